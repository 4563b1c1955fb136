//! What cuzk's `CUZK_TIMING:` lines say about the GPU's own work ([`crate::timing`]), beside
//! the merged TIMELINE intervals: kernel time, the GPU lock held and waited for, and the CPU
//! work on the critical path.
//!
//! **Attribution** (the lines name no GPU): a line belongs to the GPU that alone had an open
//! TIMELINE interval (a GPU_START without its GPU_END) among the lines above it in the log;
//! with no GPU or several open, it is unattributed. A log with one GPU gives it every line.
//! Per-GPU figures are reported only when every kernel line was attributed; otherwise the
//! report gives run-level figures and says so. A call's kernel time (its GPU thread's
//! `ntt_msm_h_ms`, `batch_add_ms`, `tail_msm_ms`) is summed only when its lines come one
//! after the other on one GPU; lines of concurrent calls interleave with nothing to tell them
//! apart, and those calls count in the totals only.

use std::collections::BTreeMap;

use super::Engine;
use crate::dist::Dist;
use crate::report::{GpuKernel, KernelReport};
use crate::timing::{Timing, TimingKey};

/// Unknown keys kept by name.
const MAX_UNKNOWN_KEYS: usize = 16;
/// Open intervals followed per GPU in line order (more: the oldest, whose end never came,
/// is dropped).
const MAX_OPEN_PER_GPU: usize = 64;
/// Partitions holding a call's kernel time until their record is out.
const MAX_PENDING_PARTITIONS: usize = 65_536;
/// GPU threads followed at once (a hostile log cannot grow the map with `gpu_tid`s).
const MAX_OPEN_THREADS: usize = 256;
/// Kernel figures decide the verdict only when the kernel lines cover at least this share
/// of the GPU intervals (a log whose timing lines start half way would read as a lock held).
pub const KERNEL_COVERAGE_MIN: f64 = 0.9;

/// The GPU thread of a call whose lines are still coming: its kernel time so far.
#[derive(Debug, Clone, Copy)]
struct OpenThread {
    kernel: u64,
}

/// What timing lines add up to whatever their place among the TIMELINE lines: the
/// totals a block's reader can add up on its own thread ([`KernelTally::add`]), for the
/// engine to take in whole ([`KernelTotals::absorb`]). (On a log shaped like cuzk's, with
/// more timing lines than TIMELINE lines, these were a tenth of the engine thread's work.)
#[derive(Debug, Default, Clone)]
pub(crate) struct KernelTally {
    /// Timing lines.
    pub lines: u64,
    /// GPU threads (`gpu_total_ms` lines).
    pub threads: u64,
    /// Kernel time, all lines.
    pub kernel_ms: u64,
    /// Lines with kernel time.
    pub kernel_lines: u64,
    /// `mutex_held_ms` per call (its count is the calls'; each `Dist` keeps an exact sum).
    pub lock_held: Dist,
    /// `mutex_wait_ms` per call.
    pub lock_wait: Dist,
    /// `pre_lock_cpu_ms` per call: CPU work between the call's start and its lock request.
    pub pre_lock_cpu: Dist,
    /// `barrier_wait_ms` per GPU thread.
    pub barrier_wait: Dist,
    /// `prep_msm_ms` and `b_g2_msm_ms` per call.
    pub prep_msm: Dist,
    pub b_g2_msm: Dist,
}

/// The values of a timing line that follow a GPU thread's call ([`KernelTotals::pair`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallParts {
    /// The line's kernel time (`ntt_msm_h_ms + batch_add_ms + tail_msm_ms`, those it has).
    pub kernel: Option<u64>,
    pub ntt_msm_h: Option<u64>,
    pub batch_add: Option<u64>,
    pub tail_msm: Option<u64>,
}

impl KernelTally {
    /// Adds up the values of a timing line that is not over [`crate::timing::MAX_TIMING_MS`]
    /// (not counting the line: [`KernelTally::lines`] is the caller's), and gives the
    /// values that follow its call.
    #[inline]
    pub(crate) fn add(&mut self, t: &Timing) -> CallParts {
        // one pass over the line's few values (a look-up of each key the totals know cost
        // more than the line has)
        let (mut parts, mut thread) = (CallParts::default(), false);
        t.for_each(|key, v| {
            let dist = match key {
                TimingKey::NttMsmH | TimingKey::BatchAdd | TimingKey::TailMsm => {
                    let part = match key {
                        TimingKey::NttMsmH => &mut parts.ntt_msm_h,
                        TimingKey::BatchAdd => &mut parts.batch_add,
                        _ => &mut parts.tail_msm,
                    };
                    *part = Some(v);
                    // the kernel time (`Timing::kernel_ms`)
                    parts.kernel = Some(parts.kernel.map_or(v, |k| k.saturating_add(v)));
                    return;
                }
                TimingKey::MutexHeld => &mut self.lock_held,
                TimingKey::MutexWait => &mut self.lock_wait,
                TimingKey::PreLockCpu => &mut self.pre_lock_cpu,
                TimingKey::BarrierWait => &mut self.barrier_wait,
                TimingKey::PrepMsm => &mut self.prep_msm,
                TimingKey::BG2Msm => &mut self.b_g2_msm,
                TimingKey::GpuTotal => {
                    thread = true;
                    return;
                }
                _ => return,
            };
            dist.record(i64::try_from(v).unwrap_or(i64::MAX));
        });
        // a partial line's thread is not a whole one: it does not count in coverage
        if thread && !t.is_partial() {
            self.threads += 1;
        }
        if let Some(k) = parts.kernel {
            self.kernel_lines += 1;
            self.kernel_ms = self.kernel_ms.saturating_add(k);
        }
        parts
    }

    /// Empties the tally for the next block, keeping its memory.
    pub(crate) fn clear(&mut self) {
        (self.lines, self.threads, self.kernel_ms, self.kernel_lines) = (0, 0, 0, 0);
        for d in self.dists_mut() {
            d.clear();
        }
    }

    /// Adds what another tally holds (a block's) to this one.
    fn absorb(&mut self, o: &KernelTally) {
        self.lines += o.lines;
        self.threads += o.threads;
        self.kernel_ms = self.kernel_ms.saturating_add(o.kernel_ms);
        self.kernel_lines += o.kernel_lines;
        for (d, od) in self.dists_mut().into_iter().zip(o.dists()) {
            d.absorb(od);
        }
    }

    /// The distributions, in one order.
    fn dists(&self) -> [&Dist; 6] {
        [
            &self.lock_held,
            &self.lock_wait,
            &self.pre_lock_cpu,
            &self.barrier_wait,
            &self.prep_msm,
            &self.b_g2_msm,
        ]
    }

    /// [`KernelTally::dists`], to change.
    fn dists_mut(&mut self) -> [&mut Dist; 6] {
        [
            &mut self.lock_held,
            &mut self.lock_wait,
            &mut self.pre_lock_cpu,
            &mut self.barrier_wait,
            &mut self.prep_msm,
            &mut self.b_g2_msm,
        ]
    }
}

/// A timing line of cuzk's usual form that has kernel time, as a block's reader hands it
/// to the engine: what follows its call ([`CallParts`]), 24 bytes where the line is 56. (Its
/// other values the reader adds up itself, [`KernelTally`]; a line with no kernel time is
/// not handed over at all: nothing of it depends on its place.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallLine {
    gpu_tid: Option<u32>,
    /// The values, [`CallLine::NONE`] where the line has none (each is at most
    /// [`crate::timing::MAX_TIMING_MS`], the kernel time three of them).
    kernel: u32,
    ntt_msm_h: u32,
    batch_add: u32,
    tail_msm: u32,
}

impl CallLine {
    const NONE: u32 = u32::MAX;

    /// The line of a timing with these parts; `None` when it has no kernel time, or a value
    /// past `u32`, which no line of values of at most [`crate::timing::MAX_TIMING_MS`] has
    /// (a line over it the engine takes whole).
    #[inline]
    pub(crate) fn new(gpu_tid: Option<u32>, parts: CallParts) -> Option<CallLine> {
        let v = |x: Option<u64>| match x {
            None => Some(Self::NONE),
            Some(v) => u32::try_from(v).ok().filter(|&v| v != Self::NONE),
        };
        parts.kernel?;
        Some(CallLine {
            gpu_tid,
            kernel: v(parts.kernel)?,
            ntt_msm_h: v(parts.ntt_msm_h)?,
            batch_add: v(parts.batch_add)?,
            tail_msm: v(parts.tail_msm)?,
        })
    }

    /// Its parts.
    #[inline]
    fn parts(&self) -> CallParts {
        let v = |x: u32| (x != Self::NONE).then_some(u64::from(x));
        CallParts {
            kernel: v(self.kernel),
            ntt_msm_h: v(self.ntt_msm_h),
            batch_add: v(self.batch_add),
            tail_msm: v(self.tail_msm),
        }
    }
}

/// Totals over every timing line.
#[derive(Debug, Default)]
pub(super) struct KernelTotals {
    /// What the lines add up to whatever their order.
    pub tally: KernelTally,
    /// `CUZK_TIMING:` lines that are no timing.
    pub notes: u64,
    /// Unknown keys (the first few by name) and how often each came.
    pub unknown: BTreeMap<String, u64>,
    /// Kernel time by attributed GPU.
    pub kernel_by_gpu: BTreeMap<u32, u64>,
    /// Lines with kernel time that no GPU could be given.
    pub unattributed: u64,
    /// Kernel time per call, where its lines came one after the other.
    pub per_call: Dist,
    /// Calls whose lines interleaved with another's (counted in the totals only).
    pub interleaved: u64,
    /// The GPU thread in progress, by (GPU, thread index).
    open: BTreeMap<(u32, u32), OpenThread>,
    /// Timing lines ignored for a value over [`crate::timing::MAX_TIMING_MS`], and the first.
    pub absurd: u64,
    pub absurd_example: Option<String>,
    /// `CUZK_NTT_H:` lines.
    pub ntt_h_lines: u64,
    /// Their stages, in the order first printed, each a distribution of its milliseconds.
    pub ntt_h: Vec<(String, Dist)>,
}

/// `CUZK_NTT_H:` stages kept at most (a hostile log cannot grow the table).
const MAX_NTT_H_KEYS: usize = 16;

impl KernelTotals {
    /// Takes in one timing line, given to `gpu` (or to none); returns the kernel time of
    /// the call it completes, when its lines were followed on one GPU.
    pub fn add(&mut self, t: &Timing, gpu: Option<u32>) -> Option<u64> {
        self.tally.lines += 1;
        if let Some((key, v)) = t.over_max() {
            self.absurd += 1;
            if self.absurd_example.is_none() {
                self.absurd_example = Some(format!(
                    "{}={v} (over an hour for one GPU call) in a line {}",
                    key.name(),
                    t.gpu_tid
                        .map_or_else(|| "of no gpu_tid".to_owned(), |g| format!("of gpu_tid {g}"))
                ));
            }
            // the GPU thread it belongs to loses a part: its call is not followed further
            // (its kernel time would be short, and the thread's next call read as interleaved)
            if let (Some(tid), Some(g)) = (t.gpu_tid, gpu) {
                self.open.remove(&(g, tid));
            }
            return None;
        }
        for (k, _) in t.unknown() {
            if let Some(n) = self.unknown.get_mut(k) {
                *n += 1;
            } else if self.unknown.len() < MAX_UNKNOWN_KEYS {
                self.unknown.insert(k.clone(), 1);
            }
        }
        let parts = self.tally.add(t);
        self.follow(t.gpu_tid, parts, gpu)
    }

    /// Takes in the values of a timing line that follow its call (the rest of the line
    /// added up already), given to `gpu` (or to none); returns the kernel time of the call it
    /// completes, as [`KernelTotals::add`].
    #[inline]
    pub(super) fn follow(
        &mut self,
        gpu_tid: Option<u32>,
        parts: CallParts,
        gpu: Option<u32>,
    ) -> Option<u64> {
        if let Some(k) = parts.kernel {
            match gpu {
                Some(g) => {
                    let e = self.kernel_by_gpu.entry(g).or_default();
                    *e = e.saturating_add(k);
                }
                None => self.unattributed += 1,
            }
        }
        self.pair(gpu_tid, parts, gpu)
    }

    /// Takes in what a block's lines added up to ([`KernelTally`]).
    pub(super) fn absorb(&mut self, o: &KernelTally) {
        self.tally.absorb(o);
    }

    /// Follows a GPU thread's lines (ntt_msm_h first, tail_msm last) to its call's kernel
    /// time, when they come one after the other on one GPU.
    fn pair(&mut self, gpu_tid: Option<u32>, parts: CallParts, gpu: Option<u32>) -> Option<u64> {
        let (Some(tid), Some(g)) = (gpu_tid, gpu) else {
            return None;
        };
        let key = (g, tid);
        if let Some(ntt) = parts.ntt_msm_h {
            if self.open.len() >= MAX_OPEN_THREADS && !self.open.contains_key(&key) {
                // threads that never finished (or a log inventing thread indexes)
                self.interleaved += self.open.len() as u64;
                self.open.clear();
            }
            // a thread starts; one still open was interleaved with it
            if self.open.insert(key, OpenThread { kernel: ntt }).is_some() {
                self.interleaved += 1;
            }
            return None;
        }
        let open = self.open.get_mut(&key)?;
        if let Some(v) = parts.batch_add {
            open.kernel = open.kernel.saturating_add(v);
        }
        let v = parts.tail_msm?;
        let kernel = open.kernel.saturating_add(v);
        self.open.remove(&key);
        self.per_call
            .record(i64::try_from(kernel).unwrap_or(i64::MAX));
        Some(kernel)
    }

    /// Takes in one `CUZK_NTT_H:` line.
    pub fn add_ntt_h(&mut self, n: &crate::timing::NttH) {
        self.ntt_h_lines += 1;
        for (key, ms) in &n.stages {
            let v = i64::try_from(*ms).unwrap_or(i64::MAX);
            if let Some((_, d)) = self.ntt_h.iter_mut().find(|(k, _)| k == key) {
                d.record(v);
            } else if self.ntt_h.len() < MAX_NTT_H_KEYS {
                let mut d = Dist::default();
                d.record(v);
                self.ntt_h.push((key.clone(), d));
            }
        }
    }

    /// The totals so far, for live counters.
    pub fn live(&self) -> crate::sink::KernelLive {
        crate::sink::KernelLive {
            calls: self.tally.lock_held.count(),
            kernel_ms: self.tally.kernel_ms,
            lock_held_ms: total(&self.tally.lock_held),
            lock_wait_ms: total(&self.tally.lock_wait),
            prep_msm_ms: total(&self.tally.prep_msm),
            b_g2_msm_ms: total(&self.tally.b_g2_msm),
        }
    }

    /// The report's part, given each GPU's elapsed and busy time and closed intervals
    /// (`(gpu, elapsed_ms, busy_ms, intervals)`).
    pub fn report(&self, gpus: &[(u32, u64, u64, u64)]) -> KernelReport {
        let elapsed: u64 = gpus.iter().map(|g| g.1).sum();
        let busy: u64 = gpus.iter().map(|g| g.2).sum();
        let intervals: u64 = gpus.iter().map(|g| g.3).sum();
        let ratio = super::ratio;
        // one GPU in the log: every line is its own
        let by_gpu: BTreeMap<u32, u64> = if gpus.len() == 1 {
            BTreeMap::from([(gpus[0].0, self.tally.kernel_ms)])
        } else {
            self.kernel_by_gpu.clone()
        };
        let attributed = gpus.len() == 1 || self.unattributed == 0;
        let attribution = if gpus.len() == 1 {
            "one GPU in the log: every line is its own".to_owned()
        } else if self.tally.kernel_lines == 0 {
            "no kernel line".to_owned()
        } else if attributed {
            format!(
                "each of the {} kernel lines came while one GPU alone had an open interval",
                self.tally.kernel_lines
            )
        } else {
            format!(
                "run-level figures only: {} of {} kernel lines came while no GPU or several had an open interval, and the lines name no GPU",
                self.unattributed, self.tally.kernel_lines
            )
        };
        let per_gpu = if attributed {
            gpus.iter()
                .map(|&(gpu, el, bu, _)| {
                    let k = by_gpu.get(&gpu).copied().unwrap_or(0);
                    GpuKernel {
                        gpu,
                        kernel_ms: k,
                        kernel_utilisation: ratio(k, el),
                        busy_ratio: ratio(bu, el),
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        KernelReport {
            timing_lines: self.tally.lines,
            other_lines: self.notes,
            absurd_lines: self.absurd,
            absurd_example: self.absurd_example.clone(),
            unknown_keys: self.unknown.keys().cloned().collect(),
            calls: self.tally.lock_held.count(),
            gpu_threads: self.tally.threads,
            kernel_ms: self.tally.kernel_ms,
            kernel_per_call: self.per_call.summary(),
            calls_interleaved: self.interleaved,
            kernel_utilisation: ratio(self.tally.kernel_ms, elapsed),
            busy_ratio: ratio(busy, elapsed),
            kernel_fill: ratio(self.tally.kernel_ms, busy),
            coverage: ratio(self.tally.threads, intervals),
            lock_held_ms: total(&self.tally.lock_held),
            lock_held_not_kernel_ms: total(&self.tally.lock_held)
                .saturating_sub(self.tally.kernel_ms),
            lock_held: self.tally.lock_held.summary(),
            lock_wait: self.tally.lock_wait.summary(),
            pre_lock_cpu: self.tally.pre_lock_cpu.summary(),
            barrier_wait: self.tally.barrier_wait.summary(),
            prep_msm: self.tally.prep_msm.summary(),
            b_g2_msm: self.tally.b_g2_msm.summary(),
            attributed,
            attribution,
            gpus: per_gpu,
            ntt_h_lines: self.ntt_h_lines,
            ntt_h: self
                .ntt_h
                .iter()
                .map(|(key, d)| crate::report::NttHStage {
                    key: key.clone(),
                    ms: d.summary(),
                })
                .collect(),
        }
    }
}

/// A distribution's exact sum, as milliseconds (saturating).
fn total(d: &Dist) -> u64 {
    u64::try_from(d.sum().max(0)).unwrap_or(u64::MAX)
}

/// A job id as the attribution tables hold it: its hash (no allocation on the ingest path,
/// which follows every GPU_START and GPU_END; two ids of one hash in flight at once would
/// only merge their partitions' kernel time).
pub(super) fn job_key(job: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    job.hash(&mut h);
    h.finish()
}

/// A partition in the attribution tables: its job's key and its index.
pub(super) type PartKey = (u64, u32);

/// The GPUs' intervals open in the order lines were given: per GPU, its open
/// `(job, partition)` keys. A GPU's calls open and close all the time: its list is kept when
/// it empties (a map entry removed and a list freed at each, and made again at the next
/// call, were most of this bookkeeping's cost), and the GPUs with one open are counted, with
/// the sum of their numbers, which is the GPU's own when one alone has any open.
///
/// The lists of GPUs numbered below [`DENSE_GPUS`] (a prover's own: 0 to 7) are found by
/// their number, those of any other in a map: every GPU_START and GPU_END passes here, in
/// logs with timing lines and without, and a hash look-up and a `Vec::remove`'s call to
/// `memmove` were most of the ~96 instructions an edge cost.
#[derive(Debug, Default)]
pub(super) struct LineOpen {
    /// The lists of GPUs 0 to [`DENSE_GPUS`] - 1, by number (as far as the highest seen).
    dense: Vec<Vec<PartKey>>,
    /// The lists of the others.
    sparse: rustc_hash::FxHashMap<u32, Vec<PartKey>>,
    /// GPUs with an interval open.
    busy: usize,
    /// The sum of their numbers.
    busy_sum: u64,
}

/// GPUs numbered below this have their list at their number.
const DENSE_GPUS: u32 = 64;

/// Empty lists kept at most beyond twice the busy GPUs' in the map of GPUs numbered
/// [`DENSE_GPUS`] and over (a log naming ever new GPUs cannot grow it: the empty ones go when
/// there are more); the dense lists are at most [`DENSE_GPUS`].
const IDLE_LISTS: usize = 64;

impl LineOpen {
    /// The one GPU with intervals open, and their keys in line order; `None` when no GPU or
    /// several have one.
    pub fn only(&self) -> Option<(u32, &[PartKey])> {
        if self.busy != 1 {
            return None;
        }
        let gpu = u32::try_from(self.busy_sum).ok()?;
        Some((gpu, self.list(gpu)?.as_slice()))
    }

    /// GPUs with an interval open.
    #[cfg(test)]
    pub fn busy(&self) -> usize {
        self.busy
    }

    /// `gpu`'s list, if it has one.
    fn list(&self, gpu: u32) -> Option<&Vec<PartKey>> {
        if gpu < DENSE_GPUS {
            self.dense.get(gpu as usize)
        } else {
            self.sparse.get(&gpu)
        }
    }

    /// `gpu`'s list, to change, if it has one.
    fn list_mut(&mut self, gpu: u32) -> Option<&mut Vec<PartKey>> {
        if gpu < DENSE_GPUS {
            self.dense.get_mut(gpu as usize)
        } else {
            self.sparse.get_mut(&gpu)
        }
    }

    /// `gpu`'s list, made when it has none.
    #[inline]
    fn list_or_new(&mut self, gpu: u32) -> &mut Vec<PartKey> {
        if gpu < DENSE_GPUS {
            let at = gpu as usize;
            if at >= self.dense.len() {
                self.dense.resize_with(at + 1, Vec::new);
            }
            return &mut self.dense[at];
        }
        if self.sparse.len() >= 2 * self.busy + IDLE_LISTS && !self.sparse.contains_key(&gpu) {
            self.sparse.retain(|_, open| !open.is_empty());
        }
        self.sparse.entry(gpu).or_default()
    }

    /// `key` opened on `gpu`.
    #[inline]
    pub fn open(&mut self, gpu: u32, key: PartKey) {
        let open = self.list_or_new(gpu);
        let was_empty = open.is_empty();
        // an interval whose end never came (a panicked call) goes first
        if open.len() >= MAX_OPEN_PER_GPU {
            open.remove(0);
        }
        open.push(key);
        if was_empty {
            self.busy += 1;
            self.busy_sum += u64::from(gpu);
        }
    }

    /// `key` closed on `gpu` (nothing when it was not open there).
    #[inline]
    pub fn close(&mut self, gpu: u32, key: PartKey) {
        let Some(open) = self.list_mut(gpu) else {
            return;
        };
        let Some(i) = open.iter().position(|k| *k == key) else {
            return;
        };
        // (the usual close is of the one open)
        if i + 1 == open.len() {
            open.pop();
        } else {
            open.remove(i);
        }
        if open.is_empty() {
            self.busy -= 1;
            self.busy_sum -= u64::from(gpu);
        }
    }

    /// Forgets the open intervals of job `job` on every GPU.
    pub fn forget(&mut self, job: u64) {
        let dense = self.dense.iter_mut().zip(0..);
        let sparse = self.sparse.iter_mut().map(|(&gpu, open)| (open, gpu));
        for (open, gpu) in dense.chain(sparse) {
            if open.is_empty() {
                continue;
            }
            open.retain(|(j, _)| *j != job);
            if open.is_empty() {
                self.busy -= 1;
                self.busy_sum -= u64::from(gpu);
            }
        }
    }
}

impl Engine {
    /// Takes in one `CUZK_TIMING:` line's values, at its place in the log: it belongs to the
    /// GPU that alone has an open interval among the lines given so far (see the module
    /// docs). Timing lines do not move the engine's clock.
    pub fn ingest_timing(&mut self, t: &Timing) {
        self.attribute_call(|kernel, gpu| kernel.add(t, gpu));
    }

    /// Takes in a timing line of cuzk's usual form as a block's reader handed it over: its
    /// values added up there ([`KernelTotals::absorb`]), what follows its call here, in its
    /// place among the TIMELINE lines.
    #[inline]
    pub(crate) fn ingest_call_line(&mut self, c: &CallLine) {
        self.attribute_call(|kernel, gpu| kernel.follow(c.gpu_tid, c.parts(), gpu));
    }

    /// Takes in what a block's timing lines of cuzk's usual form added up to.
    pub(crate) fn absorb_tally(&mut self, t: &KernelTally) {
        self.kernel.absorb(t);
    }

    /// Gives a timing line to the GPU that alone has an interval open (or to none), through
    /// `follow`; a call it completes gives that interval's partition its kernel time.
    #[inline(always)]
    fn attribute_call(
        &mut self,
        follow: impl FnOnce(&mut KernelTotals, Option<u32>) -> Option<u64>,
    ) {
        // (with two GPUs or more open, as is usual on a busy prover, no list is looked at)
        let (gpu, only) = self
            .line_open
            .only()
            .map_or((None, &[][..]), |(g, v)| (Some(g), v));
        let call = follow(&mut self.kernel, gpu);
        // a call whose GPU had one interval open: that partition's kernel time
        if let (Some(kernel), [key]) = (call, only) {
            if self.part_kernel.len() < MAX_PENDING_PARTITIONS {
                let k = self.part_kernel.entry(*key).or_default();
                *k = k.saturating_add(kernel);
            }
        }
    }

    /// The kernel time given to a partition, if a call was.
    pub(super) fn partition_kernel(&self, job: &str, part: u32) -> Option<u64> {
        if self.part_kernel.is_empty() {
            return None;
        }
        self.part_kernel.get(&(job_key(job), part)).copied()
    }

    /// Takes in a `CUZK_TIMING:` line as [`crate::timing::parse_timing`] gave it.
    pub fn ingest_timing_line(&mut self, t: &crate::timing::TimingLine) {
        match t {
            crate::timing::TimingLine::Timing(t) => self.ingest_timing(t),
            crate::timing::TimingLine::Note => self.ingest_timing_note(),
            crate::timing::TimingLine::NttH(n) => self.kernel.add_ntt_h(n),
            crate::timing::TimingLine::WorkerMap(m) => self.learn_worker_map(*m),
        }
    }

    /// Counts a `CUZK_TIMING:` line that is no timing.
    pub fn ingest_timing_note(&mut self) {
        self.kernel.notes += 1;
    }

    /// Forgets the open intervals of a job given up on (their GPU_END will not come).
    pub(super) fn forget_open_intervals(&mut self, key: u64) {
        self.line_open.forget(key);
    }

    /// Follows the GPUs' open intervals in the order lines are given (for attribution).
    /// `job` is the event's [`job_key`], taken when its id was interned. Every event
    /// passes here: inlined, the others cost a look at their kind (a call each was 1 % of
    /// the engine's thread).
    #[inline]
    pub(super) fn track_line_order(&mut self, ev: &crate::event::Nums, job: u64) {
        use crate::event::EventKind;
        if matches!(ev.kind, EventKind::GpuStart | EventKind::GpuEnd) {
            self.track_gpu_edge(ev, job);
        }
    }

    /// [`Engine::track_line_order`] of a GPU_START or GPU_END.
    fn track_gpu_edge(&mut self, ev: &crate::event::Nums, job: u64) {
        use crate::event::EventKind;
        let gpu = match (ev.gpu(), ev.worker()) {
            (Some(g), _) => g,
            (None, Some(w)) => self.gpu_of_worker(w),
            (None, None) => return,
        };
        let key = (job, ev.partition().unwrap_or(0));
        match ev.kind {
            EventKind::GpuStart => self.line_open.open(gpu, key),
            EventKind::GpuEnd => self.line_open.close(gpu, key),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::codec::parse_line;

    /// A call line handed between the threads is the 24 bytes its docs say.
    #[test]
    fn a_call_line_is_24_bytes() {
        assert_eq!(std::mem::size_of::<super::CallLine>(), 24);
    }

    use crate::engine::Engine;
    use crate::sink::NoUpdates;
    use crate::timing::parse_timing;

    fn line(e: &mut Engine, l: &str) {
        match parse_line(l) {
            Ok(Some(ev)) => e.ingest(&ev, &mut NoUpdates),
            _ => e.ingest_timing_line(&parse_timing(l).unwrap().unwrap()),
        }
    }

    /// A line with a value over an hour inside a followed call drops the call: no short kernel
    /// time for it or its partition, and the thread's next call is not read as interleaved.
    /// An hour itself is no absurd value.
    #[test]
    fn a_line_over_an_hour_inside_a_call_drops_the_call() {
        // (the call's batch_add and tail lines; per_call count, the partition's kernel time)
        for (batch_add, tail, calls, part) in [
            ("batch_add_ms=3600000", "tail_msm_ms=5", 2, 3_600_023),
            ("batch_add_ms=3600001", "tail_msm_ms=5", 1, 8),
            ("batch_add_ms=3", "tail_msm_ms=3600001", 1, 8),
        ] {
            let mut e = Engine::default();
            for l in [
                "TIMELINE,0,GPU_START,j,gpu=0,partition=0".to_owned(),
                "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=10".to_owned(),
                format!("CUZK_TIMING: gpu_tid=0 {batch_add}"),
                format!("CUZK_TIMING: gpu_tid=0 {tail}"),
                "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=7".to_owned(),
                "CUZK_TIMING: gpu_tid=0 tail_msm_ms=1".to_owned(),
                "TIMELINE,20,GPU_END,j,gpu=0,partition=0".to_owned(),
            ] {
                line(&mut e, &l);
            }
            let k = &e.kernel;
            let case = format!("{batch_add} {tail}");
            assert_eq!(k.interleaved, 0, "{case}");
            assert_eq!(k.per_call.count(), calls, "{case}");
            assert_eq!(e.partition_kernel("j", 0), Some(part), "{case}");
            assert_eq!(k.absurd, 2 - calls, "{case}");
            if calls == 1 {
                let ex = k.absurd_example.as_deref().unwrap();
                assert!(
                    ex.contains("=3600001 (over an hour") && ex.ends_with("of gpu_tid 0"),
                    "{ex}"
                );
            }
        }
    }

    /// A line goes to the one GPU with an interval open, whatever the number of GPUs and
    /// however many were open before.
    #[test]
    fn lines_go_to_the_one_gpu_open_among_many() {
        let mut e = Engine::default();
        let n = 276;
        for g in 0..n {
            line(
                &mut e,
                &format!("TIMELINE,{g},GPU_START,j{g},gpu={g},partition=0"),
            );
        }
        let kernel = "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=10";
        line(&mut e, kernel);
        assert_eq!(e.kernel.unattributed, 1, "several open: nobody's");
        for g in (0..n).filter(|&g| g != 5) {
            line(
                &mut e,
                &format!("TIMELINE,{},GPU_END,j{g},gpu={g},partition=0", n + g),
            );
        }
        line(&mut e, kernel);
        assert_eq!(
            e.kernel.kernel_by_gpu.get(&5),
            Some(&10),
            "GPU 5 alone open"
        );
        line(
            &mut e,
            &format!("TIMELINE,{},GPU_END,j5,gpu=5,partition=0", 3 * n),
        );
        // a GPU not seen before, open alone, takes the next line
        let late = n + 7;
        line(
            &mut e,
            &format!("TIMELINE,{},GPU_START,k,gpu={late},partition=0", 3 * n + 1),
        );
        line(&mut e, kernel);
        assert_eq!(e.kernel.kernel_by_gpu.get(&late), Some(&10));
        assert_eq!(e.kernel.unattributed, 1);
        // two left open, however far apart their GPUs: nobody's
        line(
            &mut e,
            &format!("TIMELINE,{},GPU_START,k,gpu=900,partition=1", 3 * n + 2),
        );
        line(&mut e, kernel);
        assert_eq!(e.kernel.unattributed, 2);
        assert_eq!(e.line_open.busy(), 2);
    }

    /// GPUs named one after the other, each opening and closing a call, keep few lists, and
    /// the count of GPUs open stays right through a job given up on.
    #[test]
    fn the_open_lists_stay_few_whatever_gpus_a_log_names() {
        use super::LineOpen;
        let mut open = LineOpen::default();
        for g in 0..100_000u32 {
            open.open(g, (1, 0));
            assert_eq!(open.only(), Some((g, &[(1, 0)][..])));
            open.close(g, (1, 0));
            assert_eq!(open.only(), None);
        }
        assert!(
            open.sparse.len() <= super::IDLE_LISTS + 1,
            "{}",
            open.sparse.len()
        );
        assert_eq!(open.dense.len(), super::DENSE_GPUS as usize);
        open.open(7, (1, 0));
        open.open(7, (2, 0));
        open.open(9, (2, 1));
        assert_eq!((open.busy(), open.only()), (2, None));
        open.forget(2);
        assert_eq!(open.busy(), 1);
        assert_eq!(open.only(), Some((7, &[(1, 0)][..])));
        open.close(7, (3, 0)); // not open there: nothing
        open.close(7, (1, 0));
        assert_eq!((open.busy(), open.only()), (0, None));
        // the first of two closed (not the last opened), on a GPU numbered past the dense
        // lists and on one within them
        for g in [5, 900] {
            open.open(g, (1, 0));
            open.open(g, (2, 0));
            open.close(g, (1, 0));
            assert_eq!(open.only(), Some((g, &[(2, 0)][..])), "gpu {g}");
            open.close(g, (2, 0));
            assert_eq!((open.busy(), open.only()), (0, None), "gpu {g}");
        }
        // one open on each kind of list: forgetting their job empties both
        open.open(900, (4, 0));
        assert_eq!(open.only(), Some((900, &[(4, 0)][..])));
        open.open(3, (4, 1));
        assert_eq!((open.busy(), open.only()), (2, None));
        open.forget(4);
        assert_eq!((open.busy(), open.only()), (0, None));
        // calls whose end never came: the oldest goes past MAX_OPEN_PER_GPU, and the GPU
        // stays the one busy
        for g in [3, 900] {
            for k in 0..=super::MAX_OPEN_PER_GPU as u64 {
                open.open(g, (10 + k, 0));
            }
            let (gpu, keys) = open.only().expect("one GPU busy");
            assert_eq!((gpu, keys.len()), (g, super::MAX_OPEN_PER_GPU), "gpu {g}");
            assert_eq!(keys[0], (11, 0), "the first opened went, gpu {g}");
            for k in 0..=super::MAX_OPEN_PER_GPU as u64 {
                open.close(g, (10 + k, 0));
            }
            assert_eq!((open.busy(), open.only()), (0, None), "gpu {g}");
        }
    }
}
