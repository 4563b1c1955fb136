//! The instant mode: a discrete-event simulation of the prover that writes its TIMELINE
//! events without sleeping, deterministically for a seed, in memory that does not grow with
//! the number of jobs (events stream out in time order as the simulation advances).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Write};
use std::sync::Arc;

use proofline_core::{Event, EventKind, TimelineEvent};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::model::SimConfig;

/// A partition (or the single unit of a whole-proof job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Unit {
    job: usize,
    partition: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    SynthFree(u32),
    SynthDone(u32, Unit, u64),
    GpuFree(u32),
    MutexReq(u32, Unit, u64),
    /// (worker, unit, started, lock taken at, kernel ms, CPU-in-lock ms)
    KernelDone(u32, Unit, u64, u64, u64, u64),
}

/// A line of the simulated log.
#[derive(Debug, Clone, PartialEq)]
pub enum SimLine {
    /// A TIMELINE event.
    Event(Event),
    /// A `CUZK_TIMING:` line.
    Timing(proofline_core::timing::Timing),
}

/// Runs the simulation, calling `emit` with every event in the order a log would print them.
pub fn simulate(cfg: &SimConfig, mut emit: impl FnMut(Event)) {
    Sim::new(cfg).run(&mut |l| {
        if let SimLine::Event(ev) = l {
            emit(ev);
        }
    });
}

/// [`simulate`], with the `CUZK_TIMING:` lines too when the configuration asks for them.
pub fn simulate_lines(cfg: &SimConfig, mut emit: impl FnMut(SimLine)) {
    Sim::new(cfg).run(&mut emit);
}

/// Writes the simulated log as TIMELINE lines; returns the bytes written.
pub fn write_log(cfg: &SimConfig, out: &mut impl Write) -> io::Result<u64> {
    let mut line = String::with_capacity(128);
    let mut bytes = 0u64;
    let mut err = None;
    simulate_lines(cfg, |l| {
        if err.is_some() {
            return;
        }
        line.clear();
        match l {
            SimLine::Event(ev) => proofline_core::write_line(&mut line, &ev),
            SimLine::Timing(t) => {
                use std::fmt::Write as _;
                let _ = write!(line, "{t}");
            }
        }
        line.push('\n');
        bytes += line.len() as u64;
        if let Err(e) = out.write_all(line.as_bytes()) {
            err = Some(e);
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(bytes),
    }
}

/// The simulated log as one string.
pub fn log_string(cfg: &SimConfig) -> String {
    let mut out = Vec::new();
    write_log(cfg, &mut out).expect("writing to memory cannot fail");
    String::from_utf8(out).expect("the log is UTF-8")
}

struct Sim<'a> {
    cfg: &'a SimConfig,
    rng: SmallRng,
    /// Separate from `rng`, so that shuffling the print order keeps the same durations.
    jitter_rng: SmallRng,
    actions: BinaryHeap<Reverse<(u64, u64, Action)>>,
    out: BinaryHeap<Reverse<(u64, u64, OutEv)>>,
    /// `CUZK_TIMING:` lines waiting, by the same key as `out`.
    out_timing: BinaryHeap<Reverse<(u64, u64, TimingOut)>>,
    seq: u64,
    next_unit: (usize, u32),
    stall_release: Option<u64>,
    queue: BinaryHeap<Reverse<Unit>>,
    synthesizing: u32,
    idle_synth: Vec<u32>,
    idle_gpu: Vec<u32>,
    picked: Vec<u32>,
    mutex_busy: Vec<bool>,
    waiters: Vec<VecDeque<(u32, Unit, u64)>>,
    ids: Vec<Arc<str>>,
}

/// A `CUZK_TIMING:` line waiting to be printed: its keys' values, in `TimingKey::ALL`
/// order, and the GPU thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct TimingOut {
    values: [Option<u64>; 15],
    gpu_tid: Option<u32>,
}

impl TimingOut {
    fn new(pairs: &[(proofline_core::timing::TimingKey, u64)], gpu_tid: Option<u32>) -> Self {
        let mut values = [None; 15];
        for &(k, v) in pairs {
            values[k as usize] = Some(v);
        }
        TimingOut { values, gpu_tid }
    }
}

/// An event waiting to be printed (kept small: strings are looked up when printed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct OutEv {
    t: u64,
    kind: EventKind,
    unit: Unit,
    worker: Option<u32>,
    ms: Option<u64>,
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a SimConfig) -> Self {
        let workers = (cfg.gpus * cfg.workers_per_gpu) as usize;
        Sim {
            cfg,
            rng: SmallRng::seed_from_u64(cfg.seed),
            jitter_rng: SmallRng::seed_from_u64(cfg.seed ^ 0x9e37_79b9_7f4a_7c15),
            actions: BinaryHeap::new(),
            out: BinaryHeap::new(),
            out_timing: BinaryHeap::new(),
            seq: 0,
            next_unit: (0, 0),
            stall_release: None,
            queue: BinaryHeap::new(),
            synthesizing: 0,
            idle_synth: Vec::new(),
            idle_gpu: Vec::new(),
            picked: vec![0; workers],
            mutex_busy: vec![false; cfg.gpus as usize],
            waiters: vec![VecDeque::new(); cfg.gpus as usize],
            ids: cfg.jobs.iter().map(|j| j.id.clone()).collect(),
        }
    }

    fn draw(&mut self, mean: f64) -> u64 {
        let s = self.cfg.timings.spread.clamp(0.0, 0.99);
        let f = if s > 0.0 {
            self.rng.random_range(1.0 - s..=1.0 + s)
        } else {
            1.0
        };
        (mean * f).round().max(1.0) as u64
    }

    fn schedule(&mut self, t: u64, a: Action) {
        self.seq += 1;
        self.actions.push(Reverse((t, self.seq, a)));
    }

    fn print(&mut self, ev: OutEv) {
        let jitter = if self.cfg.shuffle_ms > 0 {
            self.jitter_rng.random_range(0..=self.cfg.shuffle_ms)
        } else {
            0
        };
        self.seq += 1;
        self.out.push(Reverse((ev.t + jitter, self.seq, ev)));
    }

    fn print_timing(&mut self, t: u64, line: TimingOut) {
        let jitter = if self.cfg.shuffle_ms > 0 {
            self.jitter_rng.random_range(0..=self.cfg.shuffle_ms)
        } else {
            0
        };
        self.seq += 1;
        self.out_timing.push(Reverse((t + jitter, self.seq, line)));
    }

    fn flush(&mut self, before: u64, emit: &mut impl FnMut(SimLine)) {
        loop {
            let ev = self.out.peek().map(|Reverse((k, s, _))| (*k, *s));
            let tm = self.out_timing.peek().map(|Reverse((k, s, _))| (*k, *s));
            let timing_first = match (ev, tm) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(e), Some(t)) => t < e,
            };
            if timing_first {
                let Some(Reverse((key, _, line))) = self.out_timing.peek().copied() else {
                    break;
                };
                if key >= before {
                    break;
                }
                self.out_timing.pop();
                emit(SimLine::Timing(
                    proofline_core::timing::Timing::from_values(line.values, line.gpu_tid),
                ));
            } else {
                let Some(Reverse((key, _, _))) = self.out.peek() else {
                    break;
                };
                if *key >= before {
                    break;
                }
                let Some(Reverse((_, _, ev))) = self.out.pop() else {
                    break;
                };
                emit(SimLine::Event(self.to_event(ev)));
            }
        }
    }

    fn to_event(&self, o: OutEv) -> Event {
        let spec = &self.cfg.jobs[o.unit.job];
        let mut ev = TimelineEvent::new(o.t, o.kind, self.ids[o.unit.job].clone());
        ev.partition = o.unit.partition;
        ev.worker = o.worker;
        match o.kind {
            EventKind::SynthStart if o.unit.partition.is_none() => {
                ev.proof_kind = Some(Arc::from(spec.kind.as_str()))
            }
            EventKind::SynthEnd => ev.synth_ms = o.ms,
            EventKind::GpuQueue => ev.monolithic = o.unit.partition.is_none(),
            EventKind::GpuEnd => ev.gpu_ms = o.ms,
            _ => {}
        }
        ev
    }

    fn run(mut self, emit: &mut impl FnMut(SimLine)) {
        for w in 0..self.cfg.synth_workers {
            self.schedule(0, Action::SynthFree(w));
        }
        for gw in 0..self.cfg.gpus * self.cfg.workers_per_gpu {
            self.schedule(0, Action::GpuFree(gw));
        }
        while let Some(Reverse((t, _, action))) = self.actions.pop() {
            self.flush(t, emit);
            match action {
                Action::SynthFree(w) => self.synth_free(t, w),
                Action::SynthDone(w, unit, started) => self.synth_done(t, w, unit, started),
                Action::GpuFree(gw) => self.gpu_free(t, gw),
                Action::MutexReq(gw, unit, started) => self.mutex_req(t, gw, unit, started),
                Action::KernelDone(gw, unit, started, locked, kernel, cpu) => {
                    self.kernel_done(t, gw, unit, started, (locked, kernel, cpu))
                }
            }
        }
        self.flush(u64::MAX, emit);
    }

    fn peek_unit(&self) -> Option<Unit> {
        let (job, p) = self.next_unit;
        let spec = self.cfg.jobs.get(job)?;
        Some(Unit {
            job,
            partition: spec.kind.partitions().map(|_| p),
        })
    }

    fn advance_unit(&mut self) {
        let (job, p) = self.next_unit;
        let n = self.cfg.jobs[job].kind.partitions().unwrap_or(1);
        self.next_unit = if p + 1 >= n {
            (job + 1, 0)
        } else {
            (job, p + 1)
        };
    }

    fn synth_free(&mut self, t: u64, w: u32) {
        let Some(unit) = self.peek_unit() else { return };
        let arrival = unit.job as u64 * self.cfg.arrival_interval_ms;
        if arrival > t {
            self.schedule(arrival, Action::SynthFree(w));
            return;
        }
        // a stall: the first partition of the stalled job starts, and synthesis hangs for
        // `ms` (the dispatcher with it): the job is in flight while the GPU runs dry
        let mut stall = 0;
        if let Some((stalled, ms)) = self.cfg.faults.stall_before_job {
            if stalled == unit.job {
                match self.stall_release {
                    None if self.next_unit.1 == 0 => {
                        self.stall_release = Some(t + ms);
                        stall = ms;
                    }
                    Some(release) if release > t => {
                        self.schedule(release, Action::SynthFree(w));
                        return;
                    }
                    _ => {}
                }
            }
        }
        if self.queue.len() as u32 + self.synthesizing >= self.cfg.max_ahead.max(1) {
            self.idle_synth.push(w);
            return;
        }
        self.advance_unit();
        self.synthesizing += 1;
        let mean = match unit.partition {
            Some(_) => self.cfg.timings.synth_ms,
            None => self.cfg.timings.whole_synth_ms,
        };
        let d = self.draw(mean) + stall;
        self.print(OutEv {
            t,
            kind: EventKind::SynthStart,
            unit,
            worker: None,
            ms: None,
        });
        self.schedule(t + d, Action::SynthDone(w, unit, t));
    }

    fn synth_done(&mut self, t: u64, w: u32, unit: Unit, started: u64) {
        self.synthesizing -= 1;
        self.print(OutEv {
            t,
            kind: EventKind::SynthEnd,
            unit,
            worker: None,
            ms: Some(t - started),
        });
        self.print(OutEv {
            t,
            kind: EventKind::GpuQueue,
            unit,
            worker: None,
            ms: None,
        });
        self.queue.push(Reverse(unit));
        for gw in std::mem::take(&mut self.idle_gpu) {
            self.schedule(t, Action::GpuFree(gw));
        }
        self.schedule(t, Action::SynthFree(w));
    }

    fn gpu_free(&mut self, t: u64, gw: u32) {
        let Some(Reverse(unit)) = self.queue.pop() else {
            if !self.idle_gpu.contains(&gw) {
                self.idle_gpu.push(gw);
            }
            return;
        };
        for w in std::mem::take(&mut self.idle_synth) {
            self.schedule(t, Action::SynthFree(w));
        }
        self.print(OutEv {
            t,
            kind: EventKind::GpuPickup,
            unit,
            worker: Some(gw),
            ms: None,
        });
        self.print(OutEv {
            t,
            kind: EventKind::GpuStart,
            unit,
            worker: Some(gw),
            ms: None,
        });
        let n = self.picked[gw as usize];
        self.picked[gw as usize] += 1;
        let prep = self.draw(self.cfg.timings.prep_ms);
        if self.cfg.faults.panic_worker == Some((gw, n)) {
            // the GPU call panicked before the lock: no GPU_END; the worker goes on
            self.schedule(t + prep, Action::GpuFree(gw));
            return;
        }
        self.schedule(t + prep, Action::MutexReq(gw, unit, t));
    }

    fn mutex_req(&mut self, t: u64, gw: u32, unit: Unit, started: u64) {
        let gpu = (gw / self.cfg.workers_per_gpu) as usize;
        if self.mutex_busy[gpu] {
            self.waiters[gpu].push_back((gw, unit, started));
        } else {
            self.mutex_busy[gpu] = true;
            self.run_kernel(t, gw, unit, started);
        }
    }

    fn run_kernel(&mut self, t: u64, gw: u32, unit: Unit, started: u64) {
        let gpu = gw / self.cfg.workers_per_gpu;
        let mean = match unit.partition {
            Some(_) => self.cfg.timings.kernel_ms,
            None => self.cfg.timings.whole_kernel_ms,
        };
        let factor = match self.cfg.faults.slow_gpu {
            Some((g, f)) if g == gpu => f,
            _ => 1.0,
        };
        let d = self.draw(mean * factor);
        // CPU work inside the lock (the GPU thread waiting on prep_msm): the lock is held
        // that much longer
        let cpu = if self.cfg.timing.cpu_in_lock_ms > 0.0 {
            self.draw(self.cfg.timing.cpu_in_lock_ms)
        } else {
            0
        };
        self.schedule(
            t + d + cpu,
            Action::KernelDone(gw, unit, started, t, d, cpu),
        );
    }

    /// The `CUZK_TIMING:` lines of one call, cuzk's order: the lock taken, the GPU thread's
    /// NTT and H MSM, its barrier wait on the CPU's prep_msm, prep_msm itself, the batch
    /// additions, the tail MSMs, the lock about to be released, b_g2_msm.
    fn timing_lines(&mut self, release: u64, started: u64, (locked, kernel, cpu): (u64, u64, u64)) {
        use proofline_core::timing::TimingKey as K;
        let prep = self.cfg.timings.prep_ms.round() as u64;
        let ntt = kernel * 2 / 5;
        let batch = kernel / 5;
        let tail = kernel - ntt - batch;
        let wait = locked.saturating_sub(started + prep);
        self.print_timing(
            locked,
            TimingOut::new(&[(K::PreLockCpu, prep), (K::MutexWait, wait)], None),
        );
        self.print_timing(locked + ntt, TimingOut::new(&[(K::NttMsmH, ntt)], Some(0)));
        self.print_timing(
            locked + ntt + cpu,
            TimingOut::new(&[(K::BarrierWait, cpu)], Some(0)),
        );
        self.print_timing(
            locked + ntt + cpu,
            TimingOut::new(&[(K::PrepMsm, prep + ntt + cpu)], None),
        );
        self.print_timing(
            locked + ntt + cpu + batch,
            TimingOut::new(&[(K::BatchAdd, batch)], Some(0)),
        );
        self.print_timing(
            release,
            TimingOut::new(&[(K::TailMsm, tail), (K::GpuTotal, kernel + cpu)], Some(0)),
        );
        self.print_timing(
            release,
            TimingOut::new(
                &[
                    (K::MutexHeld, release - locked),
                    (K::TotalStartFn, release - started),
                ],
                None,
            ),
        );
        self.print_timing(
            release,
            TimingOut::new(&[(K::BG2Msm, tail / 2), (K::NumCircuits, 1)], None),
        );
    }

    fn kernel_done(&mut self, t: u64, gw: u32, unit: Unit, started: u64, call: (u64, u64, u64)) {
        let gpu = (gw / self.cfg.workers_per_gpu) as usize;
        match self.waiters[gpu].pop_front() {
            Some((w, u, s)) => self.run_kernel(t, w, u, s),
            None => self.mutex_busy[gpu] = false,
        }
        if self.cfg.timing.emit {
            self.timing_lines(t, started, call);
        }
        let never = self
            .cfg
            .faults
            .never_finish
            .is_some_and(|(j, p)| j == unit.job && unit.partition.unwrap_or(0) == p);
        if !never {
            let fin = self.draw(self.cfg.timings.finalize_ms);
            let end = t + fin;
            let prep = self.cfg.timings.prep_ms.round() as u64;
            let gpu_ms = (end - started).saturating_sub(prep);
            self.print(OutEv {
                t: end,
                kind: EventKind::GpuEnd,
                unit,
                worker: Some(gw),
                ms: Some(gpu_ms),
            });
        }
        // split API: the worker is free once the lock is released; a finalizer prints GPU_END
        self.schedule(t, Action::GpuFree(gw));
    }
}
