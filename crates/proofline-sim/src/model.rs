//! The simulated prover's configuration: jobs, pipeline shape, timings and faults.

use std::fmt;
use std::sync::Arc;

/// A kind of proof, with cuzk's partitioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProofKind {
    /// PoRep C2: 10 partitions.
    PoRep,
    /// SnapDeals update: 16 partitions.
    SnapDeals,
    /// WindowPoSt: one whole proof.
    WindowPost,
    /// WinningPoSt: one whole proof.
    WinningPost,
}

impl ProofKind {
    /// Partitions of a job of this kind; `None` for whole-proof kinds.
    pub const fn partitions(self) -> Option<u32> {
        match self {
            ProofKind::PoRep => Some(10),
            ProofKind::SnapDeals => Some(16),
            ProofKind::WindowPost | ProofKind::WinningPost => None,
        }
    }

    /// The `kind=` value cuzk prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProofKind::PoRep => "porep-c2",
            ProofKind::SnapDeals => "snap-update",
            ProofKind::WindowPost => "window-post",
            ProofKind::WinningPost => "winning-post",
        }
    }

    /// A job id in Curio's style for job number `n`.
    pub fn job_id(self, n: u64) -> String {
        match self {
            ProofKind::PoRep => format!("porep-1000-{n}"),
            ProofKind::SnapDeals => format!("snap-1000-{n}"),
            ProofKind::WindowPost => format!("wdpost-1000-{}-[{} {} {}]", n % 48, n, n + 1, n + 2),
            ProofKind::WinningPost => format!("winpost-1000-{n:08x}"),
        }
    }
}

impl fmt::Display for ProofKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job to prove.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobSpec {
    /// Its id.
    pub id: Arc<str>,
    /// Its kind.
    pub kind: ProofKind,
}

impl JobSpec {
    /// Job `id` of `kind`.
    pub fn new(id: impl Into<Arc<str>>, kind: ProofKind) -> Self {
        JobSpec {
            id: id.into(),
            kind,
        }
    }
}

/// Durations in milliseconds of simulated time, each drawn uniformly within `± spread`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Timings {
    /// Synthesis of one partition (cuzk: ~30 s).
    pub synth_ms: f64,
    /// CPU preparation before the GPU lock (~0.3 s).
    pub prep_ms: f64,
    /// The kernel, inside the per-GPU lock (~3.7 s).
    pub kernel_ms: f64,
    /// Finalization after the lock (~0.4 s).
    pub finalize_ms: f64,
    /// Synthesis of a whole-proof job.
    pub whole_synth_ms: f64,
    /// Kernel of a whole-proof job.
    pub whole_kernel_ms: f64,
    /// Relative spread of every duration (0.1 = ±10 %).
    pub spread: f64,
}

impl Default for Timings {
    /// cuzk's published figures.
    fn default() -> Self {
        Timings {
            synth_ms: 30_000.0,
            prep_ms: 300.0,
            kernel_ms: 3_700.0,
            finalize_ms: 400.0,
            whole_synth_ms: 2_000.0,
            whole_kernel_ms: 600.0,
            spread: 0.1,
        }
    }
}

impl Timings {
    /// Every duration divided by `speed` (2.0 runs twice as fast).
    pub fn scaled(&self, speed: f64) -> Timings {
        let s = if speed > 0.0 { speed } else { 1.0 };
        Timings {
            synth_ms: self.synth_ms / s,
            prep_ms: self.prep_ms / s,
            kernel_ms: self.kernel_ms / s,
            finalize_ms: self.finalize_ms / s,
            whole_synth_ms: self.whole_synth_ms / s,
            whole_kernel_ms: self.whole_kernel_ms / s,
            spread: self.spread,
        }
    }
}

/// Faults to inject.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Faults {
    /// Synthesis stalls for `.1` ms in the first partition of job `.0` (index into the job
    /// list), holding the dispatcher: the job is in flight while the GPU runs dry, so the GPU
    /// goes idle between sectors.
    pub stall_before_job: Option<(usize, u64)>,
    /// GPU `.0`'s kernels take `.1` times as long.
    pub slow_gpu: Option<(u32, f64)>,
    /// Partition `.1` of job `.0` never finishes its GPU work (no GPU_END).
    pub never_finish: Option<(usize, u32)>,
    /// The `.1`-th GPU call (0-based) of GPU worker `.0` panics before taking the GPU lock:
    /// cuzk's `spawn_blocking` catches it, the worker logs the error inside its `gpu_worker`
    /// span and goes on; the partition gets no GPU_END (its job stays incomplete).
    pub panic_worker: Option<(u32, u32)>,
    /// The synthesis of partition `.1` of job `.0` fails: cuzk prints no SYNTH_END and no
    /// GPU_QUEUE for it, logs the error outside the synthesis span (which has closed), and
    /// fails the job: its later partitions are not synthesized, those already queued are
    /// picked up and dropped.
    pub fail_synthesis: Option<(usize, u32)>,
}

/// Which of cuzk's GPU paths the threaded mode takes (`CUZK_DISABLE_SPLIT_PROVE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GpuPath {
    /// The default split path: GPU_START printed in the `gpu_worker` task before the GPU
    /// lock, GPU_END by a finalizer task with no span; no span around the GPU work.
    #[default]
    Split,
    /// `CUZK_DISABLE_SPLIT_PROVE=1`: the whole proof in a `gpu_prove{circuit_id, partition}`
    /// span on a blocking thread with no parent and no job id; no GPU_START or GPU_END printed.
    Sync,
}

/// The whole simulated prover: [`SimConfig::porep`] or [`SimConfig::mixed`], then the fields
/// that differ (`cfg.gpus = 2;`). Its structs are `#[non_exhaustive]`: a new setting is no
/// breaking change, and none is built by a literal outside this crate.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SimConfig {
    /// Seed of every random draw: the same seed gives the same log.
    pub seed: u64,
    /// The jobs, in dispatch order.
    pub jobs: Vec<JobSpec>,
    /// Synthesis workers (cuzk's partition workers).
    pub synth_workers: u32,
    /// GPUs.
    pub gpus: u32,
    /// GPU workers per GPU (cuzk default 2).
    pub workers_per_gpu: u32,
    /// Synthesized-or-synthesizing partitions allowed ahead of the GPUs (memory budget).
    pub max_ahead: u32,
    /// Jobs arrive this far apart (0: all queued at the start, as in a bench run).
    pub arrival_interval_ms: u64,
    /// Durations.
    pub timings: Timings,
    /// Faults.
    pub faults: Faults,
    /// Lines are printed up to this many ms out of order, as many threads do.
    pub shuffle_ms: u64,
    /// The GPU path of the threaded mode.
    pub gpu_path: GpuPath,
    /// `CUZK_TIMING:` lines in the log (instant mode), and the CPU work held inside the
    /// GPU lock.
    pub timing: TimingLines,
}

/// cuzk's `CUZK_TIMING:` lines of each GPU call, as the instant mode writes them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct TimingLines {
    /// Write them.
    pub emit: bool,
    /// CPU work (the GPU thread waiting at the barrier on `prep_msm`) inside the GPU lock,
    /// per call, ms (mean): the lock is held this much longer than the kernels run.
    pub cpu_in_lock_ms: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig::porep(5)
    }
}

impl SimConfig {
    /// `n` PoRep sectors on one GPU with two workers and ten synthesis workers, cuzk's shape.
    pub fn porep(n: usize) -> Self {
        SimConfig {
            seed: 1,
            jobs: (0..n)
                .map(|i| JobSpec {
                    id: ProofKind::PoRep.job_id(i as u64).into(),
                    kind: ProofKind::PoRep,
                })
                .collect(),
            synth_workers: 10,
            gpus: 1,
            workers_per_gpu: 2,
            max_ahead: 20,
            arrival_interval_ms: 0,
            timings: Timings::default(),
            faults: Faults::default(),
            shuffle_ms: 0,
            gpu_path: GpuPath::Split,
            timing: TimingLines::default(),
        }
    }

    /// A mix of kinds: mostly PoRep, some SnapDeals, a WindowPoSt and WinningPoSt now and then.
    pub fn mixed(n: usize) -> Self {
        let mut cfg = SimConfig::porep(0);
        cfg.jobs = (0..n as u64)
            .map(|i| {
                let kind = match i % 10 {
                    3 => ProofKind::SnapDeals,
                    6 => ProofKind::WinningPost,
                    9 => ProofKind::WindowPost,
                    _ => ProofKind::PoRep,
                };
                JobSpec {
                    id: kind.job_id(i).into(),
                    kind,
                }
            })
            .collect();
        cfg
    }
}
