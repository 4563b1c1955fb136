//! The threaded mode: real threads and real `tracing` spans with cuzk's names, fields and
//! shape, so that the layer, the exporters and the dashboards see what they would see in
//! cuzk as it is, and cuzk's own TIMELINE lines printed beside them for comparison.
//!
//! Each shape decision follows filecoin-project/curio at e0294b0f, `extern/cuzk` (described
//! here, not copied):
//!
//! ```text
//!  synthesis task (no span)          blocking thread (no parent span)
//!   SYNTH_START ─► spawn_blocking ─►  synthesize_partition{job_id, partition}: build + synthesize
//!   SYNTH_END, GPU_QUEUE ◄────────────┘   (cuzk-core/src/engine.rs synth worker; pipeline.rs)
//!        │ (job, partition) order
//!        ▼
//!  GPU worker task, one gpu_worker{worker_id, gpu, job_id=%, proof_kind=%, batch_size,
//!  partition=?} span per work item (engine.rs gpu worker, `.instrument(span)`):
//!   split path (default): enter: GPU_PICKUP, GPU_START ─ exit ─► gpu_prove_start on a blocking
//!     thread, no span (CPU prep, GPU lock, kernels) ─► enter: hand the proof to a finalizer
//!     task (plain tokio::spawn, no span) ─ exit, close ──► finalizer: b_g2_msm, epilogue, GPU_END
//!   sync path (CUZK_DISABLE_SPLIT_PROVE=1): enter: GPU_PICKUP ─ exit ─► gpu_prove{circuit_id,
//!     partition} on a blocking thread, no parent, no job id: the whole proof ─► close;
//!     no GPU_START, no GPU_END printed
//! ```
//!
//! Whole-proof jobs (WinningPoSt, WindowPoSt) are synthesized under their own span names
//! (`synthesize_winning_post{job_id}`, `synthesize_window_post{job_id, partition}`), with
//! `SYNTH_START ... kind=`, `GPU_QUEUE ... monolithic`, and a `gpu_worker` with
//! `partition = None`. A failed synthesis prints no SYNTH_END and no GPU_QUEUE; its error is
//! logged after its span closed (outside any span for a partition, inside the `synth_single`
//! task span for a whole proof), as cuzk does. A panicking GPU call is caught (cuzk's
//! `spawn_blocking` returns it as an error) and logged inside the `gpu_worker` span.
//!
//! cuzk prints its TIMELINE lines with `eprintln!` from `timeline_event()`; here they go to
//! a [`Printer`]: a writer (what cuzk prints), or `tracing` events with target `timeline`
//! whose message is the line (the one-line adoption change), or both.
//!
//! Durations are [`Timings`](crate::Timings) divided by the speed factor.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tracing::{Span, info_span};

use crate::model::{GpuPath, JobSpec, ProofKind, SimConfig};

/// The share of a partition's synthesis that builds the circuit before `synthesize_auto`:
/// inside the synthesis span, outside cuzk's printed `synth_ms`.
const CIRCUIT_SHARE: f64 = 0.05;

/// Where the simulated cuzk's `timeline_event()` sends its lines.
#[derive(Clone, Default)]
pub struct Printer {
    /// What cuzk prints (`eprintln!`), one line each.
    pub out: Option<Arc<Mutex<dyn Write + Send>>>,
    /// Also as a `tracing` event with target `timeline` whose message is the line.
    pub via_tracing: bool,
}

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer")
            .field("out", &self.out.is_some())
            .field("via_tracing", &self.via_tracing)
            .finish()
    }
}

/// What a threaded run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Partitions (or whole proofs) synthesized.
    pub synthesized: u64,
    /// Partitions whose GPU work finished.
    pub proved: u64,
    /// GPU calls that panicked (caught, as cuzk's `spawn_blocking` catches them; the
    /// worker went on).
    pub panicked_calls: u64,
}

/// Progress counters, readable while the prover runs ([`Progress::snapshot`]).
#[derive(Debug, Default)]
pub struct Progress {
    synthesized: AtomicU64,
    proved: AtomicU64,
    jobs_started: AtomicU64,
}

/// [`Progress`] at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProgressSnapshot {
    /// Partitions synthesized so far.
    pub synthesized: u64,
    /// Partitions proved so far.
    pub proved: u64,
    /// Jobs dispatched so far.
    pub jobs_started: u64,
}

impl Progress {
    /// Reads the counters.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            synthesized: self.synthesized.load(Ordering::Relaxed),
            proved: self.proved.load(Ordering::Relaxed),
            jobs_started: self.jobs_started.load(Ordering::Relaxed),
        }
    }
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

/// Sleeps `d`, or until `stop` is set: whether it slept all of it. A stopped run's threads
/// leave their work where it is, printing nothing more of it, within [`NAP`] of the stop: a
/// stall of ten minutes, or a GPU call at `--speed 0.1`, does not hold the process past
/// systemd's stop timeout.
fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        thread::sleep(left.min(NAP));
    }
}

/// How often a sleeping thread of the simulated prover looks whether the run was stopped.
const NAP: Duration = Duration::from_millis(50);

struct Shared {
    cfg: SimConfig,
    /// cuzk's TIMELINE epoch (its engine's start).
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
    timeline: Timeline,
    /// Jobs (by dispatch number) whose synthesis failed.
    failed: Mutex<HashSet<u64>>,
}

impl Shared {
    /// A duration drawn around `mean_ms` (simulated), in real time.
    fn draw(&self, rng: &mut SmallRng, mean_ms: f64) -> Duration {
        let s = self.cfg.timings.spread.clamp(0.0, 0.99);
        let f = if s > 0.0 {
            rng.random_range(1.0 - s..=1.0 + s)
        } else {
            1.0
        };
        Duration::from_secs_f64((mean_ms * f / self.speed).max(0.0) / 1000.0)
    }

    /// Sleeps a duration drawn around `mean_ms`, unless the run is stopped first: whether
    /// it slept all of it ([`nap`]).
    fn sleep(&self, rng: &mut SmallRng, mean_ms: f64) -> bool {
        nap(&self.stop, self.draw(rng, mean_ms))
    }

    fn job_failed(&self, seq: u64) -> bool {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&seq)
    }
}

/// cuzk's `timeline_event()`: TIMELINE lines, offset from its engine's start.
#[derive(Clone)]
struct Timeline {
    printer: Printer,
    start: Instant,
}

impl Timeline {
    fn line(&self, event: &str, job: &str, detail: &str) {
        let ms = self.start.elapsed().as_millis();
        if let Some(out) = &self.printer.out {
            let mut w = out.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = writeln!(w, "TIMELINE,{ms},{event},{job},{detail}");
        }
        if self.printer.via_tracing {
            tracing::info!(target: "timeline", "TIMELINE,{},{},{},{}", ms, event, job, detail);
        }
    }
}

/// `worker=W[,partition=N]`, as cuzk details its GPU events.
fn gpu_detail(worker: u32, partition: Option<u32>) -> String {
    match partition {
        Some(p) => format!("worker={worker},partition={p}"),
        None => format!("worker={worker}"),
    }
}

/// Runs the simulated prover on real threads until its jobs are done (or, with `forever`,
/// until `stop` is set), printing no TIMELINE lines. Spans go to the calling thread's
/// default subscriber, which every thread of the prover inherits.
///
/// `stop` set ends the run within 50 ms, sleeps included: the work in flight is
/// left where it is, as a process killed there leaves it (its spans stay open, nothing more
/// of it is printed), not finished first.
pub fn run(
    cfg: &SimConfig,
    speed: f64,
    forever: bool,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> RunSummary {
    run_printing(cfg, speed, forever, stop, progress, Printer::default())
}

/// [`run`], with cuzk's own TIMELINE lines going to `printer`.
pub fn run_printing(
    cfg: &SimConfig,
    speed: f64,
    forever: bool,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    printer: Printer,
) -> RunSummary {
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let start = Instant::now();
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        start,
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
        timeline: Timeline { printer, start },
        failed: Mutex::new(HashSet::new()),
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
        let _ = t.join();
    }
    RunSummary {
        synthesized: shared.progress.synthesized.load(Ordering::Relaxed),
        proved: shared.progress.proved.load(Ordering::Relaxed),
        panicked_calls: shared.panicked.load(Ordering::Relaxed),
    }
}

/// The span a synthesis runs in on its blocking thread: no parent (cuzk enters it inside
/// `spawn_blocking`, which carries no span), `job_id` recorded as a plain `&str`, the
/// partition as a plain integer; whole proofs under their own span names.
fn synthesis_span(unit: &Unit) -> Span {
    let job: &str = &unit.job;
    match (unit.partition, unit.kind.kind()) {
        (Some(p), ProofKind::SnapDeals) => {
            info_span!(parent: None, "synthesize_snap_deals_partition", job_id = job, partition = p as usize)
        }
        (Some(p), _) => {
            info_span!(parent: None, "synthesize_partition", job_id = job, partition = p as usize)
        }
        (None, ProofKind::WindowPost) => {
            info_span!(parent: None, "synthesize_window_post", job_id = job, partition = 0u32)
        }
        (None, _) => info_span!(parent: None, "synthesize_winning_post", job_id = job),
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
        if sh.stop.load(Ordering::Relaxed) {
            // stopped while this worker waited for the dispatcher (a stall held it): no new
            // work starts after the stop
            drop(d);
            sh.budget.release();
            break;
        }
        let Some((unit, first)) = d.next() else {
            drop(d);
            sh.budget.release();
            break;
        };
        if sh.job_failed(unit.seq) {
            // cuzk skips the partitions of a failed job after taking budget, silently
            drop(d);
            sh.budget.release();
            continue;
        }
        let kind = unit.kind.kind();
        let detail = match unit.partition {
            Some(p) => format!("partition={p}"),
            None => format!("kind={kind}"),
        };
        // whole proofs are dispatched by a `synth_single{proof_kind}` task (engine.rs
        // process_batch), which prints their events inside it
        let batch = unit
            .partition
            .is_none()
            .then(|| info_span!("synth_single", proof_kind = %kind));
        let _batch = batch.as_ref().map(Span::enter);
        let span = synthesis_span(&unit);
        if first {
            sh.progress.jobs_started.fetch_add(1, Ordering::Relaxed);
            // a job is not dispatched before it arrives
            let arrival = Duration::from_secs_f64(
                unit.seq as f64 * sh.cfg.arrival_interval_ms as f64 / sh.speed / 1000.0,
            );
            if let Some(wait) = arrival.checked_sub(sh.start.elapsed()) {
                if !nap(&sh.stop, wait) {
                    // (its span is left open: closed, the layer would end the synthesis)
                    std::mem::forget(span);
                    drop(d);
                    sh.budget.release();
                    break;
                }
            }
        }
        sh.timeline.line("SYNTH_START", &unit.job, &detail);
        if first {
            if let Some((job, ms)) = sh.cfg.faults.stall_before_job {
                let stall = Duration::from_secs_f64(ms as f64 / sh.speed / 1000.0);
                if job as u64 == unit.seq && !span.in_scope(|| nap(&sh.stop, stall)) {
                    // stopped inside the stall: the partition stays started, its span open
                    // (closed, the layer would print its SYNTH_END and GPU_QUEUE)
                    std::mem::forget(span);
                    drop(d);
                    sh.budget.release();
                    break;
                }
            }
        }
        drop(d);
        let mean = if unit.partition.is_some() {
            sh.cfg.timings.synth_ms
        } else {
            sh.cfg.timings.whole_synth_ms
        };
        let fails = sh
            .cfg
            .faults
            .fail_synthesis
            .is_some_and(|(j, p)| j as u64 == unit.seq && unit.partition.unwrap_or(0) == p);
        // circuit building, then `synthesize_auto`: cuzk's `synth_ms` times the latter only
        let total = sh.draw(&mut rng, mean);
        let synth_ms = span.in_scope(|| {
            if !nap(&sh.stop, total.mul_f64(CIRCUIT_SHARE)) {
                return None;
            }
            let t = Instant::now();
            nap(&sh.stop, total.mul_f64(1.0 - CIRCUIT_SHARE))
                .then(|| (t.elapsed().as_secs_f64() * 1000.0 * sh.speed) as u64)
        });
        let Some(synth_ms) = synth_ms else {
            // stopped inside the synthesis: the partition stays started, its span open
            std::mem::forget(span);
            sh.budget.release();
            break;
        };
        drop(span);
        if fails {
            // the error is logged outside the span, which has closed: no SYNTH_END
            sh.failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(unit.seq);
            tracing::error!(job_id = %unit.job, partition = ?unit.partition, "partition synthesis failed");
            sh.budget.release();
            continue;
        }
        let (end, queue) = match unit.partition {
            Some(p) => (
                format!("partition={p},synth_ms={synth_ms}"),
                format!("partition={p}"),
            ),
            None => (format!("synth_ms={synth_ms}"), "monolithic".to_owned()),
        };
        sh.timeline.line("SYNTH_END", &unit.job, &end);
        sh.progress.synthesized.fetch_add(1, Ordering::Relaxed);
        sh.timeline.line("GPU_QUEUE", &unit.job, &queue);
        sh.queue.push(unit);
    }
    if sh.synth_live.fetch_sub(1, Ordering::AcqRel) == 1 {
        sh.queue.close(); // the last synthesis worker is done: nothing more will come
    }
}

/// What the finalizer task is handed: the proof whose GPU part is done.
struct Finish {
    job: Arc<str>,
    partition: Option<u32>,
    /// When `gpu_prove_start` began (cuzk's `gpu_ms` counts from there).
    started: Instant,
}

fn gpu_worker(sh: &Shared, gw: u32) {
    let gpu = gw / sh.cfg.workers_per_gpu.max(1);
    let mut rng =
        SmallRng::seed_from_u64(sh.cfg.seed.wrapping_mul(7919).wrapping_add(u64::from(gw)));
    // the split path's finalizers: a task each (cuzk's plain tokio::spawn), with no span
    let mut finalize = {
        let speed = sh.speed;
        let finalize_ms = sh.cfg.timings.finalize_ms;
        let spread = sh.cfg.timings.spread.clamp(0.0, 0.99);
        let progress = sh.progress.clone();
        let timeline = sh.timeline.clone();
        let stop = sh.stop.clone();
        let mut fin_rng = SmallRng::seed_from_u64(sh.cfg.seed ^ u64::from(gw));
        move |f: Finish| {
            let k = if spread > 0.0 {
                fin_rng.random_range(1.0 - spread..=1.0 + spread)
            } else {
                1.0
            };
            let (progress, timeline, stop) = (progress.clone(), timeline.clone(), stop.clone());
            let d = tracing::dispatcher::get_default(Clone::clone);
            thread::Builder::new()
                .name(format!("finalizer-{gw}"))
                .spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        // b_g2_msm's join, the epilogue, serialization
                        let d = Duration::from_secs_f64(finalize_ms * k / speed / 1000.0);
                        if !nap(&stop, d) {
                            return; // stopped: the proof never finishes
                        }
                        let gpu_ms = (f.started.elapsed().as_secs_f64() * 1000.0 * speed) as u64;
                        timeline.line(
                            "GPU_END",
                            &f.job,
                            &format!("{},gpu_ms={gpu_ms}", gpu_detail(gw, f.partition)),
                        );
                        progress.proved.fetch_add(1, Ordering::Relaxed);
                    })
                })
                .expect("spawn finalizer thread")
        }
    };
    let mut finalizers = Vec::new();

    let mut picked = 0u32;
    while let Some(unit) = sh.queue.pop(&sh.stop) {
        sh.budget.release();
        let kind = unit.kind.kind();
        let detail = gpu_detail(gw, unit.partition);
        // one span per work item, instrumenting its async block: entered at each poll
        let span = info_span!("gpu_worker", worker_id = gw, gpu = gpu, job_id = %unit.job,
            proof_kind = %kind, batch_size = 1u64, partition = ?unit.partition.map(|p| p as usize));
        let failed_job = span.in_scope(|| {
            sh.timeline.line("GPU_PICKUP", &unit.job, &detail);
            if sh.job_failed(unit.seq) {
                return true; // its job failed: dropped after the pickup
            }
            if sh.cfg.gpu_path == GpuPath::Split {
                sh.timeline.line("GPU_START", &unit.job, &detail);
            }
            false
        });
        if failed_job {
            drop(span);
            continue;
        }
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
        let never = sh
            .cfg
            .faults
            .never_finish
            .is_some_and(|(j, p)| j as u64 == unit.seq && unit.partition.unwrap_or(0) == p);
        let started = Instant::now();
        // the blocking part, outside the worker's span (spawn_blocking carries none)
        // (whether it finished: `false` when the run was stopped inside it)
        let prove = |sh: &Shared, rng: &mut SmallRng| {
            if !sh.sleep(rng, sh.cfg.timings.prep_ms) {
                return false;
            }
            if panic_now {
                panic!("simulated GPU worker {gw} panic");
            }
            let _lock = sh.gpu_locks[gpu as usize]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            sh.sleep(rng, kernel * slow)
        };
        match sh.cfg.gpu_path {
            GpuPath::Split => {
                let call =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prove(sh, &mut rng)));
                match call {
                    Ok(true) => {}
                    Ok(false) => {
                        // stopped inside the call: it stays open (its span too)
                        std::mem::forget(span);
                        break;
                    }
                    Err(_) => {
                        // spawn_blocking hands the panic back as an error: logged in the span
                        sh.panicked.fetch_add(1, Ordering::Relaxed);
                        span.in_scope(
                            || tracing::error!(job_id = %unit.job, "GPU proving task panicked"),
                        );
                        drop(span);
                        continue;
                    }
                }
                // a finished finalizer thread keeps its stack until joined: join them as
                // they finish, so that a prover running forever holds only those running
                let (done, running): (Vec<_>, Vec<_>) = finalizers
                    .drain(..)
                    .partition(|h: &thread::JoinHandle<()>| h.is_finished());
                for h in done {
                    let _ = h.join();
                }
                finalizers = running;
                span.in_scope(|| {
                    if !never {
                        finalizers.push(finalize(Finish {
                            job: unit.job.clone(),
                            partition: unit.partition,
                            started,
                        }));
                    }
                });
            }
            GpuPath::Sync => {
                let circuit = kind.as_str();
                let p = info_span!(parent: None, "gpu_prove", circuit_id = %circuit,
                    partition = ?unit.partition.map(|p| p as usize));
                let finished = p.in_scope(|| {
                    prove(sh, &mut rng) && (never || sh.sleep(&mut rng, sh.cfg.timings.finalize_ms))
                });
                if !finished {
                    // stopped inside the call: it stays open (its spans too: closed, the
                    // layer would end the GPU work)
                    std::mem::forget(p);
                    std::mem::forget(span);
                    break;
                }
                drop(p);
                if !never {
                    sh.progress.proved.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if never {
            // the proof never finishes: its work item never returns, its span never closes
            std::mem::forget(span);
            continue;
        }
        drop(span);
    }
    for f in finalizers {
        let _ = f.join();
    }
}
