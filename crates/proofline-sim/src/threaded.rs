//! The threaded mode: real threads and real `tracing` spans named and shaped as cuzk's, so
//! that the layer, the exporters and the dashboards see what they would see in cuzk.
//!
//! ```text
//!  dispatcher (job, partition) order ─► N synthesis threads ─► GPU queue, (job, partition) order
//!      synthesize_partition{job_id, partition}                       │
//!                                                                    ▼
//!   G GPUs x W workers: gpu_worker{worker_id, gpu, job_id, proof_kind, partition}
//!        gpu_prove{partition}: CPU prep ─► per-GPU lock: kernel ─► finalizer thread (closes it)
//! ```
//!
//! Durations are [`Timings`](crate::Timings) divided by the speed factor.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tracing::{Span, info_span};

use crate::model::{JobSpec, ProofKind, SimConfig};

/// What a threaded run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Partitions (or whole proofs) synthesized.
    pub synthesized: u64,
    /// Partitions whose GPU work finished.
    pub proved: u64,
    /// GPU workers that panicked (the prover went on without them).
    pub panicked_workers: u64,
}

/// Progress counters, readable while the prover runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Partitions synthesized so far.
    pub synthesized: AtomicU64,
    /// Partitions proved so far.
    pub proved: AtomicU64,
    /// Jobs dispatched so far.
    pub jobs_started: AtomicU64,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Unit {
    seq: u64,
    partition: Option<u32>,
    job: Arc<str>,
    kind: KindTag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct KindTag(u8);

impl KindTag {
    fn of(k: ProofKind) -> Self {
        KindTag(match k {
            ProofKind::PoRep => 0,
            ProofKind::SnapDeals => 1,
            ProofKind::WindowPost => 2,
            ProofKind::WinningPost => 3,
        })
    }
    fn kind(self) -> ProofKind {
        match self.0 {
            0 => ProofKind::PoRep,
            1 => ProofKind::SnapDeals,
            2 => ProofKind::WindowPost,
            _ => ProofKind::WinningPost,
        }
    }
}

/// Hands out units in (job, partition) order; endless when `forever`.
struct Dispatcher {
    jobs: Vec<JobSpec>,
    forever: bool,
    next_job: u64,
    next_partition: u32,
}

impl Dispatcher {
    fn spec(&self, seq: u64) -> Option<JobSpec> {
        let n = self.jobs.len() as u64;
        if n == 0 || (!self.forever && seq >= n) {
            return None;
        }
        let base = &self.jobs[(seq % n) as usize];
        if seq < n {
            return Some(base.clone());
        }
        // forever: same mix of kinds, new ids
        Some(JobSpec {
            id: base.kind.job_id(seq).into(),
            kind: base.kind,
        })
    }

    fn next(&mut self) -> Option<(Unit, bool)> {
        let spec = self.spec(self.next_job)?;
        let first = self.next_partition == 0;
        let unit = Unit {
            seq: self.next_job,
            partition: spec.kind.partitions().map(|_| self.next_partition),
            job: spec.id.clone(),
            kind: KindTag::of(spec.kind),
        };
        let n = spec.kind.partitions().unwrap_or(1);
        if self.next_partition + 1 >= n {
            self.next_job += 1;
            self.next_partition = 0;
        } else {
            self.next_partition += 1;
        }
        Some((unit, first))
    }
}

/// A counting semaphore: synthesized-or-synthesizing partitions ahead of the GPUs.
struct Budget {
    free: Mutex<u32>,
    cv: Condvar,
}

impl Budget {
    fn acquire(&self, stop: &AtomicBool) -> bool {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            free = self
                .cv
                .wait_timeout(free, Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *free -= 1;
        true
    }

    fn release(&self) {
        *self.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.cv.notify_one();
    }
}

struct GpuQueue {
    heap: Mutex<(BinaryHeap<Reverse<Unit>>, bool)>,
    cv: Condvar,
}

impl GpuQueue {
    fn push(&self, u: Unit) {
        self.heap
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .push(Reverse(u));
        self.cv.notify_one();
    }

    /// The next unit; `None` once closed and empty.
    fn pop(&self, stop: &AtomicBool) -> Option<Unit> {
        let mut g = self.heap.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(Reverse(u)) = g.0.pop() {
                return Some(u);
            }
            if g.1 || stop.load(Ordering::Relaxed) {
                return None;
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn close(&self) {
        self.heap.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.cv.notify_all();
    }
}

struct Shared {
    cfg: SimConfig,
    start: Instant,
    speed: f64,
    stop: Arc<AtomicBool>,
    dispatcher: Mutex<Dispatcher>,
    budget: Budget,
    queue: GpuQueue,
    gpu_locks: Vec<Mutex<()>>,
    progress: Arc<Progress>,
    synth_live: AtomicUsize,
    panicked: AtomicU64,
}

impl Shared {
    fn sleep(&self, rng: &mut SmallRng, mean_ms: f64) {
        let s = self.cfg.timings.spread.clamp(0.0, 0.99);
        let f = if s > 0.0 {
            rng.random_range(1.0 - s..=1.0 + s)
        } else {
            1.0
        };
        let ms = mean_ms * f / self.speed;
        thread::sleep(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
}

/// Runs the simulated prover on real threads until its jobs are done (or, with `forever`,
/// until `stop` is set). Spans go to the calling thread's default subscriber, which every
/// thread of the prover inherits.
pub fn run(
    cfg: &SimConfig,
    speed: f64,
    forever: bool,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> RunSummary {
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        start: Instant::now(),
        speed: if speed > 0.0 { speed } else { 1.0 },
        stop,
        dispatcher: Mutex::new(Dispatcher {
            jobs: cfg.jobs.clone(),
            forever,
            next_job: 0,
            next_partition: 0,
        }),
        budget: Budget {
            free: Mutex::new(cfg.max_ahead.max(1)),
            cv: Condvar::new(),
        },
        queue: GpuQueue {
            heap: Mutex::new((BinaryHeap::new(), false)),
            cv: Condvar::new(),
        },
        gpu_locks: (0..cfg.gpus.max(1)).map(|_| Mutex::new(())).collect(),
        progress,
        synth_live: AtomicUsize::new(cfg.synth_workers.max(1) as usize),
        panicked: AtomicU64::new(0),
    });

    let mut synth = Vec::new();
    for w in 0..cfg.synth_workers.max(1) {
        let sh = shared.clone();
        let d = dispatch.clone();
        synth.push(
            thread::Builder::new()
                .name(format!("synth-{w}"))
                .spawn(move || tracing::dispatcher::with_default(&d, || synth_worker(&sh, w)))
                .expect("spawn synthesis thread"),
        );
    }
    let workers = cfg.gpus.max(1) * cfg.workers_per_gpu.max(1);
    let mut gpu = Vec::new();
    for gw in 0..workers {
        let sh = shared.clone();
        let d = dispatch.clone();
        gpu.push(
            thread::Builder::new()
                .name(format!("gpu-worker-{gw}"))
                .spawn(move || tracing::dispatcher::with_default(&d, || gpu_worker(&sh, gw)))
                .expect("spawn GPU worker thread"),
        );
    }
    for t in synth {
        let _ = t.join();
    }
    for t in gpu {
        if t.join().is_err() {
            shared.panicked.fetch_add(1, Ordering::Relaxed);
        }
    }
    RunSummary {
        synthesized: shared.progress.synthesized.load(Ordering::Relaxed),
        proved: shared.progress.proved.load(Ordering::Relaxed),
        panicked_workers: shared.panicked.load(Ordering::Relaxed),
    }
}

fn synth_worker(sh: &Shared, w: u32) {
    let mut rng =
        SmallRng::seed_from_u64(sh.cfg.seed.wrapping_mul(1000).wrapping_add(u64::from(w)));
    loop {
        if sh.stop.load(Ordering::Relaxed) || !sh.budget.acquire(&sh.stop) {
            break;
        }
        // the dispatcher hands units out in order; a stall holds it (and so every worker)
        // inside the synthesis of the stalled job's first partition: that job is in flight
        // while the GPU runs dry
        let mut d = sh.dispatcher.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((unit, first)) = d.next() else {
            drop(d);
            sh.budget.release();
            break;
        };
        let kind = unit.kind.kind();
        let span = match unit.partition {
            Some(p) => info_span!("synthesize_partition", job_id = %unit.job, partition = p),
            None => info_span!("synthesize_partition", job_id = %unit.job, proof_kind = %kind),
        };
        if first {
            sh.progress.jobs_started.fetch_add(1, Ordering::Relaxed);
            // a job is not dispatched before it arrives
            let arrival = Duration::from_secs_f64(
                unit.seq as f64 * sh.cfg.arrival_interval_ms as f64 / sh.speed / 1000.0,
            );
            if let Some(wait) = arrival.checked_sub(sh.start.elapsed()) {
                thread::sleep(wait);
            }
            if let Some((job, ms)) = sh.cfg.faults.stall_before_job {
                if job as u64 == unit.seq {
                    span.in_scope(|| {
                        thread::sleep(Duration::from_secs_f64(ms as f64 / sh.speed / 1000.0))
                    });
                }
            }
        }
        drop(d);
        let mean = if unit.partition.is_some() {
            sh.cfg.timings.synth_ms
        } else {
            sh.cfg.timings.whole_synth_ms
        };
        span.in_scope(|| sh.sleep(&mut rng, mean));
        drop(span);
        sh.progress.synthesized.fetch_add(1, Ordering::Relaxed);
        sh.queue.push(unit);
    }
    if sh.synth_live.fetch_sub(1, Ordering::AcqRel) == 1 {
        sh.queue.close(); // the last synthesis worker is done: nothing more will come
    }
}

fn gpu_worker(sh: &Shared, gw: u32) {
    let gpu = gw / sh.cfg.workers_per_gpu.max(1);
    let mut rng =
        SmallRng::seed_from_u64(sh.cfg.seed.wrapping_mul(7919).wrapping_add(u64::from(gw)));
    // the split API's finalizer: closes gpu_prove (GPU_END) after the lock is released
    let (fin_tx, fin_rx) = mpsc::channel::<(Span, bool)>();
    let speed = sh.speed;
    let finalize_ms = sh.cfg.timings.finalize_ms;
    let spread = sh.cfg.timings.spread.clamp(0.0, 0.99);
    let progress = sh.progress.clone();
    let d = tracing::dispatcher::get_default(Clone::clone);
    let mut fin_rng = SmallRng::seed_from_u64(sh.cfg.seed ^ u64::from(gw));
    let finalizer = thread::Builder::new()
        .name(format!("finalizer-{gw}"))
        .spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                for (span, never) in fin_rx {
                    if never {
                        std::mem::forget(span); // the partition never finishes: no GPU_END
                        continue;
                    }
                    let f = if spread > 0.0 {
                        fin_rng.random_range(1.0 - spread..=1.0 + spread)
                    } else {
                        1.0
                    };
                    span.in_scope(|| {
                        thread::sleep(Duration::from_secs_f64(finalize_ms * f / speed / 1000.0))
                    });
                    drop(span);
                    progress.proved.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .expect("spawn finalizer thread");

    let mut picked = 0u32;
    while let Some(unit) = sh.queue.pop(&sh.stop) {
        sh.budget.release();
        let kind = unit.kind.kind();
        let worker_span = info_span!("gpu_worker", worker_id = gw, gpu = gpu, job_id = %unit.job,
            proof_kind = %kind, partition = ?unit.partition);
        let prove = worker_span.in_scope(|| info_span!("gpu_prove", partition = ?unit.partition));
        let panic_now = sh.cfg.faults.panic_worker == Some((gw, picked));
        picked += 1;
        let slow = match sh.cfg.faults.slow_gpu {
            Some((g, f)) if g == gpu => f,
            _ => 1.0,
        };
        let kernel = if unit.partition.is_some() {
            sh.cfg.timings.kernel_ms
        } else {
            sh.cfg.timings.whole_kernel_ms
        };
        worker_span.in_scope(|| {
            prove.in_scope(|| {
                sh.sleep(&mut rng, sh.cfg.timings.prep_ms);
                if panic_now {
                    panic!("simulated GPU worker {gw} panic");
                }
                let _lock = sh.gpu_locks[gpu as usize]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                sh.sleep(&mut rng, kernel * slow);
            })
        });
        let never = sh
            .cfg
            .faults
            .never_finish
            .is_some_and(|(j, p)| j as u64 == unit.seq && unit.partition.unwrap_or(0) == p);
        let _ = fin_tx.send((prove, never));
    }
    drop(fin_tx);
    let _ = finalizer.join();
}
