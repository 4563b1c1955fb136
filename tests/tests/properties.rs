//! Properties of the engine that must hold for any input.

use proofline_core::EngineConfig;
use proofline_core::report::Report;
use proofline_sim::{SimConfig, instant};
use proofline_tests::analyze_str;
use proptest::prelude::*;

/// (job, gpu worker, start, length) for whole-proof jobs.
fn intervals() -> impl Strategy<Value = Vec<(u8, u8, u32, u32)>> {
    prop::collection::vec((0u8..20, 0u8..4, 0u32..50_000, 0u32..5_000), 1..40)
}

fn log_of(ivs: &[(u8, u8, u32, u32)]) -> String {
    let mut lines: Vec<(u64, String)> = Vec::new();
    for (i, &(job, worker, start, len)) in ivs.iter().enumerate() {
        let id = format!("winpost-1-{job}-{i}");
        let (s, e) = (u64::from(start), u64::from(start) + u64::from(len));
        lines.push((
            s,
            format!("TIMELINE,{s},SYNTH_START,{id},kind=winning-post"),
        ));
        lines.push((s, format!("TIMELINE,{s},SYNTH_END,{id},synth_ms=0")));
        lines.push((s, format!("TIMELINE,{s},GPU_START,{id},worker={worker}")));
        lines.push((
            e,
            format!("TIMELINE,{e},GPU_END,{id},worker={worker},gpu_ms={len}"),
        ));
    }
    lines.sort_by_key(|(t, _)| *t);
    lines.into_iter().map(|(_, l)| l + "\n").collect()
}

/// The union length computed the obvious way, per GPU.
fn brute_union(ivs: &[(u8, u8, u32, u32)], gpu: u8) -> u64 {
    let mut v: Vec<(u64, u64)> = ivs
        .iter()
        .filter(|i| i.1 / 2 == gpu)
        .map(|i| (u64::from(i.2), u64::from(i.2) + u64::from(i.3)))
        .collect();
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in v {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// The invariants of well-formed input: the loose ones and more.
fn check_invariants(r: &Report) {
    check_invariants_loose(r);
    for g in &r.gpus {
        assert!(
            g.busy_ms <= g.elapsed_ms,
            "busy {} > elapsed {}",
            g.busy_ms,
            g.elapsed_ms
        );
        assert!(g.steady_busy_ms <= g.steady_elapsed_ms);
        assert_eq!(g.busy_ms + g.idle_total.total_ms, g.elapsed_ms);
        assert_eq!(
            g.idle_with_queue_ms + g.idle_queue_empty_ms,
            g.idle_total.total_ms
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn busy_is_the_union_and_invariants_hold(ivs in intervals()) {
        let r = analyze_str(&log_of(&ivs), EngineConfig::default());
        check_invariants(&r);
        for g in &r.gpus {
            prop_assert_eq!(g.busy_ms, brute_union(&ivs, g.gpu as u8));
            let sum: u64 = ivs.iter().filter(|i| u32::from(i.1 / 2) == g.gpu).map(|i| u64::from(i.3)).sum();
            prop_assert_eq!(g.serial_sum_ms, sum);
        }
        prop_assert_eq!(r.summary.jobs_complete, ivs.len() as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Lines printed out of order (within the reorder window) give the report of sorted lines.
    #[test]
    fn shuffled_within_the_window_equals_sorted(seed in 0u64..1000, gpus in 1u32..3, jobs in 2usize..8, shuffle in 1u64..4000) {
        let mut cfg = SimConfig::mixed(jobs);
        cfg.seed = seed;
        cfg.gpus = gpus;
        let sorted = analyze_str(&instant::log_string(&cfg), EngineConfig::default());
        cfg.shuffle_ms = shuffle;
        let shuffled_log = instant::log_string(&cfg);
        let shuffled = analyze_str(&shuffled_log, EngineConfig::default());
        check_invariants(&sorted);
        prop_assert_eq!(shuffled.events.late, 0);
        prop_assert_eq!(&shuffled.gpus, &sorted.gpus);
        prop_assert_eq!(&shuffled.transitions, &sorted.transitions);
        prop_assert_eq!(&shuffled.summary, &sorted.summary);
        prop_assert_eq!(&shuffled.verdict, &sorted.verdict);
    }
}

/// Any stream of events, however wrong (missing edges, repeats, out of order, restarts),
/// goes through the engine without a panic (debug builds check every counter for
/// underflow) and leaves a consistent report.
fn chaos() -> impl Strategy<Value = Vec<(u8, u8, u8, u8, u32)>> {
    prop::collection::vec((0u8..6, 0u8..4, 0u8..4, 0u8..4, 0u32..20_000), 0..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_event_streams_never_panic(events in chaos(), window in 0u64..3000, timeout in 1u64..5000) {
        use proofline_core::{Engine, EventKind, TimelineEvent};
        let cfg = EngineConfig::default()
.reorder_window_ms(window)
.completion_grace_ms(window)
.job_timeout_ms(timeout)
.restart_after_ms(8_000);
        let mut engine = Engine::new(cfg);
        let jobs = ["porep-1-1", "porep-1-2", "uuid-a", "winpost-1-b"];
        let mut updates = Vec::new();
        for (k, job, part, worker, t) in events {
            let mut ev = TimelineEvent::new(u64::from(t), EventKind::ALL[k as usize], jobs[job as usize]);
            if job != 3 {
                ev.partition = Some(u32::from(part));
            }
            if k >= 3 {
                ev.worker = Some(u32::from(worker));
            }
            engine.ingest(&ev, &mut updates);
            let live = engine.live();
            prop_assert!(live.gpus.iter().all(|g| (0.0..=1.0).contains(&g.busy_ratio)));
        }
        engine.finish(&mut updates);
        let r = engine.report();
        check_invariants_loose(&r);
        prop_assert_eq!(engine.tracked().0, 0, "every job is closed after finish");
        prop_assert_eq!(r.summary.jobs_complete + r.summary.jobs_incomplete, r.summary.jobs_seen);
    }
}

/// A case `arbitrary_event_streams_never_panic` found: a GPU interval open while two jobs
/// completed (their GPU_ENDs without starts), then abandoned at a restart. The steady state's
/// marks had counted the open interval busy up to each completion, and its busy time was then
/// taken back to the device's last edge: steady busy 4146 ms in a steady state of 770 ms.
#[test]
fn an_interval_abandoned_after_the_steady_marks_does_not_stay_in_them() {
    use proofline_core::{Engine, EventKind, TimelineEvent};
    let cfg = EngineConfig::default()
        .reorder_window_ms(771)
        .completion_grace_ms(771)
        .job_timeout_ms(4147)
        .restart_after_ms(8_000);
    let mut engine = Engine::new(cfg);
    let mut updates = Vec::new();
    for (kind, job, t, partition) in [
        (EventKind::GpuStart, "porep-1-1", 14_923, Some(0)),
        (EventKind::GpuEnd, "winpost-1-b", 19_069, None),
        (EventKind::GpuEnd, "uuid-a", 18_299, Some(0)),
        (EventKind::SynthStart, "porep-1-1", 0, Some(0)),
    ] {
        let mut ev = TimelineEvent::new(t, kind, job);
        ev.partition = partition;
        if kind.is_gpu() {
            ev.worker = Some(0);
        }
        engine.ingest(&ev, &mut updates);
    }
    engine.finish(&mut updates);
    let r = engine.report();
    assert_eq!(r.summary.jobs_complete, 2);
    let g = &r.gpus[0];
    assert!(
        g.steady_busy_ms <= g.steady_elapsed_ms.max(g.busy_ms),
        "steady busy {} of {} (busy {})",
        g.steady_busy_ms,
        g.steady_elapsed_ms,
        g.busy_ms
    );
    check_invariants_loose(&r);
}

/// The invariants that hold even for broken input.
fn check_invariants_loose(r: &Report) {
    for g in &r.gpus {
        assert!(
            g.busy_ms <= g.serial_sum_ms,
            "union {} > sum {}",
            g.busy_ms,
            g.serial_sum_ms
        );
        assert!(g.steady_busy_ms <= g.steady_elapsed_ms.max(g.busy_ms));
        assert_eq!(
            g.idle_cross_sector.count + g.idle_intra_sector.count,
            g.idle_total.count
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Inserting any one valid line out of the window of the lines around it (behind the
    /// newest by more than the reorder window, or ahead of it by more than the restart
    /// threshold) into a clean log changes no job's figures and starts no run: it is counted
    /// as a stray line.
    #[test]
    fn one_line_out_of_the_window_changes_no_jobs_figures(
        at in 1usize..500,
        kind in 0usize..6,
        job in 0u64..6,
        partition in 0u32..10,
        worker in 0u32..2,
        behind in any::<bool>(),
        by in 5_001u64..900_000,
    ) {
        let log = instant::log_string(&SimConfig::porep(3));
        let lines: Vec<&str> = log.lines().collect();
        let at = at % lines.len();
        let newest = lines[..at]
            .iter()
            .map(|l| l.split(',').nth(1).unwrap().parse::<u64>().unwrap())
            .max();
        let Some(newest) = newest else { return Ok(()) };
        let cfg = EngineConfig::default();
        let offset = if behind {
            if newest < by { return Ok(()) }
            newest - by
        } else {
            newest + cfg.get_restart_after_ms() + by
        };
        let kind = proofline_core::EventKind::ALL[kind];
        let detail = if kind.is_gpu() {
            format!("worker={worker},partition={partition}")
        } else {
            format!("partition={partition}")
        };
        let stray = format!("TIMELINE,{offset},{kind},porep-1000-{job},{detail}");
        let mut with = lines.clone();
        with.insert(at, &stray);
        let clean = analyze_str(&log, cfg.clone());
        let r = analyze_str(&(with.join("\n") + "\n"), cfg);
        prop_assert_eq!(r.events.runs, 1, "{}", stray);
        prop_assert_eq!(&r.jobs, &clean.jobs, "{}", stray);
        prop_assert_eq!(&r.gpus, &clean.gpus, "{}", stray);
        prop_assert_eq!(r.events.stray_late + r.events.stray_early, 1, "{}", stray);
    }
}
