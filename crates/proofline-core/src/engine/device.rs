//! One GPU device: the busy sweep, its idle gaps, and its share of the steady state.
//!
//! The device is busy while at least one of its workers is between GPU_START and GPU_END.
//! Events reach it in time order, so busy time is a sweep over interval edges: a counter of
//! open intervals, a busy segment while it is above zero. Busy time is the union of the
//! intervals, never their sum (the sum is kept beside it as `serial`).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::report::{Boundary, GapBucket, GapCount, GpuReport, IdleGap};
use crate::sink::GpuLive;
use crate::sink::Update;
use crate::sink::UpdateSink;

/// Idle-gap size classes of the report: the upper bound (exclusive) of each class but the
/// last, in ms, and each class's label.
pub const GAP_SIZE_CLASSES: [(u64, &str); 3] =
    [(50, "<50ms"), (501, "50-500ms"), (u64::MAX, ">500ms")];

/// The class of a gap of `len_ms` in [`GAP_SIZE_CLASSES`].
pub fn gap_size_class(len_ms: u64) -> usize {
    GAP_SIZE_CLASSES
        .iter()
        .position(|&(below, _)| len_ms < below)
        .unwrap_or(GAP_SIZE_CLASSES.len() - 1)
}

/// An idle gap whose end is known but whose jobs are not all known yet: GPU_START events of
/// the same millisecond may still add jobs to `starting`. Finalized before time moves on.
#[derive(Debug)]
pub(super) struct PendingGap {
    /// When the device went idle.
    pub start: u64,
    /// When it went busy again.
    pub end: u64,
    /// Idle time inside the gap during which synthesized partitions waited.
    pub with_queue: u64,
    /// Jobs (uids) whose GPU interval ended at `start`.
    pub ended: Vec<u64>,
    /// Jobs (uids) whose GPU interval started at `end`.
    pub starting: Vec<u64>,
    /// The job whose start ended the gap (for the trace it belongs to).
    pub next_job: Arc<str>,
    /// That job's attempt.
    pub next_attempt: u32,
}

/// The GPU devices seen, in the order of their numbers: a vector searched by number (a
/// prover has a few; the engine looks one up per GPU event and steps through all of them
/// each time its clock moves, where a `BTreeMap`'s walk was a visible share of analyze's
/// engine: this and reusing the idle gaps' buffers took 2 % off its instructions).
#[derive(Debug, Default)]
pub(super) struct Devices(Vec<Device>);

impl Devices {
    /// The device numbered `gpu`.
    #[inline]
    pub fn get_mut(&mut self, gpu: u32) -> Option<&mut Device> {
        match self.0.binary_search_by_key(&gpu, |d| d.gpu) {
            Ok(i) => Some(&mut self.0[i]),
            Err(_) => None,
        }
    }

    /// The device numbered `gpu`, made when it is new.
    #[inline]
    pub fn get_or_insert(&mut self, gpu: u32) -> &mut Device {
        let i = match self.0.binary_search_by_key(&gpu, |d| d.gpu) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, Device::new(gpu));
                i
            }
        };
        &mut self.0[i]
    }

    /// The devices, by number.
    pub fn values(&self) -> std::slice::Iter<'_, Device> {
        self.0.iter()
    }

    /// The devices, by number, to change.
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, Device> {
        self.0.iter_mut()
    }

    /// Devices seen.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// One GPU device.
#[derive(Debug, Default)]
pub(super) struct Device {
    /// The device index.
    gpu: u32,
    /// Workers seen on it, sorted.
    workers: Vec<u32>,
    /// GPU intervals open now; the device is busy while this is above 0.
    active: u32,
    /// Start of the busy segment in progress (valid while `active > 0`).
    seg_start: u64,
    /// Latest end observed inside the segment in progress (where an abandoned interval
    /// closes it).
    seg_max_end: u64,
    /// Latest edge (start or end) observed inside the segment in progress (how long an
    /// abandoned interval counts in the serial sum).
    seg_max_edge: u64,
    /// Busy time of every closed segment, all runs (the union).
    closed_busy: u64,
    /// Closed segments within the busy history, oldest first.
    recent: VecDeque<(u64, u64)>,
    /// Sum of interval lengths (the serial sum): never below the union.
    serial: u64,
    /// GPU intervals closed.
    intervals: u64,
    /// First GPU_START in this run.
    first_start: Option<u64>,
    /// When the last busy segment of this run closed.
    last_end: Option<u64>,
    /// When the GPU last went idle, kept across runs and after `finish` (the live idle
    /// gauge counts from it).
    idle_since: Option<u64>,
    /// Jobs (uids) whose GPU interval ended at `last_end_any`.
    ended: Vec<u64>,
    /// The latest GPU_END instant seen.
    last_end_any: u64,
    /// The gap that the last segment start closed, until its jobs are all known.
    pending_gap: Option<PendingGap>,
    /// The buffers of the last gap finalized (`ended`, `starting`), reused by the next: two
    /// vectors made and freed per gap were a visible share of analyze's time on a log where
    /// a GPU idles between partitions.
    spare: (Vec<u64>, Vec<u64>),
    /// Idle time since the last segment closed during which partitions waited (moves into
    /// `idle_wait` when the next segment starts, dropped at the end of a run).
    tent_wait: u64,
    /// Idle time since the last segment closed with an empty queue (likewise).
    tent_empty: u64,
    /// Idle time between busy segments with partitions waiting, all runs.
    idle_wait: u64,
    /// Idle time between busy segments with an empty queue, all runs.
    idle_empty: u64,
    /// Gaps by [`GAP_SIZE_CLASSES`].
    gaps_by_size: [GapCount; 3],
    /// Cross-sector gaps.
    gaps_cross: GapCount,
    /// Intra-sector gaps.
    gaps_intra: GapCount,
    /// First GPU_START to last segment end, summed over finished runs.
    elapsed: u64,
    /// Busy time up to the run's first job completion (`None` before it).
    steady_first: Option<u64>,
    /// Busy time up to the run's last job completion.
    steady_last: u64,
    /// Steady-state busy time of finished runs.
    steady_busy: u64,
    /// Steady-state elapsed time of finished runs.
    steady_elapsed: u64,
    /// The jobs waiting to be paired into transitions here (chain.rs changes it).
    chain: super::chain::Chain,
    /// Intervals opened here, in the order they opened, numbered from `opened_base`:
    /// (start, job slot, job uid, partition, closed). Closed ones are marked in place by
    /// their number (no search) and dropped when they reach the front
    /// (`Engine::check_stuck`), so that the check touches no job but an old open one's.
    opened: VecDeque<(u64, usize, u64, usize, bool)>,
    /// The number of the front of `opened`.
    opened_base: u64,
    /// The longest interval closed here.
    longest_closed: u64,
    /// Intervals found stuck here.
    stuck: u64,
}

impl Device {
    pub fn new(gpu: u32) -> Self {
        Device {
            gpu,
            ..Device::default()
        }
    }

    /// Whether no GPU interval is open.
    pub fn is_idle(&self) -> bool {
        self.active == 0
    }

    /// Whether the device has been idle at `at` for at least `min_ms` (or was never busy):
    /// a job starting then starts cold.
    pub fn idle_at_least(&self, at: u64, min_ms: u64) -> bool {
        self.is_idle()
            && self
                .idle_since
                .is_none_or(|i| at.saturating_sub(i) >= min_ms)
    }

    /// The transition chain (chain.rs keeps it).
    pub fn chain_mut(&mut self) -> &mut super::chain::Chain {
        &mut self.chain
    }

    /// An interval known whole at once (its GPU_END came before its GPU_START): it adds to
    /// the serial sum, not to busy time (the sweep cannot go back for it).
    pub fn interval_known_whole(&mut self, len: u64) {
        self.serial += len;
        self.intervals += 1;
    }

    /// An interval of job `uid` that opened at `start` closes at `t` (the present), `len`
    /// long by its own offsets. A late GPU_END closes busy time at the present; the same
    /// stretch counts in the serial sum, so that the union never exceeds the sum whatever
    /// the input.
    pub fn close_interval(
        &mut self,
        (start, t, len): (u64, u64, u64),
        uid: u64,
        history_ms: u64,
        sink: &mut impl UpdateSink,
    ) {
        self.serial += t.saturating_sub(start).max(len);
        self.intervals += 1;
        self.longest_closed = self.longest_closed.max(t.saturating_sub(start));
        self.end(t, uid, history_ms, sink);
    }

    /// An interval of partition `pidx` of the job in slot `slot` (`uid`) opened at `t`;
    /// its number here.
    pub fn opened(&mut self, t: u64, slot: usize, uid: u64, pidx: usize) -> u64 {
        self.opened.push_back((t, slot, uid, pidx, false));
        self.opened_base + self.opened.len() as u64 - 1
    }

    /// The device index.
    pub fn gpu(&self) -> u32 {
        self.gpu
    }

    /// Interval number `seq` closed (or was given up on).
    pub fn mark_closed(&mut self, seq: u64) {
        if let Some(e) = seq
            .checked_sub(self.opened_base)
            .and_then(|i| self.opened.get_mut(usize::try_from(i).ok()?))
        {
            e.4 = true;
        }
    }

    /// The oldest interval opened here and not known closed, dropping the closed ones
    /// before it: (start, job slot, job uid, partition).
    pub fn oldest_open(&mut self) -> Option<(u64, usize, u64, usize)> {
        while let Some(&(t, slot, uid, pidx, closed)) = self.opened.front() {
            if !closed {
                return Some((t, slot, uid, pidx));
            }
            self.drop_oldest_opened();
        }
        None
    }

    /// Drops the oldest opened interval (closed since, or found stuck).
    pub fn drop_oldest_opened(&mut self) {
        if self.opened.pop_front().is_some() {
            self.opened_base += 1;
        }
    }

    /// How long an interval may stay open here before it is stuck: the larger of `min_ms`
    /// and `factor` times the longest closed here; `None` when off.
    pub fn stuck_after(&self, min_ms: u64, factor: u32) -> Option<u64> {
        (min_ms > 0).then(|| min_ms.max(self.longest_closed.saturating_mul(u64::from(factor))))
    }

    /// An interval was found stuck (its busy time is closed by `abandon_interval`).
    pub fn count_stuck(&mut self) {
        self.stuck += 1;
    }

    /// An interval of job `uid` opened at `start` will never close (its job was given up
    /// on at `now`): unobserved, not busy past what was observed. It counts in the serial
    /// sum up to the latest edge observed on the device (so that the union, which other
    /// workers may carry on, never exceeds the sum, and the sum holds no time nothing was
    /// seen in: a jump of the offsets made a 2-worker GPU read 47 workers busy). The last
    /// interval of the segment closes it at that edge; the time from there to
    /// `now` is idle time, split by `waiting` (partitions were queued) as any idle time is,
    /// so that the split adds up to the gaps.
    pub fn abandon_interval(
        &mut self,
        start: Option<u64>,
        (now, waiting): (u64, bool),
        uid: u64,
        history_ms: u64,
        sink: &mut impl UpdateSink,
    ) {
        let start = start.unwrap_or(now).max(self.seg_start);
        self.serial += self.seg_max_edge.max(start) - start;
        self.active -= 1;
        if self.active == 0 {
            // the latest instant the device was seen working (an end, or a start after it)
            let end = self.seg_max_edge;
            self.note_ended(end, uid);
            self.close_segment(end, history_ms, sink);
            // a steady-state mark taken after `end` while the interval was open counted it
            // busy up to the mark: the busy time there is now what it was at `end` (a mark
            // before `end` is at most that already), or the steady state read busier than
            // it was long
            let cum = self.closed_busy;
            self.steady_first = self.steady_first.map(|f| f.min(cum));
            self.steady_last = self.steady_last.min(cum);
            self.idle_for(now.saturating_sub(end), waiting);
        }
    }

    /// A job completed at `tc`: the steady state's first (`first`) or last (`last`)
    /// completion moved there.
    pub fn mark_completion(&mut self, tc: u64, first: bool, last: bool) {
        if first {
            self.steady_first = Some(self.cum_busy_at(tc));
        }
        if last {
            self.steady_last = self.cum_busy_at(tc);
        }
    }

    /// The live figures at `now`, the busy ratio over the `window_ms` before it.
    pub fn live(&self, now: u64, window_ms: u64) -> GpuLive {
        let from = now.saturating_sub(window_ms);
        let span = now - from;
        GpuLive {
            gpu: self.gpu,
            busy_ratio: if span == 0 {
                0.0
            } else {
                self.busy_between(from, now) as f64 / span as f64
            },
            idle_ms: if self.active > 0 {
                0
            } else {
                self.idle_since.map_or(0, |l| now.saturating_sub(l))
            },
            busy_ms: self.cum_busy_at(now),
            stuck_intervals: self.stuck,
        }
    }

    /// The device's report, the run in progress included; `steady`: the run's steady
    /// window so far (first and last completion), if it has one.
    pub fn report(&self, steady: Option<(u64, u64)>) -> GpuReport {
        let ratio = super::ratio;
        let elapsed = self.elapsed
            + match (self.first_start, self.last_end) {
                (Some(f), Some(l)) => l.saturating_sub(f),
                _ => 0,
            };
        let (sb, se) = match steady {
            Some((first, last)) => (
                self.steady_busy
                    + self
                        .steady_last
                        .saturating_sub(self.steady_first.unwrap_or(0)),
                self.steady_elapsed + (last - first),
            ),
            None => (self.steady_busy, self.steady_elapsed),
        };
        let busy = self.closed_busy;
        let total = GapCount {
            count: self.gaps_by_size.iter().map(|g| g.count).sum(),
            total_ms: self.gaps_by_size.iter().map(|g| g.total_ms).sum(),
        };
        GpuReport {
            gpu: self.gpu,
            workers: self.workers.clone(),
            intervals: self.intervals,
            busy_ms: busy,
            serial_sum_ms: self.serial,
            concurrency: (busy > 0).then(|| self.serial as f64 / busy as f64),
            elapsed_ms: elapsed,
            busy_ratio: ratio(busy, elapsed),
            steady_busy_ms: sb,
            steady_elapsed_ms: se,
            steady_busy_ratio: ratio(sb, se),
            idle_gaps_by_size: self
                .gaps_by_size
                .iter()
                .zip(GAP_SIZE_CLASSES)
                .map(|(g, (_, l))| GapBucket {
                    label: l.to_owned(),
                    count: g.count,
                    total_ms: g.total_ms,
                })
                .collect(),
            idle_cross_sector: self.gaps_cross.clone(),
            idle_intra_sector: self.gaps_intra.clone(),
            idle_total: total,
            idle_with_queue_ms: self.idle_wait,
            idle_queue_empty_ms: self.idle_empty,
            stuck_intervals: self.stuck,
        }
    }

    /// Busy time from the start of the log up to `t` (valid for `t` within the busy history).
    pub fn cum_busy_at(&self, t: u64) -> u64 {
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
    pub fn busy_between(&self, from: u64, to: u64) -> u64 {
        self.cum_busy_at(to).saturating_sub(self.cum_busy_at(from))
    }

    /// Adds a worker seen on this device.
    pub fn add_worker(&mut self, w: u32) {
        // (searched, not scanned: a GPU may list up to `MAX_WORKER` of them)
        if let Err(at) = self.workers.binary_search(&w) {
            self.workers.insert(at, w);
        }
    }

    /// A GPU interval of job `uid` opens at `t`. Returns whether it ended an idle gap (the
    /// caller finalizes the gap before time moves on).
    pub fn start(
        &mut self,
        t: u64,
        uid: u64,
        job: (Arc<str>, u32),
        sink: &mut impl UpdateSink,
    ) -> bool {
        self.active += 1;
        self.seg_max_edge = self.seg_max_edge.max(t);
        if self.first_start.is_none() {
            self.first_start = Some(t);
        }
        // every job starting the instant a gap ends is among the gap's `starting`, whatever
        // order their GPU_STARTs of that millisecond came in
        if let Some(pg) = &mut self.pending_gap {
            if pg.end == t && !pg.starting.contains(&uid) {
                pg.starting.push(uid);
            }
        }
        if self.active > 1 {
            return false;
        }
        self.seg_start = t;
        self.seg_max_end = t;
        self.seg_max_edge = t;
        sink.update(Update::GpuBusy {
            gpu: self.gpu,
            busy: true,
            t_ms: t,
        });
        if self.pending_gap.is_some() {
            return false;
        }
        let mut opened = false;
        if let Some(le) = self.last_end {
            if t > le {
                let (mut ended, mut starting) = std::mem::take(&mut self.spare);
                ended.clear();
                ended.extend_from_slice(&self.ended);
                starting.clear();
                starting.push(uid);
                self.pending_gap = Some(PendingGap {
                    start: le,
                    end: t,
                    with_queue: self.tent_wait,
                    ended,
                    starting,
                    next_job: job.0,
                    next_attempt: job.1,
                });
                self.idle_wait += self.tent_wait;
                self.idle_empty += self.tent_empty;
                opened = true;
            }
        }
        self.tent_wait = 0;
        self.tent_empty = 0;
        opened
    }

    /// A GPU interval of job `uid` closes at `t`.
    fn end(&mut self, t: u64, uid: u64, history_ms: u64, sink: &mut impl UpdateSink) {
        self.note_ended(t, uid);
        self.seg_max_end = self.seg_max_end.max(t);
        self.seg_max_edge = self.seg_max_edge.max(t);
        self.active -= 1;
        if self.active == 0 {
            self.close_segment(t, history_ms, sink);
        }
    }

    /// Job `uid`'s interval ended at `t` (for telling cross- from intra-sector gaps).
    fn note_ended(&mut self, t: u64, uid: u64) {
        if t > self.last_end_any {
            self.last_end_any = t;
            self.ended.clear();
        }
        if !self.ended.contains(&uid) {
            self.ended.push(uid);
        }
    }

    /// The busy segment ends at `t`: the device goes idle.
    fn close_segment(&mut self, t: u64, history_ms: u64, sink: &mut impl UpdateSink) {
        let t = t.max(self.seg_start);
        self.closed_busy += t - self.seg_start;
        if t > self.seg_start {
            self.recent.push_back((self.seg_start, t));
        }
        let keep_from = t.saturating_sub(history_ms);
        while self.recent.front().is_some_and(|&(_, e)| e < keep_from) {
            self.recent.pop_front();
        }
        self.last_end = Some(t);
        self.idle_since = Some(t);
        sink.update(Update::GpuBusy {
            gpu: self.gpu,
            busy: false,
            t_ms: t,
        });
    }

    /// Idle time `dt` passed; `waiting`: partitions were queued meanwhile.
    pub fn idle_for(&mut self, dt: u64, waiting: bool) {
        if self.active == 0 && self.last_end.is_some() {
            if waiting {
                self.tent_wait += dt;
            } else {
                self.tent_empty += dt;
            }
        }
    }

    /// Counts the pending gap, if any, and returns it as an [`IdleGap`] of run `run`.
    pub fn finalize_gap(&mut self, run: u32) -> Option<IdleGap> {
        let pg = self.pending_gap.take()?;
        let intra = pg.starting.iter().all(|u| pg.ended.contains(u));
        self.spare = (pg.ended, pg.starting);
        let len = pg.end - pg.start;
        let class = &mut self.gaps_by_size[gap_size_class(len)];
        class.count += 1;
        class.total_ms += len;
        let by_boundary = if intra {
            &mut self.gaps_intra
        } else {
            &mut self.gaps_cross
        };
        by_boundary.count += 1;
        by_boundary.total_ms += len;
        Some(IdleGap {
            gpu: self.gpu,
            start_ms: pg.start,
            end_ms: pg.end,
            boundary: if intra {
                Boundary::IntraSector
            } else {
                Boundary::CrossSector
            },
            with_queue_ms: pg.with_queue,
            next_job: pg.next_job,
            next_attempt: pg.next_attempt,
            run,
        })
    }

    /// Folds the run that ended into the device's totals; `steady`: whether the run had a
    /// steady state (at least one completion) and how long it was.
    pub fn end_run(&mut self, steady: Option<u64>) {
        if let (Some(f), Some(l)) = (self.first_start, self.last_end) {
            self.elapsed += l.saturating_sub(f);
        }
        if let Some(span) = steady {
            self.steady_busy += self
                .steady_last
                .saturating_sub(self.steady_first.unwrap_or(0));
            self.steady_elapsed += span;
        }
        self.steady_first = None;
        self.steady_last = 0;
        self.first_start = None;
        self.last_end = None;
        self.ended.clear();
        self.tent_wait = 0;
        self.tent_empty = 0;
        self.chain = super::chain::Chain::default();
    }
}

#[cfg(test)]
mod tests {
    use crate::report::Boundary;
    use crate::sink::Update;
    use crate::{Engine, parse_line};

    /// A GPU event with no worker and no GPU (from a span without them) is rejected and
    /// named, never placed on GPU 0.
    #[test]
    fn a_gpu_event_without_a_worker_is_rejected_not_put_on_gpu_0() {
        let mut engine = Engine::default();
        let mut ev = parse_line("TIMELINE,10,GPU_START,j,worker=0,partition=0")
            .unwrap()
            .unwrap();
        ev.worker = None;
        engine.ingest(&ev, &mut crate::sink::NoUpdates);
        engine.finish(&mut crate::sink::NoUpdates);
        let r = engine.report();
        assert_eq!(r.events.rejected, 1);
        assert!(r.gpus.is_empty(), "{:?}", r.gpus);
        assert!(r.events.conflict_examples[0].contains("without a worker"));
    }

    /// Two jobs start in the same millisecond after a gap that one of them ended: the gap is
    /// cross-sector whichever GPU_START line comes first.
    #[test]
    fn a_gap_is_cross_sector_whatever_the_order_of_same_instant_starts() {
        for order in [["a", "b"], ["b", "a"]] {
            let mut lines = vec![
                "TIMELINE,0,GPU_START,a,worker=0,partition=0".to_owned(),
                "TIMELINE,100,GPU_END,a,worker=0,partition=0,gpu_ms=100".to_owned(),
            ];
            for job in order {
                let w = if job == "a" { 0 } else { 1 };
                lines.push(format!(
                    "TIMELINE,300,GPU_START,{job},worker={w},partition=1"
                ));
            }
            lines.push("TIMELINE,400,GPU_END,a,worker=0,partition=1,gpu_ms=100".into());
            lines.push("TIMELINE,400,GPU_END,b,worker=1,partition=1,gpu_ms=100".into());
            let mut engine = Engine::default();
            let mut updates: Vec<Update> = Vec::new();
            for l in &lines {
                let ev = parse_line(l).unwrap().unwrap();
                engine.ingest(&ev, &mut updates);
            }
            engine.finish(&mut updates);
            let gaps: Vec<Boundary> = updates
                .iter()
                .filter_map(|u| match u {
                    Update::IdleGap(g) => Some(g.boundary),
                    _ => None,
                })
                .collect();
            assert_eq!(gaps, [Boundary::CrossSector], "order {order:?}");
        }
    }
}
