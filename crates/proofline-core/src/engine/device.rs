//! One GPU device: the busy sweep, its idle gaps, and its share of the steady state.
//!
//! The device is busy while at least one of its workers is between GPU_START and GPU_END.
//! Events reach it in time order, so busy time is a sweep over interval edges: a counter of
//! open intervals, a busy segment while it is above zero. Busy time is the union of the
//! intervals, never their sum (the sum is kept beside it as `serial`).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::report::{Boundary, GapCount, IdleGap};
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

/// One GPU device.
#[derive(Debug, Default)]
pub(super) struct Device {
    /// The device index.
    pub gpu: u32,
    /// Workers seen on it, sorted.
    pub workers: Vec<u32>,
    /// GPU intervals open now; the device is busy while this is above 0.
    pub active: u32,
    /// Start of the busy segment in progress (valid while `active > 0`).
    pub seg_start: u64,
    /// Latest end observed inside the segment in progress (where an abandoned interval
    /// closes it).
    pub seg_max_end: u64,
    /// Busy time of every closed segment, all runs (the union).
    pub closed_busy: u64,
    /// Closed segments within the busy history, oldest first.
    pub recent: VecDeque<(u64, u64)>,
    /// Sum of interval lengths (the serial sum): never below the union.
    pub serial: u64,
    /// GPU intervals closed.
    pub intervals: u64,
    /// First GPU_START in this run.
    pub first_start: Option<u64>,
    /// When the last busy segment of this run closed.
    pub last_end: Option<u64>,
    /// When the GPU last went idle, kept across runs and after `finish` (the live idle
    /// gauge counts from it).
    pub idle_since: Option<u64>,
    /// Jobs (uids) whose GPU interval ended at `last_end_any`.
    pub ended: Vec<u64>,
    /// The latest GPU_END instant seen.
    pub last_end_any: u64,
    /// The gap that the last segment start closed, until its jobs are all known.
    pub pending_gap: Option<PendingGap>,
    /// Idle time since the last segment closed during which partitions waited (moves into
    /// `idle_wait` when the next segment starts, dropped at the end of a run).
    pub tent_wait: u64,
    /// Idle time since the last segment closed with an empty queue (likewise).
    pub tent_empty: u64,
    /// Idle time between busy segments with partitions waiting, all runs.
    pub idle_wait: u64,
    /// Idle time between busy segments with an empty queue, all runs.
    pub idle_empty: u64,
    /// Gaps by [`GAP_SIZE_CLASSES`].
    pub gaps_by_size: [GapCount; 3],
    /// Cross-sector gaps.
    pub gaps_cross: GapCount,
    /// Intra-sector gaps.
    pub gaps_intra: GapCount,
    /// First GPU_START to last segment end, summed over finished runs.
    pub elapsed: u64,
    /// Busy time up to the run's first job completion (`None` before it).
    pub steady_first: Option<u64>,
    /// Busy time up to the run's last job completion.
    pub steady_last: u64,
    /// Steady-state busy time of finished runs.
    pub steady_busy: u64,
    /// Steady-state elapsed time of finished runs.
    pub steady_elapsed: u64,
    /// Jobs (indexes into the engine's job table) in the order their GPU work started
    /// here, waiting to be paired into transitions.
    pub chain: VecDeque<usize>,
    /// The last job paired, the `from` side of the next transition.
    pub prev: Option<super::chain::PrevJob>,
}

impl Device {
    pub fn new(gpu: u32) -> Self {
        Device {
            gpu,
            ..Device::default()
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
        if !self.workers.contains(&w) {
            self.workers.push(w);
            self.workers.sort_unstable();
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
                self.pending_gap = Some(PendingGap {
                    start: le,
                    end: t,
                    with_queue: self.tent_wait,
                    ended: self.ended.clone(),
                    starting: vec![uid],
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
    pub fn end(&mut self, t: u64, uid: u64, history_ms: u64, sink: &mut impl UpdateSink) {
        self.note_ended(t, uid);
        self.seg_max_end = self.seg_max_end.max(t);
        self.active -= 1;
        if self.active == 0 {
            self.close_segment(t, history_ms, sink);
        }
    }

    /// Job `uid`'s interval ended at `t` (for telling cross- from intra-sector gaps).
    pub fn note_ended(&mut self, t: u64, uid: u64) {
        if t > self.last_end_any {
            self.last_end_any = t;
            self.ended.clear();
        }
        if !self.ended.contains(&uid) {
            self.ended.push(uid);
        }
    }

    /// The busy segment ends at `t`: the device goes idle.
    pub fn close_segment(&mut self, t: u64, history_ms: u64, sink: &mut impl UpdateSink) {
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
        self.prev = None;
        self.chain.clear();
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
