//! How far the figures proofline derives from cuzk's spans alone (the layer with no change to
//! cuzk) land from the figures of the TIMELINE lines cuzk prints itself, for the same runs of
//! the cuzk-shaped simulator: a markdown table per scenario, each figure as the spread
//! (min..max) over several runs.
//!
//!     cargo run --release -p proofline-tests --bin span_vs_printed [RUNS]

use proofline::TimelineLayer;
use proofline_core::report::Report;
use proofline_core::{EngineConfig, text};
use proofline_sim::SimConfig;
use proofline_tests::{analyze_str, cuzk_run};

const SPEED: f64 = 20.0;

fn engine(cfg: &SimConfig) -> EngineConfig {
    EngineConfig::default()
        .gpu_workers_per_device(cfg.workers_per_gpu)
        .reorder_window_ms(1000)
        .completion_grace_ms(1000)
}

/// The figures compared, in simulated (cuzk-scale) seconds or as ratios.
fn figures(r: &Report) -> Vec<(&'static str, f64)> {
    let s = |ms: f64| ms * SPEED / 1000.0;
    let gpu = |f: fn(&proofline_core::report::GpuReport) -> f64| r.gpus.iter().map(f).sum::<f64>();
    let sum_ms = |v: Option<i64>| v.map_or(f64::NAN, |v| s(v as f64));
    vec![
        (
            "GPU busy (union), s",
            gpu(|g| g.busy_ms as f64) * SPEED / 1000.0,
        ),
        (
            "serial sum / busy (concurrency)",
            gpu(|g| g.serial_sum_ms as f64) / gpu(|g| g.busy_ms as f64).max(1.0),
        ),
        (
            "busy ratio, steady state",
            r.summary.steady_busy_ratio.unwrap_or(f64::NAN),
        ),
        ("idle gaps, count", gpu(|g| g.idle_total.count as f64)),
        (
            "idle gaps, total s",
            gpu(|g| g.idle_total.total_ms as f64) * SPEED / 1000.0,
        ),
        (
            "cross-sector gaps, count",
            gpu(|g| g.idle_cross_sector.count as f64),
        ),
        (
            "transition gap p50, s",
            sum_ms(r.transitions_summary.gap.p50_ms),
        ),
        (
            "synthesis lead p50, s",
            sum_ms(r.transitions_summary.synthesis_lead.p50_ms),
        ),
        ("GPU stage p50, s", sum_ms(r.stages.gpu.p50_ms)),
        (
            "seconds per proof",
            r.summary.seconds_per_proof.map_or(f64::NAN, |v| v * SPEED),
        ),
    ]
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo.is_nan() || hi.is_nan() {
        "-".into()
    } else if (hi - lo).abs() < 0.005 {
        format!("{lo:.2}")
    } else {
        format!("{lo:.2}..{hi:.2}")
    }
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let mut stall = SimConfig::porep(6);
    stall.faults.stall_before_job = Some((3, 40_000));
    for (name, base) in [
        (
            "8 PoRep sectors, 1 GPU x 2 workers (GPU-bound)",
            SimConfig::porep(8),
        ),
        (
            "6 PoRep sectors, synthesis stalls 40 s before sector 3",
            stall,
        ),
    ] {
        let mut span_rows: Vec<Vec<f64>> = Vec::new();
        let mut printed_rows: Vec<Vec<f64>> = Vec::new();
        let mut verdicts = Vec::new();
        let mut labels = Vec::new();
        for i in 0..runs {
            let mut cfg = base.clone();
            cfg.seed = 1 + i as u64;
            let run = cuzk_run(
                &cfg,
                SPEED,
                TimelineLayer::builder().engine_config(engine(&cfg)),
                false,
            );
            let spans = analyze_str(&run.layer_lines, engine(&cfg));
            let printed = analyze_str(&run.printed, engine(&cfg));
            for (rows, r) in [(&mut span_rows, &spans), (&mut printed_rows, &printed)] {
                for (k, (_, v)) in figures(r).into_iter().enumerate() {
                    if rows.len() <= k {
                        rows.push(Vec::new());
                    }
                    rows[k].push(v);
                }
            }
            labels = figures(&spans).into_iter().map(|(l, _)| l).collect();
            verdicts.push((spans.verdict.bound, printed.verdict.bound));
            if i == 0 {
                eprintln!("{}", text::render(&spans));
            }
        }
        println!(
            "\n**{name}** ({runs} runs at {SPEED}x, seeds 1..{runs}; min..max over the runs)\n"
        );
        println!("| figure | from cuzk's spans (layer alone) | from cuzk's TIMELINE lines |");
        println!("|---|---|---|");
        for (k, label) in labels.iter().enumerate() {
            println!(
                "| {label} | {} | {} |",
                spread(&span_rows[k]),
                spread(&printed_rows[k])
            );
        }
        let same = verdicts.iter().filter(|(a, b)| a == b).count();
        println!(
            "| verdict | {:?} | {:?} (same in {same} of {runs}) |",
            verdicts[0].0, verdicts[0].1
        );
    }
}
