//! What would change the throughput: the log's measured work replayed through the pipeline
//! under other settings.
//!
//! ```text
//!  log ─► engine ─► Collector (complete jobs' partitions) ─► learn ─► Workload + Pipeline
//!  Workload + Pipeline (changed) ─► model::simulate ─► TIMELINE events ─► engine ─► figures
//! ```
//!
//! The predicted run goes through the same engine as the log did, so its seconds per proof,
//! busy ratio and verdict are defined exactly as the report's. The log's own configuration
//! is replayed too (`baseline.replayed`): its distance from the measured figure is the
//! model's error on this log, and a prediction is best read as a change from the replay.

mod learn;
pub mod model;

use serde::{Deserialize, Serialize};

pub use learn::{Basis, Collector, Job, LearnError, Learned, Unit, Workload};
pub use model::{Pipeline, QueueOrder, simulate};

use crate::engine::{Engine, EngineConfig};
use crate::report::Report;
use crate::sink::NoUpdates;

/// The job timeout of the engine that analyzes a replay: a year.
const REPLAY_JOB_TIMEOUT_MS: u64 = 365 * 24 * 3600 * 1000;

/// Version of the `whatif --format json` document.
pub const SCHEMA_VERSION: u32 = 1;

/// A run's headline figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Steady-state seconds per proof.
    pub seconds_per_proof: Option<f64>,
    /// The GPUs' busy ratio (merged intervals), the steady state's where there is one.
    pub gpu_busy_ratio: Option<f64>,
    /// What bounds throughput (`gpu_bound`, `synthesis_bound`, ...).
    pub verdict: String,
    /// Complete jobs.
    pub jobs_complete: u64,
}

impl Figures {
    /// A report's figures.
    pub fn of(r: &Report) -> Figures {
        Figures {
            seconds_per_proof: r.summary.seconds_per_proof,
            gpu_busy_ratio: r.summary.steady_busy_ratio.or(r.summary.busy_ratio),
            verdict: r.verdict.bound.as_str().to_owned(),
            jobs_complete: r.summary.jobs_complete,
        }
    }
}

/// Runs `w` through `p` and analyzes the run with `cfg` (the settings the log was read
/// with): the figures a prover so configured would show. `p` has at most
/// [`crate::engine::MAX_WORKER`] GPU workers in all ([`check_workers`]): the engine rejects
/// the replay's events of any past it.
pub fn predict(w: &Workload, p: &Pipeline, cfg: &EngineConfig) -> Figures {
    let mut cfg = cfg.clone();
    // every job of the replay is the model's own: none is evicted for silence (a slowed
    // pipeline's jobs are quiet for long) and none is over the cap of jobs in flight
    cfg.job_timeout_ms = REPLAY_JOB_TIMEOUT_MS;
    // and no call of the model is stuck: a GPU slowed a thousandfold holds its lock for
    // half an hour, as the model says
    cfg.stuck_min_ms = 0;
    cfg.max_jobs_in_flight = cfg.max_jobs_in_flight.max(w.jobs.len() + 1);
    let mut e = Engine::new(cfg);
    for ev in simulate(w, p) {
        e.ingest(&ev.as_event_ref(), &mut NoUpdates);
    }
    e.finish(&mut NoUpdates);
    Figures::of(&e.report())
}

/// Whether each configuration asked for (`changes`, and `changes` at each of `sweep`'s
/// values, against the log's pipeline `log`) has at most [`crate::engine::MAX_WORKER`] GPU
/// workers in all (GPUs x workers per device): the replay numbers its workers from 0, and
/// the engine rejects a worker index past that as absurd (its figures would be wrong).
pub fn check_workers(
    log: &Pipeline,
    changes: &Changes,
    sweep: Option<&Sweep>,
) -> Result<(), String> {
    let max = crate::engine::MAX_WORKER;
    let check = |c: &Changes| {
        let p = c.apply(log);
        let (g, w) = (p.gpus.max(1), p.gpu_workers_per_device.max(1));
        let n = u64::from(g) * u64::from(w);
        if n > u64::from(max) {
            return Err(format!(
                "{g} GPUs of {w} GPU workers each are {n} workers: a prediction follows at most {max}"
            ));
        }
        Ok(())
    };
    check(changes)?;
    if let Some(s) = sweep {
        for &v in &s.values {
            let mut c = changes.clone();
            c.set(s.param, v);
            check(&c).map_err(|e| format!("--sweep {}={v}: {e}", s.param.name()))?;
        }
    }
    Ok(())
}

/// The changes asked for; `None` keeps the log's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    /// Synthesis workers.
    pub synthesis_workers: Option<u32>,
    /// GPU devices.
    pub gpus: Option<u32>,
    /// GPU workers per device.
    pub gpu_workers_per_device: Option<u32>,
    /// GPU work this many times as fast.
    pub gpu_speed: Option<f64>,
    /// Synthesis this many times as fast.
    pub synthesis_speed: Option<f64>,
    /// A memory budget: partitions synthesizing or waiting for a GPU at most.
    pub max_ahead: Option<u32>,
}

impl Changes {
    /// `p` with these changes.
    pub fn apply(&self, p: &Pipeline) -> Pipeline {
        let mut q = p.clone();
        if let Some(v) = self.synthesis_workers {
            q.synthesis_workers = v;
        }
        if let Some(v) = self.gpus {
            q.gpus = v;
        }
        if let Some(v) = self.gpu_workers_per_device {
            q.gpu_workers_per_device = v;
        }
        if let Some(v) = self.gpu_speed {
            q.gpu_speed = v;
        }
        if let Some(v) = self.synthesis_speed {
            q.synthesis_speed = v;
        }
        if self.max_ahead.is_some() {
            q.max_ahead = self.max_ahead;
        }
        q
    }

    /// Whether one parameter is set.
    pub fn is_set(&self, param: Param) -> bool {
        match param {
            Param::SynthesisWorkers => self.synthesis_workers.is_some(),
            Param::Gpus => self.gpus.is_some(),
            Param::GpuWorkersPerDevice => self.gpu_workers_per_device.is_some(),
            Param::GpuSpeed => self.gpu_speed.is_some(),
            Param::SynthesisSpeed => self.synthesis_speed.is_some(),
            Param::MaxAhead => self.max_ahead.is_some(),
        }
    }

    /// Sets one parameter to `v`.
    pub fn set(&mut self, param: Param, v: f64) {
        let n = || v.round().clamp(1.0, f64::from(u32::MAX)) as u32;
        match param {
            Param::SynthesisWorkers => self.synthesis_workers = Some(n()),
            Param::Gpus => self.gpus = Some(n()),
            Param::GpuWorkersPerDevice => self.gpu_workers_per_device = Some(n()),
            Param::GpuSpeed => self.gpu_speed = Some(v),
            Param::SynthesisSpeed => self.synthesis_speed = Some(v),
            Param::MaxAhead => self.max_ahead = Some(n()),
        }
    }

    /// The changes in words, against the log's pipeline: `synthesis workers 10 -> 20`.
    pub fn describe(&self, log: &Pipeline) -> Vec<String> {
        let to = self.apply(log);
        let mut v = Vec::new();
        let mut int = |name: &str, a: u32, b: u32| {
            if a != b {
                v.push(format!("{name} {a} -> {b}"));
            }
        };
        int(
            "synthesis workers",
            log.synthesis_workers,
            to.synthesis_workers,
        );
        int("GPUs", log.gpus, to.gpus);
        int(
            "GPU workers per device",
            log.gpu_workers_per_device,
            to.gpu_workers_per_device,
        );
        if (to.gpu_speed - 1.0).abs() > 1e-12 {
            v.push(format!("GPU work {}x as fast", to.gpu_speed));
        }
        if (to.synthesis_speed - 1.0).abs() > 1e-12 {
            v.push(format!("synthesis {}x as fast", to.synthesis_speed));
        }
        if to.max_ahead != log.max_ahead {
            v.push(match to.max_ahead {
                Some(m) => format!("at most {m} partitions ahead of the GPUs"),
                None => "no memory budget".to_owned(),
            });
        }
        v
    }
}

/// A parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Param {
    /// `synthesis-workers`.
    SynthesisWorkers,
    /// `gpus`.
    Gpus,
    /// `gpu-workers-per-device`.
    GpuWorkersPerDevice,
    /// `gpu-speed`.
    GpuSpeed,
    /// `synthesis-speed`.
    SynthesisSpeed,
    /// `max-ahead`.
    MaxAhead,
}

impl Param {
    const ALL: [(&'static str, Param); 6] = [
        ("synthesis-workers", Param::SynthesisWorkers),
        ("gpus", Param::Gpus),
        ("gpu-workers-per-device", Param::GpuWorkersPerDevice),
        ("gpu-speed", Param::GpuSpeed),
        ("synthesis-speed", Param::SynthesisSpeed),
        ("max-ahead", Param::MaxAhead),
    ];

    /// Its name, as `--sweep` takes it.
    pub fn name(self) -> &'static str {
        Param::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }

    fn integer(self) -> bool {
        !matches!(self, Param::GpuSpeed | Param::SynthesisSpeed)
    }

    /// The values it takes, as its flag does: (least, most).
    pub fn range(self) -> (f64, f64) {
        match self {
            Param::SynthesisWorkers => (1.0, 4096.0),
            Param::Gpus => (1.0, 1024.0),
            Param::GpuWorkersPerDevice => (1.0, 64.0),
            Param::GpuSpeed | Param::SynthesisSpeed => (0.001, 1000.0),
            Param::MaxAhead => (1.0, 1_000_000.0),
        }
    }
}

/// The most configurations one sweep may ask for.
pub const MAX_SWEEP_POINTS: usize = 1000;

/// A sweep: one parameter over several values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// The parameter.
    pub param: Param,
    /// Its values, in order.
    pub values: Vec<f64>,
}

impl std::str::FromStr for Sweep {
    type Err = String;

    /// `NAME=A..B` (integers A to B, both included), `NAME=A..B:STEP`, or `NAME=V1,V2,...`.
    fn from_str(s: &str) -> Result<Self, String> {
        let names = || {
            Param::ALL
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (name, spec) = s.split_once('=').ok_or_else(|| {
            format!(
                "`{s}`: a sweep is NAME=A..B, NAME=A..B:STEP or NAME=V1,V2,... (NAME one of {})",
                names()
            )
        })?;
        let param = Param::ALL
            .iter()
            .find(|(n, _)| *n == name.trim())
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                format!(
                    "`{name}` is no parameter a sweep can vary (one of {})",
                    names()
                )
            })?;
        let num = |t: &str| -> Result<f64, String> {
            let v: f64 = t
                .trim()
                .parse()
                .map_err(|_| format!("`{t}` in `{s}` is not a number"))?;
            let (lo, hi) = param.range();
            if !v.is_finite() || v <= 0.0 || v < lo || v > hi {
                return Err(format!(
                    "`{t}` in `{s}`: {} takes values from {lo} to {hi}",
                    param.name()
                ));
            }
            if param.integer() && v.fract() != 0.0 {
                return Err(format!(
                    "`{t}` in `{s}`: {} takes whole numbers",
                    param.name()
                ));
            }
            Ok(v)
        };
        let values = if let Some((a, rest)) = spec.split_once("..") {
            let (b, step) = match rest.split_once(':') {
                Some((b, st)) => (b, num(st)?),
                None => (rest, 1.0),
            };
            let (a, b) = (num(a)?, num(b)?);
            if b < a {
                return Err(format!(
                    "`{s}`: the range ends ({b}) before it starts ({a})"
                ));
            }
            let n = ((b - a) / step + 1e-9).floor() as usize + 1;
            if n > MAX_SWEEP_POINTS {
                return Err(format!(
                    "`{s}` asks for {n} configurations; at most {MAX_SWEEP_POINTS}"
                ));
            }
            // at the inputs' own precision: a + step * i is 0.30000000000000004 for 0.1 +
            // 0.1 * 2, which the rows then showed (a fractional parameter is at most 1000;
            // whole numbers, up to 1e6, come out exact)
            (0..n)
                .map(|i| ((a + step * i as f64) * 1e12).round() / 1e12)
                .collect()
        } else {
            let v = spec.split(',').map(num).collect::<Result<Vec<_>, _>>()?;
            if v.len() > MAX_SWEEP_POINTS {
                return Err(format!(
                    "`{s}` asks for {} configurations; at most {MAX_SWEEP_POINTS}",
                    v.len()
                ));
            }
            v
        };
        Ok(Sweep { param, values })
    }
}

/// The baseline a prediction stands beside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// What the log measured.
    pub measured: Figures,
    /// The model's replay of the log's own configuration.
    pub replayed: Figures,
    /// replayed / measured - 1 (seconds per proof): the model's error on this log.
    pub replay_error: Option<f64>,
}

/// One predicted configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The pipeline predicted.
    pub pipeline: Pipeline,
    /// Its figures (in JSON, beside `pipeline`: `seconds_per_proof`, `gpu_busy_ratio`,
    /// `verdict`, `jobs_complete`).
    #[serde(flatten)]
    pub figures: Figures,
    /// predicted / replayed seconds per proof - 1: the change the model predicts.
    pub change_from_replayed: Option<f64>,
}

/// What the model used, per call and per partition (means, ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFigures {
    /// Synthesis per partition (mean over the complete jobs).
    pub synthesis_ms: f64,
    /// The GPU lock's held time per call (mean).
    pub lock_ms: f64,
    /// CPU work before the lock.
    pub prep_ms: f64,
    /// Work after the lock (the finalizer).
    pub finalize_ms: f64,
    /// CPU work inside the lock (not sped up by a faster GPU).
    pub cpu_in_lock_ms: f64,
}

/// The whole answer of `proofline whatif`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The pipeline the log shows.
    pub log_pipeline: Pipeline,
    /// The changes, in words.
    pub changes: Vec<String>,
    /// The log's figures and the model's replay of them.
    pub baseline: Baseline,
    /// The changed configuration's figures.
    pub predicted: Prediction,
    /// The sweep's rows (absent without `--sweep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepResult>,
    /// What the model used.
    pub model: ModelFigures,
    /// How it was learned, and what was assumed.
    pub basis: Basis,
}

/// A sweep's rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// The parameter varied.
    pub param: Param,
    /// One row per value.
    pub rows: Vec<SweepRow>,
}

/// A sweep's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The parameter's value.
    pub value: f64,
    /// The prediction there (the other changes applied too).
    pub predicted: Prediction,
}

fn change(a: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (a, base) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b - 1.0),
        _ => None,
    }
}

/// Answers: the baseline, the changed configuration and the sweep.
pub fn answer(
    learned: &Learned,
    report: &Report,
    changes: &Changes,
    sweep: Option<&Sweep>,
    cfg: &EngineConfig,
) -> Answer {
    let w = &learned.workload;
    let measured = Figures::of(report);
    let replayed = predict(w, &learned.pipeline, cfg);
    let replay_error = change(replayed.seconds_per_proof, measured.seconds_per_proof);
    let at = |c: &Changes| {
        let pipeline = c.apply(&learned.pipeline);
        let figures = predict(w, &pipeline, cfg);
        Prediction {
            change_from_replayed: change(figures.seconds_per_proof, replayed.seconds_per_proof),
            pipeline,
            figures,
        }
    };
    let predicted = at(changes);
    let sweep = sweep.map(|s| SweepResult {
        param: s.param,
        rows: s
            .values
            .iter()
            .map(|&v| {
                let mut c = changes.clone();
                c.set(s.param, v);
                SweepRow {
                    value: v,
                    predicted: at(&c),
                }
            })
            .collect(),
    });
    let units: Vec<&Unit> = w.jobs.iter().flat_map(|j| &j.units).collect();
    let n = units.len().max(1) as f64;
    Answer {
        schema_version: SCHEMA_VERSION,
        log_pipeline: learned.pipeline.clone(),
        changes: changes.describe(&learned.pipeline),
        baseline: Baseline {
            measured,
            replayed,
            replay_error,
        },
        predicted,
        sweep,
        model: ModelFigures {
            synthesis_ms: units.iter().map(|u| u.synth_ms).sum::<f64>() / n,
            lock_ms: units.iter().map(|u| u.held_ms).sum::<f64>() / n,
            prep_ms: w.prep_ms,
            finalize_ms: w.finalize_ms,
            cpu_in_lock_ms: w.cpu_in_lock_ms,
        },
        basis: learned.basis.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_parse_ranges_steps_and_lists() {
        let s: Sweep = "synthesis-workers=2..5".parse().unwrap();
        assert_eq!(s.param, Param::SynthesisWorkers);
        assert_eq!(s.values, vec![2.0, 3.0, 4.0, 5.0]);
        let s: Sweep = "synthesis-workers=2..16:7".parse().unwrap();
        assert_eq!(s.values, vec![2.0, 9.0, 16.0]);
        // a fractional step lands on the decimals written, not beside them
        let s: Sweep = "gpu-speed=0.1..0.3:0.1".parse().unwrap();
        assert_eq!(s.values, vec![0.1, 0.2, 0.3]);
        let s: Sweep = "gpu-speed=0.5..1:0.1".parse().unwrap();
        assert_eq!(s.values, vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0]);
        let s: Sweep = "gpu-speed=1,1.5,2".parse().unwrap();
        assert_eq!((s.param, s.values), (Param::GpuSpeed, vec![1.0, 1.5, 2.0]));
        for (bad, says) in [
            ("synthesis-workers", "NAME=A..B"),
            ("cores=1..2", "no parameter"),
            ("gpus=2..1", "ends (1) before it starts (2)"),
            ("gpus=1.5..3", "whole numbers"),
            ("gpu-speed=0,1", "from 0.001 to 1000"),
            ("gpu-speed=1e-300", "from 0.001 to 1000"),
            ("gpus=2000", "from 1 to 1024"),
            ("gpu-workers-per-device=100", "from 1 to 64"),
            ("gpus=x", "`x`"),
            ("synthesis-workers=1..4000:1", "at most 1000"),
        ] {
            let e = bad.parse::<Sweep>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// `is_set` reads the field `set` writes, for every parameter.
    #[test]
    fn a_parameter_set_reads_as_set_and_no_other() {
        for (_, p) in Param::ALL {
            let mut c = Changes::default();
            c.set(p, 2.0);
            for (_, q) in Param::ALL {
                assert_eq!(c.is_set(q), p == q, "{p:?} set, {q:?} read");
            }
        }
    }

    #[test]
    fn changes_apply_and_say_what_changed() {
        let log = Pipeline {
            synthesis_workers: 10,
            gpus: 1,
            gpu_workers_per_device: 2,
            gpu_speed: 1.0,
            synthesis_speed: 1.0,
            queue_order: QueueOrder::Dispatch,
            max_ahead: None,
        };
        let mut c = Changes {
            synthesis_workers: Some(20),
            ..Changes::default()
        };
        c.set(Param::GpuSpeed, 1.5);
        let p = c.apply(&log);
        assert_eq!((p.synthesis_workers, p.gpus, p.gpu_speed), (20, 1, 1.5));
        assert_eq!(
            c.describe(&log),
            vec!["synthesis workers 10 -> 20", "GPU work 1.5x as fast"]
        );
        assert!(Changes::default().describe(&log).is_empty());
    }

    /// A configuration of more GPU workers than the engine follows is refused, by name, in
    /// a change or at a sweep's value; one at the limit is predicted whole: every job of a
    /// workload that uses worker 4 095 completes.
    #[test]
    fn more_gpu_workers_than_the_engine_follows_are_refused() {
        let log = Pipeline {
            synthesis_workers: 4096,
            gpus: 2,
            gpu_workers_per_device: 2,
            gpu_speed: 1.0,
            synthesis_speed: 1.0,
            queue_order: QueueOrder::Dispatch,
            max_ahead: None,
        };
        let gpus = |g: u32, w: Option<u32>| Changes {
            gpus: Some(g),
            gpu_workers_per_device: w,
            ..Changes::default()
        };
        assert_eq!(check_workers(&log, &gpus(1024, None), None), Ok(()));
        assert_eq!(check_workers(&log, &gpus(64, Some(64)), None), Ok(()));
        let e = check_workers(&log, &gpus(1024, Some(5)), None).unwrap_err();
        assert!(
            e.contains("1024 GPUs of 5 GPU workers each are 5120 workers"),
            "{e}"
        );
        let sweep: Sweep = "gpus=60..70".parse().unwrap();
        let e = check_workers(&log, &gpus(1, Some(64)), Some(&sweep)).unwrap_err();
        assert!(e.starts_with("--sweep gpus=65: "), "{e}");

        // 64 GPUs of 64 workers: 5 000 one-partition jobs take every worker at least once
        let jobs = (0..5_000)
            .map(|i| Job {
                id: format!("j{i}").into(),
                kind: None,
                units: vec![Unit {
                    partition: Some(0),
                    synth_ms: 10.0,
                    held_ms: 100.0,
                }],
            })
            .collect();
        let w = Workload {
            jobs,
            prep_ms: 0.0,
            finalize_ms: 0.0,
            cpu_in_lock_ms: 0.0,
        };
        let at_limit = gpus(64, Some(64)).apply(&log);
        let events = simulate(&w, &at_limit);
        assert!(
            events
                .iter()
                .any(|e| e.worker == Some(crate::engine::MAX_WORKER - 1))
        );
        let f = predict(
            &w,
            &at_limit,
            &EngineConfig::default().expected_partitions(Some(1)),
        );
        assert_eq!(f.jobs_complete, 5_000);
    }
}
