//! A prover of another shape than cuzk's, set up as a new user would from the docs: jobs
//! `batch-NNNNN` of 8 segments, witness generation in `witness{batch_id, segment}` spans on
//! a pool of 3 CPU threads, proving in `prove_segment{batch_id, segment, device}` spans on 2
//! GPUs with one worker each, a stall between two batches. The prover records its own
//! timeline beside the layer; the layer's figures must equal it. And the traps such a user
//! fell into: each one either works or says what is wrong.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use proofline::FieldNames;
use tracing::{Level, span};
use tracing_subscriber::prelude::*;

mod common;
use common::*;

const BATCHES: usize = 4;
const SEGMENTS: u32 = 8;
const DEVICES: u32 = 2;
/// The stall between the second and the third batch.
const STALL: Duration = Duration::from_millis(150);

/// The prover's own record: each device's busy intervals, as instants, and the batch of each.
#[derive(Default)]
struct Truth {
    busy: BTreeMap<u32, Vec<(Instant, Instant)>>,
    batch: BTreeMap<u32, Vec<String>>,
}

impl Truth {
    /// A device's idle time between work of one batch and work of the next, and how many
    /// such gaps (the cross-sector idle of proofline's definitions).
    /// (Gaps under 2 ms are counted apart: at whole milliseconds they may vanish.)
    fn cross_batch_idle_ms(&self, device: u32) -> (u64, u64, f64) {
        let mut v: Vec<(Instant, Instant, &String)> = self.busy[&device]
            .iter()
            .zip(&self.batch[&device])
            .map(|(&(s, e), b)| (s, e, b))
            .collect();
        v.sort_by_key(|x| x.0);
        let (mut n, mut short, mut ms) = (0, 0, 0.0);
        for w in v.windows(2) {
            if w[0].2 != w[1].2 && w[1].0 > w[0].1 {
                let gap = (w[1].0 - w[0].1).as_secs_f64() * 1e3;
                n += 1;
                short += u64::from(gap < 2.0);
                ms += gap;
            }
        }
        (n, short, ms)
    }
}

fn names(job: &str, worker: &[&str], gpu: &[&str]) -> FieldNames {
    FieldNames::default()
        .job_id([job])
        .partition(["segment"])
        .worker(worker.iter().copied())
        .gpu(gpu.iter().copied())
}

fn builder(fields: FieldNames) -> proofline::Builder {
    batch_prover_layer(SEGMENTS)
        .field_names(fields)
        .silence_warning_after(Duration::from_millis(300))
        .no_timeline()
}

/// Runs the prover under `layer`, its witness spans at `witness_level`; returns its record.
fn run_prover<L>(
    layer: L,
    witness_level: Level,
    filter: tracing::level_filters::LevelFilter,
) -> Truth
where
    L: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    let subscriber = tracing_subscriber::registry().with(layer.with_filter(filter));
    let d = tracing::Dispatch::new(subscriber);
    let truth = Arc::new(Mutex::new(Truth::default()));
    let (gpu_tx, gpu_rx) = mpsc::channel::<(String, u32)>();
    let gpu_rx = Arc::new(Mutex::new(gpu_rx));
    // the GPUs: one worker each, taking segments from one queue
    let gpus: Vec<_> = (0..DEVICES)
        .map(|device| {
            let (d, rx, truth) = (d.clone(), gpu_rx.clone(), truth.clone());
            thread::spawn(move || {
                let _d = tracing::dispatcher::set_default(&d);
                loop {
                    let next = rx.lock().unwrap().recv();
                    let Ok((batch, segment)) = next else { break };
                    let s =
                        tracing::info_span!("prove_segment", batch_id = %batch, segment, device);
                    let _e = s.enter();
                    let start = Instant::now();
                    thread::sleep(Duration::from_millis(12));
                    let end = Instant::now();
                    let mut t = truth.lock().unwrap();
                    t.busy.entry(device).or_default().push((start, end));
                    t.batch.entry(device).or_default().push(batch.clone());
                }
            })
        })
        .collect();
    for b in 0..BATCHES {
        if b == 2 {
            thread::sleep(STALL);
        }
        let batch = format!("batch-{b:05}");
        let work = Arc::new(Mutex::new(0..SEGMENTS));
        let pool: Vec<_> = (0..3)
            .map(|_| {
                let (d, work, tx, batch) = (d.clone(), work.clone(), gpu_tx.clone(), batch.clone());
                thread::spawn(move || {
                    let _d = tracing::dispatcher::set_default(&d);
                    loop {
                        let next = work.lock().unwrap().next();
                        let Some(segment) = next else { break };
                        let s = match witness_level {
                            Level::DEBUG => {
                                span!(Level::DEBUG, "witness", batch_id = %batch, segment)
                            }
                            _ => span!(Level::INFO, "witness", batch_id = %batch, segment),
                        };
                        s.in_scope(|| thread::sleep(Duration::from_millis(6)));
                        tx.send((batch.clone(), segment)).unwrap();
                    }
                })
            })
            .collect();
        for t in pool {
            t.join().unwrap();
        }
    }
    drop(gpu_tx);
    for g in gpus {
        g.join().unwrap();
    }
    Arc::try_unwrap(truth).ok().unwrap().into_inner().unwrap()
}

/// Busy time of a set of intervals, overlaps merged.
fn merged_ms(mut v: Vec<(Instant, Instant)>) -> f64 {
    v.sort();
    let mut total = Duration::ZERO;
    let mut cur: Option<(Instant, Instant)> = None;
    for (s, e) in v {
        match &mut cur {
            Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
            _ => {
                if let Some((cs, ce)) = cur.take() {
                    total += ce - cs;
                }
                cur = Some((s, e));
            }
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total.as_secs_f64() * 1e3
}

#[test]
fn one_field_for_worker_and_gpu_gives_each_gpu_its_own_figures() {
    let (layer, mut guard) = builder(names("batch_id", &["device"], &["device"]))
        .proof_kind_for("batch-", "batch")
        .gpu_spans_are_the_work()
        .build();
    let truth = run_prover(
        layer,
        Level::INFO,
        tracing::level_filters::LevelFilter::INFO,
    );
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    // its own kind, not `unknown`
    assert_eq!(
        report.summary.complete_by_kind,
        vec![("batch".into(), BATCHES as u64)]
    );
    assert_eq!(
        report.summary.jobs_complete, BATCHES as u64,
        "{:#?}",
        report.summary
    );
    assert_eq!(report.gpus.len(), DEVICES as usize, "{:#?}", report.gpus);
    for g in &report.gpus {
        let want = merged_ms(truth.busy[&g.gpu].clone());
        // offsets are whole milliseconds: one per interval edge at most
        let slack = 2.0 * g.intervals as f64;
        assert!(
            (g.busy_ms as f64 - want).abs() <= slack,
            "GPU {}: {} ms busy, the prover's own record says {want:.1}",
            g.gpu,
            g.busy_ms
        );
        assert_eq!(g.workers, vec![g.gpu], "one worker, the device's own");
    }
    assert_eq!(
        guard.stats().warnings,
        0,
        "a right set-up is not warned about"
    );
    // its GPU spans are the GPU work, as declared: no note that they might not be
    assert_eq!(report.gpu_interval_source, None);
    // its report in its own words
    let text = proofline::core::text::render_with(
        &report,
        &proofline::core::Nouns::new("batch", "segment"),
    );
    assert!(
        text.contains("\nBatches (complete, in completion order)"),
        "{text}"
    );
    assert!(
        text.contains("cross-batch") && !text.contains("Sectors"),
        "{text}"
    );
    // and the sentences proofline writes (the verdict, the floors) too
    let verdict = text.lines().find(|l| l.starts_with("Verdict:")).unwrap();
    assert!(
        !verdict.contains("sector") && !verdict.contains("partition"),
        "{verdict}"
    );
    assert!(report.floors.is_some(), "{text}");
    assert!(
        text.contains(" s per batch over ") && !text.contains("per sector"),
        "{text}"
    );
    // the stall between the second and third batch is an idle gap between jobs, on each
    // GPU, as long as the prover's own record says
    for g in &report.gpus {
        let (n, short, ms) = truth.cross_batch_idle_ms(g.gpu);
        let got = &g.idle_cross_sector;
        assert!(
            (n - short..=n).contains(&got.count),
            "GPU {}: {got:?}, the prover's own record says {n} gaps ({short} under 2 ms)",
            g.gpu
        );
        assert!(
            (got.total_ms as f64 - ms).abs() <= 2.0 * n as f64 + 1.0,
            "GPU {}: {got:?}, the prover's own record says {ms:.1} ms",
            g.gpu
        );
        assert!(ms >= STALL.as_secs_f64() * 1e3 / 2.0, "the stall is in it");
    }
}

#[test]
fn a_worker_field_alone_is_warned_about_not_silently_folded_onto_fewer_gpus() {
    let (layer, mut guard) = builder(names("batch_id", &["device"], &["gpu"])).build();
    run_prover(
        layer,
        Level::INFO,
        tracing::level_filters::LevelFilter::INFO,
    );
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    // GPU = worker / 2: both workers on GPU 0, as cuzk's layout would have it; said
    assert_eq!(report.gpus.len(), 1);
    // no kind configured: its jobs are of its GPU span's kind, not `unknown`
    assert_eq!(
        report.summary.complete_by_kind,
        vec![("prove_segment".into(), BATCHES as u64)]
    );
    // and, undeclared, the GPU intervals are said to come from the spans' edges
    assert!(
        report
            .gpu_interval_source
            .as_deref()
            .is_some_and(|s| s.contains("prove_segment")),
        "{:?}",
        report.gpu_interval_source
    );
    assert_eq!(guard.stats().warnings, 1, "the assumed GPU layout is said");
    // told how the workers map, it is right again
    let timeline = SharedBuf::default();
    let (layer, mut guard) = builder(names("batch_id", &["device"], &["gpu"]))
        .gpu_workers_per_device(1)
        .timeline_to_writer(timeline.clone())
        .build();
    run_prover(
        layer,
        Level::INFO,
        tracing::level_filters::LevelFilter::INFO,
    );
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(report.gpus.len(), DEVICES as usize);
    assert_eq!(guard.stats().warnings, 0);
    // and its log says so, where `analyze` reads it: the log's GPUs are the layer's
    let text = timeline.text();
    let offline = |text: &str| {
        let mut engine = proofline_core::Engine::new(engine_cfg());
        proofline_core::reader::LineFeeder::new()
            .feed_all(
                &mut text.as_bytes(),
                &mut engine,
                &mut proofline_core::sink::NoUpdates,
                |_| {},
            )
            .unwrap();
        engine.finish(&mut proofline_core::sink::NoUpdates);
        engine.report()
    };
    let read = offline(&text);
    assert_eq!(
        read.gpus.len(),
        DEVICES as usize,
        "{}",
        text.lines().next().unwrap()
    );
    for (live, read) in report.gpus.iter().zip(&read.gpus) {
        assert_eq!(
            (live.gpu, live.busy_ms, live.intervals),
            (read.gpu, read.busy_ms, read.intervals)
        );
    }
    // without that line, the log alone would fold the two GPUs into one
    let (_, lines) = text.split_once('\n').unwrap();
    assert!(lines.starts_with("TIMELINE,"));
    assert_eq!(offline(lines).gpus.len(), 1);
    // a file the layer appends to: an earlier process's lines first, this one's line
    // after them still holds from where it falls
    let earlier: String = (0..3)
        .map(|p| {
            format!(
                "TIMELINE,{},SYNTH_START,earlier-1,partition={p}\n",
                900_000 + p
            )
        })
        .collect();
    let appended = offline(&(earlier + &text));
    assert_eq!(appended.gpus.len(), DEVICES as usize, "{:?}", appended.gpus);
}

/// Runs the prover under `builder`'s layer (its witness spans at `witness_level`, an `info`
/// filter), waits past the silence delay, so that every warning due has come, and shuts the
/// layer down: its counters then, and its report.
fn warned_run(
    builder: proofline::Builder,
    witness_level: Level,
) -> (proofline::StatsSnapshot, proofline::Report) {
    let (layer, mut guard) = builder.build();
    run_prover(
        layer,
        witness_level,
        tracing::level_filters::LevelFilter::INFO,
    );
    thread::sleep(Duration::from_millis(600));
    let stats = guard.stats();
    (stats, guard.shutdown(Duration::from_secs(10)).unwrap())
}

/// The partition field misnamed (`segmnt`): every event comes without a partition, each
/// job would be taken as one whole proof; said once, naming the fields tried.
#[test]
fn a_misnamed_partition_field_is_said() {
    let fields = names("batch_id", &["device"], &["device"]).partition(["segmnt"]);
    let (stats, report) = warned_run(builder(fields), Level::INFO);
    assert!(report.summary.jobs_seen > 0);
    assert_eq!(stats.warnings, 1, "the missing partitions are said, once");
    // named right, nothing is said (the first test of this file)
}

#[test]
fn a_misnamed_job_field_is_named_not_blamed_on_a_filter() {
    // past the silence delay: the filter warning would have come by now
    let (stats, report) = warned_run(
        builder(names("batchid", &["device"], &["device"])),
        Level::INFO,
    );
    assert_eq!(report.summary.jobs_seen, 0);
    assert!(report.events.unattributed > 0);
    assert_eq!(
        stats.warnings, 1,
        "one warning, the job field's (not the filter's)"
    );
}

#[test]
fn synthesis_spans_below_the_filter_are_said_when_gpu_work_comes_alone() {
    let (stats, report) = warned_run(
        builder(names("batch_id", &["device"], &["device"])),
        Level::DEBUG,
    );
    assert!(report.gpus.iter().all(|g| g.intervals > 0));
    assert_eq!(stats.warnings, 1, "the missing synthesis is said, once");
    // and the report gives no synthesis- or hand-off-bound verdict it has no data for
    assert_eq!(
        report.verdict.bound,
        proofline::core::report::Bound::Unknown,
        "{}",
        report.verdict.sentence
    );
    assert!(
        report
            .verdict
            .sentence
            .contains("no synthesis was observed"),
        "{}",
        report.verdict.sentence
    );
}

/// The GPU spans misnamed (`prove_segmnt`): synthesis comes, no GPU event ever does, and the
/// layer says which spans it waited for, once (after six times the silence delay); a right
/// set-up that is merely slow to its first GPU event within that time is not warned about.
#[test]
fn gpu_spans_that_never_come_are_said_when_synthesis_comes_alone() {
    use proofline::{Edge, EventKind};
    let (layer, mut guard) = proofline::TimelineLayer::builder()
        .clear_mappings()
        .map("witness", EventKind::SynthStart, Edge::FirstEnter)
        .map("witness", EventKind::SynthEnd, Edge::Close)
        .map("prove_segmnt", EventKind::GpuStart, Edge::FirstEnter)
        .map("prove_segmnt", EventKind::GpuEnd, Edge::Close)
        .partitions_for("batch-", SEGMENTS)
        .engine_config(engine_cfg())
        .field_names(names("batch_id", &["device"], &["device"]))
        .silence_warning_after(Duration::from_millis(200))
        .no_timeline()
        .build();
    run_prover(
        layer,
        Level::INFO,
        tracing::level_filters::LevelFilter::INFO,
    );
    // (six times the delay: 1.2 s)
    thread::sleep(Duration::from_millis(1600));
    let stats = guard.stats();
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.gpus.is_empty());
    assert_eq!(stats.warnings, 1, "the missing GPU work is said, once");

    // the same prover set up right: its GPU events come, nothing is said
    let (layer, mut guard) = builder(names("batch_id", &["device"], &["device"]))
        .silence_warning_after(Duration::from_millis(200))
        .build();
    run_prover(
        layer,
        Level::INFO,
        tracing::level_filters::LevelFilter::INFO,
    );
    thread::sleep(Duration::from_millis(1600));
    let stats = guard.stats();
    guard.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(stats.warnings, 0);
}
