//! The incremental analysis engine.
//!
//! ```text
//!  events (any order) ─► reorder buffer ─► in time order ─► jobs / partitions ─► records, Update
//!                         (window W)                      ─► devices (merged busy, idle gaps)
//!                                                         ─► device chains ─► transitions
//! ```
//!
//! Events are buffered for the reorder window and processed in time order, so each device's
//! busy time is a sweep over interval edges: a counter of open intervals, a busy segment while
//! it is above zero. Busy time is the union, never the sum. Memory holds the jobs in flight,
//! a minute of busy history per device and fixed-size histograms: it does not grow with the
//! length of the log.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::dist::Dist;
use crate::event::{EventKind, EventRef, expected_partitions_from_job_id, kind_from_job_id};
use crate::report::*;

/// Default reorder window: events may arrive this much out of time order.
pub const DEFAULT_REORDER_WINDOW_MS: u64 = 5_000;
/// Default job timeout: a job with no event for this long is evicted as incomplete.
pub const DEFAULT_JOB_TIMEOUT_MS: u64 = 30 * 60 * 1000;
/// Default restart detection: an offset this far behind the newest one starts a new run.
/// (Threads print lines milliseconds out of order, never a minute.)
pub const DEFAULT_RESTART_AFTER_MS: u64 = 60 * 1000;
/// Default busy history kept per device (also the live busy-ratio window).
pub const DEFAULT_BUSY_WINDOW_MS: u64 = 60_000;
/// Default cap on job, transition and incomplete rows kept for the report.
pub const DEFAULT_MAX_ROWS: usize = 10_000;
/// cuzk's default number of GPU workers per device.
pub const DEFAULT_GPU_WORKERS_PER_DEVICE: u32 = 2;
/// Partition indexes at or above this are rejected as absurd.
pub const MAX_PARTITION: u32 = 1 << 16;

const SWEEP_EVERY_MS: u64 = 1_000;
const MAX_EXAMPLES: usize = 10;
const MAX_KINDS: usize = 64;

/// Engine settings. Every field has a documented default ([`EngineConfig::default`]).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// GPU = worker / this, unless the event says `gpu=` (default 2, as cuzk).
    pub gpu_workers_per_device: u32,
    /// How far out of time order events may arrive and still be processed in order.
    pub reorder_window_ms: u64,
    /// A job with no event for this long is evicted and counted as incomplete.
    pub job_timeout_ms: u64,
    /// An offset this far behind the newest offset means the daemon restarted.
    pub restart_after_ms: u64,
    /// Partitions per job when the id does not say (`None`: highest seen + 1).
    pub expected_partitions: Option<u32>,
    /// A job whose partition count is unknown completes when all its partitions are done
    /// and nothing happened to it for this long.
    pub completion_grace_ms: u64,
    /// Busy history kept per device, for the live busy ratio.
    pub busy_window_ms: u64,
    /// Rows of jobs, transitions and incomplete jobs kept for the report.
    pub max_rows: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            gpu_workers_per_device: DEFAULT_GPU_WORKERS_PER_DEVICE,
            reorder_window_ms: DEFAULT_REORDER_WINDOW_MS,
            job_timeout_ms: DEFAULT_JOB_TIMEOUT_MS,
            restart_after_ms: DEFAULT_RESTART_AFTER_MS,
            expected_partitions: None,
            completion_grace_ms: DEFAULT_REORDER_WINDOW_MS,
            busy_window_ms: DEFAULT_BUSY_WINDOW_MS,
            max_rows: DEFAULT_MAX_ROWS,
        }
    }
}

/// An event whose strings were interned, waiting in the reorder buffer.
#[derive(Debug, Clone, Copy)]
struct Ev {
    t: u64,
    seq: u64,
    kind: EventKind,
    name: u32,
    partition: Option<u32>,
    worker: Option<u32>,
    gpu: Option<u32>,
    synth_ms: Option<u64>,
    gpu_ms: Option<u64>,
    proof_kind: Option<u16>,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

#[derive(Debug)]
struct NameEntry {
    name: Arc<str>,
    /// Buffered events and job instances that refer to this name.
    refs: u32,
    /// The job instance events of this name go to.
    current: Option<usize>,
    /// Instances seen so far (the next attempt number).
    attempts: u32,
}

#[derive(Debug, Default, Clone)]
struct Part {
    t: [Option<u64>; 6],
    /// What the recorded events said, for telling duplicates from conflicts.
    sig: [u64; 6],
    worker: Option<u32>,
    gpu: Option<u32>,
    synth_reported: Option<u64>,
    gpu_reported: Option<u64>,
    queue_start: Option<u64>,
    in_synth: bool,
    queued: bool,
    picked: bool,
    gpu_open: bool,
    done: bool,
}

#[derive(Debug, Clone, Copy)]
struct DevJob {
    gpu: u32,
    first_start: u64,
    last_end: Option<u64>,
    second_last_end: Option<u64>,
    closed: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
    Active,
    Finished(JobStatus),
}

#[derive(Debug)]
struct Job {
    uid: u64,
    name: u32,
    attempt: u32,
    run: u32,
    proof_kind: Option<u16>,
    expected: Option<u32>,
    whole: bool,
    parts: Vec<Part>,
    first_synth_start: Option<u64>,
    first_synth_end: Option<u64>,
    first_gpu_start: Option<u64>,
    last_gpu_end: Option<u64>,
    synth_total: u64,
    gpu_total: u64,
    synth_reported: u64,
    gpu_reported: u64,
    done: u32,
    devs: Vec<DevJob>,
    last_activity: u64,
    state: JobState,
    cold_start: Option<u64>,
    unobserved_gpu: bool,
    chain_refs: u32,
    retain_until: u64,
}

impl Job {
    fn dev(&mut self, gpu: u32) -> Option<&mut DevJob> {
        self.devs.iter_mut().find(|d| d.gpu == gpu)
    }
}

#[derive(Debug, Clone)]
struct PrevJob {
    name: Arc<str>,
    attempt: u32,
    last_end: u64,
    second_last_end: Option<u64>,
}

#[derive(Debug)]
struct PendingGap {
    start: u64,
    end: u64,
    with_queue: u64,
    ended: Vec<u64>,
    starting: Vec<u64>,
    next_job: Arc<str>,
    next_attempt: u32,
}

#[derive(Debug)]
struct Device {
    gpu: u32,
    workers: Vec<u32>,
    active: u32,
    seg_start: u64,
    seg_max_end: u64,
    closed_busy: u64,
    recent: VecDeque<(u64, u64)>,
    serial: u64,
    intervals: u64,
    /// In this run.
    first_start: Option<u64>,
    last_end: Option<u64>,
    /// When the GPU last went idle, kept across runs and after `finish` (the live idle
    /// gauge counts from it).
    idle_since: Option<u64>,
    /// Jobs (uids) whose GPU interval ended at `last_end_any`.
    ended: Vec<u64>,
    last_end_any: u64,
    pending_gap: Option<PendingGap>,
    tent_wait: u64,
    tent_empty: u64,
    idle_wait: u64,
    idle_empty: u64,
    gaps_by_size: [GapCount; 3],
    gaps_cross: GapCount,
    gaps_intra: GapCount,
    elapsed: u64,
    steady_first: Option<u64>,
    steady_last: u64,
    steady_busy: u64,
    steady_elapsed: u64,
    chain: VecDeque<usize>,
    prev: Option<PrevJob>,
}

impl Device {
    fn new(gpu: u32) -> Self {
        Device {
            gpu,
            workers: Vec::new(),
            active: 0,
            seg_start: 0,
            seg_max_end: 0,
            closed_busy: 0,
            recent: VecDeque::new(),
            serial: 0,
            intervals: 0,
            first_start: None,
            last_end: None,
            ended: Vec::new(),
            last_end_any: 0,
            idle_since: None,
            pending_gap: None,
            tent_wait: 0,
            tent_empty: 0,
            idle_wait: 0,
            idle_empty: 0,
            gaps_by_size: Default::default(),
            gaps_cross: GapCount::default(),
            gaps_intra: GapCount::default(),
            elapsed: 0,
            steady_first: None,
            steady_last: 0,
            steady_busy: 0,
            steady_elapsed: 0,
            chain: VecDeque::new(),
            prev: None,
        }
    }

    /// Busy time from the start of the log up to `t` (valid for `t` within the busy history).
    fn cum_busy_at(&self, t: u64) -> u64 {
        let mut busy = self.closed_busy;
        for &(s, e) in self.recent.iter().rev() {
            if e <= t {
                break;
            }
            busy -= e - s.max(t);
        }
        if self.active > 0 && t > self.seg_start {
            busy += t - self.seg_start;
        }
        busy
    }

    /// Busy time inside `[from, to]` (valid within the busy history).
    fn busy_between(&self, from: u64, to: u64) -> u64 {
        self.cum_busy_at(to).saturating_sub(self.cum_busy_at(from))
    }
}

/// Per-run bookkeeping of the steady state.
#[derive(Debug, Default)]
struct RunState {
    first_completion: Option<u64>,
    last_completion: u64,
    completions: u64,
}

/// A snapshot of what is in flight, for live gauges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveState {
    /// Timeline time of the newest processed event.
    pub now_ms: u64,
    /// Partitions synthesized and not yet picked up.
    pub queue_depth: u32,
    /// Partitions being synthesized.
    pub synthesizing: u32,
    /// Partitions picked up, GPU work not started.
    pub picked_up: u32,
    /// Partitions whose GPU work started and did not end.
    pub on_gpu: u32,
    /// Jobs in flight.
    pub jobs_in_flight: u32,
    /// Per GPU: (gpu, busy ratio over the busy window, ms since it was last busy (0 while busy)).
    pub gpus: Vec<(u32, f64, u64)>,
}

/// The incremental analysis engine. Feed it events with [`Engine::ingest`], end with
/// [`Engine::finish`], read the result with [`Engine::report`].
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    names: HashMap<Arc<str>, u32>,
    name_tab: Vec<NameEntry>,
    free_names: Vec<u32>,
    kinds: Vec<Arc<str>>,
    kind_ids: HashMap<Arc<str>, u16>,
    /// The reorder buffer, sorted by (t, seq). Lines arrive nearly sorted, so inserting
    /// from the back is O(1) in the common case (a binary heap cost 10 % of analyze time).
    pending: VecDeque<Ev>,
    seq: u64,
    max_offset: Option<u64>,
    run: u32,
    run_base: u64,
    now: u64,
    started: bool,
    next_sweep: u64,
    jobs: Vec<Option<Job>>,
    free_jobs: Vec<usize>,
    job_uid: u64,
    devices: BTreeMap<u32, Device>,
    pending_gap_devs: Vec<u32>,
    queue_depth: u32,
    synthesizing: u32,
    picked_up: u32,
    on_gpu: u32,
    queue_integral: u128,
    max_queue: u32,
    first_t: Option<u64>,
    run_state: RunState,
    // totals over finished runs
    steady_span: u64,
    steady_jobs: u64,
    steady_state_ms: u64,
    // aggregates
    stats: EventStats,
    jobs_seen: u64,
    jobs_complete: u64,
    jobs_incomplete: u64,
    complete_by_kind: BTreeMap<String, u64>,
    partitions_done: u64,
    first_cold_start: Option<u64>,
    stage: [Dist; 4],
    synth_rep: Dist,
    gpu_rep: Dist,
    job_wall: Dist,
    tr_gap: Dist,
    tr_handoff: Dist,
    tr_lead: Dist,
    idle: Dist,
    job_rows: Vec<JobRecord>,
    jobs_omitted: u64,
    tr_rows: Vec<TransitionRecord>,
    tr_omitted: u64,
    incomplete_rows: Vec<JobRecord>,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new(EngineConfig::default())
    }
}

impl Engine {
    /// A new engine.
    pub fn new(mut cfg: EngineConfig) -> Self {
        cfg.gpu_workers_per_device = cfg.gpu_workers_per_device.max(1);
        cfg.busy_window_ms = cfg
            .busy_window_ms
            .max(cfg.reorder_window_ms + cfg.completion_grace_ms + 2 * SWEEP_EVERY_MS);
        cfg.restart_after_ms = cfg.restart_after_ms.max(cfg.reorder_window_ms);
        Engine {
            cfg,
            names: HashMap::default(),
            name_tab: Vec::new(),
            free_names: Vec::new(),
            kinds: Vec::new(),
            kind_ids: HashMap::default(),
            pending: VecDeque::new(),
            seq: 0,
            max_offset: None,
            run: 0,
            run_base: 0,
            now: 0,
            started: false,
            next_sweep: 0,
            jobs: Vec::new(),
            free_jobs: Vec::new(),
            job_uid: 0,
            devices: BTreeMap::new(),
            pending_gap_devs: Vec::new(),
            queue_depth: 0,
            synthesizing: 0,
            picked_up: 0,
            on_gpu: 0,
            queue_integral: 0,
            max_queue: 0,
            first_t: None,
            run_state: RunState::default(),
            steady_span: 0,
            steady_jobs: 0,
            steady_state_ms: 0,
            stats: EventStats {
                runs: 1,
                ..Default::default()
            },
            jobs_seen: 0,
            jobs_complete: 0,
            jobs_incomplete: 0,
            complete_by_kind: BTreeMap::new(),
            partitions_done: 0,
            first_cold_start: None,
            stage: Default::default(),
            synth_rep: Dist::new(),
            gpu_rep: Dist::new(),
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
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Takes in one event. Events may come in any order within the reorder window; later
    /// ones are counted as late and still used where they can be.
    pub fn ingest(&mut self, ev: &EventRef<'_>, sink: &mut impl UpdateSink) {
        self.stats.events += 1;
        if ev.partition.is_some_and(|p| p >= MAX_PARTITION) {
            self.stats.rejected += 1;
            self.example(|| {
                format!(
                    "{}: partition {} is absurd, event ignored",
                    ev.job_id,
                    ev.partition.unwrap_or(0)
                )
            });
            return;
        }
        if let Some(max) = self.max_offset {
            if ev.offset_ms + self.cfg.restart_after_ms < max {
                self.new_run(sink);
            }
        }
        self.max_offset = Some(
            self.max_offset
                .map_or(ev.offset_ms, |m| m.max(ev.offset_ms)),
        );
        let name = self.intern_name(ev.job_id);
        let proof_kind = ev.proof_kind.map(|k| self.intern_kind(k));
        self.seq += 1;
        let e = Ev {
            t: self.run_base + ev.offset_ms,
            seq: self.seq,
            kind: ev.kind,
            name,
            partition: ev.partition,
            worker: ev.worker,
            gpu: ev.gpu,
            synth_ms: ev.synth_ms,
            gpu_ms: ev.gpu_ms,
            proof_kind,
        };
        if self.started && e.t < self.now {
            self.stats.late += 1;
            self.process(e, sink);
        } else {
            let mut at = self.pending.len();
            while at > 0 && self.pending[at - 1] > e {
                at -= 1;
            }
            self.pending.insert(at, e);
        }
        self.release(sink);
    }

    /// Tells the engine that timeline time `offset_ms` (of the current run) has been reached
    /// even if no event came: buffered events older than the window are processed, and jobs
    /// past their timeout are evicted. Live callers tick with their clock.
    pub fn advance(&mut self, offset_ms: u64, sink: &mut impl UpdateSink) {
        if self.max_offset.is_none_or(|m| offset_ms > m) {
            self.max_offset = Some(offset_ms);
        }
        self.release(sink);
        let t = self.run_base + offset_ms.saturating_sub(self.cfg.reorder_window_ms);
        if self.started && t > self.now {
            self.advance_time(t, sink);
        }
    }

    /// Processes everything buffered and closes every job still in flight as incomplete.
    /// The engine can take more events afterwards (they start a fresh run).
    pub fn finish(&mut self, sink: &mut impl UpdateSink) {
        self.end_run(JobStatus::InFlightAtEnd, sink);
    }

    fn release(&mut self, sink: &mut impl UpdateSink) {
        let Some(max) = self.max_offset else { return };
        let horizon = (self.run_base + max).saturating_sub(self.cfg.reorder_window_ms);
        while self.pending.front().is_some_and(|top| top.t <= horizon) {
            let Some(e) = self.pending.pop_front() else {
                break;
            };
            self.process(e, sink);
        }
    }

    fn new_run(&mut self, sink: &mut impl UpdateSink) {
        self.end_run(JobStatus::Restarted, sink);
        self.run += 1;
        self.stats.runs += 1;
        sink.update(Update::NewRun {
            run: self.run,
            t_ms: self.run_base,
        });
    }

    /// Ends the current run: drains the buffer, closes jobs, folds run totals.
    fn end_run(&mut self, status: JobStatus, sink: &mut impl UpdateSink) {
        while let Some(e) = self.pending.pop_front() {
            self.process(e, sink);
        }
        self.finalize_gaps(sink);
        // complete what is complete, close the rest
        for idx in 0..self.jobs.len() {
            let Some(job) = &self.jobs[idx] else { continue };
            if job.state != JobState::Active {
                continue;
            }
            if self.unknown_job_complete(job) {
                self.complete(idx, sink);
            } else {
                self.give_up(idx, status, sink);
            }
        }
        for dev in self.devices.values_mut() {
            if let (Some(f), Some(l)) = (dev.first_start, dev.last_end) {
                dev.elapsed += l.saturating_sub(f);
            }
            if self.run_state.first_completion.is_some() {
                dev.steady_busy += dev
                    .steady_last
                    .saturating_sub(dev.steady_first.unwrap_or(0));
            }
            dev.steady_first = None;
            dev.steady_last = 0;
            dev.first_start = None;
            dev.last_end = None;
            dev.ended.clear();
            dev.tent_wait = 0;
            dev.tent_empty = 0;
            dev.prev = None;
        }
        if let Some(first) = self.run_state.first_completion {
            let span = self.run_state.last_completion - first;
            self.steady_state_ms += span;
            if self.run_state.completions > 1 {
                self.steady_span += span;
                self.steady_jobs += self.run_state.completions - 1;
            }
            for dev in self.devices.values_mut() {
                dev.steady_elapsed += span;
            }
        }
        self.run_state = RunState::default();
        // every job is finished: drop them all now (a new run never reuses their instances)
        for idx in 0..self.jobs.len() {
            if let Some(job) = &mut self.jobs[idx] {
                job.chain_refs = 0;
                job.retain_until = 0;
                self.remove_job(idx);
            }
        }
        for dev in self.devices.values_mut() {
            dev.chain.clear();
        }
        let end = self.now.max(self.run_base + self.max_offset.unwrap_or(0));
        self.run_base = end + 1;
        self.max_offset = None;
        self.started = false;
    }

    fn intern_name(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            self.name_tab[id as usize].refs += 1;
            return id;
        }
        let entry = NameEntry {
            name: Arc::from(name),
            refs: 1,
            current: None,
            attempts: 0,
        };
        let id = match self.free_names.pop() {
            Some(id) => {
                self.name_tab[id as usize] = entry;
                id
            }
            None => {
                self.name_tab.push(entry);
                (self.name_tab.len() - 1) as u32
            }
        };
        self.names
            .insert(self.name_tab[id as usize].name.clone(), id);
        id
    }

    fn unref_name(&mut self, id: u32) {
        let e = &mut self.name_tab[id as usize];
        e.refs -= 1;
        if e.refs == 0 {
            self.names.remove(&e.name);
            e.current = None;
            self.free_names.push(id);
        }
    }

    fn intern_kind(&mut self, kind: &str) -> u16 {
        if let Some(&id) = self.kind_ids.get(kind) {
            return id;
        }
        let kind: Arc<str> = if self.kinds.len() >= MAX_KINDS {
            Arc::from("other")
        } else {
            Arc::from(kind)
        };
        if let Some(&id) = self.kind_ids.get(&kind) {
            return id;
        }
        self.kinds.push(kind.clone());
        let id = (self.kinds.len() - 1) as u16;
        self.kind_ids.insert(kind, id);
        id
    }

    fn example(&mut self, f: impl FnOnce() -> String) {
        push_example(&mut self.stats.conflict_examples, f);
    }

    /// Moves time forward to `t`: closes pending gaps before it, accounts idle time, sweeps.
    fn advance_time(&mut self, t: u64, sink: &mut impl UpdateSink) {
        if !self.started {
            self.started = true;
            self.now = t;
            self.first_t.get_or_insert(t);
            self.next_sweep = u64::MAX;
            return;
        }
        if t <= self.now {
            return;
        }
        self.finalize_gaps(sink);
        let dt = t - self.now;
        self.queue_integral += u128::from(self.queue_depth) * u128::from(dt);
        let waiting = self.queue_depth > 0;
        for dev in self.devices.values_mut() {
            if dev.active == 0 && dev.last_end.is_some() {
                if waiting {
                    dev.tent_wait += dt;
                } else {
                    dev.tent_empty += dt;
                }
            }
        }
        self.now = t;
        if t >= self.next_sweep {
            self.sweep(sink);
        }
    }

    /// Asks for a sweep no later than `t` (sweeping early is harmless).
    fn due(&mut self, t: u64) {
        self.next_sweep = self.next_sweep.min(t.max(self.now + 1));
    }

    /// Completes, evicts and forgets jobs whose time has come, and schedules the next sweep
    /// at the earliest deadline left, so that a sparse log does not sweep at every event.
    fn sweep(&mut self, sink: &mut impl UpdateSink) {
        let now = self.now;
        let mut next = u64::MAX;
        for idx in 0..self.jobs.len() {
            let Some(job) = &self.jobs[idx] else { continue };
            match job.state {
                JobState::Active => {
                    let grace = job.last_activity + self.cfg.completion_grace_ms;
                    let timeout = job.last_activity + self.cfg.job_timeout_ms;
                    if self.unknown_job_complete(job) {
                        if grace <= now {
                            self.complete(idx, sink);
                        } else {
                            next = next.min(grace);
                        }
                    } else if timeout <= now {
                        self.give_up(idx, JobStatus::Evicted, sink);
                    } else {
                        next = next.min(timeout);
                    }
                }
                JobState::Finished(_) => {
                    if job.chain_refs == 0 && job.retain_until <= now {
                        self.remove_job(idx);
                    } else if job.chain_refs == 0 {
                        next = next.min(job.retain_until);
                    }
                }
            }
        }
        // finished jobs held by a chain wait for another job to finish: no deadline of theirs
        self.next_sweep = next.max(now + SWEEP_EVERY_MS);
    }

    fn unknown_job_complete(&self, job: &Job) -> bool {
        job.expected.is_none() && !job.parts.is_empty() && job.parts.iter().all(|p| p.done)
    }

    fn remove_job(&mut self, idx: usize) {
        let Some(job) = self.jobs[idx].take() else {
            return;
        };
        let entry = &mut self.name_tab[job.name as usize];
        if entry.current == Some(idx) {
            entry.current = None;
        }
        self.unref_name(job.name);
        self.free_jobs.push(idx);
    }

    fn new_job(&mut self, e: &Ev) -> usize {
        let entry = &mut self.name_tab[e.name as usize];
        entry.refs += 1;
        let attempt = entry.attempts;
        entry.attempts += 1;
        let expected = self
            .cfg
            .expected_partitions
            .or_else(|| expected_partitions_from_job_id(&entry.name))
            .or(if e.partition.is_none() { Some(1) } else { None });
        let kind_hint = kind_from_job_id(&entry.name);
        self.job_uid += 1;
        self.jobs_seen += 1;
        let job = Job {
            uid: self.job_uid,
            name: e.name,
            attempt,
            run: self.run,
            proof_kind: None,
            expected,
            whole: e.partition.is_none(),
            parts: Vec::new(),
            first_synth_start: None,
            first_synth_end: None,
            first_gpu_start: None,
            last_gpu_end: None,
            synth_total: 0,
            gpu_total: 0,
            synth_reported: 0,
            gpu_reported: 0,
            done: 0,
            devs: Vec::new(),
            last_activity: e.t,
            state: JobState::Active,
            cold_start: None,
            unobserved_gpu: false,
            chain_refs: 0,
            retain_until: 0,
        };
        let idx = match self.free_jobs.pop() {
            Some(i) => {
                self.jobs[i] = Some(job);
                i
            }
            None => {
                self.jobs.push(Some(job));
                self.jobs.len() - 1
            }
        };
        if let Some(k) = kind_hint {
            let k = self.intern_kind(k);
            if let Some(j) = &mut self.jobs[idx] {
                j.proof_kind = Some(k);
            }
        }
        self.name_tab[e.name as usize].current = Some(idx);
        self.due(e.t + self.cfg.job_timeout_ms);
        idx
    }

    fn signature(e: &Ev) -> u64 {
        // what a duplicate must repeat besides its time
        let w = u64::from(e.worker.unwrap_or(u32::MAX));
        let n = e.synth_ms.or(e.gpu_ms).unwrap_or(u64::MAX);
        w.rotate_left(40) ^ n
    }

    fn process(&mut self, e: Ev, sink: &mut impl UpdateSink) {
        let late = self.started && e.t < self.now;
        if !late {
            self.advance_time(e.t, sink);
        }
        // accounting time: a late event is placed at the present for busy/queue bookkeeping
        let at = e.t.max(self.now);
        let idx = match self.name_tab[e.name as usize].current {
            None => self.new_job(&e),
            Some(idx) => {
                let job = self.jobs[idx].as_ref().expect("current job exists");
                if job.state == JobState::Active {
                    idx
                } else {
                    let pidx = e.partition.unwrap_or(0) as usize;
                    let recorded = job.parts.get(pidx).and_then(|p| p.t[e.kind.index()]);
                    let sig = job.parts.get(pidx).map(|p| p.sig[e.kind.index()]);
                    if recorded == Some(e.t) && sig == Some(Self::signature(&e)) {
                        self.stats.duplicates += 1;
                        self.unref_name(e.name);
                        return;
                    }
                    if e.kind == EventKind::SynthStart {
                        self.new_job(&e) // a retry reuses the job id: a new job
                    } else {
                        self.stats.conflicts += 1;
                        let name = self.name_tab[e.name as usize].name.clone();
                        self.example(|| {
                            format!("{name}: {} after the job had ended, ignored", e.kind)
                        });
                        self.unref_name(e.name);
                        return;
                    }
                }
            }
        };
        self.unref_name(e.name);
        let wpd = self.cfg.gpu_workers_per_device;
        let job = self.jobs[idx].as_mut().expect("job exists");
        let pidx = e.partition.unwrap_or(0) as usize;
        if job.parts.len() <= pidx {
            job.parts.resize_with(pidx + 1, Part::default);
        }
        if e.partition.is_none() {
            job.whole = true;
        }
        if let Some(k) = e.proof_kind {
            job.proof_kind = Some(k);
        }
        let sig = Self::signature(&e);
        let part = &mut job.parts[pidx];
        if let Some(prev) = part.t[e.kind.index()] {
            if prev == e.t && part.sig[e.kind.index()] == sig {
                self.stats.duplicates += 1;
            } else {
                self.stats.conflicts += 1;
                let name = self.name_tab[job.name as usize].name.clone();
                let p = e.partition;
                let kind = e.kind;
                push_example(&mut self.stats.conflict_examples, || {
                    format!(
                        "{name} partition {p:?}: second {kind} at {} differs from the first at {prev}, first kept",
                        e.t
                    )
                });
            }
            return;
        }
        part.t[e.kind.index()] = Some(e.t);
        part.sig[e.kind.index()] = sig;
        if e.worker.is_some() {
            part.worker = e.worker;
        }
        job.last_activity = job.last_activity.max(e.t);
        match e.kind {
            EventKind::SynthStart => {
                job.first_synth_start = Some(job.first_synth_start.map_or(e.t, |v| v.min(e.t)));
                if part.t[EventKind::SynthEnd.index()].is_none() {
                    part.in_synth = true;
                    self.synthesizing += 1;
                }
            }
            EventKind::SynthEnd => {
                leave(&mut part.in_synth, &mut self.synthesizing);
                job.first_synth_end = Some(job.first_synth_end.map_or(e.t, |v| v.min(e.t)));
                part.synth_reported = e.synth_ms;
                if let Some(s) = part.t[EventKind::SynthStart.index()] {
                    job.synth_total += e.t.saturating_sub(s);
                }
                if let Some(ms) = e.synth_ms {
                    job.synth_reported += ms;
                }
                Self::enqueue(part, e.t, &mut self.queue_depth, &mut self.max_queue);
            }
            EventKind::GpuQueue => {
                // queue time starts at GPU_QUEUE when present
                part.queue_start = Some(e.t);
                Self::enqueue(part, e.t, &mut self.queue_depth, &mut self.max_queue);
            }
            EventKind::GpuPickup => {
                leave(&mut part.queued, &mut self.queue_depth);
                if part.t[EventKind::GpuStart.index()].is_none() {
                    part.picked = true;
                    self.picked_up += 1;
                }
            }
            EventKind::GpuStart => {
                leave(&mut part.queued, &mut self.queue_depth);
                leave(&mut part.picked, &mut self.picked_up);
                if part.t[EventKind::GpuEnd.index()].is_some() {
                    // GPU_END came first (late GPU_START): close the interval now
                    let end = part.t[EventKind::GpuEnd.index()].unwrap_or(e.t);
                    let gpu = e
                        .gpu
                        .or(part.gpu)
                        .or(part.worker.map(|w| w / wpd))
                        .unwrap_or(0);
                    part.gpu = Some(gpu);
                    let len = end.saturating_sub(e.t);
                    job.gpu_total += len;
                    let dev = self.devices.entry(gpu).or_insert_with(|| Device::new(gpu));
                    dev.serial += len;
                    dev.intervals += 1;
                } else {
                    let gpu = e.gpu.or(part.worker.map(|w| w / wpd)).unwrap_or(0);
                    part.gpu = Some(gpu);
                    part.gpu_open = true;
                    self.on_gpu += 1;
                    let first_anywhere = job.first_gpu_start.is_none();
                    job.first_gpu_start = Some(job.first_gpu_start.map_or(e.t, |v| v.min(e.t)));
                    let worker = part.worker;
                    let new_on_dev = job.dev(gpu).is_none();
                    if new_on_dev {
                        job.devs.push(DevJob {
                            gpu,
                            first_start: e.t,
                            last_end: None,
                            second_last_end: None,
                            closed: 0,
                        });
                        job.chain_refs += 1;
                    }
                    let (uid, attempt) = (job.uid, job.attempt);
                    let name = self.name_tab[job.name as usize].name.clone();
                    let dev = self.devices.entry(gpu).or_insert_with(|| Device::new(gpu));
                    if let Some(w) = worker {
                        if !dev.workers.contains(&w) {
                            dev.workers.push(w);
                            dev.workers.sort_unstable();
                        }
                    }
                    if first_anywhere && dev.active == 0 {
                        if let Some(s) = job.first_synth_start {
                            let cs = e.t.saturating_sub(s);
                            job.cold_start = Some(cs);
                            if self.first_cold_start.is_none() && self.run == 0 {
                                self.first_cold_start = Some(cs);
                            }
                        }
                    }
                    if new_on_dev {
                        // chain order: first GPU_START on this device, ties by job id
                        let mut at_pos = dev.chain.len();
                        while at_pos > 0 {
                            let Some(prev) = self
                                .jobs
                                .get(dev.chain[at_pos - 1])
                                .and_then(Option::as_ref)
                            else {
                                break;
                            };
                            let prev_start = prev
                                .devs
                                .iter()
                                .find(|d| d.gpu == gpu)
                                .map(|d| d.first_start);
                            if prev_start != Some(e.t)
                                || *self.name_tab[prev.name as usize].name <= *name
                            {
                                break;
                            }
                            at_pos -= 1;
                        }
                        dev.chain.insert(at_pos, idx);
                    }
                    Self::dev_start(
                        dev,
                        at,
                        uid,
                        (name, attempt),
                        &mut self.pending_gap_devs,
                        sink,
                    );
                }
            }
            EventKind::GpuEnd => {
                if part.done {
                    return;
                }
                part.done = true;
                part.gpu_reported = e.gpu_ms;
                job.done += 1;
                self.partitions_done += 1;
                if let Some(ms) = e.gpu_ms {
                    job.gpu_reported += ms;
                }
                job.last_gpu_end = Some(job.last_gpu_end.map_or(e.t, |v| v.max(e.t)));
                if part.gpu_open {
                    part.gpu_open = false;
                    self.on_gpu -= 1;
                    let start = part.t[EventKind::GpuStart.index()].unwrap_or(e.t);
                    let gpu = part.gpu.unwrap_or(0);
                    let len = e.t.saturating_sub(start);
                    job.gpu_total += len;
                    let uid = job.uid;
                    if let Some(dj) = job.dev(gpu) {
                        if dj.last_end.is_none_or(|l| e.t >= l) {
                            dj.second_last_end = dj.last_end;
                            dj.last_end = Some(e.t);
                        } else if dj.second_last_end.is_none_or(|s| e.t > s) {
                            dj.second_last_end = Some(e.t);
                        }
                        dj.closed += 1;
                    }
                    let dev = self
                        .devices
                        .get_mut(&gpu)
                        .expect("device of an open interval");
                    // a late GPU_END closes the device's busy time at the present (the sweep
                    // cannot go back): count the same stretch in the serial sum, so that the
                    // union never exceeds the sum whatever the input
                    dev.serial += at.saturating_sub(start).max(len);
                    dev.intervals += 1;
                    Self::dev_end(dev, at, uid, self.cfg.busy_window_ms, sink);
                } else if part.t[EventKind::GpuStart.index()].is_none() {
                    // GPU_END without GPU_START: the GPU time is unobserved
                    leave(&mut part.picked, &mut self.picked_up);
                    leave(&mut part.queued, &mut self.queue_depth);
                    job.unobserved_gpu = true;
                }
                self.record_stages(idx, pidx);
                if sink.wants_partitions() {
                    let rec = self.partition_record(idx, pidx);
                    sink.update(Update::Partition(Arc::new(rec)));
                }
                let job = self.jobs[idx].as_ref().expect("job exists");
                if job.expected.is_some_and(|n| job.done >= n) {
                    self.complete(idx, sink);
                } else if self.unknown_job_complete(job) {
                    let t = job.last_activity + self.cfg.completion_grace_ms;
                    self.due(t);
                }
            }
        }
    }

    fn enqueue(part: &mut Part, t: u64, depth: &mut u32, max: &mut u32) {
        if part.queue_start.is_none() {
            part.queue_start = Some(t);
        }
        if !part.queued
            && part.t[EventKind::GpuPickup.index()].is_none()
            && part.t[EventKind::GpuStart.index()].is_none()
        {
            part.queued = true;
            *depth += 1;
            *max = (*max).max(*depth);
        }
    }

    fn dev_start(
        dev: &mut Device,
        t: u64,
        uid: u64,
        job: (Arc<str>, u32),
        pending: &mut Vec<u32>,
        sink: &mut impl UpdateSink,
    ) {
        dev.active += 1;
        if dev.first_start.is_none() {
            dev.first_start = Some(t);
        }
        if dev.active > 1 {
            return;
        }
        dev.seg_start = t;
        dev.seg_max_end = t;
        sink.update(Update::GpuBusy {
            gpu: dev.gpu,
            busy: true,
            t_ms: t,
        });
        if let Some(pg) = &mut dev.pending_gap {
            if pg.end == t {
                pg.starting.push(uid);
            }
            return;
        }
        match dev.last_end {
            Some(le) if t > le => {
                dev.pending_gap = Some(PendingGap {
                    start: le,
                    end: t,
                    with_queue: dev.tent_wait,
                    ended: dev.ended.clone(),
                    starting: vec![uid],
                    next_job: job.0,
                    next_attempt: job.1,
                });
                dev.idle_wait += dev.tent_wait;
                dev.idle_empty += dev.tent_empty;
                pending.push(dev.gpu);
            }
            _ => {}
        }
        dev.tent_wait = 0;
        dev.tent_empty = 0;
    }

    fn dev_end(dev: &mut Device, t: u64, uid: u64, history_ms: u64, sink: &mut impl UpdateSink) {
        if t > dev.last_end_any {
            dev.last_end_any = t;
            dev.ended.clear();
        }
        if !dev.ended.contains(&uid) {
            dev.ended.push(uid);
        }
        dev.seg_max_end = dev.seg_max_end.max(t);
        dev.active -= 1;
        if dev.active == 0 {
            Self::close_segment(dev, t, history_ms, sink);
        }
    }

    fn close_segment(dev: &mut Device, t: u64, history_ms: u64, sink: &mut impl UpdateSink) {
        let t = t.max(dev.seg_start);
        dev.closed_busy += t - dev.seg_start;
        if t > dev.seg_start {
            dev.recent.push_back((dev.seg_start, t));
        }
        let keep_from = t.saturating_sub(history_ms);
        while dev.recent.front().is_some_and(|&(_, e)| e < keep_from) {
            dev.recent.pop_front();
        }
        dev.last_end = Some(t);
        dev.idle_since = Some(t);
        sink.update(Update::GpuBusy {
            gpu: dev.gpu,
            busy: false,
            t_ms: t,
        });
    }

    fn finalize_gaps(&mut self, sink: &mut impl UpdateSink) {
        if self.pending_gap_devs.is_empty() {
            return;
        }
        for gpu in std::mem::take(&mut self.pending_gap_devs) {
            let Some(dev) = self.devices.get_mut(&gpu) else {
                continue;
            };
            let Some(pg) = dev.pending_gap.take() else {
                continue;
            };
            let intra = pg.starting.iter().all(|u| pg.ended.contains(u));
            let boundary = if intra {
                Boundary::IntraSector
            } else {
                Boundary::CrossSector
            };
            let len = pg.end - pg.start;
            let bucket = match len {
                0..50 => 0,
                50..=500 => 1,
                _ => 2,
            };
            dev.gaps_by_size[bucket].count += 1;
            dev.gaps_by_size[bucket].total_ms += len;
            let bc = if intra {
                &mut dev.gaps_intra
            } else {
                &mut dev.gaps_cross
            };
            bc.count += 1;
            bc.total_ms += len;
            self.idle.record(len as i64);
            sink.update(Update::IdleGap(Arc::new(IdleGap {
                gpu,
                start_ms: pg.start,
                end_ms: pg.end,
                boundary,
                with_queue_ms: pg.with_queue,
                next_job: pg.next_job,
                next_attempt: pg.next_attempt,
                run: self.run,
            })));
        }
    }

    fn partition_record(&self, idx: usize, pidx: usize) -> PartitionRecord {
        let job = self.jobs[idx].as_ref().expect("job exists");
        let p = &job.parts[pidx];
        let t = |k: EventKind| p.t[k.index()];
        let [synthesis_ms, queue_ms, lock_wait_ms, gpu_ms] = part_stages(p);
        PartitionRecord {
            job_id: self.name_tab[job.name as usize].name.clone(),
            run: job.run,
            proof_kind: job.proof_kind.map(|k| self.kinds[k as usize].clone()),
            partition: if job.whole { None } else { Some(pidx as u32) },
            worker: p.worker,
            gpu: p.gpu,
            synth_start_ms: t(EventKind::SynthStart),
            synth_end_ms: t(EventKind::SynthEnd),
            queue_start_ms: p.queue_start,
            pickup_ms: t(EventKind::GpuPickup),
            gpu_start_ms: t(EventKind::GpuStart),
            gpu_end_ms: t(EventKind::GpuEnd),
            synthesis_ms,
            queue_ms,
            lock_wait_ms,
            gpu_ms,
            synth_reported_ms: p.synth_reported,
            gpu_reported_ms: p.gpu_reported,
        }
    }

    /// Records a finished partition's stages in the distributions.
    fn record_stages(&mut self, idx: usize, pidx: usize) {
        let p = &self.jobs[idx].as_ref().expect("job exists").parts[pidx];
        let (stages, synth_rep, gpu_rep) = (part_stages(p), p.synth_reported, p.gpu_reported);
        for (dist, v) in self.stage.iter_mut().zip(stages) {
            if let Some(v) = v {
                dist.record(v as i64);
            }
        }
        if let Some(v) = synth_rep {
            self.synth_rep.record(v as i64);
        }
        if let Some(v) = gpu_rep {
            self.gpu_rep.record(v as i64);
        }
    }

    fn job_record(&self, job: &Job, status: JobStatus) -> JobRecord {
        let name = &self.name_tab[job.name as usize].name;
        JobRecord {
            job_id: name.clone(),
            run: job.run,
            attempt: job.attempt,
            proof_kind: job.proof_kind.map(|k| self.kinds[k as usize].clone()),
            status,
            partitions_expected: job.expected,
            partitions_done: job.done,
            first_synth_start_ms: job.first_synth_start,
            first_synth_end_ms: job.first_synth_end,
            first_gpu_start_ms: job.first_gpu_start,
            last_gpu_end_ms: job.last_gpu_end,
            wall_ms: match (job.first_synth_start, job.last_gpu_end) {
                (Some(s), Some(e)) => Some(e.saturating_sub(s)),
                _ => None,
            },
            synthesis_total_ms: job.synth_total,
            gpu_total_ms: job.gpu_total,
            synth_reported_total_ms: job.synth_reported,
            gpu_reported_total_ms: job.gpu_reported,
            first_synth_to_first_gpu_ms: match (job.first_synth_start, job.first_gpu_start) {
                (Some(s), Some(g)) => Some(g.saturating_sub(s)),
                _ => None,
            },
            cold_start_ms: job.cold_start,
            unobserved_gpu: job.unobserved_gpu
                || job
                    .parts
                    .iter()
                    .any(|p| p.t[EventKind::GpuPickup.index()].is_some() && !p.done),
        }
    }

    fn complete(&mut self, idx: usize, sink: &mut impl UpdateSink) {
        let job = self.jobs[idx].as_mut().expect("job exists");
        job.state = JobState::Finished(JobStatus::Complete);
        job.retain_until = self.now + self.cfg.reorder_window_ms * 2 + self.cfg.completion_grace_ms;
        let retain = job.retain_until;
        let tc = job.last_gpu_end.unwrap_or(self.now);
        self.due(retain);
        let job = self.jobs[idx].as_ref().expect("job exists");
        let rec = self.job_record(job, JobStatus::Complete);
        self.jobs_complete += 1;
        let kind = rec.proof_kind.as_deref().unwrap_or("unknown").to_owned();
        *self.complete_by_kind.entry(kind).or_default() += 1;
        if let Some(w) = rec.wall_ms {
            self.job_wall.record(w as i64);
        }
        // steady state: from the first completion to the last
        let rs = &mut self.run_state;
        rs.completions += 1;
        let refirst = rs.first_completion.is_none_or(|f| tc < f);
        if refirst {
            rs.first_completion = Some(tc);
        }
        let relast = tc >= rs.last_completion;
        if relast {
            rs.last_completion = tc;
        }
        for dev in self.devices.values_mut() {
            if refirst {
                dev.steady_first = Some(dev.cum_busy_at(tc));
            }
            if relast {
                dev.steady_last = dev.cum_busy_at(tc);
            }
        }
        if self.job_rows.len() < self.cfg.max_rows {
            self.job_rows.push(rec.clone());
        } else {
            self.jobs_omitted += 1;
        }
        // transitions into this job first, so that a sink sees them before the job's record
        self.drain_chains_of(idx, sink);
        sink.update(Update::Job(Arc::new(rec)));
    }

    fn give_up(&mut self, idx: usize, status: JobStatus, sink: &mut impl UpdateSink) {
        let now = self.now;
        let job = self.jobs[idx].as_mut().expect("job exists");
        job.state = JobState::Finished(status);
        job.retain_until = now + self.cfg.reorder_window_ms * 2;
        let retain = job.retain_until;
        let uid = job.uid;
        self.next_sweep = self.next_sweep.min(retain.max(now + 1));
        for part in &mut job.parts {
            leave(&mut part.in_synth, &mut self.synthesizing);
            leave(&mut part.queued, &mut self.queue_depth);
            leave(&mut part.picked, &mut self.picked_up);
            if part.gpu_open {
                // close at the latest instant observed on the device: unobserved, not busy
                part.gpu_open = false;
                self.on_gpu -= 1;
                let gpu = part.gpu.unwrap_or(0);
                if let Some(dev) = self.devices.get_mut(&gpu) {
                    // what the busy time keeps of this interval counts in the serial sum too,
                    // so that the union never exceeds the sum: up to now while other workers
                    // keep the GPU busy, else up to the segment's last observed end
                    let start = part.t[EventKind::GpuStart.index()]
                        .unwrap_or(now)
                        .max(dev.seg_start);
                    let kept_until = if dev.active > 1 { now } else { dev.seg_max_end };
                    dev.serial += kept_until.saturating_sub(start);
                    dev.active -= 1;
                    if dev.active == 0 {
                        let end = dev.seg_max_end;
                        if end > dev.last_end_any {
                            dev.last_end_any = end;
                            dev.ended.clear();
                        }
                        dev.ended.push(uid);
                        Self::close_segment(dev, end, self.cfg.busy_window_ms, sink);
                    }
                }
                job.unobserved_gpu = true;
            }
        }
        // the partitions that never finished, for charts and traces (not in the stage stats)
        let unfinished: Vec<usize> = self.jobs[idx]
            .as_ref()
            .map(|j| {
                j.parts
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !p.done && p.t.iter().any(Option::is_some))
                    .map(|(i, _)| i)
                    .collect()
            })
            .unwrap_or_default();
        for pidx in unfinished {
            if sink.wants_partitions() {
                let rec = self.partition_record(idx, pidx);
                sink.update(Update::Partition(Arc::new(rec)));
            }
        }
        let job = self.jobs[idx].as_ref().expect("job exists");
        let rec = self.job_record(job, status);
        self.jobs_incomplete += 1;
        if self.incomplete_rows.len() < self.cfg.max_rows {
            self.incomplete_rows.push(rec.clone());
        }
        // transitions into this job first, so that a sink sees them before the job's record
        self.drain_chains_of(idx, sink);
        sink.update(Update::Job(Arc::new(rec)));
    }

    fn drain_chains_of(&mut self, idx: usize, sink: &mut impl UpdateSink) {
        let gpus: Vec<u32> = self.jobs[idx]
            .as_ref()
            .map(|j| j.devs.iter().map(|d| d.gpu).collect())
            .unwrap_or_default();
        for gpu in gpus {
            self.drain_chain(gpu, sink);
        }
    }

    /// Pairs consecutive finished jobs on a device, in the order their GPU work started.
    fn drain_chain(&mut self, gpu: u32, sink: &mut impl UpdateSink) {
        loop {
            let Some(dev) = self.devices.get_mut(&gpu) else {
                return;
            };
            let Some(&front) = dev.chain.front() else {
                return;
            };
            let Some(job) = self.jobs[front].as_mut() else {
                dev.chain.pop_front();
                continue;
            };
            if job.state == JobState::Active {
                return;
            }
            dev.chain.pop_front();
            job.chain_refs -= 1;
            let Some(dj) = job.dev(gpu).copied() else {
                continue;
            };
            let Some(last_end) = dj.last_end else {
                continue;
            };
            let name = self.name_tab[job.name as usize].name.clone();
            let first_synth_end = job.first_synth_end;
            let (run, to_attempt) = (job.run, job.attempt);
            let cur = PrevJob {
                name: name.clone(),
                attempt: to_attempt,
                last_end,
                second_last_end: dj.second_last_end,
            };
            if let Some(prev) = dev.prev.replace(cur) {
                let gap = dj.first_start as i64 - prev.last_end as i64;
                let rec = TransitionRecord {
                    gpu,
                    from_job: prev.name,
                    from_attempt: prev.attempt,
                    to_job: name,
                    run,
                    to_attempt,
                    from_last_gpu_end_ms: prev.last_end,
                    to_first_gpu_start_ms: dj.first_start,
                    gap_ms: gap,
                    overlap_ms: if gap < 0 { gap.unsigned_abs() } else { 0 },
                    handoff_ms: prev
                        .second_last_end
                        .map(|s| dj.first_start as i64 - s as i64),
                    synthesis_lead_ms: first_synth_end.map(|s| prev.last_end as i64 - s as i64),
                };
                self.tr_gap.record(rec.gap_ms);
                if let Some(h) = rec.handoff_ms {
                    self.tr_handoff.record(h);
                }
                if let Some(l) = rec.synthesis_lead_ms {
                    self.tr_lead.record(l);
                }
                if self.tr_rows.len() < self.cfg.max_rows {
                    self.tr_rows.push(rec.clone());
                } else {
                    self.tr_omitted += 1;
                }
                sink.update(Update::Transition(Arc::new(rec)));
            }
        }
    }

    /// What is in flight now, for live gauges.
    pub fn live(&self) -> LiveState {
        let now = self.now;
        let w = self.cfg.busy_window_ms;
        LiveState {
            now_ms: now,
            queue_depth: self.queue_depth,
            synthesizing: self.synthesizing,
            picked_up: self.picked_up,
            on_gpu: self.on_gpu,
            jobs_in_flight: self
                .jobs
                .iter()
                .flatten()
                .filter(|j| j.state == JobState::Active)
                .count() as u32,
            gpus: self
                .devices
                .values()
                .map(|d| {
                    let from = now.saturating_sub(w);
                    let span = now - from;
                    let ratio = if span == 0 {
                        0.0
                    } else {
                        d.busy_between(from, now) as f64 / span as f64
                    };
                    let idle = if d.active > 0 {
                        0
                    } else {
                        d.idle_since.map_or(0, |l| now.saturating_sub(l))
                    };
                    (d.gpu, ratio, idle)
                })
                .collect(),
        }
    }

    /// Job instances held in memory (in flight, or finished and still needed for duplicate
    /// detection or a pending transition), and interned job ids. Bounded by the jobs in
    /// flight, not by the length of the log.
    pub fn tracked(&self) -> (usize, usize) {
        (self.jobs.iter().flatten().count(), self.names.len())
    }

    /// The newest TIMELINE offset of the current run, if any event came.
    pub fn newest_offset(&self) -> Option<u64> {
        self.max_offset
    }

    /// Jobs ever seen, including those still in flight.
    pub fn jobs_seen(&self) -> u64 {
        self.jobs_seen
    }

    /// The report of everything processed so far. Call [`Engine::finish`] first for the
    /// final one; before that, events in the reorder buffer and jobs in flight are not in it.
    pub fn report(&self) -> Report {
        let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        let mut gpus = Vec::new();
        let (mut busy_all, mut elapsed_all, mut sbusy_all, mut selapsed_all) = (0, 0, 0, 0);
        let (mut idle_wait, mut idle_empty) = (0, 0);
        for d in self.devices.values() {
            // include the run in progress
            let elapsed = d.elapsed
                + match (d.first_start, d.last_end) {
                    (Some(f), Some(l)) => l.saturating_sub(f),
                    _ => 0,
                };
            let (sb, se) = match self.run_state.first_completion {
                Some(f) => (
                    d.steady_busy + d.steady_last.saturating_sub(d.steady_first.unwrap_or(0)),
                    d.steady_elapsed + (self.run_state.last_completion - f),
                ),
                _ => (d.steady_busy, d.steady_elapsed),
            };
            let busy = d.closed_busy;
            busy_all += busy;
            elapsed_all += elapsed;
            sbusy_all += sb;
            selapsed_all += se;
            idle_wait += d.idle_wait;
            idle_empty += d.idle_empty;
            let labels = ["<50ms", "50-500ms", ">500ms"];
            let total = GapCount {
                count: d.gaps_by_size.iter().map(|g| g.count).sum(),
                total_ms: d.gaps_by_size.iter().map(|g| g.total_ms).sum(),
            };
            gpus.push(GpuReport {
                gpu: d.gpu,
                workers: d.workers.clone(),
                intervals: d.intervals,
                busy_ms: busy,
                serial_sum_ms: d.serial,
                concurrency: (busy > 0).then(|| d.serial as f64 / busy as f64),
                elapsed_ms: elapsed,
                busy_ratio: ratio(busy, elapsed),
                steady_busy_ms: sb,
                steady_elapsed_ms: se,
                steady_busy_ratio: ratio(sb, se),
                idle_gaps_by_size: d
                    .gaps_by_size
                    .iter()
                    .zip(labels)
                    .map(|(g, l)| GapBucket {
                        label: l.to_owned(),
                        count: g.count,
                        total_ms: g.total_ms,
                    })
                    .collect(),
                idle_cross_sector: d.gaps_cross.clone(),
                idle_intra_sector: d.gaps_intra.clone(),
                idle_total: total,
                idle_with_queue_ms: d.idle_wait,
                idle_queue_empty_ms: d.idle_empty,
            });
        }
        let (mut span, mut sjobs, mut steady_ms) =
            (self.steady_span, self.steady_jobs, self.steady_state_ms);
        if let Some(f) = self.run_state.first_completion {
            let s = self.run_state.last_completion - f;
            steady_ms += s;
            if self.run_state.completions > 1 {
                span += s;
                sjobs += self.run_state.completions - 1;
            }
        }
        let steady_ratio = ratio(sbusy_all, selapsed_all);
        let busy_ratio = ratio(busy_all, elapsed_all);
        let lead_p50 = self.tr_lead.quantile(0.5);
        let verdict = verdict(steady_ratio, busy_ratio, idle_wait, idle_empty, lead_p50);
        let elapsed_events = self
            .first_t
            .map(|f| self.now.saturating_sub(f))
            .unwrap_or(0);
        Report {
            schema_version: SCHEMA_VERSION,
            gpu_workers_per_device: self.cfg.gpu_workers_per_device,
            lines: LineStats::default(),
            events: self.stats.clone(),
            summary: Summary {
                jobs_seen: self.jobs_seen,
                jobs_complete: self.jobs_complete,
                jobs_incomplete: self.jobs_incomplete,
                complete_by_kind: self
                    .complete_by_kind
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
                partitions_done: self.partitions_done,
                first_event_ms: self.first_t,
                last_event_ms: self.first_t.map(|_| self.now),
                cold_start_ms: self.first_cold_start,
                seconds_per_proof: (sjobs > 0).then(|| span as f64 / sjobs as f64 / 1000.0),
                steady_state_ms: steady_ms,
                steady_busy_ratio: steady_ratio,
                busy_ratio,
            },
            verdict,
            gpus,
            stages: StageSummaries {
                synthesis: self.stage[0].summary(),
                queue: self.stage[1].summary(),
                lock_wait: self.stage[2].summary(),
                gpu: self.stage[3].summary(),
                synth_reported: self.synth_rep.summary(),
                gpu_reported: self.gpu_rep.summary(),
            },
            job_wall: self.job_wall.summary(),
            transitions_summary: TransitionSummaries {
                gap: self.tr_gap.summary(),
                handoff: self.tr_handoff.summary(),
                synthesis_lead: self.tr_lead.summary(),
            },
            idle_gaps: self.idle.summary(),
            queue: QueueSummary {
                max_depth: self.max_queue,
                mean_depth: if elapsed_events > 0 {
                    (self.queue_integral as f64 / elapsed_events as f64 * 100.0).round() / 100.0
                } else {
                    0.0
                },
            },
            jobs: self.job_rows.clone(),
            jobs_omitted: self.jobs_omitted,
            transitions: self.tr_rows.clone(),
            transitions_omitted: self.tr_omitted,
            incomplete: self.incomplete_rows.clone(),
        }
    }
}

/// Clears an in-flight flag and the gauge that counts it.
/// A partition's stage durations, in [`Stage::ALL`] order.
fn part_stages(p: &Part) -> [Option<u64>; 4] {
    let t = |k: EventKind| p.t[k.index()];
    let span = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let pickup = t(EventKind::GpuPickup);
    let start = t(EventKind::GpuStart);
    [
        span(t(EventKind::SynthStart), t(EventKind::SynthEnd)),
        span(p.queue_start, pickup.or(start)),
        span(pickup, start),
        span(start, t(EventKind::GpuEnd)),
    ]
}

fn leave(flag: &mut bool, gauge: &mut u32) {
    if std::mem::take(flag) {
        *gauge -= 1;
    }
}

fn push_example(examples: &mut Vec<String>, f: impl FnOnce() -> String) {
    if examples.len() < MAX_EXAMPLES {
        examples.push(f());
    }
}

/// GPU-bound at a busy ratio of at least this.
pub const GPU_BOUND_RATIO: f64 = 0.95;

fn verdict(
    steady: Option<f64>,
    whole: Option<f64>,
    wait: u64,
    empty: u64,
    lead: Option<i64>,
) -> Verdict {
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
