//! What the engine sums up: totals and distributions as jobs finish, the live state for
//! gauges, and the [`Report`].

use std::collections::{BTreeMap, VecDeque};

use super::Engine;
use super::verdict::{Evidence, KernelEvidence, verdict};
use crate::dist::Dist;
use crate::report::*;
use crate::sink::LiveState;

/// Completions the live seconds-per-proof figure looks back over.
pub const LIVE_SPP_WINDOW: usize = 20;

/// The steady state of the run in progress: from its first job completion to its last.
#[derive(Debug, Default)]
pub(super) struct RunSteady {
    /// Earliest completion instant (a job's last GPU_END).
    pub first_completion: Option<u64>,
    /// Latest completion instant.
    pub last_completion: u64,
    /// Jobs completed in the run.
    pub completions: u64,
}

/// Totals and distributions over every run, and the rows kept for the report.
#[derive(Debug)]
pub(super) struct Totals {
    /// Event counts (duplicates, conflicts, late, runs, ...).
    pub stats: EventStats,
    /// Job instances created.
    pub jobs_seen: u64,
    /// Jobs completed.
    pub jobs_complete: u64,
    /// Partitions of the completed jobs (how many a sector has, on average).
    pub partitions_complete: u64,
    /// Jobs given up on.
    pub jobs_incomplete: u64,
    /// Completed jobs by proof kind.
    pub complete_by_kind: BTreeMap<String, u64>,
    /// Partitions with GPU_END.
    pub partitions_done: u64,
    /// Cold start of the first job of the first run that found its GPU idle.
    pub first_cold_start: Option<u64>,
    /// Stage durations, in [`Stage::ALL`] order, and the printed `synth_ms` and `gpu_ms`.
    pub stages: StageTally,
    /// Wall time of completed jobs.
    pub job_wall: Dist,
    /// Transition gaps.
    pub tr_gap: Dist,
    /// Hand-overs.
    pub tr_handoff: Dist,
    /// Synthesis leads.
    pub tr_lead: Dist,
    /// Idle gaps.
    pub idle: Dist,
    /// Completed jobs, up to `max_rows`.
    pub job_rows: Vec<JobRecord>,
    /// Completed jobs past `max_rows`.
    pub jobs_omitted: u64,
    /// Transitions, up to `max_rows`.
    pub tr_rows: Vec<TransitionRecord>,
    /// Transitions past `max_rows`.
    pub tr_omitted: u64,
    /// Incomplete jobs, up to `max_rows`.
    pub incomplete_rows: Vec<JobRecord>,
    /// Steady-state span of finished runs with at least two completions, ms.
    pub steady_span: u64,
    /// Completions after the first of those runs (the divisor of seconds per proof).
    pub steady_jobs: u64,
    /// Steady-state length of every finished run, ms.
    pub steady_state_ms: u64,
    /// Finished partitions' stages not recorded yet, while another thread adds them up
    /// ([`Engine::defer_stages`]); `None`: each is recorded as it finishes.
    pub deferred: Option<Vec<StageValues>>,
    /// Completion instants of the current run (kept after `finish`, cleared when a restart
    /// starts the next run), the latest [`LIVE_SPP_WINDOW`] (for the live seconds per proof).
    pub recent_completions: VecDeque<u64>,
}

/// A finished partition's stage durations ([`Stage::ALL`] order) and its printed synthesis
/// and GPU times, as [`Totals::record_stages`] takes them: 56 bytes (the values that are
/// there, by a bit each), kept by the engine while a second thread adds them up
/// ([`StageTally`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StageValues {
    vals: [u64; 6],
    /// Bit `i`: `vals[i]` is there.
    some: u8,
}

impl StageValues {
    #[inline(always)]
    pub fn new(stages: [Option<u64>; 4], synth: Option<u64>, gpu: Option<u64>) -> Self {
        let mut v = StageValues {
            vals: [0; 6],
            some: 0,
        };
        let [a, b, c, d] = stages;
        for (i, x) in [a, b, c, d, synth, gpu].into_iter().enumerate() {
            if let Some(x) = x {
                v.vals[i] = x;
                v.some |= 1 << i;
            }
        }
        v
    }
}

/// The stage distributions of finished partitions: the engine's totals, and a tally added
/// up on the thread of a reader that reads with two ([`crate::reader::LineFeeder::feed_all_parallel`]) while the engine's
/// thread goes on (recording them was a twentieth of that thread's instructions on a log
/// of TIMELINE lines), for [`StageTally::absorb`].
#[derive(Debug, Clone, Default)]
pub(crate) struct StageTally {
    /// In [`Stage::ALL`] order.
    pub stage: [Dist; 4],
    /// Printed `synth_ms`.
    pub synth_rep: Dist,
    /// Printed `gpu_ms`.
    pub gpu_rep: Dist,
}

impl StageTally {
    /// Records a finished partition's values, those that are there.
    #[inline]
    pub fn record(&mut self, v: &StageValues) {
        let [s0, s1, s2, s3] = &mut self.stage;
        let dists = [s0, s1, s2, s3, &mut self.synth_rep, &mut self.gpu_rep];
        for (i, d) in dists.into_iter().enumerate() {
            if v.some & (1 << i) != 0 {
                d.record(v.vals[i] as i64);
            }
        }
    }

    /// Takes in what another tally recorded, as if each partition were recorded here.
    pub fn absorb(&mut self, o: &StageTally) {
        for (d, o) in self.stage.iter_mut().zip(&o.stage) {
            d.absorb(o);
        }
        self.synth_rep.absorb(&o.synth_rep);
        self.gpu_rep.absorb(&o.gpu_rep);
    }
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            stats: EventStats {
                runs: 1,
                ..Default::default()
            },
            jobs_seen: 0,
            jobs_complete: 0,
            partitions_complete: 0,
            jobs_incomplete: 0,
            complete_by_kind: BTreeMap::new(),
            partitions_done: 0,
            first_cold_start: None,
            stages: StageTally::default(),
            job_wall: Dist::new(),
            tr_gap: Dist::new(),
            tr_handoff: Dist::new(),
            tr_lead: Dist::new(),
            idle: Dist::new(),
            job_rows: Vec::new(),
            jobs_omitted: 0,
            tr_rows: Vec::new(),
            tr_omitted: 0,
            incomplete_rows: Vec::new(),
            steady_span: 0,
            steady_jobs: 0,
            steady_state_ms: 0,
            recent_completions: VecDeque::new(),
            deferred: None,
        }
    }
}

impl Totals {
    /// A transition's figures.
    pub fn record_transition(&mut self, rec: &TransitionRecord, max_rows: usize) {
        self.tr_gap.record(rec.gap_ms);
        if let Some(h) = rec.handoff_ms {
            self.tr_handoff.record(h);
        }
        if let Some(l) = rec.synthesis_lead_ms {
            self.tr_lead.record(l);
        }
        if self.tr_rows.len() < max_rows {
            self.tr_rows.push(rec.clone());
        } else {
            self.tr_omitted += 1;
        }
    }

    /// A finished partition's stages: recorded, or kept for another thread while
    /// `deferred` is on.
    #[inline]
    pub fn record_stages(&mut self, v: StageValues) {
        match &mut self.deferred {
            Some(kept) => kept.push(v),
            None => self.stages.record(&v),
        }
    }

    /// A completed job.
    pub fn record_complete(&mut self, rec: &JobRecord, max_rows: usize) {
        self.jobs_complete += 1;
        self.partitions_complete += u64::from(rec.partitions_done);
        let kind = rec.proof_kind.as_deref().unwrap_or("unknown");
        // (the key made only for a kind not seen before: a string per job was an
        // allocation and a free per job)
        match self.complete_by_kind.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.complete_by_kind.insert(kind.to_owned(), 1);
            }
        }
        if let Some(w) = rec.wall_ms {
            self.job_wall.record(w as i64);
        }
        if let Some(t) = rec.last_gpu_end_ms {
            self.recent_completions.push_back(t);
            if self.recent_completions.len() > LIVE_SPP_WINDOW {
                self.recent_completions.pop_front();
            }
        }
        if self.job_rows.len() < max_rows {
            self.job_rows.push(rec.clone());
        } else {
            self.jobs_omitted += 1;
        }
    }

    /// Seconds per proof over the recent completions of the current run: (latest -
    /// earliest) / (completions - 1). (Jobs are not always completed in time order: a job
    /// whose partition count is unknown completes after a grace period.)
    pub fn live_seconds_per_proof(&self) -> Option<f64> {
        let first = self.recent_completions.iter().min()?;
        let last = self.recent_completions.iter().max()?;
        let n = self.recent_completions.len();
        (n > 1 && last > first).then(|| (last - first) as f64 / 1000.0 / (n - 1) as f64)
    }

    /// Folds a finished run's steady state.
    pub fn end_run(&mut self, run: &RunSteady) {
        if let Some(first) = run.first_completion {
            let span = run.last_completion - first;
            self.steady_state_ms += span;
            if run.completions > 1 {
                self.steady_span += span;
                self.steady_jobs += run.completions - 1;
            }
        }
    }
}

impl Engine {
    /// What is in flight now, for live gauges.
    pub fn live(&self) -> LiveState {
        let now = self.now;
        let w = self.cfg.busy_window_ms;
        let [synthesizing, queue_depth, picked_up, on_gpu] = self.gauges.in_stage;
        LiveState {
            now_ms: now,
            queue_depth,
            synthesizing,
            picked_up,
            on_gpu,
            jobs_in_flight: u32::try_from(self.active).unwrap_or(u32::MAX),
            seconds_per_proof: self.totals.live_seconds_per_proof(),
            gpus: self.devices.values().map(|d| d.live(now, w)).collect(),
            kernel: self.kernel.live(),
            // (the busy stretch still open counts: a GPU that never went idle has closed
            // none, and read as a floor of 0 on the provers where it matters most)
            floors: self
                .floor_figures(
                    self.devices.values().map(|d| d.cum_busy_at(now)).sum(),
                    self.devices.len(),
                )
                .map(|f| (f.gpu_s, f.synthesis_s)),
            last_event_age_ms: self
                .max_event_offset
                .map(|e| self.max_offset.unwrap_or(e).saturating_sub(e)),
            oldest_job_age_ms: self.oldest_active().map(|since| now.saturating_sub(since)),
            runs: self.run + 1,
        }
    }

    /// When the job in flight the longest began (its first SYNTH_START, else its first
    /// GPU_START, else its latest event), on the timeline.
    fn oldest_active(&self) -> Option<u64> {
        self.created.iter().find_map(|&(idx, uid)| {
            let job = self.jobs.get(idx)?.as_ref()?;
            (job.uid == uid && job.state == super::job::JobState::Active).then(|| {
                job.first_synth_start
                    .or(job.first_gpu_start)
                    .unwrap_or(job.last_activity)
            })
        })
    }

    /// From now on, finished partitions' stage values are kept, for another thread to add
    /// up, until [`Engine::end_deferring`]: a reader with two threads hands them over
    /// with each block's buffers ([`Engine::take_deferred_stages`]).
    pub(crate) fn defer_stages(&mut self) {
        self.totals.deferred.get_or_insert_with(Vec::new);
    }

    /// The stage values kept since the last call, swapped into `into` (an empty vector,
    /// whose memory the engine keeps using).
    #[inline]
    pub(crate) fn take_deferred_stages(&mut self, into: &mut Vec<StageValues>) {
        debug_assert!(into.is_empty(), "values handed back not added up");
        if let Some(kept) = &mut self.totals.deferred {
            std::mem::swap(kept, into);
        }
    }

    /// Records stage values that were handed over but not added up elsewhere.
    pub(crate) fn record_deferred(&mut self, vals: &[StageValues]) {
        for v in vals {
            self.totals.stages.record(v);
        }
    }

    /// Ends [`Engine::defer_stages`]: what another thread added up is taken in, and what
    /// is still kept is recorded.
    pub(crate) fn end_deferring(&mut self, tally: &StageTally) {
        self.totals.stages.absorb(tally);
        if let Some(kept) = self.totals.deferred.take() {
            self.record_deferred(&kept);
        }
    }

    /// [`Engine::report`], the engine consumed: its rows (jobs, transitions, incomplete
    /// jobs) are moved into the report, not copied (for 20 000 rows, a copy and then a free
    /// of each was ~3 ms of the end of `analyze`, after the reading).
    pub fn into_report(mut self) -> Report {
        let t = &mut self.totals;
        let jobs = std::mem::take(&mut t.job_rows);
        let transitions = std::mem::take(&mut t.tr_rows);
        let incomplete = std::mem::take(&mut t.incomplete_rows);
        let mut r = self.report();
        r.jobs = jobs;
        r.transitions = transitions;
        r.incomplete = incomplete;
        r
    }

    /// The report of everything processed so far. Call [`Engine::finish`] first for the
    /// final one; before that, events in the reorder buffer and jobs in flight are not in it.
    pub fn report(&self) -> Report {
        debug_assert!(
            self.totals.deferred.is_none(),
            "a report while another thread adds up the partitions' stages"
        );
        let ratio = super::ratio;
        let t = &self.totals;
        let mut gpus = Vec::new();
        let mut gpu_times = Vec::new();
        let (mut busy_all, mut elapsed_all, mut sbusy_all, mut selapsed_all) = (0, 0, 0, 0);
        let (mut idle_wait, mut idle_empty) = (0, 0);
        let steady = self
            .steady
            .first_completion
            .map(|f| (f, self.steady.last_completion));
        for d in self.devices.values() {
            let g = d.report(steady);
            gpu_times.push((g.gpu, g.elapsed_ms, g.busy_ms, g.intervals));
            busy_all += g.busy_ms;
            elapsed_all += g.elapsed_ms;
            sbusy_all += g.steady_busy_ms;
            selapsed_all += g.steady_elapsed_ms;
            idle_wait += g.idle_with_queue_ms;
            idle_empty += g.idle_queue_empty_ms;
            gpus.push(g);
        }
        let (mut span, mut sjobs, mut steady_ms) =
            (t.steady_span, t.steady_jobs, t.steady_state_ms);
        if let Some(f) = self.steady.first_completion {
            let s = self.steady.last_completion - f;
            steady_ms += s;
            if self.steady.completions > 1 {
                span += s;
                sjobs += self.steady.completions - 1;
            }
        }
        let steady_ratio = ratio(sbusy_all, selapsed_all);
        let busy_ratio = ratio(busy_all, elapsed_all);
        let kernel = (self.kernel.tally.lines + self.kernel.notes + self.kernel.ntt_h_lines > 0)
            .then(|| self.kernel.report(&gpu_times));
        let kernel_over = kernel
            .as_ref()
            .and_then(|k| k.kernel_fill)
            .filter(|&f| f > super::verdict::KERNEL_FILL_MAX);
        let verdict = verdict(Evidence {
            steady: steady_ratio,
            whole: busy_ratio,
            wait: idle_wait,
            empty: idle_empty,
            lead: t.tr_lead.quantile(0.5),
            synthesis_seen: t.stages.stage[0].count() + t.stages.synth_rep.count() > 0,
            kernel_over,
            // only kernel lines that cover the run decide (not notes alone, not a log whose
            // timing lines start half way), and that fit in the busy time
            kernel: kernel.as_ref().and_then(|k| {
                if k.kernel_ms == 0
                    || k.coverage
                        .is_none_or(|c| c < super::kernel::KERNEL_COVERAGE_MIN)
                    || kernel_over.is_some()
                {
                    return None;
                }
                Some(KernelEvidence {
                    fill: k.kernel_fill?,
                    utilisation: k.kernel_utilisation?,
                    prep_msm_p50: k.prep_msm.p50_ms,
                    b_g2_msm_p50: k.b_g2_msm.p50_ms,
                })
            }),
        });
        let seconds_per_proof = (sjobs > 0).then(|| span as f64 / sjobs as f64 / 1000.0);
        let floors = self.floors(busy_all, gpus.len(), seconds_per_proof);
        let elapsed_events = self
            .first_t
            .map(|f| self.now.saturating_sub(f))
            .unwrap_or(0);
        let (gpu_mapping, gpu_mapping_disagreements) = self.mapping_words();
        Report {
            schema_version: SCHEMA_VERSION,
            gpu_workers_per_device: self.cfg.gpu_workers_per_device,
            gpu_mapping,
            gpu_mapping_disagreements,
            gpu_interval_source: self.cfg.gpu_interval_source.clone(),
            lines: LineStats::default(),
            events: EventStats {
                rules_matching_no_job: self.rules_matching_no_job(),
                ..t.stats.clone()
            },
            summary: Summary {
                jobs_seen: t.jobs_seen,
                jobs_complete: t.jobs_complete,
                jobs_incomplete: t.jobs_incomplete,
                complete_by_kind: t
                    .complete_by_kind
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
                partitions_done: t.partitions_done,
                first_event_ms: self.first_t,
                last_event_ms: self.first_t.map(|_| self.now),
                cold_start_ms: t.first_cold_start,
                seconds_per_proof,
                steady_state_ms: steady_ms,
                steady_busy_ratio: steady_ratio,
                busy_ratio,
            },
            verdict,
            floors,
            gpus,
            kernel,
            stages: StageSummaries {
                synthesis: t.stages.stage[0].summary(),
                queue: t.stages.stage[1].summary(),
                lock_wait: t.stages.stage[2].summary(),
                gpu: t.stages.stage[3].summary(),
                synth_reported: t.stages.synth_rep.summary(),
                gpu_reported: t.stages.gpu_rep.summary(),
            },
            job_wall: t.job_wall.summary(),
            transitions_summary: TransitionSummaries {
                gap: t.tr_gap.summary(),
                handoff: t.tr_handoff.summary(),
                synthesis_lead: t.tr_lead.summary(),
            },
            idle_gaps: t.idle.summary(),
            queue: QueueSummary {
                max_depth: self.gauges.max_queue,
                mean_depth: if elapsed_events > 0 {
                    (self.gauges.queue_integral as f64 / elapsed_events as f64 * 100.0).round()
                        / 100.0
                } else {
                    0.0
                },
            },
            jobs: t.job_rows.clone(),
            jobs_omitted: t.jobs_omitted,
            transitions: t.tr_rows.clone(),
            transitions_omitted: t.tr_omitted,
            incomplete: t.incomplete_rows.clone(),
        }
    }
}
