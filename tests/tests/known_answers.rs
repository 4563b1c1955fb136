//! Logs with known answers: every number below was worked out by hand from the log.

use proofline_core::EngineConfig;
use proofline_core::report::{Bound, JobStatus};
use proofline_tests::analyze_str;

/// Four jobs of two partitions on one GPU with two workers. See the comments for the answers.
const LOG: &str = include_str!("data/four_jobs.log");

fn cfg() -> EngineConfig {
    EngineConfig::default().expected_partitions(Some(2))
}

#[test]
fn busy_is_the_union_of_overlapping_worker_intervals() {
    let r = analyze_str(LOG, cfg());
    assert_eq!(r.gpus.len(), 1);
    let g = &r.gpus[0];
    assert_eq!(g.workers, vec![0, 1]);
    assert_eq!(g.intervals, 8);
    // [1000,5000] + [6000,7000] + [8000,9000] + [9000,9000] + [9500,10500]
    assert_eq!(g.busy_ms, 7000);
    // 2000+2300 + 2000+1000 + 1000+0 + 500+500: the sum, never called busy
    assert_eq!(g.serial_sum_ms, 9300);
    assert_eq!(g.elapsed_ms, 9500);
    assert!((g.concurrency.unwrap() - 9300.0 / 7000.0).abs() < 1e-9);
    assert!((g.busy_ratio.unwrap() - 7000.0 / 9500.0).abs() < 1e-9);
}

#[test]
fn idle_gaps_are_classified_and_bucketed() {
    let r = analyze_str(LOG, cfg());
    let g = &r.gpus[0];
    // [5000,6000] intra (b ended, b starts); [7000,8000] and [9000,9500] cross
    assert_eq!(
        (g.idle_intra_sector.count, g.idle_intra_sector.total_ms),
        (1, 1000)
    );
    assert_eq!(
        (g.idle_cross_sector.count, g.idle_cross_sector.total_ms),
        (2, 1500)
    );
    assert_eq!((g.idle_total.count, g.idle_total.total_ms), (3, 2500));
    let sizes: Vec<u64> = g.idle_gaps_by_size.iter().map(|b| b.count).collect();
    assert_eq!(sizes, vec![0, 1, 2]);
    // queue waiting: all of the first two gaps, 300 ms of the third (d queued at 9200)
    assert_eq!(g.idle_with_queue_ms, 2300);
    assert_eq!(g.idle_queue_empty_ms, 200);
    // busy + idle gaps = elapsed
    assert_eq!(g.busy_ms + g.idle_total.total_ms, g.elapsed_ms);
}

#[test]
fn transitions_gap_handoff_and_synthesis_lead() {
    let r = analyze_str(LOG, cfg());
    let t: Vec<_> = r
        .transitions
        .iter()
        .map(|t| {
            (
                &*t.from_job,
                &*t.to_job,
                t.gap_ms,
                t.overlap_ms,
                t.handoff_ms,
                t.synthesis_lead_ms,
            )
        })
        .collect();
    assert_eq!(
        t,
        vec![
            ("a", "b", -500, 500, Some(0), Some(1000)),
            ("b", "c", 1000, 0, Some(3000), Some(500)),
            ("c", "d", 500, 0, Some(500), Some(-200)),
        ]
    );
}

#[test]
fn jobs_cold_start_throughput_and_verdict() {
    let r = analyze_str(LOG, cfg());
    let s = &r.summary;
    assert_eq!((s.jobs_seen, s.jobs_complete, s.jobs_incomplete), (4, 4, 0));
    assert_eq!(s.cold_start_ms, Some(1000));
    // completions at 3500 and 10500: (10500 - 3500) / 3
    assert!((s.seconds_per_proof.unwrap() - 7.0 / 3.0).abs() < 1e-9);
    assert_eq!(s.steady_state_ms, 7000);
    // busy within [3500, 10500] = 7000 - 2500
    assert!((s.steady_busy_ratio.unwrap() - 4500.0 / 7000.0).abs() < 1e-9);
    let a = &r.jobs[0];
    assert_eq!(&*a.job_id, "a");
    assert_eq!(a.status, JobStatus::Complete);
    assert_eq!(
        (a.wall_ms, a.synthesis_total_ms, a.gpu_total_ms),
        (Some(3500), 2200, 4300)
    );
    assert_eq!(
        (a.synth_reported_total_ms, a.gpu_reported_total_ms),
        (2200, 4300)
    );
    assert_eq!(a.first_synth_to_first_gpu_ms, Some(1000));
    let cold: Vec<_> = r.jobs.iter().map(|j| j.cold_start_ms).collect();
    // c found the GPU idle for 1 s (7000..8000): a cold start; d only for 500 ms
    // (9000..9500), queued behind c: none (the threshold is 1 s)
    assert_eq!(cold, vec![Some(1000), None, Some(6000), None]);
    let strict = analyze_str(LOG, cfg().cold_start_min_idle_ms(1001));
    let cold: Vec<_> = strict.jobs.iter().map(|j| j.cold_start_ms).collect();
    assert_eq!(
        cold,
        vec![Some(1000), None, None, None],
        "a GPU that never worked counts"
    );
    // idle 2.3 s with partitions waiting against 0.2 s empty: hand-off bound
    assert_eq!(r.verdict.bound, Bound::HandoffBound);
    assert_eq!(
        (r.verdict.idle_with_queue_ms, r.verdict.idle_queue_empty_ms),
        (2300, 200)
    );
    assert!(
        r.verdict.sentence.contains("64.3%"),
        "{}",
        r.verdict.sentence
    );
    assert_eq!(r.stages.queue.count, 8);
    assert_eq!(r.queue.max_depth, 2);
}

#[test]
fn shuffled_lines_within_the_window_give_the_same_report() {
    let sorted = analyze_str(LOG, cfg());
    // reverse the order of lines within blocks of distinct offsets (up to 2 s apart)
    let lines: Vec<&str> = LOG.lines().collect();
    let mut shuffled: Vec<&str> = Vec::new();
    for chunk in lines.chunks(5) {
        let mut groups: Vec<Vec<&str>> = Vec::new();
        for l in chunk {
            let off = l.split(',').nth(1).unwrap();
            match groups.last_mut() {
                Some(g) if g[0].split(',').nth(1).unwrap() == off => g.push(l),
                _ => groups.push(vec![l]),
            }
        }
        groups.reverse();
        shuffled.extend(groups.into_iter().flatten());
    }
    assert_ne!(shuffled, lines);
    let r = analyze_str(&(shuffled.join("\n") + "\n"), cfg());
    assert_eq!(r.events.late, 0);
    assert_eq!(r.gpus, sorted.gpus);
    assert_eq!(r.transitions, sorted.transitions);
    assert_eq!(r.jobs, sorted.jobs);
    assert_eq!(r.summary, sorted.summary);
}

#[test]
fn duplicate_lines_are_dropped_and_counted() {
    let doubled: String = LOG
        .lines()
        .flat_map(|l| [l, l])
        .map(|l| format!("{l}\n"))
        .collect();
    let r = analyze_str(&doubled, cfg());
    let once = analyze_str(LOG, cfg());
    assert_eq!(r.events.duplicates, LOG.lines().count() as u64);
    assert_eq!(r.events.conflicts, 0);
    assert_eq!(r.gpus, once.gpus);
    assert_eq!(r.summary, once.summary);
}

#[test]
fn a_conflicting_record_keeps_the_earlier_offset_and_is_reported() {
    let log = LOG.replace(
        "TIMELINE,1200,GPU_START,a,worker=1,partition=1\n",
        "TIMELINE,1200,GPU_START,a,worker=1,partition=1\nTIMELINE,1300,GPU_START,a,worker=1,partition=1\n",
    );
    let r = analyze_str(&log, cfg());
    assert_eq!(r.events.conflicts, 1);
    assert!(
        r.events.conflict_examples[0]
            .contains("second GPU_START at 1300 differs from the first at 1200")
    );
    assert_eq!(r.gpus[0].busy_ms, 7000);
}

#[test]
fn a_lone_line_beyond_the_window_is_a_stray_counted_named_and_not_used() {
    // move a line of d's past three later lines, 1 s out of the window (100 ms)
    let mut lines: Vec<&str> = LOG.lines().collect();
    let late = lines.remove(lines.len() - 4); // GPU_START d partition=0 at 9500
    lines.push(late);
    let cfg = cfg().reorder_window_ms(100).completion_grace_ms(100);
    let r = analyze_str(&(lines.join("\n") + "\n"), cfg.clone());
    assert_eq!(
        (r.events.stray_late, r.events.late, r.events.runs),
        (1, 0, 1)
    );
    assert!(
        r.events.conflict_examples[0].contains("GPU_START at 9500 ms"),
        "{:?}",
        r.events.conflict_examples
    );
    // the other jobs' figures are those of the log without it
    let without: Vec<&str> = LOG
        .lines()
        .filter(|l| !l.starts_with("TIMELINE,9500,GPU_START,d,"))
        .collect();
    let clean = analyze_str(&(without.join("\n") + "\n"), cfg);
    assert_eq!(r.jobs, clean.jobs);
    assert_eq!(r.gpus, clean.gpus);
    assert_eq!(
        r.stages.gpu.count, 7,
        "d's partition 0 has no GPU interval now"
    );
}

/// The lines of `log` with each offset `ms` later: a restarted prover doing the same work
/// again, which never prints its lines again to the millisecond.
fn later_by(log: &str, ms: u64) -> String {
    log.lines()
        .map(|l| {
            let Some(rest) = l.strip_prefix("TIMELINE,") else {
                return format!("{l}\n");
            };
            let (offset, tail) = rest.split_once(',').unwrap();
            format!("TIMELINE,{},{tail}\n", offset.parse::<u64>().unwrap() + ms)
        })
        .collect()
}

#[test]
fn a_daemon_restart_starts_a_new_run() {
    let log = format!("{LOG}{}", later_by(LOG, 1));
    let r = analyze_str(&log, cfg().restart_after_ms(5_000));
    assert_eq!(r.events.runs, 2);
    assert_eq!(r.events.conflicts + r.events.duplicates, 0);
    assert_eq!(r.summary.jobs_complete, 8);
    assert_eq!(r.gpus[0].busy_ms, 14_000);
    assert_eq!(r.gpus[0].elapsed_ms, 19_000);
    // no idle gap across the restart, no transition d -> a
    assert_eq!(r.gpus[0].idle_total.count, 6);
    assert_eq!(r.transitions.len(), 6);
    assert!((r.summary.seconds_per_proof.unwrap() - 7.0 / 3.0).abs() < 1e-9);
    assert_eq!(r.jobs[4].run, 1);
    assert!(r.jobs[4].first_synth_start_ms.unwrap() > 10_500);
}

#[test]
fn a_reused_job_id_after_completion_is_a_new_job() {
    let retry = "\
TIMELINE,20000,SYNTH_START,a,partition=0
TIMELINE,20000,SYNTH_START,a,partition=1
TIMELINE,21000,SYNTH_END,a,partition=0,synth_ms=1000
TIMELINE,21000,SYNTH_END,a,partition=1,synth_ms=1000
TIMELINE,21000,GPU_START,a,worker=0,partition=0
TIMELINE,21000,GPU_START,a,worker=1,partition=1
TIMELINE,22000,GPU_END,a,worker=0,partition=0,gpu_ms=1000
TIMELINE,22000,GPU_END,a,worker=1,partition=1,gpu_ms=1000
";
    let r = analyze_str(&format!("{LOG}{retry}"), cfg());
    assert_eq!(r.events.runs, 1);
    assert_eq!(r.summary.jobs_complete, 5);
    let last = r.jobs.last().unwrap();
    assert_eq!(
        (&*last.job_id, last.attempt, last.wall_ms),
        ("a", 1, Some(2000))
    );
}

/// The live GPU idle time counts from the GPU's last busy end, before and after the engine
/// is finished (a layer's last tick, after shutdown, reads it after `finish`).
#[test]
fn live_idle_counts_from_the_last_busy_end_even_after_finish() {
    use proofline_core::sink::NoUpdates;
    use proofline_core::{Engine, parse_line};
    let c = cfg();
    let window = c.get_reorder_window_ms();
    let mut engine = Engine::new(c);
    for line in LOG.lines() {
        if let Some(ev) = parse_line(line).unwrap() {
            engine.ingest(&ev, &mut NoUpdates);
        }
    }
    // the clock moves on to 40 s after the last GPU_END (10.5 s), with no events
    engine.advance(50_500 + window, &mut NoUpdates);
    let idle = |e: &Engine| e.live().gpus.iter().map(|g| g.idle_ms).collect::<Vec<_>>();
    assert_eq!(idle(&engine), vec![40_000]);
    engine.finish(&mut NoUpdates);
    assert_eq!(idle(&engine), vec![40_000], "after finish");
}

/// A writer that stalls 130 s and then prints its backlog in one burst, while `watch`'s clock
/// moved on: the lines are late, not a daemon restart (one run, the job complete).
#[test]
fn a_late_burst_after_a_stalled_writer_is_no_restart() {
    use proofline_core::sink::NoUpdates;
    use proofline_core::{Engine, parse_line};
    let mut engine = Engine::new(cfg().partitions_for("w-", 1));
    let feed = |line: &str, engine: &mut Engine| {
        engine.ingest(&parse_line(line).unwrap().unwrap(), &mut NoUpdates);
    };
    feed("TIMELINE,0,SYNTH_START,w-1,partition=0", &mut engine);
    feed(
        "TIMELINE,1000,SYNTH_END,w-1,partition=0,synth_ms=1000",
        &mut engine,
    );
    // the writer stalls; the live clock goes on 130 s
    for s in 1..=130 {
        engine.advance(1000 + s * 1000, &mut NoUpdates);
    }
    // ...and then prints what it held back
    feed(
        "TIMELINE,2000,GPU_START,w-1,worker=0,partition=0",
        &mut engine,
    );
    feed(
        "TIMELINE,3000,GPU_END,w-1,worker=0,partition=0,gpu_ms=1000",
        &mut engine,
    );
    engine.finish(&mut NoUpdates);
    let r = engine.report();
    assert_eq!(r.events.runs, 1, "no restart");
    assert_eq!(r.summary.jobs_complete, 1);
    assert_eq!(r.events.late, 2, "counted as late");
}

/// The log of `n` PoRep sectors, one GPU.
fn sim_log(n: usize) -> String {
    proofline_sim::instant::log_string(&proofline_sim::SimConfig::porep(n))
}

/// A daemon that dies `at` ms after it started and starts again, proving the same sectors
/// (their ids reused) from offset 0: a second run whichever the moment, its sectors complete.
#[test]
fn restarts_at_5_s_30_s_and_10_min_with_reused_ids_are_each_detected() {
    let cfg = EngineConfig::default()
        .reorder_window_ms(1000)
        .completion_grace_ms(1000);
    // at 10x cuzk's speed a daemon has done some of everything 5 s after its start
    let mut fast = proofline_sim::SimConfig::porep(3);
    fast.timings = fast.timings.scaled(10.0);
    let fast = proofline_sim::instant::log_string(&fast);
    let slow = sim_log(3);
    for (at, full) in [(5_000u64, &fast), (30_000, &slow), (600_000, &slow)] {
        let before: String = full
            .lines()
            .filter(|l| l.split(',').nth(1).unwrap().parse::<u64>().unwrap() <= at)
            .map(|l| format!("{l}\n"))
            .collect();
        let r = analyze_str(&format!("{before}{}", later_by(full, 1)), cfg.clone());
        assert_eq!(r.events.runs, 2, "restart {at} ms after the start");
        let second: Vec<_> = r.jobs.iter().filter(|j| j.run == 1).collect();
        assert_eq!(second.len(), 3, "restart at {at}: {:?}", r.jobs);
        assert_eq!((r.events.stray_late, r.events.stray_early), (0, 0));
    }
}

/// A block of lines sent again (a log shipper resending, a file concatenated into itself):
/// its lines repeat ones the run used, so they are duplicates, not a daemon restart's first
/// lines; the report is the clean log's. A restart with reused ids and offsets from 0 is still
/// one (the test above), since its lines are not repeats to the millisecond.
#[test]
fn a_block_sent_again_is_duplicates_not_a_restart() {
    // 20 sectors, 1,200 lines: the block's lines were read ~600 lines before (a few of them
    // may have left the table of recent lines: a probe's case that read as a restart)
    let log = sim_log(20);
    let lines: Vec<&str> = log.lines().collect();
    let cfg = EngineConfig::default();
    let clean = analyze_str(&log, cfg.clone());
    // 200 lines from the first third, sent again two thirds of the way through
    let block = &lines[lines.len() / 6..lines.len() / 6 + 200];
    let at = 2 * lines.len() / 3;
    let mut text = String::new();
    for l in lines[..at].iter().chain(block).chain(&lines[at..]) {
        text.push_str(l);
        text.push('\n');
    }
    let r = analyze_str(&text, cfg);
    assert_eq!(
        r.events.runs, 1,
        "a block sent again is no restart: {:?}",
        r.events
    );
    // its SYNTH_STARTs are known repeats (duplicates), its other lines strays: none used
    let starts = block.iter().filter(|l| l.contains(",SYNTH_START,")).count() as u64;
    assert_eq!(r.events.duplicates, clean.events.duplicates + starts);
    assert_eq!(r.events.stray_late, 200 - starts);
    assert_eq!((r.events.conflicts, r.events.stray_early), (0, 0));
    assert_eq!(r.summary.jobs_complete, clean.summary.jobs_complete);
    assert_eq!(r.summary.seconds_per_proof, clean.summary.seconds_per_proof);
    assert_eq!(r.gpus[0].busy_ms, clean.gpus[0].busy_ms);
}

/// A log concatenated with itself is the same lines twice, to the millisecond: one run, the
/// second copy duplicates (a restart that does the same work again is the test above).
#[test]
fn a_log_concatenated_with_itself_is_one_run() {
    for log in [LOG.to_owned(), sim_log(12), sim_log(40), sim_log(160)] {
        let clean = analyze_str(&log, cfg_for(&log));
        let r = analyze_str(&format!("{log}{log}"), cfg_for(&log));
        let lines = log.lines().filter(|l| l.starts_with("TIMELINE")).count() as u64;
        assert_eq!(r.events.runs, 1, "{lines} lines: {:?}", r.events);
        // the few lines that had left the table of recent lines (40 sectors are 2,400
        // lines) are strays; none is used twice
        assert_eq!(
            r.events.duplicates + r.events.stray_late,
            lines,
            "{:?}",
            r.events
        );
        assert_eq!(r.events.conflicts, 0);
        assert_eq!(r.summary.jobs_complete, clean.summary.jobs_complete);
        assert_eq!(r.gpus[0].busy_ms, clean.gpus[0].busy_ms);
    }
}

/// The known-answer configuration for the hand-made log, the default for generated ones.
fn cfg_for(log: &str) -> EngineConfig {
    if log == LOG {
        cfg()
    } else {
        EngineConfig::default()
    }
}

/// One stray line far behind, or far ahead, of the lines around it: no new run, and no job's
/// figures change; it is counted and named.
#[test]
fn a_stray_line_behind_or_ahead_splits_no_run() {
    let log = sim_log(4);
    let lines: Vec<&str> = log.lines().collect();
    let cfg = EngineConfig::default();
    let clean = analyze_str(&log, cfg.clone());
    let mid = lines.len() / 2;
    let newest: u64 = lines[..mid]
        .iter()
        .map(|l| l.split(',').nth(1).unwrap().parse::<u64>().unwrap())
        .max()
        .unwrap();
    for (stray, behind) in [
        (
            format!(
                "TIMELINE,{},GPU_END,porep-1000-9,worker=0,partition=0,gpu_ms=5",
                newest - 70_000
            ),
            true,
        ),
        (
            format!(
                "TIMELINE,{},SYNTH_START,porep-1000-0,partition=3",
                newest + 3_600_000
            ),
            false,
        ),
    ] {
        let mut with = lines.clone();
        with.insert(mid, &stray);
        let r = analyze_str(&(with.join("\n") + "\n"), cfg.clone());
        assert_eq!(r.events.runs, 1, "{stray}");
        assert_eq!(r.jobs, clean.jobs, "{stray}");
        assert_eq!(r.gpus, clean.gpus, "{stray}");
        let counted = if behind {
            r.events.stray_late
        } else {
            r.events.stray_early
        };
        assert_eq!(counted, 1, "{stray}");
        assert!(
            r.events
                .conflict_examples
                .iter()
                .any(|e| e.contains("a stray line"))
        );
    }
}

/// `CUZK_NTT_H:` lines (the H polynomial's NTT and MSM per GPU call, `ms`-suffixed values)
/// are read beside the TIMELINE lines: each stage's milliseconds per line, a key cuzk may add
/// kept.
#[test]
fn ntt_h_lines_are_read_per_stage() {
    let log = format!(
        "{LOG}CUZK_NTT_H: d_b_alloc=1ms ntt_kernels=100ms msm_invoke=400ms total=510ms\n\
         noise CUZK_NTT_H: d_b_alloc=3ms ntt_kernels=140ms msm_invoke=420ms total=570ms later=9ms\n"
    );
    let r = analyze_str(&log, cfg());
    let k = r
        .kernel
        .as_ref()
        .expect("a kernel report from NTT_H lines alone");
    assert_eq!(k.ntt_h_lines, 2);
    let keys: Vec<&str> = k.ntt_h.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        ["d_b_alloc", "ntt_kernels", "msm_invoke", "total", "later"]
    );
    let ntt = &k.ntt_h[1].ms;
    assert_eq!(
        (ntt.count, ntt.mean_ms, ntt.total_ms),
        (2, Some(120.0), 240)
    );
    assert_eq!(k.ntt_h[4].ms.count, 1);
    assert!(proofline_core::text::render(&r).contains("CUZK_NTT_H (2 lines"));
}

/// Curio resubmits a proof under the same id after its timeout without cancelling the first:
/// two attempts of one job in flight at once. From TIMELINE lines they cannot be told apart;
/// the job is named, counted, and its figures are the first attempt's (the second's lines
/// conflicts), not a silent merge. A retry after the job ended is a new attempt, as before.
#[test]
fn a_second_attempt_in_flight_under_the_same_id_is_named() {
    let log = "\
TIMELINE,0,SYNTH_START,porep-7,partition=0
TIMELINE,1000,SYNTH_START,porep-7,partition=0
TIMELINE,30000,SYNTH_END,porep-7,partition=0,synth_ms=30000
TIMELINE,30000,GPU_START,porep-7,worker=0,partition=0
TIMELINE,31000,SYNTH_END,porep-7,partition=0,synth_ms=30000
TIMELINE,34000,GPU_END,porep-7,worker=0,partition=0,gpu_ms=4000
TIMELINE,34000,GPU_START,porep-7,worker=0,partition=0
TIMELINE,38000,GPU_END,porep-7,worker=0,partition=0,gpu_ms=4000
";
    let r = analyze_str(log, EngineConfig::default().expected_partitions(Some(1)));
    assert_eq!(r.events.overlapping_attempts, 1, "{:?}", r.events);
    assert_eq!(r.events.overlapping_examples, ["porep-7"]);
    assert!(r.events.conflicts >= 1);
    let text = proofline_core::text::render(&r);
    assert!(
        text.contains("second attempt under the same id in flight at once"),
        "{text}"
    );
    assert!(text.contains("porep-7"));
    // the clean log of four jobs has none
    assert_eq!(analyze_str(LOG, cfg()).events.overlapping_attempts, 0);
}
