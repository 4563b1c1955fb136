//! The threaded simulator through the real layer: configured timings come out, faults show
//! where they should, and the instant mode agrees.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use proofline::TimelineLayer;
use proofline_core::EngineConfig;
use proofline_core::report::{Bound, Report};
use proofline_sim::threaded::{self, Progress, RunSummary};
use proofline_sim::{SimConfig, instant};
use proofline_tests::analyze_str;
use tracing_subscriber::prelude::*;

const SPEED: f64 = 100.0;

/// Runs the threaded prover under the layer; returns the live report, the TIMELINE text and
/// the run summary.
fn run(cfg: &SimConfig) -> (Report, String, RunSummary, proofline::StatsSnapshot) {
    let buf = proofline_tests::SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .engine_config(
            EngineConfig::default()
                .reorder_window_ms(1000)
                .completion_grace_ms(1000),
        )
        .timeline_to_writer(buf.clone())
        .build();
    let progress = Arc::new(Progress::default());
    let summary =
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            threaded::run(
                cfg,
                SPEED,
                false,
                Arc::new(AtomicBool::new(false)),
                progress.clone(),
            )
        });
    // what the prover counted as it ran is what it sums up
    let p = progress.snapshot();
    assert_eq!(
        (p.synthesized, p.proved),
        (summary.synthesized, summary.proved)
    );
    assert_eq!(p.jobs_started, cfg.jobs.len() as u64);
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    (report, text, summary, guard.stats())
}

fn within(actual: f64, expected: f64, tol: f64) -> bool {
    (actual - expected).abs() <= expected * tol
}

#[test]
fn configured_timings_come_out_of_the_spans() {
    let mut cfg = SimConfig::porep(3);
    cfg.timings.spread = 0.0;
    let (r, text, summary, stats) = run(&cfg);
    assert_eq!(
        summary,
        RunSummary {
            synthesized: 30,
            proved: 30,
            panicked_calls: 0
        }
    );
    assert_eq!(stats.dropped, 0);
    assert_eq!(text.lines().count(), 180);
    assert_eq!(r.summary.jobs_complete, 3);
    // synthesis 30 s / 100 = 300 ms a partition
    let synth = r.stages.synthesis.p50_ms.unwrap() as f64;
    assert!(within(synth, 300.0, 0.1), "synthesis p50 {synth} ms");
    // the kernel (37 ms) is serialised by the GPU lock: ~370 ms of GPU per sector
    let spp = r.summary.seconds_per_proof.unwrap() * 1000.0;
    assert!(within(spp, 370.0, 0.2), "seconds per proof {spp} ms");
    assert!(
        r.gpus[0].serial_sum_ms > r.gpus[0].busy_ms,
        "two workers overlap"
    );
    // the log it wrote analyzes to the same numbers (one engine, two doors)
    let offline = analyze_str(
        &text,
        EngineConfig::default()
            .reorder_window_ms(1000)
            .completion_grace_ms(1000),
    );
    assert_eq!(offline.gpus, r.gpus);
    assert_eq!(offline.summary, r.summary);
}

#[test]
fn a_stall_is_a_cross_sector_gap_and_synthesis_bound() {
    let mut cfg = SimConfig::porep(4);
    cfg.faults.stall_before_job = Some((2, 60_000));
    let (r, ..) = run(&cfg);
    assert_eq!(r.summary.jobs_complete, 4);
    assert_eq!(
        r.verdict.bound,
        Bound::SynthesisBound,
        "{}",
        r.verdict.sentence
    );
    let g = &r.gpus[0];
    assert!(g.idle_cross_sector.count >= 1);
    assert!(
        g.idle_cross_sector.total_ms > 300,
        "{:?}",
        g.idle_cross_sector
    );
}

#[test]
fn a_never_finishing_partition_is_an_incomplete_job() {
    let mut cfg = SimConfig::porep(3);
    cfg.faults.never_finish = Some((1, 4));
    let (r, _, summary, _) = run(&cfg);
    assert_eq!(summary.proved, 29);
    assert_eq!(r.summary.jobs_complete, 2);
    assert_eq!(r.summary.jobs_incomplete, 1);
    assert_eq!(&*r.incomplete[0].job_id, "porep-1000-1");
    assert_eq!(r.incomplete[0].partitions_done, 9);
}

#[test]
fn a_panicking_gpu_call_leaves_the_prover_and_the_layer_working() {
    let mut cfg = SimConfig::porep(3);
    cfg.faults.panic_worker = Some((1, 2));
    let (r, text, summary, stats) = run(&cfg);
    assert_eq!(summary.panicked_calls, 1);
    assert_eq!(
        summary.proved, 29,
        "one partition's GPU call panicked, the rest was proved"
    );
    assert_eq!(
        stats.failed, 1,
        "the error logged inside its gpu_worker span: no GPU_END"
    );
    assert_eq!(stats.aborted, 0, "cuzk's spawn_blocking catches the panic");
    assert_eq!(r.summary.jobs_complete, 2);
    assert_eq!(r.summary.jobs_incomplete, 1);
    // worker 1 goes on picking up work after the panic, and the layer writes its events
    let pickups_of_1 = text
        .lines()
        .filter(|l| l.contains(",GPU_PICKUP,") && l.contains("worker=1"))
        .count();
    assert!(pickups_of_1 > 3, "{pickups_of_1} pickups by worker 1");
}

#[test]
fn instant_and_threaded_modes_agree() {
    let mut cfg = SimConfig::porep(4);
    cfg.gpus = 1;
    let (threaded, ..) = run(&cfg);
    let instant = analyze_str(&instant::log_string(&cfg), EngineConfig::default());
    let spp_t = threaded.summary.seconds_per_proof.unwrap() * SPEED;
    let spp_i = instant.summary.seconds_per_proof.unwrap();
    assert!(
        within(spp_t, spp_i, 0.15),
        "threaded {spp_t:.2} s/proof vs instant {spp_i:.2}"
    );
    let busy_t = threaded.summary.steady_busy_ratio.unwrap();
    let busy_i = instant.summary.steady_busy_ratio.unwrap();
    assert!((busy_t - busy_i).abs() < 0.05, "busy {busy_t} vs {busy_i}");
    assert_eq!(threaded.verdict.bound, instant.verdict.bound);
    let synth_t = threaded.stages.synthesis.p50_ms.unwrap() as f64 * SPEED;
    let synth_i = instant.stages.synthesis.p50_ms.unwrap() as f64;
    assert!(within(synth_t, synth_i, 0.1), "{synth_t} vs {synth_i}");
}
