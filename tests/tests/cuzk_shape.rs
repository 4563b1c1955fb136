//! proofline inside cuzk as it is: the layer alone on cuzk's spans, the synchronous GPU path,
//! the one-line adoption change with its preset, a failed synthesis and whole-proof jobs,
//! each on the simulator built span for span and thread for thread like cuzk's engine.

use std::collections::BTreeMap;

use proofline::{Edge, EventKind, TimelineLayer};
use proofline_core::EngineConfig;
use proofline_core::parse_line;
use proofline_core::report::JobStatus;
use proofline_sim::{GpuPath, SimConfig};
use proofline_tests::{analyze_str, cuzk_run, sorted_lines};

const SPEED: f64 = 100.0;

fn engine() -> EngineConfig {
    EngineConfig::default()
        .reorder_window_ms(1000)
        .completion_grace_ms(1000)
}

fn layer() -> proofline::Builder {
    TimelineLayer::builder().engine_config(engine())
}

/// Each (job, partition)'s count of each event kind in a log.
fn counts(text: &str) -> BTreeMap<(String, Option<u32>), BTreeMap<EventKind, usize>> {
    let mut m: BTreeMap<_, BTreeMap<EventKind, usize>> = BTreeMap::new();
    for l in text.lines() {
        let ev = parse_line(l).unwrap().unwrap();
        *m.entry((ev.job_id.to_owned(), ev.partition))
            .or_default()
            .entry(ev.kind)
            .or_default() += 1;
    }
    m
}

/// Each (job, partition)'s instant of one event kind.
fn instants(text: &str, kind: EventKind) -> BTreeMap<(String, Option<u32>), u64> {
    text.lines()
        .map(|l| parse_line(l).unwrap().unwrap())
        .filter(|e| e.kind == kind)
        .map(|e| ((e.job_id.to_owned(), e.partition), e.offset_ms))
        .collect()
}

#[test]
fn the_layer_alone_gives_every_partition_each_event_once_on_the_split_path() {
    let cfg = SimConfig::porep(3);
    let run = cuzk_run(&cfg, SPEED, layer(), false);
    let c = counts(&run.layer_lines);
    assert_eq!(c.len(), 30, "every partition of 3 sectors: {c:?}");
    for (part, kinds) in &c {
        for kind in EventKind::ALL {
            assert_eq!(kinds.get(&kind), Some(&1), "{part:?}: {kinds:?}");
        }
    }
    // cuzk printed the same set of events, with GPU_START/GPU_END of its own
    let printed = counts(&run.printed);
    assert_eq!(
        printed.keys().collect::<Vec<_>>(),
        c.keys().collect::<Vec<_>>()
    );
    assert_eq!(run.report.summary.jobs_complete, 3);
    assert_eq!(
        run.report.events.duplicates + run.report.events.conflicts,
        0
    );
    assert_eq!(run.stats.missing_job_id, 0);
    // the GPU intervals are the gpu_worker span's, and say so
    let src = run.report.gpu_interval_source.as_deref().unwrap();
    assert!(src.contains("first enter of `gpu_worker`"), "{src}");
    assert!(src.contains("close of `gpu_worker`"), "{src}");
    // as documented: the span's GPU_START is no later than cuzk's (it opens at the pickup,
    // cuzk prints GPU_START just after), and its GPU_END comes before cuzk's, which waits
    // for the finalizer (finalize_ms of 400 ms at 100x: 4 ms, spread ±10 %)
    let (span_start, span_end) = (
        instants(&run.layer_lines, EventKind::GpuStart),
        instants(&run.layer_lines, EventKind::GpuEnd),
    );
    let (cuzk_start, cuzk_end) = (
        instants(&run.printed, EventKind::GpuStart),
        instants(&run.printed, EventKind::GpuEnd),
    );
    // each clock counts from its own epoch (the layer's is a little earlier): the offset
    // between them is what separates a span's first enter from cuzk's SYNTH_START, printed
    // the same instant
    let (span_synth, cuzk_synth) = (
        instants(&run.layer_lines, EventKind::SynthStart),
        instants(&run.printed, EventKind::SynthStart),
    );
    let mut d: Vec<i64> = span_synth
        .iter()
        .map(|(k, &t)| t as i64 - cuzk_synth[k] as i64)
        .collect();
    d.sort_unstable();
    let epochs = d[d.len() / 2];
    let mut ends_earlier = 0;
    for (part, &s) in &span_start {
        let s = s as i64 - epochs;
        let c = cuzk_start[part] as i64;
        assert!((s - c).abs() <= 20, "{part:?}: span {s} cuzk {c}");
        if (span_end[part] as i64 - epochs) < cuzk_end[part] as i64 {
            ends_earlier += 1;
        }
    }
    assert!(
        ends_earlier >= 25,
        "{ends_earlier} of 30 span GPU_ENDs before cuzk's"
    );
    let text = proofline_core::text::render(&run.report);
    assert!(text.contains("GPU intervals from spans"), "{text}");
}

#[test]
fn the_synchronous_path_invents_no_gpu_events_and_counts_what_it_cannot_tie() {
    let mut cfg = SimConfig::porep(2);
    cfg.gpu_path = GpuPath::Sync;
    // the old mapping of `gpu_prove` added to the defaults: its spans carry no job id
    let run = cuzk_run(
        &cfg,
        SPEED,
        layer()
            .map("gpu_prove", EventKind::GpuStart, Edge::FirstEnter)
            .map("gpu_prove", EventKind::GpuEnd, Edge::Close),
        false,
    );
    let printed = counts(&run.printed);
    // cuzk prints no GPU_START/GPU_END on this path
    for kinds in printed.values() {
        assert_eq!(kinds.get(&EventKind::GpuStart), None);
        assert_eq!(kinds.get(&EventKind::GpuEnd), None);
        assert_eq!(kinds.get(&EventKind::GpuPickup), Some(&1));
    }
    // the layer's come from gpu_worker, once each; gpu_prove's are dropped and counted
    let c = counts(&run.layer_lines);
    assert_eq!(c.len(), 20);
    for (part, kinds) in &c {
        for kind in EventKind::ALL {
            assert_eq!(kinds.get(&kind), Some(&1), "{part:?}: {kinds:?}");
        }
    }
    assert_eq!(
        run.stats.missing_job_id, 40,
        "two events of 20 gpu_prove spans"
    );
    assert_eq!(run.report.events.unattributed, 40);
    let text = proofline_core::text::render(&run.report);
    assert!(
        text.contains("40 span edges could not be tied to a job"),
        "{text}"
    );
    assert_eq!(run.report.summary.jobs_complete, 2);
    // cuzk's own lines alone: GPU time not observed, no verdict invented
    let offline = analyze_str(&run.printed, engine());
    assert!(offline.gpus.is_empty());
    assert_eq!(offline.summary.jobs_complete, 0);
    assert!(
        offline.incomplete.iter().all(|j| j.unobserved_gpu),
        "{:?}",
        offline.incomplete
    );
    assert!(offline.verdict.sentence.starts_with("No verdict"));
}

#[test]
fn the_preset_with_the_one_line_change_writes_cuzks_own_lines_exactly() {
    let cfg = SimConfig::mixed(8);
    let run = cuzk_run(&cfg, SPEED, layer().cuzk_timeline_events(), true);
    assert!(!run.printed.is_empty());
    assert_eq!(
        sorted_lines(&run.layer_lines),
        sorted_lines(&run.printed),
        "the layer writes cuzk's lines byte for byte"
    );
    let r = &run.report;
    assert_eq!(
        (r.events.duplicates, r.events.conflicts, r.events.late),
        (0, 0, 0)
    );
    assert_eq!(r.summary.jobs_complete, 8);
    assert_eq!(r.gpu_interval_source, None, "cuzk's own GPU events");
    // the same report as analyze of what cuzk printed
    let offline = analyze_str(&run.printed, engine());
    assert_eq!(offline.gpus, r.gpus);
    assert_eq!(offline.summary, r.summary);
}

#[test]
fn a_failed_synthesis_leaves_its_job_incomplete() {
    let mut cfg = SimConfig::porep(3);
    cfg.faults.fail_synthesis = Some((1, 4));
    let run = cuzk_run(&cfg, SPEED, layer(), false);
    let printed = counts(&run.printed);
    let failed = &printed[&("porep-1000-1".to_owned(), Some(4))];
    assert_eq!(failed.get(&EventKind::SynthStart), Some(&1));
    assert_eq!(
        failed.get(&EventKind::SynthEnd),
        None,
        "cuzk prints no SYNTH_END"
    );
    assert_eq!(failed.get(&EventKind::GpuQueue), None);
    // cuzk logs the error after the span closed: the layer alone cannot know, and ends the
    // span as it ends any other (docs/layer.md says so); the job is incomplete either way
    let layer = counts(&run.layer_lines);
    let seen = &layer[&("porep-1000-1".to_owned(), Some(4))];
    assert_eq!(
        seen.get(&EventKind::SynthEnd),
        Some(&1),
        "the layer alone cannot see the error: the documented difference"
    );
    assert_eq!(seen.get(&EventKind::GpuPickup), None, "never queued");
    // partitions of the failed job that were queued already: cuzk picks them up and drops
    // them (GPU_PICKUP, no GPU_START); later ones are never synthesized
    let dropped: Vec<u32> = printed
        .iter()
        .filter(|((job, _), k)| {
            job == "porep-1000-1"
                && k.contains_key(&EventKind::GpuPickup)
                && !k.contains_key(&EventKind::GpuStart)
        })
        .filter_map(|((_, p), _)| *p)
        .collect();
    assert!(
        !dropped.is_empty() && !dropped.contains(&4),
        "{dropped:?} dropped after pickup"
    );
    // the layer alone gives those an empty GPU interval (the documented limitation)
    let (start, end) = (
        instants(&run.layer_lines, EventKind::GpuStart),
        instants(&run.layer_lines, EventKind::GpuEnd),
    );
    for p in &dropped {
        let key = ("porep-1000-1".to_owned(), Some(*p));
        assert!(end[&key] - start[&key] <= 5, "partition {p}");
    }
    for r in [&run.report, &analyze_str(&run.printed, engine())] {
        assert_eq!(r.summary.jobs_complete, 2);
        let inc: Vec<_> = r
            .incomplete
            .iter()
            .map(|j| (&*j.job_id, j.status))
            .collect();
        assert_eq!(inc, [("porep-1000-1", JobStatus::InFlightAtEnd)]);
    }
}

#[test]
fn whole_proof_jobs_get_their_kind_and_no_partition() {
    let mut cfg = SimConfig::mixed(10);
    cfg.jobs.retain(|j| j.kind.partitions().is_none());
    assert_eq!(cfg.jobs.len(), 2, "a WinningPoSt and a WindowPoSt");
    let run = cuzk_run(&cfg, SPEED, layer(), false);
    let c = counts(&run.layer_lines);
    assert_eq!(c.len(), 2);
    for ((job, partition), kinds) in &c {
        assert_eq!(*partition, None, "{job}");
        for kind in EventKind::ALL {
            assert_eq!(kinds.get(&kind), Some(&1), "{job}: {kinds:?}");
        }
    }
    for l in run
        .layer_lines
        .lines()
        .filter(|l| l.contains(",SYNTH_START,"))
    {
        let ev = parse_line(l).unwrap().unwrap();
        let want = if ev.job_id.starts_with("winpost") {
            "winning-post"
        } else {
            "window-post"
        };
        assert_eq!(ev.proof_kind, Some(want), "{l}");
    }
    let queued = run
        .layer_lines
        .lines()
        .filter(|l| l.contains(",GPU_QUEUE,") && l.ends_with(",monolithic"))
        .count();
    assert_eq!(queued, 2, "{}", run.layer_lines);
    assert_eq!(run.report.summary.jobs_complete, 2);
    let kinds: Vec<&str> = run
        .report
        .jobs
        .iter()
        .filter_map(|j| j.proof_kind.as_deref())
        .collect();
    assert_eq!(kinds.len(), 2);
}
