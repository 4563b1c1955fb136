//! The pipeline model: a discrete-event replay of a [`Workload`] through cuzk's structure,
//! writing the TIMELINE events such a run would print.
//!
//! ```text
//!  jobs (dispatch order) ─► synthesis pool (N workers) ─► GPU queue (dispatch or FIFO order)
//!     ─► GPU workers (W per device): prep (CPU) ─► the device's lock (kernels) ─► release:
//!        the worker takes its next partition; a finalizer prints GPU_END after `finalize`
//! ```
//!
//! Every duration is the measured one of that partition (its synthesis, its lock time),
//! scaled by the change asked for; nothing is drawn at random.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::event::{Event, EventKind, TimelineEvent};

use super::learn::Workload;

/// How the GPU queue hands out partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueOrder {
    /// The lowest job in dispatch order first, then the lowest partition (cuzk's).
    Dispatch,
    /// In the order partitions were queued.
    Fifo,
}

/// The pipeline's shape and speeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pipeline {
    /// Synthesis workers (partitions synthesized at once).
    pub synthesis_workers: u32,
    /// GPU devices.
    pub gpus: u32,
    /// GPU workers per device, sharing its lock.
    pub gpu_workers_per_device: u32,
    /// GPU work (the lock's held time less the CPU work inside it) runs this much faster.
    pub gpu_speed: f64,
    /// Synthesis runs this much faster.
    pub synthesis_speed: f64,
    /// The GPU queue's order.
    pub queue_order: QueueOrder,
    /// Partitions synthesizing or waiting for a GPU at most (a memory budget); `None`: none.
    pub max_ahead: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    /// A synthesis ends: (unit, SYNTH_START time).
    SynthDone(usize, u64),
    /// A GPU worker asks for its device's lock: (worker, unit, GPU_START time).
    LockRequest(u32, usize, u64),
    /// The lock is released: (worker, unit, GPU_START time).
    Release(u32, usize, u64),
}

/// Milliseconds as the integer the TIMELINE carries (at least 0).
fn ms(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

/// Runs `w` through `p`; returns the TIMELINE events in time order.
pub fn simulate(w: &Workload, p: &Pipeline) -> Vec<Event> {
    Sim::new(w, p).run()
}

struct Sim<'a> {
    w: &'a Workload,
    p: &'a Pipeline,
    /// (job, partition slot) of each unit, in dispatch order.
    units: Vec<(usize, usize)>,
    actions: BinaryHeap<Reverse<(u64, u64, Action)>>,
    seq: u64,
    next: usize,
    synth_free: u32,
    synthesizing: u32,
    /// Waiting for a GPU: by dispatch rank or by queueing order.
    queue: BTreeMap<(u64, usize), usize>,
    idle_workers: VecDeque<u32>,
    lock_busy: Vec<bool>,
    lock_waiters: Vec<VecDeque<(u32, usize, u64)>>,
    out: Vec<(u64, u64, Event)>,
}

impl<'a> Sim<'a> {
    fn new(w: &'a Workload, p: &'a Pipeline) -> Self {
        let units = w
            .jobs
            .iter()
            .enumerate()
            .flat_map(|(ji, j)| (0..j.units.len()).map(move |pi| (ji, pi)))
            .collect();
        let gpus = p.gpus.max(1);
        let workers = gpus * p.gpu_workers_per_device.max(1);
        Sim {
            w,
            p,
            units,
            actions: BinaryHeap::new(),
            seq: 0,
            next: 0,
            synth_free: p.synthesis_workers.max(1),
            synthesizing: 0,
            queue: BTreeMap::new(),
            idle_workers: (0..workers).collect(),
            lock_busy: vec![false; gpus as usize],
            lock_waiters: vec![VecDeque::new(); gpus as usize],
            out: Vec::new(),
        }
    }

    fn schedule(&mut self, t: u64, a: Action) {
        self.seq += 1;
        self.actions.push(Reverse((t, self.seq, a)));
    }

    fn emit(&mut self, t: u64, kind: EventKind, unit: usize, worker: Option<u32>, d: Option<u64>) {
        let (ji, pi) = self.units[unit];
        let job = &self.w.jobs[ji];
        let u = &job.units[pi];
        let mut ev = TimelineEvent::new(t, kind, job.id.clone());
        ev.partition = u.partition;
        ev.proof_kind = job.kind.clone();
        if let Some(gw) = worker {
            ev.worker = Some(gw);
            ev.gpu = Some(gw / self.p.gpu_workers_per_device.max(1));
        }
        match kind {
            EventKind::SynthEnd => ev.synth_ms = d,
            EventKind::GpuEnd => ev.gpu_ms = d,
            EventKind::GpuQueue => ev.monolithic = u.partition.is_none(),
            _ => {}
        }
        self.seq += 1;
        self.out.push((t, self.seq, ev));
    }

    fn run(mut self) -> Vec<Event> {
        self.dispatch(0);
        while let Some(Reverse((t, _, a))) = self.actions.pop() {
            match a {
                Action::SynthDone(u, started) => self.synth_done(t, u, started),
                Action::LockRequest(gw, u, started) => self.lock_request(t, gw, u, started),
                Action::Release(gw, u, started) => self.release(t, gw, u, started),
            }
        }
        self.out.sort_by_key(|&(t, seq, _)| (t, seq));
        self.out.into_iter().map(|(_, _, e)| e).collect()
    }

    /// Starts syntheses while workers are free, work is left and the budget allows.
    fn dispatch(&mut self, t: u64) {
        while self.synth_free > 0 && self.next < self.units.len() {
            if let Some(cap) = self.p.max_ahead {
                if self.synthesizing + self.queue.len() as u32 >= cap.max(1) {
                    break;
                }
            }
            let u = self.next;
            self.next += 1;
            self.synth_free -= 1;
            self.synthesizing += 1;
            let (ji, pi) = self.units[u];
            let d = ms(self.w.jobs[ji].units[pi].synth_ms / self.p.synthesis_speed.max(1e-9));
            self.emit(t, EventKind::SynthStart, u, None, None);
            self.schedule(t + d, Action::SynthDone(u, t));
        }
    }

    fn synth_done(&mut self, t: u64, u: usize, started: u64) {
        self.synthesizing -= 1;
        self.synth_free += 1;
        self.emit(t, EventKind::SynthEnd, u, None, Some(t - started));
        self.emit(t, EventKind::GpuQueue, u, None, None);
        let key = match self.p.queue_order {
            QueueOrder::Dispatch => (u as u64, u),
            QueueOrder::Fifo => (self.seq, u),
        };
        self.queue.insert(key, u);
        self.pick(t);
        self.dispatch(t);
    }

    /// Idle GPU workers (the longest idle first) take waiting partitions.
    fn pick(&mut self, t: u64) {
        while !self.queue.is_empty() {
            let Some(gw) = self.idle_workers.pop_front() else {
                break;
            };
            let Some((_, u)) = self.queue.pop_first() else {
                break;
            };
            self.emit(t, EventKind::GpuPickup, u, Some(gw), None);
            self.emit(t, EventKind::GpuStart, u, Some(gw), None);
            self.schedule(t + ms(self.w.prep_ms), Action::LockRequest(gw, u, t));
        }
    }

    fn held(&self, u: usize) -> u64 {
        let (ji, pi) = self.units[u];
        let h = self.w.jobs[ji].units[pi].held_ms;
        let cpu = self.w.cpu_in_lock_ms.min(h).max(0.0);
        ms((h - cpu) / self.p.gpu_speed.max(1e-9) + cpu).max(1)
    }

    fn lock_request(&mut self, t: u64, gw: u32, u: usize, started: u64) {
        let gpu = (gw / self.p.gpu_workers_per_device.max(1)) as usize;
        if self.lock_busy[gpu] {
            self.lock_waiters[gpu].push_back((gw, u, started));
        } else {
            self.lock_busy[gpu] = true;
            let h = self.held(u);
            self.schedule(t + h, Action::Release(gw, u, started));
        }
    }

    fn release(&mut self, t: u64, gw: u32, u: usize, started: u64) {
        let gpu = (gw / self.p.gpu_workers_per_device.max(1)) as usize;
        if let Some((w2, u2, s2)) = self.lock_waiters[gpu].pop_front() {
            let h = self.held(u2);
            self.schedule(t + h, Action::Release(w2, u2, s2));
        } else {
            self.lock_busy[gpu] = false;
        }
        let end = t + ms(self.w.finalize_ms);
        self.emit(end, EventKind::GpuEnd, u, Some(gw), Some(end - started));
        self.idle_workers.push_back(gw);
        self.pick(t);
        self.dispatch(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::whatif::learn::{Job, Unit};
    use std::sync::Arc;

    fn workload(jobs: usize, parts: u32, synth: f64, held: f64) -> Workload {
        Workload {
            jobs: (0..jobs)
                .map(|j| Job {
                    id: Arc::from(format!("job-{j}")),
                    kind: None,
                    units: (0..parts)
                        .map(|p| Unit {
                            partition: Some(p),
                            synth_ms: synth,
                            held_ms: held,
                        })
                        .collect(),
                })
                .collect(),
            prep_ms: 0.0,
            finalize_ms: 0.0,
            cpu_in_lock_ms: 0.0,
        }
    }

    fn pipeline(synth: u32, gpus: u32, per: u32) -> Pipeline {
        Pipeline {
            synthesis_workers: synth,
            gpus,
            gpu_workers_per_device: per,
            gpu_speed: 1.0,
            synthesis_speed: 1.0,
            queue_order: QueueOrder::Dispatch,
            max_ahead: None,
        }
    }

    fn gpu_ends(evs: &[Event]) -> Vec<u64> {
        evs.iter()
            .filter(|e| e.kind == EventKind::GpuEnd)
            .map(|e| e.offset_ms)
            .collect()
    }

    /// One synthesis worker, one GPU: synthesis 100 ms a partition, lock 30 ms. Partition
    /// k is synthesized by 100(k+1) and its GPU work ends 30 ms later: hand-computed.
    #[test]
    fn a_serial_pipeline_is_the_sum_of_its_stages() {
        let evs = simulate(&workload(1, 3, 100.0, 30.0), &pipeline(1, 1, 1));
        assert_eq!(gpu_ends(&evs), vec![130, 230, 330]);
        assert_eq!(evs.len(), 18);
    }

    /// Synthesis faster than the GPU: the lock is the bound. Ten partitions ready at 10 ms
    /// (ten workers), a 50 ms lock: GPU_ENDs every 50 ms; two workers per GPU share it.
    #[test]
    fn the_gpu_lock_serializes_the_workers_of_a_device() {
        let evs = simulate(&workload(1, 4, 10.0, 50.0), &pipeline(10, 1, 2));
        assert_eq!(gpu_ends(&evs), vec![60, 110, 160, 210]);
        // two devices halve it
        let evs = simulate(&workload(1, 4, 10.0, 50.0), &pipeline(10, 2, 2));
        assert_eq!(gpu_ends(&evs), vec![60, 60, 110, 110]);
    }

    /// The CPU work before the lock overlaps another worker's lock time only with two
    /// workers: prep 20, lock 50, finalizer 5; with one worker a call takes 70 ms of the
    /// device, with two the lock is held back to back.
    #[test]
    fn prep_overlaps_the_lock_only_with_a_second_worker() {
        let mut w = workload(1, 3, 1.0, 50.0);
        w.prep_ms = 20.0;
        w.finalize_ms = 5.0;
        let one = gpu_ends(&simulate(&w, &pipeline(10, 1, 1)));
        assert_eq!(
            one,
            vec![1 + 20 + 50 + 5, 1 + 70 + 70 + 5, 1 + 140 + 70 + 5]
        );
        let two = gpu_ends(&simulate(&w, &pipeline(10, 1, 2)));
        assert_eq!(two, vec![76, 126, 1 + 20 + 50 + 50 + 50 + 5]);
    }

    /// A faster GPU shortens the kernels, not the CPU work held inside the lock.
    #[test]
    fn gpu_speed_leaves_the_cpu_inside_the_lock() {
        let mut w = workload(1, 2, 1.0, 100.0);
        w.cpu_in_lock_ms = 40.0;
        let mut p = pipeline(10, 1, 1);
        p.gpu_speed = 2.0;
        // lock 40 + 60 / 2 = 70 a call
        assert_eq!(gpu_ends(&simulate(&w, &p)), vec![71, 141]);
    }

    /// A budget of two partitions ahead of the GPU holds the third synthesis back until
    /// a GPU worker takes one.
    #[test]
    fn a_memory_budget_holds_synthesis_back() {
        let mut p = pipeline(10, 1, 1);
        p.max_ahead = Some(2);
        let evs = simulate(&workload(1, 3, 10.0, 100.0), &p);
        let starts: Vec<u64> = evs
            .iter()
            .filter(|e| e.kind == EventKind::SynthStart)
            .map(|e| e.offset_ms)
            .collect();
        // two at 0; at 10 both are queued and one is picked: the third starts then
        assert_eq!(starts, vec![0, 0, 10]);
    }
}
