//! Before and after: two reports' figures side by side, each with a noise band from the
//! runs' own samples and a call (`better`, `worse`, `same`).
//!
//! **The band.** Each figure is an estimate with a standard error (SE) from its run's own
//! samples, the sector being the unit of replication: the partitions of one sector share its
//! queue and its GPU's state, so they are not independent draws.
//!
//! - Means over sectors (seconds per proof: the mean interval between completions; a
//!   sector's wall time, synthesis and GPU time per partition) and over transitions (gap,
//!   hand-off, synthesis lead), in time order: SE = standard deviation / sqrt(samples),
//!   times sqrt((1 + r) / (1 - r)) with r the samples' lag-1 autocorrelation (0 when
//!   negative, at most 0.9): a sector that waited makes the next one wait.
//! - Figures the report keeps as distributions only: the standard deviation is taken from
//!   the distribution's p50 and p90 as a normal one's ((p90 - p50) / 1.2816), or from its
//!   p50 and p99 ((p99 - p50) / 2.326) where wider (a queue's long right tail); over
//!   sqrt(calls) for the GPU calls' kernel and lock-held times, and over sqrt(n) for the
//!   queue and lock-wait stages and the lock waits, n the sectors' effective number
//!   (sectors x (1 - r) / (1 + r), r the completions' lag-1 autocorrelation): a queue's
//!   partitions wait one behind another, and its state persists from sector to sector.
//! - The mean idle gap is not compared: two runs of one configuration differ in it by half
//!   (fewer, longer gaps or more, shorter ones) beyond any band their samples give; the
//!   busy ratio and the transition gaps carry the GPU's idle time.
//! - Derived figures (floors, busy ratio): the SE of what they are made of, relative,
//!   propagated (delta method).
//! - One value per run (cold start) has no band: it is shown and never called.
//!
//! The band of a difference is `z * sqrt(SE_a^2 + SE_b^2)`, with `z` the normal quantile
//! for a family-wise false-alarm rate `alpha` (default 1 %) split over the `m` figures with a
//! band (Bonferroni: `z = Phi^-1(1 - alpha / 2m)`, about 3.4 for 16 figures). A figure is
//! `better` or `worse` only when its difference is beyond its band *and* at least
//! [`MIN_EFFECT`] (1 %) of its value, [`MIN_EFFECT_FLOW`] (10 %) for the figures of the
//! flow and its outcomes: smaller changes are below what a run-to-run comparison of
//! provers can mean.

use serde::{Deserialize, Serialize};

use crate::dist::DistSummary;
use crate::report::{JobStatus, Report};

/// Version of the `compare --format json` document.
pub const SCHEMA_VERSION: u32 = 1;

/// Differences below this fraction of the figure are never called.
pub const MIN_EFFECT: f64 = 0.01;

/// The same for the figures of the flow and its outcomes (queue, gaps, lead, wall):
/// they follow the phase in which a run's syntheses and GPU calls fall, which drifts over a
/// run more slowly than its samples can show (two seeds of one configuration differ in a
/// sector's wall time by up to 5 % where each run's own spread says 1 %).
pub const MIN_EFFECT_FLOW: f64 = 0.10;

/// The least change called for a figure.
pub fn min_effect(name: &str) -> f64 {
    if name == "seconds_per_proof" || tier(name) <= 2 {
        MIN_EFFECT
    } else {
        MIN_EFFECT_FLOW
    }
}

/// Default family-wise false-alarm rate.
pub const DEFAULT_ALPHA: f64 = 0.01;

/// Which way is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Less is better (times, gaps).
    LowerIsBetter,
    /// More is better (busy ratio, synthesis lead).
    HigherIsBetter,
}

/// The call on one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Beyond the band, the good way.
    Better,
    /// Beyond the band, the bad way.
    Worse,
    /// Within the band (or under [`MIN_EFFECT`]).
    Same,
    /// No band (one value per run, or a side without the figure): shown, never called.
    NotCalled,
}

impl Change {
    /// Its name, as in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Change::Better => "better",
            Change::Worse => "worse",
            Change::Same => "same",
            Change::NotCalled => "not_called",
        }
    }
}

/// An estimate and its standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The figure.
    pub value: f64,
    /// Its standard error (`None`: no band).
    pub se: Option<f64>,
    /// Samples it stands on.
    pub n: u64,
}

/// One figure compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Its name, e.g. `seconds_per_proof`.
    pub name: String,
    /// Its unit: `s`, `ms` or `ratio`.
    pub unit: String,
    /// A's value.
    pub a: Option<f64>,
    /// B's value.
    pub b: Option<f64>,
    /// b - a.
    pub delta: Option<f64>,
    /// b / a - 1; `None` unless a > 0 and b >= 0 (across a sign change, or from a value
    /// at or below 0, a fraction of a says nothing: `delta` does).
    pub delta_ratio: Option<f64>,
    /// Half-width of the noise band of the difference (same unit).
    pub band: Option<f64>,
    /// The band as a fraction of a (`None` where `delta_ratio` is).
    pub band_ratio: Option<f64>,
    /// |delta| / (band / z): how many standard errors the difference is.
    pub z: Option<f64>,
    /// Less or more is better.
    pub direction: Direction,
    /// The call.
    pub change: Change,
    /// Samples behind a and b.
    pub samples: [u64; 2],
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Complete jobs of A and B.
    pub jobs: [u64; 2],
    /// The verdicts (`gpu_bound`, ...).
    pub verdicts: [String; 2],
    /// The figures: seconds per proof first, then the called ones (the work before its
    /// effects, each group by how far beyond noise), then the rest.
    pub figures: Vec<Figure>,
    /// Family-wise false-alarm rate.
    pub alpha: f64,
    /// Figures with a band (the Bonferroni split).
    pub banded: usize,
    /// The normal quantile the bands use.
    pub z: f64,
    /// The method, in words.
    pub method: String,
}

impl Comparison {
    /// A figure by name.
    pub fn figure(&self, name: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.name == name)
    }
}

/// Samples' lag-1 autocorrelation, in 0..=0.9 (a negative one is taken as 0).
fn lag1(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 3 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let ss = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
    if ss <= 0.0 {
        return 0.0;
    }
    let r = v
        .windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum::<f64>()
        / ss;
    r.clamp(0.0, 0.9)
}

/// Mean and its standard error of samples.
fn mean_se(v: &[f64]) -> Option<Estimate> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let se = (n >= 2).then(|| {
        let ss = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        let var = ss / (n - 1) as f64;
        // samples in time order lean on their neighbours (a sector that waited makes the
        // next wait): the variance of their mean grows by (1 + r) / (1 - r), r their lag-1
        // autocorrelation (an AR(1) series' effective sample size); a negative r is taken
        // as 0, never narrowing the band
        let r = lag1(v);
        (var / n as f64 * (1.0 + r) / (1.0 - r)).sqrt()
    });
    Some(Estimate {
        value: mean,
        se,
        n: n as u64,
    })
}

/// A distribution's mean with an SE from its p50..p90 spread over `n_eff` samples.
fn from_dist(d: &DistSummary, n_eff: u64) -> Option<Estimate> {
    let mean = d.mean_ms?;
    if d.count == 0 {
        return None;
    }
    let n = n_eff.min(d.count).max(1);
    // a normal distribution's sd from its p50..p90 or, for a long right tail (queues),
    // its p50..p99, whichever is wider
    let se = match (d.p50_ms, d.p90_ms) {
        (Some(p50), Some(p90)) if n >= 2 => {
            let by90 = (p90 - p50).max(0) as f64 / 1.2816;
            let by99 = d
                .p99_ms
                .map_or(0.0, |p99| (p99 - p50).max(0) as f64 / 2.3263);
            Some(by90.max(by99) / (n as f64).sqrt())
        }
        _ => None,
    };
    Some(Estimate { value: mean, se, n })
}

fn rel(e: &Estimate) -> Option<f64> {
    e.se.map(|se| {
        if e.value.abs() > 0.0 {
            se / e.value.abs()
        } else {
            0.0
        }
    })
}

/// `value` with the relative SE of `parts` combined (delta method, independent parts).
fn derived(value: f64, parts: &[Option<Estimate>], n: u64) -> Estimate {
    let mut sum = 0.0;
    let mut any = true;
    for p in parts {
        match p.as_ref().and_then(rel) {
            Some(r) => sum += r * r,
            None => any = false,
        }
    }
    Estimate {
        value,
        se: any.then(|| value.abs() * sum.sqrt()),
        n,
    }
}

/// Every figure of a report with its SE: `(name, unit, direction, estimate)`.
pub fn estimates(r: &Report) -> Vec<(&'static str, &'static str, Direction, Option<Estimate>)> {
    use Direction::{HigherIsBetter as Hi, LowerIsBetter as Lo};
    let complete: Vec<_> = r
        .jobs
        .iter()
        .filter(|j| j.status == JobStatus::Complete)
        .collect();
    let sectors = complete.len() as u64;
    // seconds per proof: the intervals between completions, within a run
    let mut ends: Vec<(u32, u64)> = complete
        .iter()
        .filter_map(|j| j.last_gpu_end_ms.map(|e| (j.run, e)))
        .collect();
    ends.sort_unstable();
    let intervals: Vec<f64> = ends
        .windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| (w[1].1 - w[0].1) as f64 / 1000.0)
        .collect();
    let spp = mean_se(&intervals).map(|mut e| {
        // the report's own figure (it counts every complete job, past the row cap too)
        if let Some(v) = r.summary.seconds_per_proof {
            e.value = v;
        }
        e
    });
    let per_part = |f: &dyn Fn(&crate::report::JobRecord) -> u64| -> Option<Estimate> {
        let v: Vec<f64> = complete
            .iter()
            .filter(|j| j.partitions_done > 0)
            .map(|j| f(j) as f64 / f64::from(j.partitions_done))
            .collect();
        mean_se(&v)
    };
    let synth = per_part(&|j| j.synthesis_total_ms);
    let gpu = per_part(&|j| j.gpu_total_ms);
    let wall = mean_se(
        &complete
            .iter()
            .filter_map(|j| j.wall_ms.map(|w| w as f64 / 1000.0))
            .collect::<Vec<_>>(),
    );
    let first_gpu = mean_se(
        &complete
            .iter()
            .filter_map(|j| j.first_synth_to_first_gpu_ms.map(|w| w as f64))
            .collect::<Vec<_>>(),
    );
    let tr = |f: &dyn Fn(&crate::report::TransitionRecord) -> Option<i64>| {
        mean_se(
            &r.transitions
                .iter()
                .filter_map(|t| f(t).map(|v| v as f64))
                .collect::<Vec<_>>(),
        )
    };
    let gap = tr(&|t| Some(t.gap_ms));
    let handoff = tr(&|t| t.handoff_ms);
    let lead = tr(&|t| t.synthesis_lead_ms);
    // the flow's state (a queue, a run of idle gaps) persists from sector to sector as
    // the completions do: its figures stand on the sectors' effective number
    let r_flow = lag1(&intervals);
    let flow_n = ((sectors as f64 * (1.0 - r_flow) / (1.0 + r_flow)).round() as u64).max(2);
    let queue = from_dist(&r.stages.queue, flow_n);
    let lock_wait = from_dist(&r.stages.lock_wait, flow_n);
    // a GPU call's kernel and lock time are independent from call to call; its wait for
    // the lock is the queue's, not (per sector, as the stages)
    let (kernel, held, kwait) = match &r.kernel {
        Some(k) if k.calls > 0 => (
            // every call's kernel time (the per-call distribution covers only the calls
            // whose lines came one after the other: its spread, not its mean)
            (k.kernel_ms > 0)
                .then(|| from_dist(&k.kernel_per_call, k.calls))
                .flatten()
                .map(|mut e| {
                    let v = k.kernel_ms as f64 / k.calls as f64;
                    if let Some(se) = e.se.as_mut() {
                        *se *= v / e.value.max(1e-9);
                    }
                    e.value = v;
                    e
                }),
            from_dist(&k.lock_held, k.lock_held.count),
            from_dist(&k.lock_wait, flow_n),
        ),
        _ => (None, None, None),
    };
    let busy = r
        .summary
        .steady_busy_ratio
        .or(r.summary.busy_ratio)
        .map(|b| derived(b, &[gpu, spp], sectors));
    let (gpu_floor, synth_floor) = match &r.floors {
        Some(f) => (
            Some(derived(
                f.gpu_s_per_proof,
                &[if f.gpu_basis == "lock_held" {
                    held
                } else {
                    gpu
                }],
                sectors,
            )),
            Some(derived(f.synthesis_s_per_proof, &[synth], sectors)),
        ),
        None => (None, None),
    };
    let cold = r.summary.cold_start_ms.map(|c| Estimate {
        value: c as f64,
        se: None,
        n: 1,
    });
    vec![
        ("seconds_per_proof", "s", Lo, spp),
        ("kernel_per_call_ms", "ms", Lo, kernel),
        ("lock_held_per_call_ms", "ms", Lo, held),
        ("lock_wait_per_call_ms", "ms", Lo, kwait),
        ("synthesis_per_partition_ms", "ms", Lo, synth),
        ("gpu_per_partition_ms", "ms", Lo, gpu),
        ("gpu_busy_ratio", "ratio", Hi, busy),
        ("gpu_floor_s_per_proof", "s", Lo, gpu_floor),
        ("synthesis_floor_s_per_proof", "s", Lo, synth_floor),
        ("job_wall_s", "s", Lo, wall),
        ("first_synth_to_first_gpu_ms", "ms", Lo, first_gpu),
        ("queue_ms", "ms", Lo, queue),
        ("lock_wait_ms", "ms", Lo, lock_wait),
        ("transition_gap_ms", "ms", Lo, gap),
        ("handoff_ms", "ms", Lo, handoff),
        ("synthesis_lead_ms", "ms", Hi, lead),
        ("cold_start_ms", "ms", Lo, cold),
    ]
}

/// How directly a figure measures the work (0) rather than its effects (4): the order in
/// which called figures explain a change.
fn tier(name: &str) -> u8 {
    match name {
        "kernel_per_call_ms" | "synthesis_per_partition_ms" => 0,
        // the lock's time holds the kernels' and the CPU work inside the lock
        "lock_held_per_call_ms" => 1,
        "gpu_floor_s_per_proof" | "synthesis_floor_s_per_proof" => 2,
        "job_wall_s" | "first_synth_to_first_gpu_ms" | "cold_start_ms" => 4,
        _ => 3,
    }
}

/// The inverse of the standard normal distribution function (Acklam's rational
/// approximation, relative error below 1.2e-9), for `0 < p < 1`.
pub fn inverse_normal(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let low = 0.02425;
    if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -inverse_normal(1.0 - p)
    }
}

/// Compares `a` (before) with `b` (after) at a family-wise false-alarm rate `alpha`.
pub fn compare(a: &Report, b: &Report, alpha: f64) -> Comparison {
    let ea = estimates(a);
    let eb = estimates(b);
    let banded = ea
        .iter()
        .zip(&eb)
        .filter(|((_, _, _, x), (_, _, _, y))| {
            x.is_some_and(|e| e.se.is_some()) && y.is_some_and(|e| e.se.is_some())
        })
        .count()
        .max(1);
    let alpha = if alpha > 0.0 && alpha < 1.0 {
        alpha
    } else {
        DEFAULT_ALPHA
    };
    let z = inverse_normal(1.0 - alpha / (2.0 * banded as f64));
    let mut figures: Vec<Figure> = ea
        .into_iter()
        .zip(eb)
        .map(|((name, unit, direction, x), (_, _, _, y))| {
            let delta = x.zip(y).map(|(x, y)| y.value - x.value);
            let se = x
                .zip(y)
                .and_then(|(x, y)| x.se.zip(y.se).map(|(sa, sb)| (sa * sa + sb * sb).sqrt()));
            let band = se.map(|s| z * s);
            let base = x.map(|e| e.value.abs()).filter(|v| *v > 0.0);
            // a change as a fraction of A only where both are of one sign and A is above 0:
            // a lead of 18 s that turns into -0.7 s is not "-104 %" (the deltas say it)
            let ratio_base = x
                .zip(y)
                .filter(|(x, y)| x.value > 0.0 && y.value >= 0.0)
                .map(|(x, _)| x.value);
            let change = match (delta, band) {
                (Some(d), Some(bd)) => {
                    let big = base.is_none_or(|v| d.abs() >= min_effect(name) * v);
                    if d.abs() > bd && big {
                        let up = d > 0.0;
                        if up == (direction == Direction::HigherIsBetter) {
                            Change::Better
                        } else {
                            Change::Worse
                        }
                    } else {
                        Change::Same
                    }
                }
                _ => Change::NotCalled,
            };
            Figure {
                name: name.to_owned(),
                unit: unit.to_owned(),
                a: x.map(|e| e.value),
                b: y.map(|e| e.value),
                delta,
                delta_ratio: delta.zip(ratio_base).map(|(d, v)| d / v),
                band,
                band_ratio: band.zip(ratio_base).map(|(bd, v)| bd / v),
                z: delta.zip(se).map(|(d, s)| {
                    if s > 0.0 {
                        d.abs() / s
                    } else if d == 0.0 {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                }),
                direction,
                change,
                samples: [x.map_or(0, |e| e.n), y.map_or(0, |e| e.n)],
            }
        })
        .collect();
    // seconds per proof first; then what changed, the furthest beyond noise first; then
    // the rest in their order
    let headline = figures.remove(0);
    let mut called: Vec<Figure> = Vec::new();
    let mut rest: Vec<Figure> = Vec::new();
    for f in figures {
        if matches!(f.change, Change::Better | Change::Worse) {
            called.push(f);
        } else {
            rest.push(f);
        }
    }
    // the work first (what a change to the prover changes), then where it shows in the
    // flow, then the outcomes; within each, the furthest beyond noise first
    called.sort_by(|x, y| {
        let k = |f: &Figure| {
            f.z.map_or(0.0, |z| if z.is_finite() { z } else { f64::MAX })
        };
        tier(&x.name)
            .cmp(&tier(&y.name))
            .then(k(y).total_cmp(&k(x)))
    });
    let mut ordered = vec![headline];
    ordered.extend(called);
    ordered.extend(rest);
    let count = |r: &Report| {
        r.jobs
            .iter()
            .filter(|j| j.status == JobStatus::Complete)
            .count() as u64
    };
    Comparison {
        schema_version: SCHEMA_VERSION,
        jobs: [count(a), count(b)],
        verdicts: [
            a.verdict.bound.as_str().to_owned(),
            b.verdict.bound.as_str().to_owned(),
        ],
        figures: ordered,
        alpha,
        banded,
        z,
        method: format!(
            "each figure's standard error from its run's own samples, per sector (means: sd / sqrt(n), widened for lag-1 autocorrelation; distributions: the p50..p90 or p50..p99 spread as a normal's over sqrt(calls) for a GPU call's kernel and lock time, over sqrt(the sectors' effective number) for the flow's; floors and busy ratio: propagated); the band is z x the difference's standard error with z = {z:.2} (a {:.0} % family-wise false-alarm rate split over {banded} figures, Bonferroni); a change is called only beyond its band and at least {:.0} % of the figure ({:.0} % for the flow and its outcomes: queue, gaps, lead, wall, which drift with a run's phase more than its samples show)",
            alpha * 100.0,
            MIN_EFFECT * 100.0,
            MIN_EFFECT_FLOW * 100.0
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inverse_normal_matches_known_quantiles() {
        for (p, z) in [
            (0.5, 0.0),
            (0.975, 1.959_963_985),
            (0.995, 2.575_829_304),
            (0.999_5, 3.290_526_731),
            (0.01, -2.326_347_874),
            (1e-6, -4.753_424_309),
        ] {
            assert!(
                (inverse_normal(p) - z).abs() < 1e-6,
                "{p}: {}",
                inverse_normal(p)
            );
        }
    }

    #[test]
    fn the_mean_and_its_standard_error_are_the_textbook_ones() {
        let e = mean_se(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(e.value, 2.5);
        // sd = sqrt(5/3), se = sd / 2, times sqrt((1 + r) / (1 - r)) with r = 0.25
        let r: f64 = (-1.5 * -0.5 + -0.5 * 0.5 + 0.5 * 1.5) / 5.0;
        assert!((r - 0.25).abs() < 1e-12);
        let want = (5.0f64 / 3.0).sqrt() / 2.0 * ((1.0 + r) / (1.0 - r)).sqrt();
        assert!((e.se.unwrap() - want).abs() < 1e-12);
        // alternating samples (negative r) are not narrowed
        let e = mean_se(&[1.0, 3.0, 1.0, 3.0]).unwrap();
        assert!((e.se.unwrap() - (4.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-12);
        assert_eq!(mean_se(&[7.0]).unwrap().se, None);
        assert!(mean_se(&[]).is_none());
    }
}
