//! The metric set: every proofline metric, its buckets, HELP text and registration.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use proofline_core::Nouns;

use crate::exports::ExportCollector;
use crate::labels::*;

// Buckets: ten finite ones each (the series budget, docs/metrics.md, "Series budget"), placed where
// the questions are: the gap size classes (50 ms, 500 ms), a partition's GPU work (2-7 s), its
// synthesis (~30 s), a sector (~40 s to minutes).

/// Idle gaps, seconds (the size classes' edges 0.05 and 0.5 among them).
pub(crate) const GAP_BUCKETS: [f64; 10] =
    [0.05, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
/// Transition gaps and overlaps, synthesis leads and lags, seconds (all non-negative: a
/// signed figure is two histograms, so that every scraper's parser takes them).
pub(crate) const TRANSITION_BUCKETS: [f64; 10] =
    [0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0];
/// Partition stages, seconds.
pub(crate) const STAGE_BUCKETS: [f64; 10] =
    [0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0];
/// Sector wall time, seconds.
pub(crate) const SECTOR_BUCKETS: [f64; 10] = [
    10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0, 600.0, 1200.0,
];
/// Cold starts, seconds.
pub(crate) const COLD_BUCKETS: [f64; 8] = [1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// The most finite buckets a histogram may have (the series budget: docs/metrics.md, "Series budget").
pub const MAX_BUCKETS: usize = 10;

/// The buckets (upper bounds, in seconds) of proofline's histograms. The defaults are sized
/// for cuzk (a partition's GPU work 2-7 s, its synthesis ~30 s, a sector ~40 s to minutes);
/// a prover of another size sets its own:
///
/// ```
/// use proofline_prometheus::{Buckets, Metrics};
/// // jobs of 1-2 s, GPU stages of ~100 ms
/// let buckets = Buckets::default()
///     .job(vec![0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0])
///     .stage(vec![0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0]);
/// let metrics = Metrics::with_buckets(buckets).unwrap();
/// ```
///
/// Each list holds 1 to [`MAX_BUCKETS`] finite, positive, increasing bounds (`+Inf` is
/// always added). deploy/'s recording rules take quantiles, which any buckets serve; its
/// rules test feeds the default bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    idle_gap: Vec<f64>,
    transition: Vec<f64>,
    stage: Vec<f64>,
    job: Vec<f64>,
    cold_start: Vec<f64>,
}

impl Default for Buckets {
    /// cuzk's.
    fn default() -> Self {
        Buckets {
            idle_gap: GAP_BUCKETS.to_vec(),
            transition: TRANSITION_BUCKETS.to_vec(),
            stage: STAGE_BUCKETS.to_vec(),
            job: SECTOR_BUCKETS.to_vec(),
            cold_start: COLD_BUCKETS.to_vec(),
        }
    }
}

impl Buckets {
    /// `proofline_gpu_idle_gap_seconds`.
    pub fn idle_gap(mut self, bounds: Vec<f64>) -> Self {
        self.idle_gap = bounds;
        self
    }

    /// The transition histograms (`proofline_sector_transition_gap_seconds`, `_overlap_`)
    /// and `proofline_synthesis_lead_seconds`, `_lag_`.
    pub fn transition(mut self, bounds: Vec<f64>) -> Self {
        self.transition = bounds;
        self
    }

    /// `proofline_partition_stage_seconds`.
    pub fn stage(mut self, bounds: Vec<f64>) -> Self {
        self.stage = bounds;
        self
    }

    /// `proofline_sector_seconds` (a job's wall time).
    pub fn job(mut self, bounds: Vec<f64>) -> Self {
        self.job = bounds;
        self
    }

    /// `proofline_cold_starts_seconds`.
    pub fn cold_start(mut self, bounds: Vec<f64>) -> Self {
        self.cold_start = bounds;
        self
    }

    /// The names of the histograms' buckets, as [`Buckets::named`] and [`BucketsError`]
    /// give them (those of the setters above).
    pub const NAMES: [&'static str; 5] = ["idle_gap", "transition", "stage", "job", "cold_start"];

    /// The setter of that name (one of [`Buckets::NAMES`]), for a command line's
    /// `--buckets job=1,2.5,5`; `None` for another name.
    pub fn named(self, name: &str, bounds: Vec<f64>) -> Option<Self> {
        Some(match name {
            "idle_gap" => self.idle_gap(bounds),
            "transition" => self.transition(bounds),
            "stage" => self.stage(bounds),
            "job" => self.job(bounds),
            "cold_start" => self.cold_start(bounds),
            _ => return None,
        })
    }

    fn check(&self) -> Result<(), BucketsError> {
        let lists = [
            &self.idle_gap,
            &self.transition,
            &self.stage,
            &self.job,
            &self.cold_start,
        ];
        for (name, b) in Self::NAMES.into_iter().zip(lists) {
            let bad = |why: String| BucketsError {
                histogram: name,
                why,
            };
            if b.is_empty() || b.len() > MAX_BUCKETS {
                return Err(bad(format!(
                    "{} bounds; 1 to {MAX_BUCKETS} (+Inf is added)",
                    b.len()
                )));
            }
            if let Some(v) = b.iter().find(|v| !v.is_finite() || **v <= 0.0) {
                return Err(bad(format!(
                    "bound {v} is not a finite positive number of seconds"
                )));
            }
            if let Some(w) = b.windows(2).find(|w| w[0] >= w[1]) {
                return Err(bad(format!(
                    "bounds not increasing: {} then {}",
                    w[0], w[1]
                )));
            }
        }
        Ok(())
    }
}

/// Buckets that cannot be a histogram's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("buckets of `{histogram}`: {why}")]
pub struct BucketsError {
    histogram: &'static str,
    why: String,
}

/// Makes a family's histograms with its buckets.
#[derive(Debug, Clone)]
pub(crate) struct HistOf(Arc<[f64]>);

impl prometheus_client::metrics::family::MetricConstructor<HistogramWithExemplars<TraceL>>
    for HistOf
{
    fn new_metric(&self) -> HistogramWithExemplars<TraceL> {
        HistogramWithExemplars::new(self.0.iter().copied())
    }
}

impl prometheus_client::metrics::family::MetricConstructor<Histogram> for HistOf {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

fn ex_hist(b: &[f64]) -> HistogramWithExemplars<TraceL> {
    HistogramWithExemplars::new(b.iter().copied())
}

/// Every proofline metric, registered in one registry.
#[derive(Debug)]
pub struct Metrics {
    pub(crate) registry: Registry,
    pub(crate) gpu_busy_seconds: Family<GpuL, FloatCounter>,
    pub(crate) gpu_busy_ratio: Family<GpuL, FloatGauge>,
    pub(crate) gpu_idle_seconds: Family<GpuL, FloatGauge>,
    pub(crate) gap_idle_seconds: Family<GapL, FloatCounter>,
    pub(crate) idle_gap: ExHist<BoundaryL>,
    pub(crate) transition_gap: HistogramWithExemplars<TraceL>,
    pub(crate) transition_overlap: HistogramWithExemplars<TraceL>,
    pub(crate) synthesis_lead: HistogramWithExemplars<TraceL>,
    pub(crate) synthesis_lag: HistogramWithExemplars<TraceL>,
    pub(crate) stage: PlainHist<StageL>,
    pub(crate) sector: ExHist<KindL>,
    pub(crate) proofs_completed: Family<KindL, Counter>,
    pub(crate) seconds_per_proof: FloatGauge,
    pub(crate) gpu_floor: FloatGauge,
    pub(crate) synthesis_floor: FloatGauge,
    pub(crate) cold_start: FloatGauge,
    pub(crate) cold_starts: Histogram,
    pub(crate) queue_depth: Gauge,
    pub(crate) in_flight: Family<StageL, Gauge>,
    pub(crate) jobs_in_flight: Gauge,
    pub(crate) gpu_interval_source: Family<SourceL, Gauge>,
    pub(crate) jobs_incomplete: Family<IncompleteL, Counter>,
    pub(crate) events_dropped: Counter,
    pub(crate) malformed_lines: Counter,
    /// The OTLP exporter's counters, read at scrape time.
    pub(crate) exports: Arc<ExportCollector>,
    pub(crate) folded: Family<LabelL, Counter>,
    /// Requests to the endpoint itself refused: TLS handshakes, 401s, 429s.
    pub(crate) requests_refused: Family<RefusedL, Counter>,
    /// From `CUZK_TIMING:` lines: calls, then kernel, lock held, lock wait, prep_msm and
    /// b_g2_msm seconds.
    pub(crate) gpu_calls: Counter,
    pub(crate) kernel_seconds: [FloatCounter; 5],
    pub(crate) last_event_age: FloatGauge,
    pub(crate) oldest_job_age: FloatGauge,
    pub(crate) runs: Counter,
    pub(crate) gpu_stuck: Family<GpuL, Counter>,
}

impl Metrics {
    /// Counts a request (or connection) the endpoint refused.
    #[cfg_attr(not(feature = "web-config"), allow(dead_code))]
    pub(crate) fn refused(&self, reason: Refused) {
        self.requests_refused
            .get_or_create(&RefusedL { reason: V(reason) })
            .inc();
    }

    /// A registry with every metric, all at zero, with cuzk's buckets.
    pub fn new() -> Arc<Metrics> {
        Self::build(&Buckets::default(), &Nouns::default())
    }

    /// [`Metrics::new`] with buckets of the prover's own size.
    pub fn with_buckets(buckets: Buckets) -> Result<Arc<Metrics>, BucketsError> {
        Self::with_buckets_and_nouns(buckets, &Nouns::default())
    }

    /// [`Metrics::with_buckets`], and the metrics' HELP texts in the prover's own words for
    /// a job and its parts (`Nouns::new("batch", "segment")`: "Batch transitions where the
    /// GPU waited ..."). Metric names and label values stay as they are (`proofline_sector_*`,
    /// `boundary="cross_sector"`): dashboards and alerts read them.
    pub fn with_buckets_and_nouns(
        buckets: Buckets,
        nouns: &Nouns,
    ) -> Result<Arc<Metrics>, BucketsError> {
        buckets.check()?;
        Ok(Self::build(&buckets, nouns))
    }

    fn build(b: &Buckets, nouns: &Nouns) -> Arc<Metrics> {
        let of = |v: &[f64]| HistOf(v.into());
        let h = |template: &str| nouns.fill(template);
        let mut r = Registry::default();
        let m = Metrics {
            gpu_busy_seconds: Family::default(),
            gpu_busy_ratio: Family::default(),
            gpu_idle_seconds: Family::default(),
            gap_idle_seconds: Family::default(),
            idle_gap: Family::new_with_constructor(of(&b.idle_gap)),
            transition_gap: ex_hist(&b.transition),
            transition_overlap: ex_hist(&b.transition),
            synthesis_lead: ex_hist(&b.transition),
            synthesis_lag: ex_hist(&b.transition),
            stage: Family::new_with_constructor(of(&b.stage)),
            sector: Family::new_with_constructor(of(&b.job)),
            proofs_completed: Family::default(),
            seconds_per_proof: FloatGauge::default(),
            gpu_floor: FloatGauge::default(),
            synthesis_floor: FloatGauge::default(),
            cold_start: FloatGauge::default(),
            cold_starts: Histogram::new(b.cold_start.iter().copied()),
            queue_depth: Gauge::default(),
            in_flight: Family::default(),
            jobs_in_flight: Gauge::default(),
            gpu_interval_source: Family::default(),
            jobs_incomplete: Family::default(),
            events_dropped: Counter::default(),
            malformed_lines: Counter::default(),
            exports: Arc::new(ExportCollector::new(nouns)),
            folded: Family::default(),
            requests_refused: Family::default(),
            gpu_calls: Counter::default(),
            kernel_seconds: Default::default(),
            last_event_age: FloatGauge::default(),
            oldest_job_age: FloatGauge::default(),
            runs: Counter::default(),
            gpu_stuck: Family::default(),
            registry: Registry::default(),
        };
        r.register(
            "proofline_gpu_busy_seconds",
            h("Time a GPU had at least one worker between GPU_START and GPU_END (union of the workers' intervals, never their sum)"),
            m.gpu_busy_seconds.clone(),
        );
        r.register(
            "proofline_gpu_busy_ratio",
            h("Busy share of the last busy window (60 s by default) per GPU"),
            m.gpu_busy_ratio.clone(),
        );
        r.register(
            "proofline_gpu_idle_seconds",
            h("Time since the GPU last had work; 0 while busy"),
            m.gpu_idle_seconds.clone(),
        );
        r.register(
            "proofline_gpu_gap_idle_seconds",
            h("Idle time in a GPU's closed idle gaps, by boundary (cross_sector: the GPU waited between {jobs})"),
            m.gap_idle_seconds.clone(),
        );
        r.register(
            "proofline_gpu_idle_gap_seconds",
            h("Holes between busy intervals of the prover's GPUs; boundary=cross_sector when the jobs before and after differ"),
            m.idle_gap.clone(),
        );
        r.register(
            "proofline_sector_transition_gap_seconds",
            h("{Job} transitions where the GPU waited: first GPU_START of {job} N+1 minus last GPU_END of {job} N (0 or more; overlaps are the overlap histogram)"),
            m.transition_gap.clone(),
        );
        r.register(
            "proofline_sector_transition_overlap_seconds",
            h("{Job} transitions where {job} N+1 started on a GPU before {job} N ended there: by how much"),
            m.transition_overlap.clone(),
        );
        r.register(
            "proofline_synthesis_lead_seconds",
            h("{Job} transitions with synthesis ahead: last GPU_END of {job} N minus first SYNTH_END of {job} N+1 (0 or more)"),
            m.synthesis_lead.clone(),
        );
        r.register(
            "proofline_synthesis_lag_seconds",
            h("{Job} transitions with synthesis behind: first SYNTH_END of {job} N+1 minus last GPU_END of {job} N (the GPU waited on synthesis)"),
            m.synthesis_lag.clone(),
        );
        r.register(
            "proofline_partition_stage_seconds",
            h("{Part} stage lengths: synthesis, queue, lock_wait, gpu (all proof kinds)"),
            m.stage.clone(),
        );
        r.register(
            "proofline_sector_seconds",
            h("Job wall time, first SYNTH_START to last GPU_END"),
            m.sector.clone(),
        );
        r.register(
            "proofline_proofs_completed",
            h("Jobs whose every {part} finished"),
            m.proofs_completed.clone(),
        );
        r.register(
            "proofline_seconds_per_proof",
            h("Steady-state seconds per proof over the last 20 completions of the current run (after a restart, the previous run's until two of the new run)"),
            m.seconds_per_proof.clone(),
        );
        r.register(
            "proofline_gpu_floor_seconds_per_proof",
            h("GPU floor: the GPU work a {job} needs that cannot overlap (the GPU lock's held time with CUZK_TIMING, else the TIMELINE GPU intervals' union) over the GPUs; 0 before a job completed"),
            m.gpu_floor.clone(),
        );
        r.register(
            "proofline_synthesis_floor_seconds_per_proof",
            h("Synthesis floor: synthesis time per {job} over the synthesis workers (the most {parts} synthesized at once); 0 before a job completed"),
            m.synthesis_floor.clone(),
        );
        r.register(
            "proofline_cold_start_seconds",
            h("Cold start of the last job that found its GPU idle: first GPU_START minus first SYNTH_START"),
            m.cold_start.clone(),
        );
        r.register(
            "proofline_cold_starts_seconds",
            h("Cold starts of jobs that found their GPU idle"),
            m.cold_starts.clone(),
        );
        r.register(
            "proofline_gpu_queue_depth",
            h("{Parts} synthesized and not yet picked up by a GPU worker"),
            m.queue_depth.clone(),
        );
        r.register(
            "proofline_partitions_in_flight",
            h("{Parts} in each stage now: synthesis, queue, lock_wait, gpu"),
            m.in_flight.clone(),
        );
        r.register(
            "proofline_jobs_in_flight",
            h("Jobs started and not yet complete"),
            m.jobs_in_flight.clone(),
        );
        r.register(
            "proofline_last_event_age_seconds",
            h("Time since the newest event of the prover (its silence): the clock past the newest TIMELINE offset (watch), or past the newest span edge or event (the layer)"),
            m.last_event_age.clone(),
        );
        r.register(
            "proofline_oldest_job_age_seconds",
            h("Age of the job in flight the longest (since its first SYNTH_START); 0 with none in flight"),
            m.oldest_job_age.clone(),
        );
        r.register(
            "proofline_runs",
            h("Runs of the prover seen: 1 + its restarts (a crash loop shows as a rising rate)"),
            m.runs.clone(),
        );
        r.register(
            "proofline_gpu_stuck_intervals",
            h("GPU intervals found stuck: open past the larger of 60 s and 4x the longest the GPU closed (a call that never returned, a prover dead inside GPU work); no longer counted busy"),
            m.gpu_stuck.clone(),
        );
        r.register(
            "proofline_gpu_interval_source",
            h("1 for where the GPU intervals come from when not the prover's own GPU_START/GPU_END (span edges, which can fall elsewhere); absent when they are the prover's own"),
            m.gpu_interval_source.clone(),
        );
        r.register(
            "proofline_jobs_incomplete",
            h("Jobs given up on: evicted after the timeout, cut by a restart, or in flight at shutdown"),
            m.jobs_incomplete.clone(),
        );
        r.register(
            "proofline_events_dropped",
            h("TIMELINE events (and CUZK_TIMING lines logged through tracing) the prover produced that the telemetry queue could not take (dropped, never waited for)"),
            m.events_dropped.clone(),
        );
        r.register(
            "proofline_malformed_lines",
            h("Malformed TIMELINE and CUZK_TIMING lines read (and lines over the length limit, by watch)"),
            m.malformed_lines.clone(),
        );
        // 0 unless an OTLP exporter registered its counters in the run's exports
        r.register_collector(Box::new(m.exports.clone()));
        r.register(
            "proofline_label_values_folded",
            h("Observations whose gpu or proof_kind label was folded into `other` by the cardinality cap"),
            m.folded.clone(),
        );
        for reason in Refused::ALL {
            drop(
                m.requests_refused
                    .get_or_create(&RefusedL { reason: V(reason) }),
            );
        }
        r.register(
            "proofline_metrics_requests_refused",
            h("Connections and requests the metrics endpoint refused: failed TLS handshakes (no TLS, a missing or untrusted client certificate), unauthorized (no or wrong user and password), too_many_checks (two password checks were running); 0 without a web config"),
            m.requests_refused.clone(),
        );
        r.register(
            "proofline_gpu_calls",
            h("GPU proving calls (CUZK_TIMING mutex_held_ms lines)"),
            m.gpu_calls.clone(),
        );
        for (i, (name, help)) in [
            (
                "proofline_gpu_kernel_seconds",
                "GPU threads' kernel time from CUZK_TIMING lines: ntt_msm_h + batch_add + tail_msm (all the prover's GPUs)",
            ),
            (
                "proofline_gpu_lock_held_seconds",
                "GPU lock held (CUZK_TIMING mutex_held_ms): kernels and the CPU work done inside the lock",
            ),
            (
                "proofline_gpu_lock_wait_seconds",
                "GPU lock waited for (CUZK_TIMING mutex_wait_ms)",
            ),
            (
                "proofline_prep_msm_seconds",
                "CPU MSM preprocessing (CUZK_TIMING prep_msm_ms): the GPU thread waits on it inside the lock",
            ),
            (
                "proofline_bg2_msm_seconds",
                "CPU b_g2 MSM (CUZK_TIMING b_g2_msm_ms)",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            r.register(name, h(help), m.kernel_seconds[i].clone());
        }
        Arc::new(Metrics { registry: r, ..m })
    }
}
