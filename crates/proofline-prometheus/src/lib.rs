//! Prometheus metrics for proofline: a sink of engine updates that keeps the metric set in a
//! `prometheus-client` registry, an HTTP endpoint that serves it, and [`Metrics::render`] for
//! provers that serve metrics their own way.
//!
//! ```text
//!  engine ─► Update / tick ─► PrometheusSink ─► registry (atomics) ◄─ GET /metrics: encode only
//! ```
//!
//! The event path updates the registry; a scrape only encodes. Labels are bounded: never a
//! job id; GPUs and proof kinds beyond a cap fold into `other` (counted in
//! `proofline_label_values_folded_total`). Gap, lead and sector histograms carry exemplars
//! with the sector's trace id ([`proofline_core::ids::trace_id`]), the same id the OTLP
//! exporter gives the sector's trace.

mod server;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use proofline_core::ids::trace_id;
use proofline_core::report::{JobStatus, Stage};
use proofline_core::sink::{ExportCounters, LiveState, TelemetryCounts, Update, UpdateSink};

pub use server::{DEFAULT_ADDR, MetricsServer, ServeError, serve};

/// At most this many distinct `gpu` label values; more fold into `other`.
pub const MAX_GPUS: usize = 64;
/// At most this many distinct `proof_kind` label values; more fold into `other`.
pub const MAX_PROOF_KINDS: usize = 16;

/// Escapes a label value for the text formats (`\`, `"`, newline), which prometheus-client
/// leaves to its caller.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GpuL {
    gpu: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GapL {
    gpu: String,
    boundary: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageKindL {
    stage: String,
    proof_kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindL {
    proof_kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageL {
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonL {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LabelL {
    label: String,
}

/// The exemplar's label set: the sector's trace id.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceL {
    trace_id: String,
}

type ExHist<L> = Family<L, HistogramWithExemplars<TraceL>, fn() -> HistogramWithExemplars<TraceL>>;
type PlainHist<L> = Family<L, Histogram, fn() -> Histogram>;
type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

const GAP_BUCKETS: [f64; 13] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
const SIGNED_BUCKETS: [f64; 17] = [
    -60.0, -30.0, -10.0, -5.0, -2.0, -1.0, -0.5, -0.1, 0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
    60.0,
];
const STAGE_BUCKETS: [f64; 15] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0,
];
const SECTOR_BUCKETS: [f64; 12] = [
    5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 1200.0,
];
const COLD_BUCKETS: [f64; 10] = [1.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0, 600.0];

fn gap_hist() -> HistogramWithExemplars<TraceL> {
    HistogramWithExemplars::new(GAP_BUCKETS.into_iter())
}
fn signed_hist() -> HistogramWithExemplars<TraceL> {
    HistogramWithExemplars::new(SIGNED_BUCKETS.into_iter())
}
fn sector_hist() -> HistogramWithExemplars<TraceL> {
    HistogramWithExemplars::new(SECTOR_BUCKETS.into_iter())
}
fn stage_hist() -> Histogram {
    Histogram::new(STAGE_BUCKETS)
}

/// Every proofline metric, registered in one registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    gpu_busy_seconds: Family<GpuL, FloatCounter>,
    gpu_busy_ratio: Family<GpuL, FloatGauge>,
    gpu_idle_seconds: Family<GpuL, FloatGauge>,
    idle_gap: ExHist<GapL>,
    transition_gap: ExHist<GpuL>,
    synthesis_lead: ExHist<GpuL>,
    stage: PlainHist<StageKindL>,
    sector: ExHist<KindL>,
    proofs_completed: Family<KindL, Counter>,
    seconds_per_proof: FloatGauge,
    cold_start: FloatGauge,
    cold_starts: Histogram,
    queue_depth: Gauge,
    in_flight: Family<StageL, Gauge>,
    jobs_in_flight: Gauge,
    jobs_incomplete: Family<ReasonL, Counter>,
    events_dropped: Counter,
    malformed_lines: Counter,
    otlp_traces_dropped: Counter,
    otlp_spans_exported: Counter,
    otlp_spans_failed: Counter,
    otlp_links_unplaced: Counter,
    folded: Family<LabelL, Counter>,
}

impl Metrics {
    /// A registry with every metric, all at zero.
    pub fn new() -> Arc<Metrics> {
        let mut r = Registry::default();
        let m = Metrics {
            gpu_busy_seconds: Family::default(),
            gpu_busy_ratio: Family::default(),
            gpu_idle_seconds: Family::default(),
            idle_gap: Family::new_with_constructor(gap_hist),
            transition_gap: Family::new_with_constructor(signed_hist),
            synthesis_lead: Family::new_with_constructor(signed_hist),
            stage: Family::new_with_constructor(stage_hist),
            sector: Family::new_with_constructor(sector_hist),
            proofs_completed: Family::default(),
            seconds_per_proof: FloatGauge::default(),
            cold_start: FloatGauge::default(),
            cold_starts: Histogram::new(COLD_BUCKETS),
            queue_depth: Gauge::default(),
            in_flight: Family::default(),
            jobs_in_flight: Gauge::default(),
            jobs_incomplete: Family::default(),
            events_dropped: Counter::default(),
            malformed_lines: Counter::default(),
            otlp_traces_dropped: Counter::default(),
            otlp_spans_exported: Counter::default(),
            otlp_spans_failed: Counter::default(),
            otlp_links_unplaced: Counter::default(),
            folded: Family::default(),
            registry: Registry::default(),
        };
        r.register(
            "proofline_gpu_busy_seconds",
            "Time a GPU had at least one worker between GPU_START and GPU_END (union of the workers' intervals, never their sum)",
            m.gpu_busy_seconds.clone(),
        );
        r.register(
            "proofline_gpu_busy_ratio",
            "Busy share of the last busy window (60 s by default) per GPU",
            m.gpu_busy_ratio.clone(),
        );
        r.register(
            "proofline_gpu_idle_seconds",
            "Time since the GPU last had work; 0 while busy",
            m.gpu_idle_seconds.clone(),
        );
        r.register(
            "proofline_gpu_idle_gap_seconds",
            "Holes between busy intervals of a GPU; boundary=cross_sector when the jobs before and after differ",
            m.idle_gap.clone(),
        );
        r.register(
            "proofline_sector_transition_gap_seconds",
            "First GPU_START of sector N+1 minus last GPU_END of sector N on a GPU (negative: overlap)",
            m.transition_gap.clone(),
        );
        r.register(
            "proofline_synthesis_lead_seconds",
            "Last GPU_END of sector N minus first SYNTH_END of sector N+1 (positive: synthesis ahead of the GPU)",
            m.synthesis_lead.clone(),
        );
        r.register(
            "proofline_partition_stage_seconds",
            "Partition stage lengths: synthesis, queue, lock_wait, gpu",
            m.stage.clone(),
        );
        r.register(
            "proofline_sector_seconds",
            "Job wall time, first SYNTH_START to last GPU_END",
            m.sector.clone(),
        );
        r.register(
            "proofline_proofs_completed",
            "Jobs whose every partition finished",
            m.proofs_completed.clone(),
        );
        r.register(
            "proofline_seconds_per_proof",
            "Steady-state seconds per proof over the last 20 completions",
            m.seconds_per_proof.clone(),
        );
        r.register(
            "proofline_cold_start_seconds",
            "Cold start of the last job that found its GPU idle: first GPU_START minus first SYNTH_START",
            m.cold_start.clone(),
        );
        r.register(
            "proofline_cold_starts_seconds",
            "Cold starts of jobs that found their GPU idle",
            m.cold_starts.clone(),
        );
        r.register(
            "proofline_gpu_queue_depth",
            "Partitions synthesized and not yet picked up by a GPU worker",
            m.queue_depth.clone(),
        );
        r.register(
            "proofline_partitions_in_flight",
            "Partitions in each stage now: synthesis, queue, lock_wait, gpu",
            m.in_flight.clone(),
        );
        r.register(
            "proofline_jobs_in_flight",
            "Jobs started and not yet complete",
            m.jobs_in_flight.clone(),
        );
        r.register(
            "proofline_jobs_incomplete",
            "Jobs given up on: evicted after the timeout, cut by a restart, or in flight at shutdown",
            m.jobs_incomplete.clone(),
        );
        r.register(
            "proofline_events_dropped",
            "TIMELINE events the prover produced that the telemetry queue could not take (dropped, never waited for)",
            m.events_dropped.clone(),
        );
        r.register(
            "proofline_malformed_lines",
            "Malformed TIMELINE lines read",
            m.malformed_lines.clone(),
        );
        // 0 unless an OTLP exporter's counters are attached (`with_export_counters`)
        r.register(
            "proofline_otlp_traces_dropped",
            "Sector traces dropped because the OTLP export queue was full",
            m.otlp_traces_dropped.clone(),
        );
        r.register(
            "proofline_otlp_spans_exported",
            "Spans the OTLP collector accepted",
            m.otlp_spans_exported.clone(),
        );
        r.register(
            "proofline_otlp_spans_failed",
            "Spans whose OTLP export failed (collector down, refused, timed out)",
            m.otlp_spans_failed.clone(),
        );
        r.register(
            "proofline_otlp_links_unplaced",
            "Sector-to-sector links no trace could carry: both sectors' traces were sent before their transition was known",
            m.otlp_links_unplaced.clone(),
        );
        r.register(
            "proofline_label_values_folded",
            "Observations whose gpu or proof_kind label was folded into `other` by the cardinality cap",
            m.folded.clone(),
        );
        Arc::new(Metrics { registry: r, ..m })
    }

    /// The metrics in OpenMetrics text (with exemplars), ending in `# EOF`.
    pub fn render_openmetrics(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail.
        let _ = text::encode(&mut out, &self.registry);
        out
    }

    /// The metrics in Prometheus' classic text format (0.0.4): no exemplars, no `# EOF`,
    /// counters typed under their `_total` name.
    pub fn render_classic(&self) -> String {
        to_classic(&self.render_openmetrics())
    }

    /// The metrics in the format an HTTP `Accept` header asks for; returns the body and its
    /// content type. OpenMetrics when asked for, else the classic text format.
    pub fn render(&self, accept: Option<&str>) -> (String, &'static str) {
        if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
            (
                self.render_openmetrics(),
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
        } else {
            (
                self.render_classic(),
                "text/plain; version=0.0.4; charset=utf-8",
            )
        }
    }
}

/// Converts OpenMetrics text to the classic format.
fn to_classic(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut counters: HashSet<&str> = HashSet::new();
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.strip_suffix(" counter") {
                counters.insert(name);
            }
        }
    }
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = &line[..7];
            if counters.contains(name) {
                let _ = writeln!(out, "{kind}{name}_total {tail}");
            } else {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        // drop the exemplar: `sample value # {labels} value [timestamp]`
        let sample = match line.find(" # {") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// Caps the distinct values of a label.
#[derive(Debug)]
struct Cap {
    seen: HashMap<String, String>,
    max: usize,
    name: &'static str,
}

impl Cap {
    fn new(name: &'static str, max: usize) -> Self {
        Cap {
            seen: HashMap::new(),
            max,
            name,
        }
    }

    fn get(&mut self, raw: &str, folded: &Family<LabelL, Counter>) -> String {
        if let Some(v) = self.seen.get(raw) {
            if v == "other" {
                folded
                    .get_or_create(&LabelL {
                        label: self.name.to_owned(),
                    })
                    .inc();
            }
            return v.clone();
        }
        let v = if self.seen.len() < self.max {
            escape_label_value(raw)
        } else {
            "other".to_owned()
        };
        if v == "other" {
            folded
                .get_or_create(&LabelL {
                    label: self.name.to_owned(),
                })
                .inc();
        }
        self.seen.insert(raw.to_owned(), v.clone());
        v
    }
}

/// Keeps [`Metrics`] up to date from the engine's updates.
#[derive(Debug)]
pub struct PrometheusSink {
    m: Arc<Metrics>,
    run_key: String,
    gpus: Cap,
    kinds: Cap,
    /// Each GPU's busy time last published, ms (the counter moves by the engine's delta).
    busy_seen: HashMap<u32, u64>,
    dropped_seen: u64,
    malformed_seen: u64,
    export: Option<(Arc<ExportCounters>, [u64; 4])>,
}

impl PrometheusSink {
    /// A sink feeding `metrics`; `run_key` ([`proofline_core::ids::run_key`]) names the run
    /// in exemplar trace ids.
    pub fn new(metrics: Arc<Metrics>, run_key: impl Into<String>) -> Self {
        // counters of known label values start at 0, so rates and alerts see them at once
        for status in JobStatus::INCOMPLETE {
            drop(metrics.jobs_incomplete.get_or_create(&ReasonL {
                reason: status.as_str().to_owned(),
            }));
        }
        PrometheusSink {
            m: metrics,
            run_key: run_key.into(),
            gpus: Cap::new("gpu", MAX_GPUS),
            kinds: Cap::new("proof_kind", MAX_PROOF_KINDS),
            busy_seen: HashMap::new(),
            dropped_seen: 0,
            malformed_seen: 0,
            export: None,
        }
    }

    /// Publishes an OTLP exporter's counters too (`proofline_otlp_*`).
    pub fn with_export_counters(mut self, counters: Arc<ExportCounters>) -> Self {
        self.export = Some((counters, [0; 4]));
        self
    }

    /// Changes the run key (for readers that learn the run's epoch from the first event).
    pub fn set_run_key(&mut self, run_key: impl Into<String>) {
        self.run_key = run_key.into();
    }

    fn gpu(&mut self, gpu: u32) -> String {
        self.gpus.get(&gpu.to_string(), &self.m.folded)
    }

    fn kind(&mut self, kind: Option<&str>) -> String {
        self.kinds.get(kind.unwrap_or("unknown"), &self.m.folded)
    }

    fn exemplar(&self, run: u32, job: &str, attempt: u32) -> Option<TraceL> {
        Some(TraceL {
            trace_id: trace_id(&self.run_key, run, job, attempt).to_string(),
        })
    }
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn secs_i(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

impl UpdateSink for PrometheusSink {
    fn update(&mut self, update: Update) {
        match update {
            // busy time is published at each tick, from the engine's own figure
            Update::GpuBusy { .. } => {}
            Update::IdleGap(gap) => {
                let g = self.gpu(gap.gpu);
                let labels = GapL {
                    gpu: g,
                    boundary: gap.boundary.as_str().to_owned(),
                };
                let ex = self.exemplar(gap.run, &gap.next_job, gap.next_attempt);
                self.m
                    .idle_gap
                    .get_or_create(&labels)
                    .observe(secs(gap.len_ms()), ex, None);
            }
            Update::Transition(t) => {
                let g = self.gpu(t.gpu);
                let ex = self.exemplar(t.run, &t.to_job, t.to_attempt);
                self.m
                    .transition_gap
                    .get_or_create(&GpuL { gpu: g.clone() })
                    .observe(secs_i(t.gap_ms), ex.clone(), None);
                if let Some(lead) = t.synthesis_lead_ms {
                    self.m
                        .synthesis_lead
                        .get_or_create(&GpuL { gpu: g })
                        .observe(secs_i(lead), ex, None);
                }
            }
            Update::Partition(p) => {
                let kind = self.kind(p.proof_kind.as_deref());
                for stage in Stage::ALL {
                    if let Some(ms) = p.stage_ms(stage) {
                        let l = StageKindL {
                            stage: stage.as_str().to_owned(),
                            proof_kind: kind.clone(),
                        };
                        self.m.stage.get_or_create(&l).observe(secs(ms));
                    }
                }
            }
            Update::Job(j) => {
                let kind = self.kind(j.proof_kind.as_deref());
                if j.status == JobStatus::Complete {
                    self.m
                        .proofs_completed
                        .get_or_create(&KindL {
                            proof_kind: kind.clone(),
                        })
                        .inc();
                    if let Some(w) = j.wall_ms {
                        let ex = self.exemplar(j.run, &j.job_id, j.attempt);
                        self.m
                            .sector
                            .get_or_create(&KindL { proof_kind: kind })
                            .observe(secs(w), ex, None);
                    }
                } else {
                    let reason = j.status.as_str();
                    self.m
                        .jobs_incomplete
                        .get_or_create(&ReasonL {
                            reason: reason.to_owned(),
                        })
                        .inc();
                }
                if let Some(cs) = j.cold_start_ms {
                    self.m.cold_start.set(secs(cs));
                    self.m.cold_starts.observe(secs(cs));
                }
            }
            Update::NewRun { .. } => {}
        }
    }

    fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        self.m.queue_depth.set(i64::from(live.queue_depth));
        for (stage, n) in [
            (Stage::Synthesis, live.synthesizing),
            (Stage::Queue, live.queue_depth),
            (Stage::LockWait, live.picked_up),
            (Stage::Gpu, live.on_gpu),
        ] {
            self.m
                .in_flight
                .get_or_create(&StageL {
                    stage: stage.as_str().to_owned(),
                })
                .set(i64::from(n));
        }
        self.m.jobs_in_flight.set(i64::from(live.jobs_in_flight));
        if let Some(spp) = live.seconds_per_proof {
            self.m.seconds_per_proof.set(spp);
        }
        for g in &live.gpus {
            let l = GpuL {
                gpu: self.gpu(g.gpu),
            };
            self.m.gpu_busy_ratio.get_or_create(&l).set(g.busy_ratio);
            self.m
                .gpu_idle_seconds
                .get_or_create(&l)
                .set(secs(g.idle_ms));
            // the engine's busy time includes the open busy stretch, so rates do not lag a
            // long kernel; a counter never goes back
            let seen = self.busy_seen.entry(g.gpu).or_insert(0);
            if g.busy_ms > *seen {
                self.m
                    .gpu_busy_seconds
                    .get_or_create(&l)
                    .inc_by(secs(g.busy_ms - *seen));
                *seen = g.busy_ms;
            }
        }
        if counts.events_dropped > self.dropped_seen {
            self.m
                .events_dropped
                .inc_by(counts.events_dropped - self.dropped_seen);
            self.dropped_seen = counts.events_dropped;
        }
        if let Some((c, seen)) = &mut self.export {
            use std::sync::atomic::Ordering::Relaxed;
            let now = [
                c.traces_dropped.load(Relaxed),
                c.spans_exported.load(Relaxed),
                c.spans_failed.load(Relaxed),
                c.links_unplaced.load(Relaxed),
            ];
            let metrics = [
                &self.m.otlp_traces_dropped,
                &self.m.otlp_spans_exported,
                &self.m.otlp_spans_failed,
                &self.m.otlp_links_unplaced,
            ];
            for i in 0..metrics.len() {
                if now[i] > seen[i] {
                    metrics[i].inc_by(now[i] - seen[i]);
                    seen[i] = now[i];
                }
            }
        }
        if counts.malformed_lines > self.malformed_seen {
            self.m
                .malformed_lines
                .inc_by(counts.malformed_lines - self.malformed_seen);
            self.malformed_seen = counts.malformed_lines;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_conversion() {
        let om = "# HELP a_seconds Busy.\n# TYPE a_seconds counter\n# UNIT a_seconds seconds\na_seconds_total{gpu=\"0\"} 1.5\n\
# HELP h Gaps.\n# TYPE h histogram\nh_bucket{le=\"1.0\"} 1 # {trace_id=\"ab\"} 0.5\nh_sum 0.5\nh_count 1\n# EOF\n";
        let classic = to_classic(om);
        assert_eq!(
            classic,
            "# HELP a_seconds_total Busy.\n# TYPE a_seconds_total counter\na_seconds_total{gpu=\"0\"} 1.5\n\
# HELP h Gaps.\n# TYPE h histogram\nh_bucket{le=\"1.0\"} 1\nh_sum 0.5\nh_count 1\n"
        );
    }

    #[test]
    fn the_endpoint_listens_on_loopback_unless_told_otherwise() {
        let addr: std::net::SocketAddr = DEFAULT_ADDR.parse().unwrap();
        assert!(addr.ip().is_loopback());
        assert_eq!(addr.port(), 9464);
    }

    #[test]
    fn label_values_are_escaped_and_capped() {
        assert_eq!(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let m = Metrics::new();
        let mut cap = Cap::new("proof_kind", 2);
        assert_eq!(cap.get("x", &m.folded), "x");
        assert_eq!(cap.get("y\"", &m.folded), "y\\\"");
        assert_eq!(cap.get("z", &m.folded), "other");
        assert_eq!(cap.get("x", &m.folded), "x");
        assert_eq!(
            m.folded
                .get_or_create(&LabelL {
                    label: "proof_kind".into()
                })
                .get(),
            1
        );
    }
}
