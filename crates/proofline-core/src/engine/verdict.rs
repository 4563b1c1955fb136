//! The verdict: which resource bounds throughput, and the numbers that decided it.

use crate::report::{Bound, Verdict};

/// GPU-bound at a busy ratio of at least this.
pub const GPU_BOUND_RATIO: f64 = 0.95;
/// The pipeline looks busy at a busy ratio of at least this: below it, idle gaps explain
/// the throughput before the lock does.
pub const LOOKS_BUSY_RATIO: f64 = 0.85;
/// Kernels fill the GPU when their time is at least this share of its busy time; below, the
/// lock is held by CPU work (when the pipeline looks busy).
pub const KERNEL_FILL_RATIO: f64 = 0.75;
/// Kernel time more than this share of the busy time cannot be: the timing lines counted
/// some calls twice (a log read twice, or joined with an overlapping part: a repeated
/// TIMELINE line is dropped, a repeated `CUZK_TIMING:` line cannot be told from a new one).
/// The kernel figures are then left out of the verdict, which says so.
pub const KERNEL_FILL_MAX: f64 = 1.05;

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
    /// From `CUZK_TIMING:` lines, when there were any: kernel time / busy time, kernel time
    /// / elapsed time, and the medians of prep_msm and b_g2_msm (ms).
    pub kernel: Option<KernelEvidence>,
    /// Whether any synthesis was observed (a partition's SYNTH_START and SYNTH_END pair, or a
    /// printed `synth_ms`): without it an empty queue is no evidence that the GPUs waited on
    /// synthesis (the hand-off is still told by partitions that waited in the queue).
    pub synthesis_seen: bool,
    /// The kernel fill, when it was above [`KERNEL_FILL_MAX`] (then `kernel` is `None`).
    pub kernel_over: Option<f64>,
}

/// What the kernel lines add to the evidence.
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelEvidence {
    pub fill: f64,
    pub utilisation: f64,
    pub prep_msm_p50: Option<i64>,
    pub b_g2_msm_p50: Option<i64>,
}

/// When kernel time was observed, the GPU lock held by CPU work if the (steady-state, else
/// whole-run) busy ratio is at least [`LOOKS_BUSY_RATIO`] and the kernels fill less than
/// [`KERNEL_FILL_RATIO`] of the busy time. Else GPU-bound at a busy ratio of at least
/// [`GPU_BOUND_RATIO`]; below it, hand-off bound if the GPUs idled longer with partitions
/// waiting than with the queue empty, else synthesis-bound when synthesis was observed, else
/// unknown.
pub(super) fn verdict(ev: Evidence) -> Verdict {
    let Evidence {
        steady,
        whole,
        wait,
        empty,
        lead,
        kernel,
        synthesis_seen,
        kernel_over,
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
    let ms_txt =
        |v: Option<i64>| v.map_or("-".to_owned(), |v| format!("{:.1} s", v as f64 / 1000.0));
    let kernel_txt = match (kernel, kernel_over) {
        (Some(k), _) => format!(
            "; kernels {} of the time, filling {} of the busy time",
            pct(k.utilisation),
            pct(k.fill)
        ),
        (None, Some(f)) => format!(
            "; kernel figures left out: the CUZK_TIMING lines give {} of the busy time in kernels, which cannot be (lines repeated: a log read twice, or joined with an overlapping part? or GPUs merged by --gpu-workers-per-device set too high)",
            pct(f)
        ),
        (None, None) => "; kernel time not observed (no CUZK_TIMING lines)".to_owned(),
    };
    let (bound, sentence) = match (ratio, kernel) {
        (None, _) => (
            Bound::Unknown,
            "No verdict: no GPU interval was observed.".to_owned(),
        ),
        (Some(r), Some(k)) if r >= LOOKS_BUSY_RATIO && k.fill < KERNEL_FILL_RATIO => (
            Bound::LockHeldByCpu,
            format!(
                "GPU lock held by CPU work: pipeline busy {} of {span}, kernels {}; they fill {} of the busy time (< 75%); prep_msm p50 {} and b_g2_msm p50 {} on the critical path. More GPUs would not help; CPU memory bandwidth or the MSM preprocessing is the limit.",
                pct(r),
                pct(k.utilisation),
                pct(k.fill),
                ms_txt(k.prep_msm_p50),
                ms_txt(k.b_g2_msm_p50)
            ),
        ),
        (Some(r), _) if r >= GPU_BOUND_RATIO => (
            Bound::GpuBound,
            format!(
                "GPU-bound: the GPUs were busy {} of {span} (>= 95%){kernel_txt}{lead_txt}.",
                pct(r)
            ),
        ),
        (Some(r), _) if wait > empty => (
            Bound::HandoffBound,
            format!(
                "Hand-off bound: the GPUs were busy {} of {span}; they idled {} while synthesized partitions waited, against {} with an empty queue{lead_txt}.",
                pct(r),
                secs(wait),
                secs(empty)
            ),
        ),
        (Some(r), _) if !synthesis_seen => (
            Bound::Unknown,
            format!(
                "No verdict: the GPUs were busy {} of {span}, and no synthesis was observed (no partition's SYNTH_START and SYNTH_END up to its GPU_END, nor a printed synth_ms: the synthesis spans filtered out or not mapped, the log lacks them, or its jobs were evicted before a partition's GPU work ended), so what kept them idle cannot be told{kernel_txt}.",
                pct(r)
            ),
        ),
        (Some(r), _) => (
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
        kernel_fill: kernel.map(|k| k.fill),
        kernel_utilisation: kernel.map(|k| k.utilisation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three jobs of two partitions on one GPU, each call's kernel 80 of its 100 ms, the
    /// lines given `times` times each (a log read twice): the repeated TIMELINE lines are
    /// dropped, the repeated timing lines cannot be told from new ones.
    fn kernel_report(times: usize) -> crate::Report {
        crate::engine::calls_on_one_gpu(
            &[
                "CUZK_TIMING: mutex_held_ms=95 total_start_fn_ms=96",
                "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=40",
                "CUZK_TIMING: gpu_tid=0 batch_add_ms=20",
                "CUZK_TIMING: gpu_tid=0 tail_msm_ms=20 gpu_total_ms=80",
            ],
            times,
        )
        .report()
    }

    /// Kernel time that does not fit in the busy time (a log whose timing lines were read
    /// twice gave "kernels 142 % of the time" and flipped the verdict) is left out of the
    /// verdict, which says why; read once, the same lines decide.
    #[test]
    fn kernel_time_beyond_the_busy_time_is_left_out_of_the_verdict() {
        let report = kernel_report(1);
        // (the text says how many calls the per-call figure is over)
        let text = crate::text::render(&report);
        assert!(
            text.contains("6 calls, 6 GPU threads; kernel per call")
                && text.contains("(over the 6 calls whose lines were followed on one GPU;"),
            "{text}"
        );
        let once = report.verdict;
        let fill = once.kernel_fill.expect("kernel evidence");
        assert!((fill - 0.8).abs() < 1e-9, "{once:?}");
        assert!(
            !text.contains("repeated TIMELINE line(s) were dropped"),
            "{text}"
        );
        let twice = kernel_report(2);
        // the kernel section says the repeated lines may be counted twice
        let text = crate::text::render(&twice);
        assert!(
            text.contains("note: 24 repeated TIMELINE line(s) were dropped; repeated CUZK_TIMING lines cannot be told"),
            "{text}"
        );
        let twice = twice.verdict;
        assert_eq!(twice.kernel_fill, None, "{twice:?}");
        assert_eq!(twice.busy_ratio, once.busy_ratio);
        assert!(
            twice.sentence.contains(
                "kernel figures left out: the CUZK_TIMING lines give 160.0% of the busy time"
            ),
            "{}",
            twice.sentence
        );
    }

    fn evidence(wait: u64, empty: u64, synthesis_seen: bool) -> Evidence {
        Evidence {
            steady: Some(0.6),
            whole: Some(0.6),
            wait,
            empty,
            lead: None,
            kernel: None,
            synthesis_seen,
            kernel_over: None,
        }
    }

    /// Without synthesis, an empty queue proves nothing (unknown), but partitions that
    /// waited in the queue still prove a hand-off bound; with synthesis, the usual rule.
    #[test]
    fn no_synthesis_takes_away_only_the_synthesis_bound_verdict() {
        assert_eq!(verdict(evidence(100, 5_000, false)).bound, Bound::Unknown);
        assert!(
            verdict(evidence(100, 5_000, false))
                .sentence
                .contains("no synthesis was observed")
        );
        assert_eq!(
            verdict(evidence(5_000, 100, false)).bound,
            Bound::HandoffBound
        );
        assert_eq!(
            verdict(evidence(100, 5_000, true)).bound,
            Bound::SynthesisBound
        );
        let mut busy = evidence(0, 0, false);
        busy.steady = Some(0.97);
        assert_eq!(verdict(busy).bound, Bound::GpuBound);
    }
}
