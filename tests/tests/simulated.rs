//! Logs from the deterministic simulator, with answers the configuration implies.

use proofline_core::EngineConfig;
use proofline_core::report::{Bound, Boundary, JobStatus};
use proofline_sim::{SimConfig, instant};
use proofline_tests::analyze_str;

#[test]
fn a_gpu_that_never_idles_reads_gpu_bound() {
    let cfg = SimConfig::porep(8);
    let r = analyze_str(&instant::log_string(&cfg), EngineConfig::default());
    assert_eq!(r.summary.jobs_complete, 8);
    assert_eq!(r.verdict.bound, Bound::GpuBound, "{}", r.verdict.sentence);
    assert!(r.summary.steady_busy_ratio.unwrap() >= 0.95);
    let g = &r.gpus[0];
    assert_eq!(g.idle_cross_sector.count, 0);
    // two workers overlap: the sum is larger than the union, which is counted once
    assert!(
        g.serial_sum_ms > g.busy_ms + g.busy_ms / 2,
        "serial {} busy {}",
        g.serial_sum_ms,
        g.busy_ms
    );
    assert!(g.busy_ms <= g.elapsed_ms);
    // ten kernels of ~3.7 s under one lock per sector: ~37 s per proof, as cuzk measured
    let spp = r.summary.seconds_per_proof.unwrap();
    assert!((35.0..40.0).contains(&spp), "{spp}");
    // synthesis keeps ahead of the GPU
    assert!(r.transitions_summary.synthesis_lead.p50_ms.unwrap() > 0);
}

#[test]
fn a_synthesis_stall_is_a_cross_sector_gap_and_synthesis_bound() {
    let mut cfg = SimConfig::porep(4);
    cfg.faults.stall_before_job = Some((2, 60_000));
    let log = instant::log_string(&cfg);
    let r = analyze_str(&log, EngineConfig::default());
    assert_eq!(r.summary.jobs_complete, 4);
    assert_eq!(
        r.verdict.bound,
        Bound::SynthesisBound,
        "{}",
        r.verdict.sentence
    );
    let g = &r.gpus[0];
    assert_eq!(g.idle_cross_sector.count, 1);
    assert!(
        g.idle_cross_sector.total_ms > 30_000,
        "{:?}",
        g.idle_cross_sector
    );
    assert!(g.idle_queue_empty_ms > g.idle_with_queue_ms);
    // the stalled sector's transition shows a positive gap and a negative synthesis lead
    let t = r
        .transitions
        .iter()
        .find(|t| &*t.to_job == "porep-1000-2")
        .unwrap();
    assert!(t.gap_ms > 30_000);
    assert!(t.synthesis_lead_ms.unwrap() < -30_000);

    // the live updates name the sector after the gap
    let mut engine = proofline_core::Engine::new(EngineConfig::default());
    let mut gaps = Vec::new();
    for line in log.lines() {
        let ev = proofline_core::parse_line(line).unwrap().unwrap();
        engine.ingest(&ev, &mut |u| {
            if let proofline_core::Update::IdleGap(g) = u {
                gaps.push(g);
            }
        });
    }
    let cross: Vec<_> = gaps
        .iter()
        .filter(|g| g.boundary == Boundary::CrossSector)
        .collect();
    assert_eq!(cross.len(), 1);
    assert_eq!(&*cross[0].next_job, "porep-1000-2");
}

#[test]
fn a_never_finishing_partition_is_an_incomplete_job_evicted_after_the_timeout() {
    let mut cfg = SimConfig::porep(12);
    cfg.faults.never_finish = Some((1, 4));
    let ecfg = EngineConfig::default().job_timeout_ms(120_000);
    let r = analyze_str(&instant::log_string(&cfg), ecfg);
    assert_eq!(r.summary.jobs_complete, 11);
    assert_eq!(r.summary.jobs_incomplete, 1);
    let j = &r.incomplete[0];
    assert_eq!(
        (&*j.job_id, j.status, j.partitions_done),
        ("porep-1000-1", JobStatus::Evicted, 9)
    );
    assert!(j.unobserved_gpu);
    // evicted mid-log, not at the end: the jobs after it still completed and paired
    assert!(r.transitions.iter().any(|t| &*t.from_job == "porep-1000-1"));
}

#[test]
fn unknown_partition_counts_complete_after_the_grace_period() {
    // bench runs use UUIDs: the engine takes the highest partition seen + 1
    let log = instant::log_string(&SimConfig::porep(4))
        .replace("porep-1000-", "3f2b8c1e-9d7a-4c55-8e0b-00000000000");
    let r = analyze_str(&log, EngineConfig::default());
    assert_eq!(r.summary.jobs_complete, 4);
    assert!(
        r.jobs
            .iter()
            .all(|j| j.partitions_done == 10 && j.partitions_expected.is_none())
    );
    let known = analyze_str(
        &instant::log_string(&SimConfig::porep(4)),
        EngineConfig::default(),
    );
    assert_eq!(r.summary.seconds_per_proof, known.summary.seconds_per_proof);
    assert_eq!(r.gpus[0].busy_ms, known.gpus[0].busy_ms);
}

#[test]
fn mixed_kinds_on_two_gpus() {
    let mut cfg = SimConfig::mixed(20);
    cfg.gpus = 2;
    let r = analyze_str(&instant::log_string(&cfg), EngineConfig::default());
    assert_eq!(r.summary.jobs_complete, 20);
    let kinds: Vec<(&str, u64)> = r
        .summary
        .complete_by_kind
        .iter()
        .map(|(k, n)| (k.as_str(), *n))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("porep-c2", 14),
            ("snap-update", 2),
            ("window-post", 2),
            ("winning-post", 2)
        ]
    );
    assert_eq!(r.gpus.len(), 2);
    assert_eq!(r.gpus[0].workers, vec![0, 1]);
    assert_eq!(r.gpus[1].workers, vec![2, 3]);
    for g in &r.gpus {
        assert!(g.busy_ms <= g.serial_sum_ms && g.busy_ms <= g.elapsed_ms);
    }
}

#[test]
fn memory_holds_the_jobs_in_flight_not_the_log() {
    let cfg = SimConfig::porep(400);
    let mut engine = proofline_core::Engine::new(EngineConfig::default());
    let mut peak = (0, 0);
    instant::simulate(&cfg, |ev| {
        engine.ingest(&ev.as_event_ref(), &mut proofline_core::sink::NoUpdates);
        let t = engine.tracked();
        peak = (peak.0.max(t.0), peak.1.max(t.1));
    });
    engine.finish(&mut proofline_core::sink::NoUpdates);
    assert_eq!(engine.report().summary.jobs_complete, 400);
    // max_ahead = 20 partitions: at most a handful of sectors are ever in flight
    assert!(peak.0 < 12 && peak.1 < 12, "peak tracked {peak:?}");
    assert_eq!(engine.tracked(), (0, 0));
}

#[test]
fn jobs_in_flight_past_the_cap_evict_the_oldest_and_are_counted() {
    // 50 jobs that start and never finish, one a second
    let mut log = String::new();
    for j in 0..50 {
        log.push_str(&format!(
            "TIMELINE,{},SYNTH_START,stuck-{j},partition=0\n",
            j * 1000
        ));
    }
    let cfg = EngineConfig::default().max_jobs_in_flight(8);
    let mut engine = proofline_core::Engine::new(cfg);
    let mut peak = 0;
    let mut evicted_first = Vec::new();
    for line in log.lines() {
        let ev = proofline_core::parse_line(line).unwrap().unwrap();
        engine.ingest(&ev, &mut |u| {
            if let proofline_core::sink::Update::Job(j) = u {
                evicted_first.push(j.job_id.to_string());
            }
        });
        peak = peak.max(engine.tracked().0);
    }
    // the cap is on jobs in flight; finished ones linger two reorder windows (10 s: ten
    // of these) for duplicate detection
    assert!(peak <= 8 + 11, "{peak} job instances held");
    engine.finish(&mut proofline_core::sink::NoUpdates);
    let r = engine.report();
    assert_eq!(r.events.evicted_over_cap, 42);
    assert_eq!(r.summary.jobs_incomplete, 50);
    // the oldest went first
    assert_eq!(evicted_first[..3], ["stuck-0", "stuck-1", "stuck-2"]);
    assert!(proofline_core::text::render(&r).contains("42 jobs evicted"));
}

/// A prover that dies inside GPU work: its log stops at 140 s with GPU intervals open, and
/// the live clock goes on. Past the stuck threshold (60 s here: 4x the longest closed
/// interval is less) the GPU no longer counts as busy, its idle time counts from the last
/// line, the intervals are counted stuck, and the silence and the oldest job's age show.
#[test]
fn a_prover_dead_inside_gpu_work_stops_counting_busy() {
    use proofline_core::reader::LineFeeder;
    use proofline_core::sink::NoUpdates;
    let log = instant::log_string(&SimConfig::porep(8));
    let cut = proofline_tests::lines_until(&log, 140_000);
    let mut e = proofline_core::Engine::new(EngineConfig::default());
    let mut f = LineFeeder::new();
    f.feed_lines(cut.as_bytes(), &mut e, &mut NoUpdates);
    // the clock goes on, as watch's does, one second at a time
    let live_at = |e: &mut proofline_core::Engine, s: u64| {
        for t in 141..=s {
            e.advance(t * 1000, &mut NoUpdates);
        }
        e.live()
    };
    let l = live_at(&mut e, 180);
    assert_eq!(l.gpus[0].idle_ms, 0, "still within the threshold: busy");
    assert_eq!(l.gpus[0].stuck_intervals, 0);
    let l = live_at(&mut e, 230);
    assert!(l.gpus[0].stuck_intervals >= 1, "{l:?}");
    // idle since about the last line (140 s), less the reorder window the clock lags by
    assert!(l.gpus[0].idle_ms >= 80_000, "{l:?}");
    assert!(l.last_event_age_ms.unwrap() >= 80_000, "{l:?}");
    assert!(l.oldest_job_age_ms.unwrap() >= 100_000, "{l:?}");
    assert_eq!(l.on_gpu, 0, "{l:?}");
    assert_eq!(l.runs, 1);
    e.finish(&mut NoUpdates);
    let r = e.report();
    assert_eq!(r.events.gpu_stuck, l.gpus[0].stuck_intervals);
    assert_eq!(r.gpus[0].stuck_intervals, r.events.gpu_stuck);
    assert!(
        r.events
            .conflict_examples
            .iter()
            .any(|x| x.contains("stuck, no longer counted busy")),
        "{:?}",
        r.events.conflict_examples
    );
}

/// One GPU call that never returns while the prover goes on: counted stuck once, the
/// other worker keeps the GPU busy, and a log that ends normally is unchanged otherwise.
#[test]
fn a_gpu_call_that_never_returns_is_counted_stuck_once() {
    let mut cfg = SimConfig::porep(8);
    cfg.faults.never_finish = Some((2, 3));
    let r = analyze_str(&instant::log_string(&cfg), EngineConfig::default());
    assert_eq!(r.events.gpu_stuck, 1, "{:?}", r.events);
    assert_eq!(r.summary.jobs_complete, 7);
    // a healthy log has none
    let r = analyze_str(
        &instant::log_string(&SimConfig::porep(8)),
        EngineConfig::default(),
    );
    assert_eq!(r.events.gpu_stuck, 0);
}
