//! The sink: engine updates and ticks into the metric set.

use std::collections::HashMap;
use std::sync::Arc;

use proofline_core::ids::trace_id;
use proofline_core::report::{JobStatus, Stage};
use proofline_core::sink::{LiveState, RunInfo, TelemetryCounts, Update, UpdateSink};

use crate::labels::*;
use crate::metrics::*;
use crate::*;

/// Keeps [`Metrics`] up to date from the engine's updates.
#[derive(Debug)]
pub struct PrometheusSink {
    m: Arc<Metrics>,
    run_key: String,
    gpus: Cap,
    kinds: Cap,
    /// Each GPU's busy time last published, ms (the counter moves by the engine's delta).
    busy_seen: HashMap<u32, u64>,
    stuck_seen: HashMap<u32, u64>,
    runs_seen: u64,
    dropped_seen: u64,
    malformed_seen: u64,
    /// The kernel totals last published: calls, then the five times of `KernelLive`.
    kernel_seen: [u64; 6],
}

impl PrometheusSink {
    /// A sink feeding `metrics`. The run key its exemplars' trace ids derive from comes with
    /// [`UpdateSink::start_run`], which the layer's `build()` and `watch` call, with the
    /// run's exports, where the OTLP exporter's counters are read when scraped.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        // counters of known label values start at 0, so rates and alerts see them at once
        for status in JobStatus::INCOMPLETE {
            drop(
                metrics
                    .jobs_incomplete
                    .get_or_create(&IncompleteL { reason: V(status) }),
            );
        }
        PrometheusSink {
            m: metrics,
            run_key: String::new(),
            gpus: Cap::new(Folded::Gpu, MAX_GPUS),
            kinds: Cap::new(Folded::ProofKind, MAX_PROOF_KINDS),
            busy_seen: HashMap::new(),
            stuck_seen: HashMap::new(),
            runs_seen: 0,
            dropped_seen: 0,
            malformed_seen: 0,
            kernel_seen: [0; 6],
        }
    }

    fn gpu(&mut self, gpu: u32) -> String {
        self.gpus.get(&gpu.to_string(), &self.m.folded)
    }

    fn kind(&mut self, kind: Option<&str>) -> String {
        self.kinds.get(kind.unwrap_or("unknown"), &self.m.folded)
    }

    /// The exemplar naming a job's trace; none before a run was started (no trace id to
    /// name).
    fn exemplar(&self, run: u32, job: &str, attempt: u32) -> Option<TraceL> {
        if self.run_key.is_empty() {
            return None;
        }
        Some(TraceL {
            trace_id: trace_id(&self.run_key, run, job, attempt).to_string(),
        })
    }
}

/// How far an absolute total kept elsewhere (the engine's, the layer's) grew since `seen`,
/// which moves up to it: the one rule by which every counter here follows its total. A total
/// that went back (an abandoned interval cut back to its last observed end) moves nothing
/// until it passes `seen` again: a counter never goes back.
fn growth(seen: &mut u64, total: u64) -> Option<u64> {
    (total > *seen)
        .then(|| std::mem::replace(seen, total))
        .map(|before| total - before)
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn secs_i(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

impl UpdateSink for PrometheusSink {
    fn start_run(&mut self, run: &RunInfo) {
        self.m.exports.follow(&run.exports);
        self.run_key.clone_from(&run.run_key);
        if let Some(src) = &run.gpu_interval_source {
            self.m
                .gpu_interval_source
                .get_or_create(&SourceL {
                    source: escape_label_value(src),
                })
                .set(1);
        }
    }

    fn update(&mut self, update: Update) {
        match update {
            // busy time is published at each tick, from the engine's own figure
            Update::GpuBusy { .. } => {}
            Update::IdleGap(gap) => {
                let boundary = V(gap.boundary);
                let per_gpu = GapL {
                    gpu: self.gpu(gap.gpu),
                    boundary,
                };
                self.m
                    .gap_idle_seconds
                    .get_or_create(&per_gpu)
                    .inc_by(secs(gap.len_ms()));
                let ex = self.exemplar(gap.run, &gap.next_job, gap.next_attempt);
                self.m
                    .idle_gap
                    .get_or_create(&BoundaryL { boundary })
                    .observe(secs(gap.len_ms()), ex, None);
            }
            Update::Transition(t) => {
                let ex = self.exemplar(t.run, &t.to_job, t.to_attempt);
                // a signed figure goes to one of two non-negative histograms
                let (hist, v) = if t.gap_ms >= 0 {
                    (&self.m.transition_gap, t.gap_ms)
                } else {
                    (&self.m.transition_overlap, -t.gap_ms)
                };
                hist.observe(secs_i(v), ex.clone(), None);
                if let Some(lead) = t.synthesis_lead_ms {
                    let (hist, v) = if lead >= 0 {
                        (&self.m.synthesis_lead, lead)
                    } else {
                        (&self.m.synthesis_lag, -lead)
                    };
                    hist.observe(secs_i(v), ex, None);
                }
            }
            Update::Partition(p) => {
                for stage in Stage::ALL {
                    if let Some(ms) = p.stage_ms(stage) {
                        let l = StageL { stage: V(stage) };
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
                    self.m
                        .jobs_incomplete
                        .get_or_create(&IncompleteL {
                            reason: V(j.status),
                        })
                        .inc();
                }
                if let Some(cs) = j.cold_start_ms {
                    self.m.cold_start.set(secs(cs));
                    self.m.cold_starts.observe(secs(cs));
                }
            }
            // NewRun, and what a later version adds
            _ => {}
        }
    }

    fn baseline(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        // the counters that follow totals start from these, so the first tick adds nothing
        // that was already counted
        self.runs_seen = self.runs_seen.max(u64::from(live.runs));
        for g in &live.gpus {
            self.busy_seen.insert(g.gpu, g.busy_ms);
            self.stuck_seen.insert(g.gpu, g.stuck_intervals);
        }
        let k = live.kernel;
        self.kernel_seen = [
            k.calls,
            k.kernel_ms,
            k.lock_held_ms,
            k.lock_wait_ms,
            k.prep_msm_ms,
            k.b_g2_msm_ms,
        ];
        self.dropped_seen = counts.events_dropped;
        self.malformed_seen = counts.malformed_lines;
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
                .get_or_create(&StageL { stage: V(stage) })
                .set(i64::from(n));
        }
        self.m.jobs_in_flight.set(i64::from(live.jobs_in_flight));
        if let Some(age) = live.last_event_age_ms {
            self.m.last_event_age.set(secs(age));
        }
        self.m
            .oldest_job_age
            .set(secs(live.oldest_job_age_ms.unwrap_or(0)));
        if let Some(d) = growth(&mut self.runs_seen, u64::from(live.runs)) {
            self.m.runs.inc_by(d);
        }
        if let Some(spp) = live.seconds_per_proof {
            self.m.seconds_per_proof.set(spp);
        }
        if let Some((gpu, synthesis)) = live.floors {
            self.m.gpu_floor.set(gpu);
            self.m.synthesis_floor.set(synthesis);
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
            // long kernel
            let seen = self.busy_seen.entry(g.gpu).or_insert(0);
            if let Some(d) = growth(seen, g.busy_ms) {
                self.m.gpu_busy_seconds.get_or_create(&l).inc_by(secs(d));
            }
            // at 0 from the GPU's first tick, so that an alert's increase() sees the first one
            let stuck = self.m.gpu_stuck.get_or_create(&l);
            let seen = self.stuck_seen.entry(g.gpu).or_insert(0);
            if let Some(d) = growth(seen, g.stuck_intervals) {
                stuck.inc_by(d);
            }
        }
        let (k, seen) = (live.kernel, &mut self.kernel_seen);
        if let Some(d) = growth(&mut seen[0], k.calls) {
            self.m.gpu_calls.inc_by(d);
        }
        let kernel = [
            k.kernel_ms,
            k.lock_held_ms,
            k.lock_wait_ms,
            k.prep_msm_ms,
            k.b_g2_msm_ms,
        ];
        for (i, now) in kernel.into_iter().enumerate() {
            if let Some(d) = growth(&mut seen[i + 1], now) {
                self.m.kernel_seconds[i].inc_by(secs(d));
            }
        }
        if let Some(d) = growth(&mut self.dropped_seen, counts.events_dropped) {
            self.m.events_dropped.inc_by(d);
        }
        if let Some(d) = growth(&mut self.malformed_seen, counts.malformed_lines) {
            self.m.malformed_lines.inc_by(d);
        }
    }
}
