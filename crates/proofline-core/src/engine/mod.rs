//! The incremental analysis engine.
//!
//! ```text
//!  events (any order) ─► reorder buffer ─► in time order ─► jobs / partitions ─► records, Update
//!                         (reorder.rs)      (process.rs)   ─► devices (device.rs: merged busy, idle gaps)
//!                                                          ─► device chains (chain.rs) ─► transitions
//!                                                          ─► totals, live state, report (summary.rs)
//!                                                          ─► verdict (verdict.rs)
//! ```
//!
//! Events are buffered for the reorder window and processed in time order, so each device's
//! busy time is a sweep over interval edges: a counter of open intervals, a busy segment while
//! it is above zero. Busy time is the union, never the sum. Memory holds the jobs in flight,
//! a minute of busy history per device and fixed-size histograms: it does not grow with the
//! length of the log.
//!
//! The rooms: [`config`] (settings), `names` (interned job ids and kinds), `reorder` (the
//! buffer), `job` (jobs, partitions and a partition's stage), `gauges` (live counts),
//! `process` (one event), `device` (the busy sweep and idle gaps), `chain` (transitions),
//! `summary` (totals, live state, report), `verdict`, `kernel` (`CUZK_TIMING` lines). This
//! file holds the timeline: runs,
//! time moving on, and the sweep that completes and evicts jobs.

mod chain;
pub mod config;
mod device;
mod floors;
mod gauges;
mod job;
mod kernel;
mod names;
mod process;
mod reorder;
mod runs;
mod summary;
mod verdict;

pub use config::*;
pub use device::{GAP_SIZE_CLASSES, gap_size_class};
pub use kernel::KERNEL_COVERAGE_MIN;
pub(crate) use kernel::{CallLine, KernelTally};
pub use runs::{MIN_BEHIND_MS, RESTART_CONFIRMATIONS};
pub use summary::LIVE_SPP_WINDOW;
pub use verdict::GPU_BOUND_RATIO;

use crate::event::{EventRef, Nums};
use crate::report::JobStatus;
use crate::sink::Update;
use crate::sink::UpdateSink;
use device::Devices;
use gauges::Gauges;
use job::{Job, JobState, PartStage};
use names::{Kinds, Names};
use reorder::{Ev, Reorder};
use summary::{RunSteady, Totals};
pub(crate) use summary::{StageTally, StageValues};

/// A job's tables kept for reuse ([`Engine`]'s `spare_tables`): a prover has a few dozen jobs
/// in flight at most, and each finishing job hands its own on.
const SPARE_TABLES: usize = 64;

/// The incremental analysis engine. Feed it events with [`Engine::ingest`], end with
/// [`Engine::finish`], read the result with [`Engine::report`].
#[derive(Debug)]
pub struct Engine {
    /// The settings, normalized ([`EngineConfig::normalized`]).
    cfg: EngineConfig,
    /// Job ids in flight.
    names: Names,
    /// Proof kinds seen.
    kinds: Kinds,
    /// Events waiting to be processed in time order.
    reorder: Reorder,
    /// Events out of the window, held until the lines that follow decide what they are.
    held: runs::Held,
    /// The lines the current run used recently, to tell a block sent again from a restart.
    recent: runs::Recent,
    /// The newest offset of the current run (`None` before its first event): of its events,
    /// or of the clock's [`Engine::advance`].
    max_offset: Option<u64>,
    /// The newest offset an event of the current run carried. A restart is judged against
    /// it, not against the clock: lines a stalled writer prints late, in one burst, are behind
    /// the clock but not behind the lines before them.
    max_event_offset: Option<u64>,
    /// The current run, from 0; a detected daemon restart starts the next.
    run: u32,
    /// Where the current run's offset 0 sits on the timeline (just after the previous run).
    run_base: u64,
    /// The present: the time of the newest processed event (or of the clock's advance).
    /// Never moves back.
    now: u64,
    /// Whether the present was set by a first event of this run.
    started: bool,
    /// When the next sweep is due (`u64::MAX`: none).
    next_sweep: u64,
    /// When the open GPU intervals are next looked at for stuck ones.
    next_stuck_check: u64,
    /// The first instant processed, all runs.
    first_t: Option<u64>,
    /// Job instances by slot (`None`: free).
    jobs: Vec<Option<Job>>,
    /// Free slots of `jobs`.
    free_jobs: Vec<usize>,
    /// The partition and device tables of removed jobs, emptied, for the next new ones
    /// ([`Job::into_tables`]; on the small TIMELINE-only log the partition table, measured
    /// with the chains' vector of GPUs, was ~1.3 % of the engine's instructions, the device
    /// table 0.3 %); at most [`SPARE_TABLES`].
    spare_tables: Vec<job::Tables>,
    /// The last job uid given.
    job_uid: u64,
    /// Jobs in the `Active` state.
    active: usize,
    /// Job instances in the order they were created, `(slot, uid)`: the oldest in flight is
    /// the first still active (finished ones are skipped, and swept out as they pile up).
    created: std::collections::VecDeque<(usize, u64)>,
    /// Devices by index.
    devices: Devices,
    /// Devices with a pending gap to finalize before time moves on.
    pending_gap_devs: Vec<u32>,
    /// Partitions per stage, queue depth over time.
    gauges: Gauges,
    /// The steady state of the current run.
    steady: RunSteady,
    /// Totals over every run and the report's rows.
    totals: Totals,
    /// Which of the configuration's `partitions_for` rules, then its `proof_kind_for` ones,
    /// a job id started with (a few: looked through as each job begins, until all have).
    rules_matched: Vec<bool>,
    /// What the `CUZK_TIMING:` lines say.
    kernel: kernel::KernelTotals,
    /// Open GPU intervals per GPU, `(job, partition)`, in the order lines were given (not
    /// of the timeline): the attribution of timing lines.
    line_open: kernel::LineOpen,
    /// A call's kernel time given to the one partition whose interval was open on its GPU,
    /// until the partition's record is out.
    part_kernel: rustc_hash::FxHashMap<kernel::PartKey, u64>,
    /// Each worker's GPU, as cuzk's start-up lines said (empty: worker / per device).
    worker_gpu: rustc_hash::FxHashMap<u32, u32>,
    /// Where the worker-to-GPU mapping came from, and what disagreed with the user's.
    mapping: Mapping,
}

/// Where the worker-to-GPU mapping came from.
#[derive(Debug, Default)]
struct Mapping {
    /// cuzk's start-up lines gave it.
    from_startup: bool,
    /// What they said against the user's `gpu_workers_per_device` (the first few).
    disagreements: Vec<String>,
    /// The process restarted: the mapping holds until its own start-up lines replace it.
    stale: bool,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new(EngineConfig::default())
    }
}

impl Engine {
    /// A new engine.
    pub fn new(cfg: EngineConfig) -> Self {
        let rules = cfg.partitions_by_prefix.len() + cfg.kinds_by_prefix.len();
        Engine {
            cfg: cfg.normalized(),
            names: Names::default(),
            kinds: Kinds::default(),
            reorder: Reorder::default(),
            held: runs::Held::default(),
            recent: runs::Recent::default(),
            max_offset: None,
            max_event_offset: None,
            run: 0,
            run_base: 0,
            now: 0,
            started: false,
            next_sweep: 0,
            next_stuck_check: 0,
            first_t: None,
            jobs: Vec::new(),
            free_jobs: Vec::new(),
            spare_tables: Vec::new(),
            job_uid: 0,
            active: 0,
            created: std::collections::VecDeque::new(),
            devices: Devices::default(),
            pending_gap_devs: Vec::new(),
            gauges: Gauges::default(),
            steady: RunSteady::default(),
            totals: Totals::default(),
            rules_matched: vec![false; rules],
            kernel: kernel::KernelTotals::default(),
            line_open: Default::default(),
            part_kernel: Default::default(),
            worker_gpu: Default::default(),
            mapping: Mapping::default(),
        }
    }

    /// The GPU of a worker: as cuzk's start-up lines said, else worker / per device.
    #[inline]
    pub(super) fn gpu_of_worker(&self, w: u32) -> u32 {
        if !self.worker_gpu.is_empty() {
            if let Some(&g) = self.worker_gpu.get(&w) {
                return g;
            }
        }
        w / self.cfg.gpu_workers_per_device.max(1)
    }

    /// Takes in one of cuzk's start-up lines: the mapping it says is used, unless the user
    /// gave one (then a disagreement is noted for the report).
    pub(super) fn learn_worker_map(&mut self, m: crate::timing::WorkerMap) {
        use crate::timing::WorkerMap;
        let wpd = self.cfg.gpu_workers_per_device.max(1);
        if self.cfg.gpu_workers_per_device_given {
            let differs = match m {
                WorkerMap::PerDevice(n) => (n != wpd).then(|| {
                    format!("cuzk's start-up lines say {n} GPU workers per device, --gpu-workers-per-device {wpd} was given (and is used)")
                }),
                WorkerMap::Worker { worker, gpu } => (worker / wpd != gpu).then(|| {
                    format!("cuzk's start-up lines put worker {worker} on GPU {gpu}; --gpu-workers-per-device {wpd} (used) puts it on {}", worker / wpd)
                }),
            };
            if let Some(d) = differs {
                if self.mapping.disagreements.len() < 4 {
                    self.mapping.disagreements.push(d);
                }
            }
            return;
        }
        if std::mem::take(&mut self.mapping.stale) {
            // a new process's own start-up lines: the last one's placements go
            self.worker_gpu.clear();
        }
        self.mapping.from_startup = true;
        match m {
            WorkerMap::PerDevice(n) => self.cfg.gpu_workers_per_device = n.max(1),
            WorkerMap::Worker { worker, gpu } if worker < MAX_WORKER && gpu < MAX_GPU => {
                self.worker_gpu.insert(worker, gpu);
            }
            // a placement past the limits is not used (a GPU taken from a worker stays below
            // `MAX_GPU`, and the table small), and the report says so
            WorkerMap::Worker { worker, gpu } => {
                if self.mapping.disagreements.len() < 4 {
                    self.mapping.disagreements.push(format!(
                        "cuzk's start-up lines put worker {worker} on GPU {gpu}, past the {MAX_WORKER} workers and {MAX_GPU} GPUs followed: not used"
                    ));
                }
            }
        }
    }

    /// The worker-to-GPU mapping in words, and what disagreed with it.
    pub(super) fn mapping_words(&self) -> (String, Vec<String>) {
        let wpd = self.cfg.gpu_workers_per_device;
        let words = if self.mapping.from_startup {
            format!(
                "GPUs from the log's start-up lines, cuzk's or the layer's ({wpd} GPU workers per device{})",
                if self.worker_gpu.is_empty() {
                    String::new()
                } else {
                    format!(", {} workers placed as logged", self.worker_gpu.len())
                }
            )
        } else if self.cfg.gpu_workers_per_device_given {
            format!("GPUs from --gpu-workers-per-device {wpd} (GPU = worker / {wpd})")
        } else {
            format!(
                "GPUs by cuzk's default of {wpd} GPU workers per device (GPU = worker / {wpd}); the log has no start-up lines: pass --gpu-workers-per-device if the prover was set otherwise"
            )
        };
        (words, self.mapping.disagreements.clone())
    }

    /// The configuration in force.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Takes in one event. Events may come in any order within the reorder window; later
    /// ones are counted as late and still used where they can be.
    pub fn ingest(&mut self, ev: &EventRef<'_>, sink: &mut impl UpdateSink) {
        self.ingest_nums(ev.offset_ms, ev.job_id, ev.proof_kind, Nums::of(ev), sink);
    }

    /// [`Engine::ingest`] of an event in its compact form, inlined where it is called: the
    /// reader's loop over a block, which holds its events so (inlined, the event is read
    /// where it lies in the block, not built and read back).
    #[inline(always)]
    pub(crate) fn ingest_nums(
        &mut self,
        offset_ms: u64,
        job_id: &str,
        proof_kind: Option<&str>,
        nums: Nums,
        sink: &mut impl UpdateSink,
    ) {
        self.totals.stats.events += 1;
        if nums.index_over(MAX_PARTITION, MAX_WORKER, MAX_GPU) {
            self.reject_absurd_index(job_id, &nums);
            return;
        }
        if offset_ms > crate::codec::MAX_OFFSET_MS {
            self.totals.stats.rejected += 1;
            self.example(|| {
                format!("{job_id}: offset {offset_ms} is beyond any uptime, event ignored")
            });
            return;
        }
        if nums.kind.is_gpu() && nums.worker().is_none() && nums.gpu().is_none() {
            // no GPU to place it on (a line without `worker=` is malformed before this)
            self.totals.stats.rejected += 1;
            self.example(|| format!("{job_id}: {} without a worker, event ignored", nums.kind));
            return;
        }
        let name = self.names.intern(job_id);
        self.track_line_order(&nums, self.names.get(name).hash);
        let proof_kind = proof_kind.map(|k| self.kinds.intern(k));
        // placed on the timeline (`t`) when it is accepted, in its run
        let e = Ev::new(self.reorder.next_seq(), nums, name, proof_kind);
        // the usual line: in the window, nothing held (the rest decides in `admit`)
        if self.held.side.is_none() && self.side_of(offset_ms).is_none() {
            self.accept(offset_ms, e, sink);
        } else {
            self.admit(offset_ms, e, sink);
        }
    }

    /// Uses an event at `offset` of the run in progress: in the reorder buffer, or processed
    /// at once when it is older than the present (counted late).
    #[inline(always)]
    fn accept(&mut self, offset: u64, mut e: Ev, sink: &mut impl UpdateSink) {
        self.max_event_offset = Some(self.max_event_offset.map_or(offset, |m| m.max(offset)));
        self.max_offset = Some(self.max_offset.map_or(offset, |m| m.max(offset)));
        e.t = self.run_base.saturating_add(offset);
        if e.nums.kind == crate::event::EventKind::SynthStart {
            let key = self.recent_key(offset, &e);
            self.recent.insert(key);
        }
        if self.started && e.t < self.now {
            self.totals.stats.late += 1;
            self.process(&e, sink);
        } else {
            self.reorder.insert(e);
        }
        self.release(sink);
    }

    /// Tells the engine that timeline time `offset_ms` (of the current run) has been reached
    /// even if no event came: buffered events older than the window are processed, and jobs
    /// past their timeout are evicted. Live callers tick with their clock.
    pub fn advance(&mut self, offset_ms: u64, sink: &mut impl UpdateSink) {
        self.clock_reached(offset_ms, sink);
        if self.max_offset.is_none_or(|m| offset_ms > m) {
            self.max_offset = Some(offset_ms);
        }
        self.release(sink);
        let t = self
            .run_base
            .saturating_add(offset_ms.saturating_sub(self.cfg.reorder_window_ms));
        if self.started {
            self.advance_time(t, sink);
        }
    }

    /// The prover restarted, as the source knows for certain (the journal's entries name
    /// another process): what is buffered is processed, the jobs in flight end as
    /// `restarted`, and the next event starts a new run at offset 0 (no heuristic is
    /// needed: a restart seconds after the start is one). Nothing happens before the
    /// current run's first event.
    pub fn restart(&mut self, sink: &mut impl UpdateSink) {
        if self.max_event_offset.is_none() && self.held.events.is_empty() {
            return;
        }
        self.settle_held_at_end(sink);
        self.new_run(sink);
        self.mapping.stale = true;
    }

    /// Processes everything buffered and closes every job still in flight as incomplete.
    /// The engine can take more events afterwards (they start a fresh run).
    pub fn finish(&mut self, sink: &mut impl UpdateSink) {
        self.settle_held_at_end(sink);
        self.end_run(JobStatus::InFlightAtEnd, sink);
    }

    /// Job instances held in memory (in flight, or finished and still needed for duplicate
    /// detection or a pending transition), and interned job ids. Bounded by the jobs in
    /// flight, not by the length of the log.
    pub fn tracked(&self) -> (usize, usize) {
        (self.jobs.iter().flatten().count(), self.names.len())
    }

    /// The current run (0 until a daemon restart is detected).
    pub fn run(&self) -> u32 {
        self.run
    }

    /// Where the current run's offset 0 sits on the engine's timeline (runs are laid one
    /// after the other): an update's time is this plus the line's offset. A caller that knows
    /// a run's wall-clock start places the run's updates with it.
    pub fn run_base(&self) -> u64 {
        self.run_base
    }

    /// The newest TIMELINE offset an event of the current run carried, if any came. The
    /// live clock ([`Engine::advance`]) does not move it, nor does a held line.
    pub fn newest_offset(&self) -> Option<u64> {
        self.max_event_offset
    }

    /// Processes the buffered events a reorder window older than the newest offset.
    #[inline(always)]
    fn release(&mut self, sink: &mut impl UpdateSink) {
        let Some(max) = self.max_offset else { return };
        let horizon = self
            .run_base
            .saturating_add(max)
            .saturating_sub(self.cfg.reorder_window_ms);
        while let Some(e) = self.reorder.pop_until(horizon) {
            self.process(&e, sink);
        }
    }

    /// Ends the current run: drains the buffer, closes jobs, folds run totals.
    fn end_run(&mut self, status: JobStatus, sink: &mut impl UpdateSink) {
        while let Some(e) = self.reorder.pop() {
            self.process(&e, sink);
        }
        self.finalize_gaps(sink);
        // complete what is complete, close the rest
        for idx in 0..self.jobs.len() {
            let Some(job) = &self.jobs[idx] else { continue };
            if job.state != JobState::Active {
                continue;
            }
            if job.unknown_count_complete() {
                self.complete(idx, sink);
            } else {
                self.give_up(idx, status, sink);
            }
        }
        let steady = self
            .steady
            .first_completion
            .map(|first| self.steady.last_completion - first);
        for dev in self.devices.values_mut() {
            dev.end_run(steady);
        }
        self.totals.end_run(&self.steady);
        self.steady = RunSteady::default();
        // every job is finished: drop them all now (a new run never reuses their instances)
        for idx in 0..self.jobs.len() {
            if let Some(job) = &mut self.jobs[idx] {
                job.release();
                self.remove_job(idx);
            }
        }
        let end = self
            .now
            .max(self.run_base.saturating_add(self.max_offset.unwrap_or(0)));
        self.run_base = end.saturating_add(1);
        self.max_offset = None;
        self.max_event_offset = None;
        self.started = false;
    }

    /// Rejects an event whose partition, worker or GPU index is at or over its limit
    /// ([`MAX_PARTITION`], [`MAX_WORKER`], [`MAX_GPU`]), naming the first such index.
    #[cold]
    fn reject_absurd_index(&mut self, job_id: &str, nums: &Nums) {
        self.totals.stats.rejected += 1;
        self.example(|| {
            let what = if let Some(p) = nums.partition().filter(|&p| p >= MAX_PARTITION) {
                format!("partition {p}")
            } else if let Some(w) = nums.worker().filter(|&w| w >= MAX_WORKER) {
                format!("worker {w}")
            } else {
                format!("GPU {}", nums.gpu().unwrap_or_default())
            };
            format!("{job_id}: {what} is absurd, event ignored")
        });
    }

    fn example(&mut self, f: impl FnOnce() -> String) {
        push_example(&mut self.totals.stats.conflict_examples, f);
    }

    /// Moves time forward to `t`: closes pending gaps before it, accounts idle time, sweeps.
    /// (Inlined: many events share the millisecond of the one before, and a call to learn
    /// that time had not moved was 1 % of the engine's instructions.)
    #[inline]
    fn advance_time(&mut self, t: u64, sink: &mut impl UpdateSink) {
        if !self.started {
            self.started = true;
            self.now = t;
            self.first_t.get_or_insert(t);
            self.next_sweep = u64::MAX;
        } else if t > self.now {
            self.time_moves(t, sink);
        }
    }

    /// [`Engine::advance_time`] once time moved on to `t`.
    #[inline(never)]
    fn time_moves(&mut self, t: u64, sink: &mut impl UpdateSink) {
        self.finalize_gaps(sink);
        let dt = t - self.now;
        self.gauges.elapse(dt);
        let waiting = self.gauges.queue_depth() > 0;
        for dev in self.devices.values_mut() {
            dev.idle_for(dt, waiting);
        }
        self.now = t;
        if t >= self.next_sweep {
            self.sweep(sink);
        }
        if t >= self.next_stuck_check {
            self.check_stuck(sink);
            // a quarter of the threshold apart (15 s by default): a stuck call is seen at
            // most that late, and a long log pays for a check every 15 s of its timeline,
            // not every second (8 % of analyze's time on a TIMELINE-only log)
            let every = (self.cfg.stuck_min_ms / 4).max(SWEEP_EVERY_MS);
            self.next_stuck_check = t.saturating_add(every);
        }
    }

    /// Finds the GPU intervals open past their device's stuck threshold (a call that never
    /// returns, a prover dead inside GPU work): each stops counting as busy from the last
    /// edge seen on its device, is counted, and named. Amortized O(1) per interval: a
    /// device's intervals are looked at in the order they opened, those marked closed are
    /// dropped as they reach the front, and only an open one older than the threshold is
    /// looked up in its job.
    fn check_stuck(&mut self, sink: &mut impl UpdateSink) {
        let (min_ms, factor) = (self.cfg.stuck_min_ms, self.cfg.stuck_factor);
        if min_ms == 0 {
            return;
        }
        let now = self.now;
        let waiting = self.gauges.queue_depth() > 0;
        for dev in self.devices.values_mut() {
            let Some(after) = dev.stuck_after(min_ms, factor) else {
                continue;
            };
            while let Some((start, idx, uid, pidx)) = dev.oldest_open() {
                if now.saturating_sub(start) <= after {
                    break;
                }
                let part = self
                    .jobs
                    .get_mut(idx)
                    .and_then(Option::as_mut)
                    .filter(|j| j.uid == uid)
                    .and_then(|j| j.parts.get_mut(pidx))
                    .filter(|p| p.stage() == PartStage::OnGpu);
                let Some(part) = part else {
                    // its job ended without marking it (a new run): nothing to watch
                    dev.drop_oldest_opened();
                    continue;
                };
                self.gauges.advance(part, PartStage::Stuck);
                dev.drop_oldest_opened();
                dev.count_stuck();
                dev.abandon_interval(
                    Some(start),
                    (now, waiting),
                    uid,
                    self.cfg.busy_window_ms,
                    sink,
                );
                self.totals.stats.gpu_stuck += 1;
                if let Some(job) = self.jobs[idx].as_ref() {
                    let name = self.names.name(job.name).clone();
                    let gpu = dev.gpu();
                    push_example(&mut self.totals.stats.conflict_examples, || {
                        format!(
                            "{name}: partition {pidx}'s GPU work on GPU {gpu} open {} s, past {} s: stuck, no longer counted busy",
                            now.saturating_sub(start) / 1000,
                            after / 1000
                        )
                    });
                }
            }
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
                    if job.unknown_count_complete() {
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

    /// Counts and emits the idle gaps that ended at the present.
    #[inline]
    fn finalize_gaps(&mut self, sink: &mut impl UpdateSink) {
        // (the look inlined where time moves, half of the events: a call that found nothing
        // pending was 0.75 % of the engine's thread's instructions)
        if !self.pending_gap_devs.is_empty() {
            self.finalize_pending_gaps(sink);
        }
    }

    /// [`Engine::finalize_gaps`] when a gap is pending.
    #[inline(never)]
    fn finalize_pending_gaps(&mut self, sink: &mut impl UpdateSink) {
        // (the list's buffer is kept: a new one per GPU_START that ended a gap was a visible
        // share of the engine's allocations)
        let mut devs = std::mem::take(&mut self.pending_gap_devs);
        for &gpu in &devs {
            let Some(gap) = self
                .devices
                .get_mut(gpu)
                .and_then(|d| d.finalize_gap(self.run))
            else {
                continue;
            };
            self.totals.idle.record(gap.len_ms() as i64);
            if sink.wants_idle_gaps() {
                sink.update(Update::IdleGap(std::sync::Arc::new(gap)));
            }
        }
        devs.clear();
        self.pending_gap_devs = devs;
    }

    fn remove_job(&mut self, idx: usize) {
        let Some(job) = self.jobs[idx].take() else {
            return;
        };
        if !self.part_kernel.is_empty() {
            let key = kernel::job_key(self.names.name(job.name));
            for p in 0..job.parts.len().max(1) {
                self.part_kernel.remove(&(key, p as u32));
            }
        }
        let entry = self.names.get_mut(job.name);
        entry.others.retain(|&i| i != idx);
        if entry.current == Some(idx) {
            // another request's instance of the id, still in flight, takes its place
            entry.current = entry.others.pop();
        }
        self.names.unref(job.name);
        self.free_jobs.push(idx);
        if self.spare_tables.len() < SPARE_TABLES {
            if let Some(tables) = job.into_tables() {
                self.spare_tables.push(tables);
            }
        }
    }

    /// Gives up on the oldest job in flight while there are `max_jobs_in_flight` or more.
    fn make_room(&mut self, sink: &mut impl UpdateSink) {
        while self.active >= self.cfg.max_jobs_in_flight.max(1) {
            let Some((idx, uid)) = self.created.pop_front() else {
                return;
            };
            let live = self.jobs[idx]
                .as_ref()
                .is_some_and(|j| j.uid == uid && j.state == JobState::Active);
            if live {
                self.totals.stats.evicted_over_cap += 1;
                self.give_up(idx, JobStatus::Evicted, sink);
            }
        }
    }

    /// A job went from active to finished.
    pub(super) fn finished_one(&mut self) {
        self.active = self.active.saturating_sub(1);
        // finished entries pile up behind an old one in flight: drop them now and then
        if self.created.len() > 2 * self.active + 1024 {
            let jobs = &self.jobs;
            self.created.retain(|&(idx, uid)| {
                jobs[idx]
                    .as_ref()
                    .is_some_and(|j| j.uid == uid && j.state == JobState::Active)
            });
        }
    }

    /// The prefix rules no job id has started with, as given on the command line.
    pub(super) fn rules_matching_no_job(&self) -> Vec<String> {
        let cfg = &self.cfg;
        let partitions = cfg
            .partitions_by_prefix
            .iter()
            .map(|(p, n)| format!("--partitions-for {p}={n}"));
        let kinds = cfg
            .kinds_by_prefix
            .iter()
            .map(|(p, k)| format!("--proof-kind-for {p}={k}"));
        partitions
            .chain(kinds)
            .zip(&self.rules_matched)
            .filter(|(_, matched)| !**matched)
            .map(|(rule, _)| rule)
            .collect()
    }

    fn new_job(&mut self, e: &Ev, sink: &mut impl UpdateSink) -> usize {
        self.make_room(sink);
        let entry = self.names.get_mut(e.name);
        entry.refs += 1;
        entry.max_request = entry.max_request.max(e.request().map_or(0, |r| r.get()));
        let attempt = entry.attempts;
        entry.attempts += 1;
        if self.rules_matched.contains(&false) {
            note_rules_of(&self.cfg, &mut self.rules_matched, &entry.name);
        }
        let count = self.cfg.count_of(&entry.name, e.nums.partition().is_none());
        let kind_hint = self.cfg.kind_of(&entry.name).map(|k| self.kinds.intern(k));
        self.job_uid += 1;
        self.totals.jobs_seen += 1;
        let (parts, devs) = self.spare_tables.pop().unwrap_or_default();
        let job = Job {
            uid: self.job_uid,
            name: e.name,
            attempt,
            run: self.run,
            proof_kind: kind_hint,
            expected: count.map(|(n, _)| n),
            expected_from: count.map(|(_, from)| from),
            whole: e.nums.partition().is_none(),
            parts,
            first_synth_start: None,
            first_synth_end: None,
            first_gpu_start: None,
            last_gpu_end: None,
            synth_total: 0,
            gpu_total: 0,
            synth_reported: 0,
            gpu_reported: 0,
            done: 0,
            devs,
            last_activity: e.t,
            state: JobState::Active,
            cold_start: None,
            unobserved_gpu: false,
            chain_refs: 0,
            retain_until: 0,
            overlapped: false,
            request: e.request(),
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
        self.names.get_mut(e.name).current = Some(idx);
        self.due(e.t + self.cfg.job_timeout_ms);
        self.active += 1;
        self.created.push_back((idx, self.job_uid));
        idx
    }
}

fn push_example(examples: &mut Vec<String>, f: impl FnOnce() -> String) {
    if examples.len() < MAX_EXAMPLES {
        examples.push(f());
    }
}

/// `a / b`, or `None` when `b` is 0.
fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// A fixed sequence of pseudo-random numbers (xorshift64) for the engine's tests.
#[cfg(test)]
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// The engine's tests' log of GPU calls: three jobs of two partitions on one GPU, one call
/// of 100 ms each (back to back, worker 0), each call's `CUZK_TIMING:` lines (`per_call`)
/// inside its interval, every line given `times` times (a log read twice); read through a
/// [`crate::reader::LineFeeder`] with a count of two partitions, and finished.
#[cfg(test)]
fn calls_on_one_gpu(per_call: &[&str], times: usize) -> Engine {
    let mut lines = Vec::new();
    let mut t = 0;
    for job in ["a", "b", "c"] {
        for p in 0..2 {
            lines.push(format!("TIMELINE,{t},SYNTH_START,{job},partition={p}"));
            lines.push(format!(
                "TIMELINE,{t},SYNTH_END,{job},partition={p},synth_ms=0"
            ));
            lines.push(format!(
                "TIMELINE,{t},GPU_START,{job},worker=0,partition={p}"
            ));
            lines.extend(per_call.iter().map(|l| (*l).to_owned()));
            t += 100;
            lines.push(format!(
                "TIMELINE,{t},GPU_END,{job},worker=0,partition={p},gpu_ms=100"
            ));
        }
    }
    let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(2)));
    let mut feeder = crate::reader::LineFeeder::new();
    for l in &lines {
        for _ in 0..times {
            feeder.feed_line(
                format!("{l}\n").as_bytes(),
                &mut e,
                &mut crate::sink::NoUpdates,
            );
        }
    }
    e.finish(&mut crate::sink::NoUpdates);
    e
}

#[cfg(test)]
mod tables_and_records {
    use super::*;
    use crate::sink::NoUpdates;

    fn feed(e: &mut Engine, lines: &[String]) {
        let mut feeder = crate::reader::LineFeeder::new();
        for l in lines {
            feeder.feed_line(format!("{l}\n").as_bytes(), e, &mut NoUpdates);
        }
    }

    /// A job of `parts` partitions starting at `t`, each on GPU `p % 2`, 100 ms apart.
    fn job(name: &str, t: u64, parts: u32) -> Vec<String> {
        let mut lines = Vec::new();
        for p in 0..parts {
            let (s, g) = (t + u64::from(p) * 100, p % 2);
            lines.push(format!("TIMELINE,{s},SYNTH_START,{name},partition={p}"));
            lines.push(format!(
                "TIMELINE,{},SYNTH_END,{name},partition={p},synth_ms=40",
                s + 40
            ));
            lines.push(format!(
                "TIMELINE,{},GPU_START,{name},gpu={g},worker={},partition={p}",
                s + 50,
                g * 2
            ));
            lines.push(format!(
                "TIMELINE,{},GPU_END,{name},gpu={g},worker={},partition={p},gpu_ms=30",
                s + 80,
                g * 2
            ));
        }
        lines
    }

    /// A whole-proof job (no partitions) on GPU 0 at `t`.
    fn whole(name: &str, t: u64) -> Vec<String> {
        vec![
            format!("TIMELINE,{t},SYNTH_START,{name}"),
            format!("TIMELINE,{},SYNTH_END,{name},synth_ms=70", t + 70),
            format!("TIMELINE,{},GPU_START,{name},gpu=0,worker=0", t + 90),
            format!(
                "TIMELINE,{},GPU_END,{name},gpu=0,worker=0,gpu_ms=20",
                t + 110
            ),
        ]
    }

    /// The record of `name` in the report, with the fields a recycled table could carry
    /// over (its partitions, their totals, its devices' work).
    fn record(e: &Engine, name: &str) -> (u32, Option<u32>, u64, u64, Option<u64>, bool) {
        let r = e.report();
        let j = r
            .jobs
            .iter()
            .find(|j| &*j.job_id == name)
            .unwrap_or_else(|| panic!("{name} in the report"));
        (
            j.partitions_done,
            j.partitions_expected,
            j.synthesis_total_ms,
            j.gpu_total_ms,
            j.wall_ms,
            j.unobserved_gpu,
        )
    }

    /// A job made after one of 16 partitions on two GPUs was removed takes that job's
    /// tables, emptied: its record is what it is with no job before it.
    #[test]
    fn a_table_handed_on_starts_empty() {
        let cfg = || EngineConfig::default().expected_partitions(Some(16));
        let later = 10 * 60 * 1000;
        let mut after = Engine::new(cfg());
        feed(&mut after, &job("a", 0, 16));
        feed(&mut after, &whole("b", later));
        after.finish(&mut NoUpdates);
        let mut alone = Engine::new(cfg());
        feed(&mut alone, &whole("b", later));
        alone.finish(&mut NoUpdates);
        assert_eq!(record(&after, "a").0, 16);
        assert_eq!(record(&after, "b"), record(&alone, "b"));
        assert_eq!(record(&after, "b").0, 1, "one whole-proof part, not a's 16");
    }

    /// A sink that declines records gets no job or transition update, and the report's
    /// rows are the same; a sink that takes them gets each job's record and each transition.
    #[test]
    fn records_are_built_only_for_a_sink_that_wants_them() {
        struct Declines(Vec<Update>);
        impl UpdateSink for Declines {
            fn update(&mut self, u: Update) {
                self.0.push(u);
            }
            fn wants_records(&self) -> bool {
                false
            }
        }
        let mut lines = job("a", 0, 2);
        lines.extend(job("b", 1000, 2));
        fn run(lines: &[String], sink: &mut impl UpdateSink) -> Engine {
            let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(2)));
            let mut feeder = crate::reader::LineFeeder::new();
            for l in lines {
                feeder.feed_line(format!("{l}\n").as_bytes(), &mut e, sink);
            }
            e.finish(sink);
            e
        }
        let mut declined = Declines(Vec::new());
        let without = run(&lines, &mut declined);
        let mut taken: Vec<Update> = Vec::new();
        let with = run(&lines, &mut taken);
        let is_record = |u: &Update| matches!(u, Update::Job(_) | Update::Transition(_));
        assert!(!declined.0.iter().any(is_record));
        assert!(declined.0.iter().any(|u| matches!(u, Update::Partition(_))));
        let jobs = taken.iter().filter(|u| matches!(u, Update::Job(_))).count();
        let transitions = taken
            .iter()
            .filter(|u| matches!(u, Update::Transition(_)))
            .count();
        assert_eq!((jobs, transitions), (2, 2), "a and b; a to b on each GPU");
        let (rw, rs) = (with.report(), without.report());
        assert_eq!(rw.jobs.len(), 2);
        assert_eq!(rw.transitions.len(), 2);
        assert_eq!(
            serde_json::to_string(&rw).unwrap(),
            serde_json::to_string(&rs).unwrap()
        );
    }

    /// The tables kept are few and of a usual size: one grown by an absurd partition index
    /// goes with its job.
    #[test]
    fn the_tables_kept_are_few_and_small() {
        let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(2)));
        let mut lines = Vec::new();
        for n in 0..200u64 {
            lines.extend(job(&format!("j{n}"), n * 1000, 2));
        }
        // partition 50 000 (under the absurd limit): a table of 50 001 slots
        lines.push("TIMELINE,300000,SYNTH_START,big,partition=50000".to_owned());
        lines.push("TIMELINE,300040,SYNTH_END,big,partition=50000,synth_ms=40".to_owned());
        feed(&mut e, &lines);
        e.finish(&mut NoUpdates);
        assert!(
            !e.spare_tables.is_empty() && e.spare_tables.len() <= SPARE_TABLES,
            "{}",
            e.spare_tables.len()
        );
        for (parts, devs) in &e.spare_tables {
            assert!(parts.is_empty() && devs.is_empty());
            assert!(
                parts.capacity() <= job::PARTITIONS_AT_ONCE,
                "{}",
                parts.capacity()
            );
            assert!(
                devs.capacity() <= job::DEVICES_HANDED_ON,
                "{}",
                devs.capacity()
            );
        }
    }
}

/// [`Engine::into_report`] moves the rows that [`Engine::report`] copies: the same report,
/// rows and all (jobs, transitions, incomplete jobs, the rows past the limit counted).
#[cfg(test)]
mod into_report {
    use super::*;
    use crate::sink::NoUpdates;

    #[test]
    fn the_report_moved_is_the_report_copied() {
        let mut e = Engine::new(
            EngineConfig::default()
                .expected_partitions(Some(1))
                .max_rows(3),
        );
        let mut feeder = crate::reader::LineFeeder::new();
        let mut lines = Vec::new();
        for j in 0..6u64 {
            let t = j * 100;
            lines.push(format!("TIMELINE,{t},SYNTH_START,j{j},partition=0"));
            lines.push(format!(
                "TIMELINE,{},SYNTH_END,j{j},partition=0,synth_ms=10",
                t + 10
            ));
            lines.push(format!(
                "TIMELINE,{},GPU_START,j{j},worker=0,partition=0",
                t + 20
            ));
            if j != 4 {
                lines.push(format!(
                    "TIMELINE,{},GPU_END,j{j},worker=0,partition=0,gpu_ms=5",
                    t + 25
                ));
            }
        }
        for l in &lines {
            feeder.feed_line(format!("{l}\n").as_bytes(), &mut e, &mut NoUpdates);
        }
        e.finish(&mut NoUpdates);
        let copied = e.report();
        assert_eq!(copied.jobs.len(), 3);
        assert!(copied.jobs_omitted > 0 && !copied.transitions.is_empty());
        assert!(!copied.incomplete.is_empty());
        let json = |r: &crate::report::Report| serde_json::to_value(r).unwrap();
        assert_eq!(json(&e.into_report()), json(&copied));
    }
}

/// The engine follows at most [`MAX_GPU`] GPUs: an event whose GPU or worker index is past
/// its limit is rejected and named, a start-up line placing a worker past them is not used
/// (and said so), and the GPUs and events below the limits are kept.
#[cfg(test)]
mod absurd_indexes {
    use super::*;
    use crate::sink::NoUpdates;

    fn analyze(lines: &[String]) -> crate::report::Report {
        let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(1)));
        let mut feeder = crate::reader::LineFeeder::new();
        for l in lines {
            feeder.feed_line(format!("{l}\n").as_bytes(), &mut e, &mut NoUpdates);
        }
        e.finish(&mut NoUpdates);
        e.report()
    }

    /// A one-partition job named `name` at `t` whose GPU lines carry `place`.
    fn job(name: &str, t: u64, place: &str) -> Vec<String> {
        vec![
            format!("TIMELINE,{t},SYNTH_START,{name},partition=0"),
            format!(
                "TIMELINE,{},SYNTH_END,{name},partition=0,synth_ms=10",
                t + 10
            ),
            format!("TIMELINE,{},GPU_START,{name},{place},partition=0", t + 20),
            format!(
                "TIMELINE,{},GPU_END,{name},{place},partition=0,gpu_ms=5",
                t + 25
            ),
        ]
    }

    fn gpus(r: &crate::report::Report) -> Vec<u32> {
        r.gpus.iter().map(|g| g.gpu).collect()
    }

    #[test]
    fn a_gpu_or_worker_past_the_limits_is_rejected_and_named() {
        let mut lines = job("ok-gpu", 0, &format!("gpu={},worker=0", MAX_GPU - 1));
        lines.extend(job("ok-worker", 100, &format!("worker={}", MAX_WORKER - 1)));
        lines.extend(job("far-gpu", 200, &format!("gpu={MAX_GPU},worker=0")));
        lines.extend(job(
            "far-worker",
            300,
            &format!("gpu=0,worker={MAX_WORKER}"),
        ));
        let r = analyze(&lines);
        let wpd = crate::engine::DEFAULT_GPU_WORKERS_PER_DEVICE;
        assert_eq!(gpus(&r), [(MAX_WORKER - 1) / wpd, MAX_GPU - 1]);
        assert_eq!(r.events.rejected, 4, "the two GPU lines of each far job");
        let examples = &r.events.conflict_examples;
        for want in [
            format!("far-gpu: GPU {MAX_GPU} is absurd, event ignored"),
            format!("far-worker: worker {MAX_WORKER} is absurd, event ignored"),
        ] {
            assert!(examples.contains(&want), "{want} in {examples:?}");
        }
        let done: Vec<&str> = r.jobs.iter().map(|j| &*j.job_id).collect();
        assert!(
            done.contains(&"ok-gpu") && done.contains(&"ok-worker"),
            "{done:?}"
        );
        // the first index past its limit is named: partition, worker, GPU
        let r = analyze(&[
            format!(
                "TIMELINE,0,GPU_START,a,gpu={MAX_GPU},worker={MAX_WORKER},partition={MAX_PARTITION}"
            ),
            format!("TIMELINE,0,GPU_START,b,gpu={MAX_GPU},worker={MAX_WORKER},partition=0"),
        ]);
        assert_eq!(
            r.events.conflict_examples,
            [
                format!("a: partition {MAX_PARTITION} is absurd, event ignored"),
                format!("b: worker {MAX_WORKER} is absurd, event ignored"),
            ]
        );
    }

    #[test]
    fn a_start_up_line_placing_a_worker_past_the_limits_is_not_used_and_named() {
        let startup = |worker: u32, gpu: u32| {
            format!(
                "2026-12-01T03:00:00.2Z  INFO cuzk_core::engine: pipeline GPU worker started \
                 worker_id={worker} gpu={gpu} sub_id=0"
            )
        };
        let mut lines = vec![startup(1, 3), startup(2, MAX_GPU), startup(MAX_WORKER, 0)];
        lines.extend(job("placed", 0, "worker=1"));
        lines.extend(job("unplaced", 100, "worker=2"));
        let r = analyze(&lines);
        // worker 1 where the line put it; worker 2 by the default count per device
        let wpd = crate::engine::DEFAULT_GPU_WORKERS_PER_DEVICE;
        assert_eq!(gpus(&r), [2 / wpd, 3]);
        assert_eq!(r.events.rejected, 0);
        assert!(
            r.gpu_mapping.ends_with(", 1 workers placed as logged)"),
            "{}",
            r.gpu_mapping
        );
        let said = |w: u32, g: u32| {
            format!(
                "cuzk's start-up lines put worker {w} on GPU {g}, past the {MAX_WORKER} workers and {MAX_GPU} GPUs followed: not used"
            )
        };
        assert_eq!(
            r.gpu_mapping_disagreements,
            [said(2, MAX_GPU), said(MAX_WORKER, 0)]
        );
    }
}

/// Notes the prefix rules of `cfg` (its `partitions_for` rules, then its `proof_kind_for`
/// ones, as `matched` holds them) that job id `name` starts with.
#[cold]
fn note_rules_of(cfg: &EngineConfig, matched: &mut [bool], name: &str) {
    let prefixes = cfg.partitions_by_prefix.iter().map(|(p, _)| p);
    let prefixes = prefixes.chain(cfg.kinds_by_prefix.iter().map(|(p, _)| p));
    for (matched, prefix) in matched.iter_mut().zip(prefixes) {
        *matched |= name.starts_with(prefix.as_str());
    }
}
