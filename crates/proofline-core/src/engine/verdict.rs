//! The verdict: which resource bounds throughput, and the numbers that decided it.

use crate::report::{Bound, Verdict};

/// GPU-bound at a busy ratio of at least this.
pub const GPU_BOUND_RATIO: f64 = 0.95;

/// What decides the verdict.
#[derive(Debug, Clone, Copy)]
pub(super) struct Evidence {
    /// Steady-state busy ratio of all devices (`None`: fewer than two completions).
    pub steady: Option<f64>,
    /// Busy ratio of the whole run.
    pub whole: Option<f64>,
    /// GPU idle time with partitions waiting, ms.
    pub wait: u64,
    /// GPU idle time with an empty queue, ms.
    pub empty: u64,
    /// Median synthesis lead, ms.
    pub lead: Option<i64>,
}

/// GPU-bound when the (steady-state, else whole-run) busy ratio is at least
/// [`GPU_BOUND_RATIO`]; below it, hand-off bound if the GPUs idled longer with partitions
/// waiting than with the queue empty, else synthesis-bound.
pub(super) fn verdict(ev: Evidence) -> Verdict {
    let Evidence {
        steady,
        whole,
        wait,
        empty,
        lead,
    } = ev;
    let (ratio, is_steady) = match (steady, whole) {
        (Some(s), _) => (Some(s), true),
        (None, w) => (w, false),
    };
    let pct = |r: f64| format!("{:.1}%", r * 100.0);
    let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    let span = if is_steady {
        "the steady state"
    } else {
        "the run (no steady state: fewer than two jobs completed)"
    };
    let lead_txt = lead
        .map(|l| format!(", median synthesis lead {:+.1} s", l as f64 / 1000.0))
        .unwrap_or_default();
    let (bound, sentence) = match ratio {
        None => (
            Bound::Unknown,
            "No verdict: no GPU interval was observed.".to_owned(),
        ),
        Some(r) if r >= GPU_BOUND_RATIO => (
            Bound::GpuBound,
            format!(
                "GPU-bound: the GPUs were busy {} of {span} (>= 95%){lead_txt}.",
                pct(r)
            ),
        ),
        Some(r) if wait > empty => (
            Bound::HandoffBound,
            format!(
                "Hand-off bound: the GPUs were busy {} of {span}; they idled {} while synthesized partitions waited, against {} with an empty queue{lead_txt}.",
                pct(r),
                secs(wait),
                secs(empty)
            ),
        ),
        Some(r) => (
            Bound::SynthesisBound,
            format!(
                "Synthesis-bound: the GPUs were busy {} of {span}; they idled {} with an empty queue, against {} while partitions waited{lead_txt}.",
                pct(r),
                secs(empty),
                secs(wait)
            ),
        ),
    };
    Verdict {
        bound,
        sentence,
        busy_ratio: ratio,
        steady_state: is_steady,
        idle_with_queue_ms: wait,
        idle_queue_empty_ms: empty,
        synthesis_lead_p50_ms: lead,
    }
}
