//! The simulated prover's shape and faults, as `demo` and `generate` take them.

use anyhow::{Context, Result};
use proofline_sim::SimConfig;

/// The simulated prover's shape and faults, shared by `demo` and `generate`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Jobs (sectors) to prove. Range 1..=1000000.
    #[arg(long, default_value_t = 8,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    jobs: usize,
    /// Mix proof kinds (PoRep, SnapDeals, WindowPoSt, WinningPoSt) instead of PoRep only.
    #[arg(long)]
    pub(crate) mixed: bool,
    /// GPUs. Range 1..=64.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    gpus: u32,
    /// GPU workers per GPU (cuzk's default is 2). Range 1..=64.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    workers_per_gpu: u32,
    /// Synthesis workers. Range 1..=1024.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1024))]
    synth_workers: u32,
    /// Seed of the random durations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fault: synthesis hangs MS milliseconds (cuzk time) in job N's first partition (0-based).
    #[arg(long, value_name = "N:MS", allow_hyphen_values = true)]
    stall: Option<String>,
    /// Fault: GPU G's kernels take FACTOR times as long.
    #[arg(long, value_name = "G:FACTOR", allow_hyphen_values = true)]
    slow_gpu: Option<String>,
    /// Fault: partition P of job J never finishes its GPU work.
    #[arg(long, value_name = "J:P", allow_hyphen_values = true)]
    never_finish: Option<String>,
    /// Fault: GPU worker W's N-th GPU call (0-based) panics; the worker logs it and goes on,
    /// the partition never finishes (as in cuzk, whose spawn_blocking catches the panic).
    #[arg(long, value_name = "W:N", allow_hyphen_values = true)]
    panic_worker: Option<String>,
    /// Kernel time of a partition's GPU call, inside the GPU lock, cuzk ms (cuzk measured
    /// ~3700; its Phase 9 ~1800). Range 1..=600000.
    #[arg(long, default_value_t = 3700, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..=600_000))]
    kernel_ms: u64,
    /// Synthesis time of a partition, cuzk ms (~30000). Range 1..=3600000.
    #[arg(long, default_value_t = 30_000, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    synth_ms: u64,
    /// Write cuzk's `CUZK_TIMING:` lines of each GPU call too (`generate` only).
    #[arg(long)]
    cuzk_timing: bool,
    /// CPU work held inside the GPU lock per call (the GPU waiting on prep_msm), cuzk ms
    /// (`generate --cuzk-timing`): the pipeline looks busy while the kernels idle. Range
    /// 0..=600000.
    #[arg(long, default_value_t = 0, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(0..=600_000))]
    cpu_in_lock_ms: u64,
}

impl SimArgs {
    /// The simulator's configuration; `forever`: jobs go on past `--jobs` (`demo
    /// --forever`, whose job N is of job N mod `--jobs`'s kind), so a fault may name one.
    pub fn sim_config(&self, forever: bool) -> Result<SimConfig> {
        let mut cfg = if self.mixed {
            SimConfig::mixed(self.jobs)
        } else {
            SimConfig::porep(self.jobs)
        };
        cfg.gpus = self.gpus.max(1);
        cfg.workers_per_gpu = self.workers_per_gpu.max(1);
        cfg.synth_workers = self.synth_workers.max(1);
        cfg.seed = self.seed;
        cfg.timings.kernel_ms = self.kernel_ms as f64;
        cfg.timings.synth_ms = self.synth_ms as f64;
        // A fault that names no job, GPU or worker of the run, or that cannot happen, is
        // refused: accepted, it changed nothing and said nothing.
        let jobs = cfg.jobs.len();
        let job = |flag: &str, j: usize| {
            anyhow::ensure!(
                forever || j < jobs,
                "{flag}: job {j} is not one of the run's {jobs} jobs (0..={})",
                jobs - 1
            );
            Ok(())
        };
        if let Some(s) = &self.stall {
            let (j, ms) = parse_pair(s, "--stall")?;
            job("--stall", j)?;
            anyhow::ensure!(
                (1..=86_400_000).contains(&ms),
                "--stall: {ms} ms is out of range 1..=86400000 (a day)"
            );
            cfg.faults.stall_before_job = Some((j, ms));
        }
        if let Some(s) = &self.slow_gpu {
            let (g, factor): (u32, f64) = parse_pair(s, "--slow-gpu")?;
            anyhow::ensure!(
                g < cfg.gpus,
                "--slow-gpu: GPU {g} is not one of the run's {} GPUs (0..={})",
                cfg.gpus,
                cfg.gpus - 1
            );
            // (named as given: 1e308 printed as a float is 309 digits)
            let given = s.split_once(':').map_or(s.as_str(), |(_, f)| f);
            anyhow::ensure!(
                factor > 0.0 && factor <= 1000.0,
                "--slow-gpu: a factor of {given} is out of range: above 0, at most 1000"
            );
            cfg.faults.slow_gpu = Some((g, factor));
        }
        if let Some(s) = &self.never_finish {
            let (j, p): (usize, u32) = parse_pair(s, "--never-finish")?;
            job("--never-finish", j)?;
            let kind = cfg.jobs[j % jobs].kind;
            // (a job proved whole is its partition 0)
            let parts = kind.partitions().unwrap_or(1);
            anyhow::ensure!(
                p < parts,
                "--never-finish: job {j} ({kind}) has {parts} partition(s) (0..={}), not {p}",
                parts - 1
            );
            cfg.faults.never_finish = Some((j, p));
        }
        if let Some(s) = &self.panic_worker {
            let (w, n): (u32, u32) = parse_pair(s, "--panic-worker")?;
            let workers = cfg.gpus * cfg.workers_per_gpu;
            anyhow::ensure!(
                w < workers,
                "--panic-worker: worker {w} is not one of the run's {workers} GPU workers (0..={})",
                workers - 1
            );
            // (a GPU call is a partition's: a worker makes fewer than the run has)
            let calls: u64 = cfg
                .jobs
                .iter()
                .map(|j| u64::from(j.kind.partitions().unwrap_or(1)))
                .sum();
            anyhow::ensure!(
                forever || u64::from(n) < calls,
                "--panic-worker: call {n} is past the run's {calls} GPU calls (0..={})",
                calls - 1
            );
            cfg.faults.panic_worker = Some((w, n));
        }
        cfg.timing.emit = self.cuzk_timing;
        cfg.timing.cpu_in_lock_ms = self.cpu_in_lock_ms as f64;
        Ok(cfg)
    }
}

/// Parses `A:B` flag values.
pub(crate) fn parse_pair<A: std::str::FromStr, B: std::str::FromStr>(
    s: &str,
    flag: &str,
) -> Result<(A, B)> {
    let (a, b) = s
        .split_once(':')
        .with_context(|| format!("{flag} takes two values as A:B, got `{s}`"))?;
    let a = a
        .parse()
        .map_err(|_| anyhow::anyhow!("{flag}: `{a}` is not a valid number"))?;
    let b = b
        .parse()
        .map_err(|_| anyhow::anyhow!("{flag}: `{b}` is not a valid number"))?;
    Ok((a, b))
}
