//! What the model learns from a log: the complete jobs in dispatch order, each partition's
//! synthesis time and GPU lock time, the CPU work around the lock, and the pipeline's shape.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::report::{JobStatus, PartitionRecord, Report};
use crate::sink::{Update, UpdateSink};

use super::model::{Pipeline, QueueOrder};

/// Takes the engine's partition and job records and keeps the complete jobs' partitions:
/// the [`UpdateSink`] a `whatif` reading of a log runs with. Memory: the complete jobs'
/// partition records (about 300 bytes each), and those of the jobs in flight.
#[derive(Debug, Default)]
pub struct Collector {
    in_flight: FxHashMap<(u32, Arc<str>), Vec<Arc<PartitionRecord>>>,
    complete: Vec<ObservedJob>,
}

/// A complete job as the log showed it.
#[derive(Debug, Clone)]
struct ObservedJob {
    run: u32,
    id: Arc<str>,
    kind: Option<Arc<str>>,
    first_synth_start: u64,
    parts: Vec<Arc<PartitionRecord>>,
}

impl UpdateSink for Collector {
    fn update(&mut self, update: Update) {
        match update {
            Update::Partition(p) => self
                .in_flight
                .entry((p.run, p.job_id.clone()))
                .or_default()
                .push(p),
            Update::Job(j) => {
                let parts = self
                    .in_flight
                    .remove(&(j.run, j.job_id.clone()))
                    .unwrap_or_default();
                if j.status == JobStatus::Complete && !parts.is_empty() {
                    self.complete.push(ObservedJob {
                        run: j.run,
                        id: j.job_id.clone(),
                        kind: j.proof_kind.clone(),
                        first_synth_start: j.first_synth_start_ms.unwrap_or(0),
                        parts,
                    });
                }
            }
            _ => {}
        }
    }

    fn wants_partitions(&self) -> bool {
        true
    }

    fn wants_idle_gaps(&self) -> bool {
        false
    }
}

/// One partition (or whole proof) of the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// Partition index; `None` for a whole-proof job.
    pub partition: Option<u32>,
    /// Synthesis time, ms.
    pub synth_ms: f64,
    /// The GPU lock's held time of its call, ms (kernels and any CPU work inside the lock).
    pub held_ms: f64,
}

/// One job of the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Its id (a run's number appended after the first run, so that ids stay distinct).
    pub id: Arc<str>,
    /// Its proof kind, when known.
    pub kind: Option<Arc<str>>,
    /// Its partitions, in index order.
    pub units: Vec<Unit>,
}

/// The measured work, in dispatch order, and the per-call figures the model needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The complete jobs, in the order their synthesis began.
    pub jobs: Vec<Job>,
    /// CPU work of a GPU call before it asks for the lock, ms.
    pub prep_ms: f64,
    /// Work after the lock is released and before GPU_END (cuzk's finalizer), ms.
    pub finalize_ms: f64,
    /// CPU work held inside the lock per call, ms (known only from `CUZK_TIMING`): a
    /// faster GPU does not shorten it.
    pub cpu_in_lock_ms: f64,
}

/// What was learned: the workload, the pipeline as the log shows it, how each figure was
/// obtained, and the log's own measured figures.
#[derive(Debug, Clone)]
pub struct Learned {
    /// The work.
    pub workload: Workload,
    /// The pipeline as the log shows it.
    pub pipeline: Pipeline,
    /// How the figures were obtained, and what had to be assumed.
    pub basis: Basis,
}

/// How the model's figures were obtained from the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Basis {
    /// `lock_held` (`CUZK_TIMING` `mutex_held_ms`) or `timeline` (inferred from the spacing
    /// of GPU_END lines where a call waited for the lock).
    pub gpu_lock: String,
    /// Calls whose lock time was read from a GPU_END spacing, of the calls.
    pub lock_samples: u64,
    /// Calls that took the lock as soon as they asked for it (their interval is prep +
    /// lock + finalizer).
    pub idle_start_samples: u64,
    /// Whether the split of the CPU work around the lock (before it, after it) was seen
    /// (`CUZK_TIMING` `pre_lock_cpu_ms`, or a worker's next call starting before its
    /// previous one ended) or assumed.
    pub prep_finalize_seen: bool,
    /// How the GPU queue hands out partitions: `dispatch` (lowest job, then partition,
    /// first) or `fifo` (in the order they were queued), with the evidence.
    pub queue_order_evidence: String,
    /// Complete jobs learned from.
    pub jobs: u64,
    /// Runs of the log (daemon restarts + 1) they came from.
    pub runs: u32,
    /// Every assumption, in words.
    pub assumptions: Vec<String>,
}

/// Why a log could not be learned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnError(pub String);

impl std::fmt::Display for LearnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LearnError {}

/// A GPU interval of a unit, for the lock inference.
#[derive(Debug, Clone, Copy)]
struct Interval {
    gpu: u32,
    worker: u32,
    start: u64,
    end: u64,
    /// Index of the unit: (job, partition slot).
    unit: (usize, usize),
}

/// Fewer samples than this do not make a figure "seen".
const MIN_SAMPLES: usize = 5;

/// Share of the dispatch period the pipeline must sit at its peak of partitions ahead of
/// the GPUs, with a synthesis worker idle, for the peak to be taken as a memory budget.
const BUDGET_SHARE: f64 = 0.2;

/// A memory budget, when the log shows one: the peak of partitions synthesizing or
/// waiting for a GPU, above the synthesis `pool` (the engine's count), held for at least
/// [`BUDGET_SHARE`] of the time jobs were being dispatched while a synthesis worker idled;
/// with the share of time it was held.
fn memory_budget(jobs: &[ObservedJob], pool: u32) -> Option<(u32, f64)> {
    // (t, order at t: ends first, delta synthesizing, delta ahead)
    let mut edges: Vec<(u64, u8, i64, i64)> = Vec::new();
    let mut last_start = 0;
    for j in jobs {
        for p in &j.parts {
            let Some(s) = p.synth_start_ms else { continue };
            last_start = last_start.max(s);
            edges.push((s, 2, 1, 1));
            if let Some(e) = p.synth_end_ms {
                edges.push((e.max(s), 0, -1, 0));
            }
            if let Some(k) = p.pickup_ms.or(p.gpu_start_ms) {
                edges.push((k.max(s), 1, 0, -1));
            }
        }
    }
    edges.sort_unstable();
    let mut ahead = 0i64;
    let mut peak = 0i64;
    for &(_, _, _, da) in &edges {
        ahead += da;
        peak = peak.max(ahead);
    }
    if peak <= i64::from(pool) {
        return None;
    }
    // time at the peak with a synthesis worker idle, while jobs were still dispatched
    let (mut syn, mut ahead) = (0i64, 0i64);
    let (mut at_cap, mut prev) = (0u64, None::<u64>);
    let first = edges.first().map_or(0, |e| e.0);
    for &(t, _, ds, da) in &edges {
        if let Some(p) = prev {
            let (a, b) = (p.min(last_start), t.min(last_start));
            if ahead == peak && syn < i64::from(pool) && b > a {
                at_cap += b - a;
            }
        }
        syn += ds;
        ahead += da;
        prev = Some(t);
    }
    let span = last_start.saturating_sub(first);
    let share = if span > 0 {
        at_cap as f64 / span as f64
    } else {
        0.0
    };
    let cap = u32::try_from(peak).unwrap_or(u32::MAX);
    (share >= BUDGET_SHARE).then_some((cap, share))
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl Collector {
    /// The workload and pipeline the log shows, with `report` the engine's report of the
    /// same reading.
    pub fn learn(mut self, report: &Report) -> Result<Learned, LearnError> {
        if self.complete.len() < 2 {
            return Err(LearnError(format!(
                "the log has {} complete job(s): the model needs at least two (a steady state to measure seconds per proof)",
                self.complete.len()
            )));
        }
        // dispatch order: runs in order, and within a run the order synthesis began
        self.complete.sort_by(|a, b| {
            (a.run, a.first_synth_start, &a.id).cmp(&(b.run, b.first_synth_start, &b.id))
        });
        let runs = self.complete.iter().map(|j| j.run).max().unwrap_or(0) + 1;
        for j in &mut self.complete {
            j.parts.sort_by_key(|p| p.partition);
        }

        // the GPU shape: devices, workers per device (the most workers seen on one)
        let mut workers: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let mut intervals = Vec::new();
        for (ji, j) in self.complete.iter().enumerate() {
            for (pi, p) in j.parts.iter().enumerate() {
                if let (Some(g), Some(w)) = (p.gpu, p.worker) {
                    let ws = workers.entry(g).or_default();
                    if !ws.contains(&w) {
                        ws.push(w);
                    }
                    if let (Some(s), Some(e)) = (p.gpu_start_ms, p.gpu_end_ms) {
                        if e >= s {
                            intervals.push(Interval {
                                gpu: g,
                                worker: w,
                                start: s,
                                end: e,
                                unit: (ji, pi),
                            });
                        }
                    }
                }
            }
        }
        if intervals.is_empty() {
            return Err(LearnError(
                "no complete job has a GPU interval with its GPU and worker (GPU_START and GPU_END with worker=): there is no GPU work to model".to_owned(),
            ));
        }
        let gpus = u32::try_from(workers.len()).unwrap_or(u32::MAX).max(1);
        let per_gpu = workers.values().map(Vec::len).max().unwrap_or(1).max(1);
        let per_gpu = u32::try_from(per_gpu).unwrap_or(u32::MAX);
        let synthesis_workers = report
            .floors
            .as_ref()
            .map_or(1, |f| f.synthesis_workers)
            .max(1);
        let budget = memory_budget(&self.complete, synthesis_workers);

        let mut assumptions = Vec::new();
        let (queue_order, queue_order_evidence) = queue_order(&self.complete);

        // ---- the GPU call: finalizer, lock time, CPU before the lock ----
        // finalizer: a worker takes its next partition the moment it releases the lock, while
        // its finalizer still runs: next start .. previous end is the finalizer's length
        let mut by_worker: BTreeMap<(u32, u32), Vec<Interval>> = BTreeMap::new();
        for iv in &intervals {
            by_worker.entry((iv.gpu, iv.worker)).or_default().push(*iv);
        }
        let mut fin_samples = Vec::new();
        for ivs in by_worker.values_mut() {
            ivs.sort_by_key(|iv| (iv.start, iv.end));
            for w in ivs.windows(2) {
                if w[1].start < w[0].end {
                    fin_samples.push((w[0].end - w[1].start) as f64);
                }
            }
        }
        let fin_median = median(&mut fin_samples);
        let fin_guess = fin_median.unwrap_or(0.0);
        let fin_seen = fin_median.filter(|_| fin_samples.len() >= MIN_SAMPLES);

        // lock time: on a GPU, a call that asked for the lock before the previous holder
        // released it takes the lock at that release; their GPU_ENDs are then one lock time
        // apart (both finalizers being alike)
        let mut by_gpu: BTreeMap<u32, Vec<Interval>> = BTreeMap::new();
        for iv in &intervals {
            by_gpu.entry(iv.gpu).or_default().push(*iv);
        }
        let mut held: FxHashMap<(usize, usize), f64> = FxHashMap::default();
        let mut idle_start: Vec<Interval> = Vec::new();
        for ivs in by_gpu.values_mut() {
            ivs.sort_by_key(|iv| (iv.end, iv.start));
            for w in ivs.windows(2) {
                let (a, b) = (w[0], w[1]);
                if b.start as f64 <= a.end as f64 - fin_guess && b.end >= a.end {
                    held.insert(b.unit, (b.end - a.end) as f64);
                }
            }
            // calls that took the lock as soon as they asked: no other call on the GPU
            // released it in between (its GPU_END, a finalizer after the release, falls
            // inside this call's interval past the finalizer a call may start under)
            let mut ends: Vec<u64> = ivs.iter().map(|iv| iv.end).collect();
            ends.sort_unstable();
            let after = (fin_guess * 1.5).ceil() as u64 + 1;
            for iv in ivs.iter() {
                let lo = iv.start.saturating_add(after);
                if lo >= iv.end {
                    continue;
                }
                // ends in (lo, iv.end): another release while this call was in flight
                let from = ends.partition_point(|&e| e <= lo);
                let to = ends.partition_point(|&e| e < iv.end);
                if from >= to {
                    idle_start.push(*iv);
                }
            }
        }
        let lock_samples = held.len() as u64;
        let kind_of = |u: (usize, usize)| -> Option<Arc<str>> {
            let j = &self.complete[u.0];
            j.kind.clone().or_else(|| j.parts[u.1].proof_kind.clone())
        };
        let whole = |u: (usize, usize)| self.complete[u.0].parts[u.1].partition.is_none();
        // the lock time of each kind (whole proofs apart from partitions)
        let mut by_kind: BTreeMap<(Option<Arc<str>>, bool), Vec<f64>> = BTreeMap::new();
        for (&u, &h) in &held {
            by_kind.entry((kind_of(u), whole(u))).or_default().push(h);
        }
        let kind_held: BTreeMap<(Option<Arc<str>>, bool), f64> = by_kind
            .into_iter()
            .filter_map(|(k, mut v)| median(&mut v).map(|m| (k, m)))
            .collect();
        // the CPU work around the lock, from the calls that took it as soon as they asked:
        // their interval is prep + lock + finalizer
        let mut around = Vec::new();
        for iv in &idle_start {
            if let Some(h) = kind_held.get(&(kind_of(iv.unit), whole(iv.unit))) {
                around.push(((iv.end - iv.start) as f64 - h).max(0.0));
            }
        }
        let around_n = around.len();
        let around_seen = median(&mut around).filter(|_| around_n >= MIN_SAMPLES);
        // the CPU work before the lock matters only with one GPU worker per device (with
        // more it overlaps another worker's lock time): said when it had to be assumed
        let unseen_prep = format!(
            "the CPU work before the GPU lock is taken as 0: too few calls ({around_n}, fewer than {MIN_SAMPLES}) took the lock the moment they asked to measure it (a saturated GPU hides it under the other workers' lock time); with one GPU worker per device the prediction is optimistic by that work a call"
        );
        let (mut prep, mut fin) = match (around_seen, fin_seen) {
            (Some(o), Some(f)) => ((o - f).max(0.0), f),
            (Some(o), None) => {
                assumptions.push(format!(
                    "the CPU work around the GPU lock ({o:.0} ms a call) is taken as after the lock (the finalizer): too few of a worker's calls overlapped to show the split; with one GPU worker per device the prediction is optimistic by up to that much a call"
                ));
                (0.0, o)
            }
            (None, Some(f)) => {
                assumptions.push(unseen_prep.clone());
                (0.0, f)
            }
            (None, None) => {
                assumptions.push(format!(
                    "{unseen_prep}; the finalizer after the lock is taken as 0 too (too few of a worker's calls overlapped): every GPU interval is lock time"
                ));
                (0.0, 0.0)
            }
        };
        let mut prep_finalize_seen = around_seen.is_some() && fin_seen.is_some();

        // the lock time of every unit: its own spacing where seen, else its interval less the
        // CPU work around the lock when it took the lock at once, else its kind's median
        let mut idle_units: FxHashMap<(usize, usize), f64> = FxHashMap::default();
        for iv in &idle_start {
            idle_units.insert(iv.unit, ((iv.end - iv.start) as f64 - prep - fin).max(1.0));
        }
        let fallback_all = median(&mut held.values().copied().collect::<Vec<_>>());
        let unit_held = |u: (usize, usize), gpu_ms: Option<f64>| -> f64 {
            if let Some(&h) = held.get(&u) {
                return h;
            }
            if let Some(&h) = idle_units.get(&u) {
                return h;
            }
            if let Some(&h) = kind_held.get(&(kind_of(u), whole(u))) {
                return h;
            }
            gpu_ms
                .map(|g| (g - prep - fin).max(1.0))
                .or(fallback_all)
                .unwrap_or(1.0)
        };

        // synthesis: each partition's own time; a partition without one takes its kind's mean
        let mut synth_kind: BTreeMap<(Option<Arc<str>>, bool), Vec<f64>> = BTreeMap::new();
        for (ji, j) in self.complete.iter().enumerate() {
            for (pi, p) in j.parts.iter().enumerate() {
                if let Some(s) = synth_of(p) {
                    synth_kind
                        .entry((kind_of((ji, pi)), whole((ji, pi))))
                        .or_default()
                        .push(s);
                }
            }
        }
        let synth_mean: BTreeMap<_, f64> = synth_kind
            .iter()
            .filter_map(|(k, v)| mean(v).map(|m| (k.clone(), m)))
            .collect();
        let mut jobs = Vec::with_capacity(self.complete.len());
        let mut synth_missing = 0u64;
        for (ji, j) in self.complete.iter().enumerate() {
            let mut units = Vec::with_capacity(j.parts.len());
            for (pi, p) in j.parts.iter().enumerate() {
                let u = (ji, pi);
                let synth_ms = synth_of(p).unwrap_or_else(|| {
                    synth_missing += 1;
                    synth_mean
                        .get(&(kind_of(u), whole(u)))
                        .copied()
                        .unwrap_or(0.0)
                });
                let gpu_ms = match (p.gpu_start_ms, p.gpu_end_ms) {
                    (Some(s), Some(e)) if e >= s => Some((e - s) as f64),
                    _ => p.gpu_reported_ms.map(|g| g as f64),
                };
                units.push(Unit {
                    partition: p.partition,
                    synth_ms,
                    held_ms: unit_held(u, gpu_ms),
                });
            }
            let id: Arc<str> = if j.run == 0 {
                j.id.clone()
            } else {
                format!("{}~run{}", j.id, j.run).into()
            };
            jobs.push(Job {
                id,
                kind: j.kind.clone(),
                units,
            });
        }
        if synth_missing > 0 {
            assumptions.push(format!(
                "{synth_missing} partition(s) had no synthesis interval: given their kind's mean synthesis time"
            ));
        }

        // with CUZK_TIMING lines the prover says the lock's held time, its wait and the CPU
        // work before the lock: those replace the inferred figures (the per-call shape of the
        // inference is kept, scaled to the measured mean)
        let mut gpu_lock = "timeline".to_owned();
        let mut cpu_in_lock = 0.0;
        if let Some(k) = report.kernel.as_ref().filter(|k| k.calls > 0) {
            let calls = k.calls as f64;
            let held_mean = k.lock_held_ms as f64 / calls;
            let units: Vec<&mut Unit> = jobs.iter_mut().flat_map(|j| j.units.iter_mut()).collect();
            let model_mean =
                mean(&units.iter().map(|u| u.held_ms).collect::<Vec<_>>()).unwrap_or(0.0);
            if held_mean > 0.0 && model_mean > 0.0 {
                let scale = held_mean / model_mean;
                for u in units {
                    u.held_ms *= scale;
                }
                gpu_lock = "lock_held".to_owned();
                // the CPU work inside the lock is the lock's time less the kernels', known
                // only where the kernel lines cover the calls
                let covered = k.kernel_ms > 0
                    && k.coverage
                        .is_some_and(|c| c >= crate::engine::KERNEL_COVERAGE_MIN);
                if covered {
                    cpu_in_lock = k.lock_held_not_kernel_ms as f64 / calls;
                } else {
                    assumptions.push(format!(
                        "the CUZK_TIMING lines give the lock's time but not the kernels' for {} of the calls: all the lock time is taken as GPU work (a faster GPU shortens all of it)",
                        k.coverage.map_or("most".to_owned(), |c| format!("{:.0} %", (1.0 - c.min(1.0)) * 100.0))
                    ));
                }
                if let Some(p) = k.pre_lock_cpu.mean_ms.filter(|_| k.pre_lock_cpu.count > 0) {
                    prep = p;
                    // what had to be assumed about the CPU work around the lock is now seen
                    assumptions.retain(|a| !a.starts_with("the CPU work"));
                    // the GPU interval is prep + wait + lock + finalizer: the finalizer is
                    // what the means leave
                    if let (Some(g), Some(w)) = (report.stages.gpu.mean_ms, k.lock_wait.mean_ms) {
                        fin = (g - w - held_mean - p).max(0.0);
                    }
                    prep_finalize_seen = true;
                }
            }
        } else {
            assumptions.push(
                "no CUZK_TIMING lines: the GPU lock's held time is inferred from the TIMELINE (the spacing of GPU_END lines on a GPU where a call waited for the lock), and every part of it is taken as GPU work (a faster GPU shortens all of it)"
                    .to_owned(),
            );
        }
        assumptions.push(
            "every job is waiting from the start (a backlog): the prediction is the pipeline's capacity, not a replay of when work arrived".to_owned(),
        );
        assumptions.push(
            "a partition's synthesis time does not depend on how many synthesize at once (CPU contention, memory bandwidth): more synthesis workers than cores, or than memory allows, will be slower than predicted".to_owned(),
        );
        match budget {
            Some((cap, share)) => assumptions.push(format!(
                "a memory budget holds synthesis back: at most {cap} partitions synthesizing or waiting for a GPU (the log sat there with synthesis workers idle {:.0} % of the time); every prediction keeps it (--max-ahead changes it)",
                share * 100.0
            )),
            None => assumptions.push(
                "no memory budget was seen holding synthesis back (partitions ahead of the GPUs): none is modelled unless --max-ahead gives one".to_owned(),
            ),
        }
        assumptions.push(format!(
            "GPU workers were given to GPUs as the engine read the log: by gpu= where a line carries it, else worker / {} (--log-gpu-workers-per-device): a wrong mapping makes one device's workers look like two devices",
            report.gpu_workers_per_device
        ));
        if runs > 1 {
            assumptions.push(format!(
                "the log holds {runs} runs (daemon restarts): their jobs are replayed as one backlog through one pipeline, the largest shape the log shows"
            ));
        }
        if self.complete.len() < 5 {
            assumptions.push(format!(
                "only {} complete jobs: the steady state is short, and every figure is noisy",
                self.complete.len()
            ));
        }

        Ok(Learned {
            workload: Workload {
                jobs,
                prep_ms: prep,
                finalize_ms: fin,
                cpu_in_lock_ms: cpu_in_lock,
            },
            pipeline: Pipeline {
                synthesis_workers,
                gpus,
                gpu_workers_per_device: per_gpu,
                gpu_speed: 1.0,
                synthesis_speed: 1.0,
                queue_order,
                max_ahead: budget.map(|(cap, _)| cap),
            },
            basis: Basis {
                gpu_lock,
                lock_samples,
                idle_start_samples: idle_start.len() as u64,
                prep_finalize_seen,
                queue_order_evidence,
                jobs: self.complete.len() as u64,
                runs,
                assumptions,
            },
        })
    }
}

/// A partition's synthesis time: its interval, else what the prover printed.
fn synth_of(p: &PartitionRecord) -> Option<f64> {
    match (p.synth_start_ms, p.synth_end_ms) {
        (Some(s), Some(e)) if e >= s => Some((e - s) as f64),
        _ => p.synth_reported_ms.map(|v| v as f64),
    }
}

/// How the GPU queue hands out partitions, judged from consecutive pickups: the order
/// (dispatch or queueing) that the log breaks less often.
fn queue_order(jobs: &[ObservedJob]) -> (QueueOrder, String) {
    // (pickup, queued, dispatch rank)
    let mut picks: Vec<(u64, u64, (usize, u32))> = Vec::new();
    for (ji, j) in jobs.iter().enumerate() {
        for p in &j.parts {
            if let (Some(pick), Some(q)) = (p.pickup_ms, p.queue_start_ms) {
                picks.push((pick, q, (ji, p.partition.unwrap_or(0))));
            }
        }
    }
    picks.sort_unstable();
    let (mut fifo_broken, mut dispatch_broken) = (0u64, 0u64);
    for w in picks.windows(2) {
        let (a, b) = (w[0], w[1]);
        // both were waiting when the first was picked: the queue chose between them
        if b.1 <= a.0 && a.0 < b.0 {
            if b.1 < a.1 {
                fifo_broken += 1;
            }
            if b.2 < a.2 {
                dispatch_broken += 1;
            }
        }
    }
    let order = if fifo_broken < dispatch_broken {
        QueueOrder::Fifo
    } else {
        QueueOrder::Dispatch
    };
    (
        order,
        format!(
            "of consecutive pickups with both partitions waiting, {dispatch_broken} broke dispatch order and {fifo_broken} broke queueing order"
        ),
    )
}
