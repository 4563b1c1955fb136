//! `compare`'s calls on generated pairs: two runs of one configuration come out `same` on
//! every figure over many seeds; a real change comes out `worse` or `better`, with the
//! figure that explains it named first.

use proofline_core::compare::{self, Change, Comparison};
use proofline_core::{EngineConfig, Report};
use proofline_sim::{SimConfig, instant};
use proofline_tests::analyze_str;

fn report(cfg: &SimConfig) -> Report {
    analyze_str(&instant::log_string(cfg), EngineConfig::default())
}

fn cfg(synth: u32, gpus: u32, seed: u64) -> SimConfig {
    let mut c = SimConfig::porep(20);
    c.synth_workers = synth;
    c.gpus = gpus;
    c.seed = seed;
    c.timing.emit = true;
    c
}

fn called(c: &Comparison) -> Vec<String> {
    c.figures
        .iter()
        .filter(|f| matches!(f.change, Change::Better | Change::Worse))
        .map(|f| {
            format!(
                "{} {} ({:+.1} %, band {:.1} %)",
                f.name,
                f.change.as_str(),
                f.delta_ratio.unwrap_or(0.0) * 100.0,
                f.band_ratio.unwrap_or(0.0) * 100.0
            )
        })
        .collect()
}

/// The same configuration, different seeds: nothing is called, on 8 seed pairs of each of
/// a GPU-bound, a synthesis-bound and a two-GPU prover (24 comparisons of 18 figures).
#[test]
fn two_runs_of_one_configuration_are_the_same_on_every_figure() {
    for (synth, gpus) in [(10, 1), (4, 1), (12, 2)] {
        for seed in (10..26).step_by(2) {
            let a = report(&cfg(synth, gpus, seed));
            let b = report(&cfg(synth, gpus, seed + 1));
            let c = compare::compare(&a, &b, compare::DEFAULT_ALPHA);
            assert!(
                called(&c).is_empty(),
                "{synth} workers, {gpus} GPUs, seeds {seed}/{}: {:?}",
                seed + 1,
                called(&c)
            );
            assert!(c.banded >= 14, "{}", c.banded);
        }
    }
}

/// Kernels 8 % slower (cuzk's kernel per partition, 3.7 s -> 4.0 s): seconds per proof
/// worse, and the kernel time named first as the reason.
#[test]
fn slower_kernels_are_worse_and_named_first() {
    let a = report(&cfg(10, 1, 1));
    let mut slow = cfg(10, 1, 2);
    slow.timings.kernel_ms *= 1.08;
    let b = report(&slow);
    let c = compare::compare(&a, &b, compare::DEFAULT_ALPHA);
    assert_eq!(c.figures[0].name, "seconds_per_proof");
    assert_eq!(c.figures[0].change, Change::Worse, "{:?}", called(&c));
    assert_eq!(c.figures[1].name, "kernel_per_call_ms", "{:?}", called(&c));
    assert_eq!(c.figures[1].change, Change::Worse);
    let d = c.figures[1].delta_ratio.unwrap();
    assert!((0.06..0.10).contains(&d), "{d}");
    // synthesis did not change
    assert_eq!(
        c.figure("synthesis_per_partition_ms").unwrap().change,
        Change::Same
    );
}

/// 7 instead of 10 synthesis workers: seconds per proof worse (cuzk's table: ~53 against
/// ~43), and the synthesis floor, not the work per partition, is what moved.
#[test]
fn fewer_synthesis_workers_are_worse() {
    let a = report(&cfg(10, 1, 3));
    let b = report(&cfg(7, 1, 4));
    let c = compare::compare(&a, &b, compare::DEFAULT_ALPHA);
    assert_eq!(c.figures[0].change, Change::Worse, "{:?}", called(&c));
    assert_eq!(
        c.figure("synthesis_floor_s_per_proof").unwrap().change,
        Change::Worse
    );
    assert_eq!(
        c.figure("synthesis_per_partition_ms").unwrap().change,
        Change::Same
    );
    assert_eq!(c.verdicts, ["gpu_bound", "synthesis_bound"]);
}

/// An improvement: a second GPU on a GPU-bound prover; and the reverse comparison calls the
/// same figure worse.
#[test]
fn an_improvement_is_better_and_the_reverse_worse() {
    let a = report(&cfg(16, 1, 5));
    let b = report(&cfg(16, 2, 6));
    let c = compare::compare(&a, &b, compare::DEFAULT_ALPHA);
    assert_eq!(c.figures[0].change, Change::Better, "{:?}", called(&c));
    let r = compare::compare(&b, &a, compare::DEFAULT_ALPHA);
    assert_eq!(r.figures[0].change, Change::Worse);
}

/// A change under the noise of a short run is not called, even when it is real: 1 % slower
/// kernels over 20 sectors.
#[test]
fn a_change_inside_the_noise_is_the_same() {
    let a = report(&cfg(10, 1, 7));
    let mut b = cfg(10, 1, 8);
    b.timings.kernel_ms *= 1.005;
    let c = compare::compare(&a, &report(&b), compare::DEFAULT_ALPHA);
    assert_eq!(c.figures[0].change, Change::Same, "{:?}", called(&c));
}
