//! `proofline export --format perfetto`: Chrome trace-event JSON, which ui.perfetto.dev and
//! chrome://tracing open. A process per GPU with a thread per worker (sub-rows where a
//! worker's intervals overlap, so that slices nest properly), a process for synthesis with a
//! thread per slot, one for the queue, and counters for queue depth and GPU busy.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::ValueEnum;
use serde_json::{Value, json};

use crate::input::EngineArgs;
use crate::timeline::{self, Timeline};

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing).
    Perfetto,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The log: a file (plain or gzip) or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Perfetto)]
    format: ExportFormat,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Export at most this many partitions (the first ones).
    #[arg(long, default_value_t = timeline::DEFAULT_MAX_PARTITIONS)]
    max_partitions: usize,
    #[command(flatten)]
    engine: EngineArgs,
}

pub(crate) fn run(args: &ExportArgs) -> Result<()> {
    let t = timeline::Timeline::from_log(&args.input, args.engine.config(), args.max_partitions)?;
    let ExportFormat::Perfetto = args.format;
    let trace = perfetto(&t);
    match &args.output {
        Some(p) => {
            let f = File::create(p).with_context(|| format!("cannot create {}", p.display()))?;
            serde_json::to_writer(io::BufWriter::new(f), &trace)?;
        }
        None => {
            let mut out = io::BufWriter::new(io::stdout().lock());
            serde_json::to_writer(&mut out, &trace)?;
            writeln!(out)?;
        }
    }
    Ok(())
}

const PID_SYNTH: u32 = 1;
const PID_QUEUE: u32 = 2;
const PID_GPU0: u32 = 10;

fn us(ms: u64) -> u64 {
    ms * 1000
}

fn meta(kind: &str, pid: u32, tid: u32, name: String) -> Value {
    json!({"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
}

fn slice(name: String, cat: &str, pid: u32, tid: u32, s: u64, e: u64, args: Value) -> Value {
    json!({"name": name, "cat": cat, "ph": "X", "ts": us(s), "dur": us(e.saturating_sub(s)), "pid": pid, "tid": tid, "args": args})
}

/// The trace as a JSON value.
pub fn perfetto(t: &Timeline) -> Value {
    let mut ev: Vec<Value> = Vec::new();
    let label = |p: &proofline_core::report::PartitionRecord| match p.partition {
        Some(n) => format!("{} p{n}", p.job_id),
        None => p.job_id.to_string(),
    };
    let args = |p: &proofline_core::report::PartitionRecord| json!({"job_id": &*p.job_id, "partition": p.partition, "worker": p.worker, "proof_kind": p.proof_kind.as_deref()});

    ev.push(meta("process_name", PID_SYNTH, 0, "Synthesis".into()));
    let synth = t.synthesis_lanes(usize::MAX);
    for r in 0..synth.rows {
        ev.push(meta(
            "thread_name",
            PID_SYNTH,
            r as u32,
            format!("slot {r}"),
        ));
    }
    for &(i, s, e, r) in &synth.items {
        let p = &t.parts[i];
        ev.push(slice(
            label(p),
            "synthesis",
            PID_SYNTH,
            r as u32,
            s,
            e,
            args(p),
        ));
    }

    ev.push(meta("process_name", PID_QUEUE, 0, "GPU queue".into()));
    let queue = t.queue_lanes(usize::MAX);
    for r in 0..queue.rows {
        ev.push(meta(
            "thread_name",
            PID_QUEUE,
            r as u32 + 1,
            format!("waiting {r}"),
        ));
    }
    let mut depth: Vec<(u64, i64)> = Vec::new();
    for &(i, s, e, r) in &queue.items {
        let p = &t.parts[i];
        ev.push(slice(
            label(p),
            "queue",
            PID_QUEUE,
            r as u32 + 1,
            s,
            e,
            args(p),
        ));
        depth.push((s, 1));
        depth.push((e, -1));
    }
    depth.sort();
    let mut d = 0i64;
    for (at, delta) in depth {
        d += delta;
        ev.push(json!({"name": "queue depth", "ph": "C", "ts": us(at), "pid": PID_QUEUE, "args": {"partitions": d}}));
    }

    let workers = t.worker_lanes(usize::MAX);
    let mut gpus: Vec<u32> = workers
        .keys()
        .map(|k| k.0)
        .chain(t.busy.iter().map(|b| b.0))
        .collect();
    gpus.sort_unstable();
    gpus.dedup();
    for g in &gpus {
        ev.push(meta("process_name", PID_GPU0 + g, 0, format!("GPU {g}")));
    }
    for ((g, w), lanes) in &workers {
        for k in 0..lanes.rows {
            let name = if k == 0 {
                format!("worker {w}")
            } else {
                format!("worker {w} (overlap {k})")
            };
            ev.push(meta(
                "thread_name",
                PID_GPU0 + g,
                w * 100 + k as u32 + 1,
                name,
            ));
        }
        for &(i, _, _, r) in &lanes.items {
            let p = &t.parts[i];
            let tid = w * 100 + r as u32 + 1;
            if let (Some(pick), Some(start)) = (p.pickup_ms, p.gpu_start_ms) {
                if start > pick {
                    ev.push(slice(
                        label(p),
                        "lock_wait",
                        PID_GPU0 + g,
                        tid,
                        pick,
                        start,
                        args(p),
                    ));
                }
            }
            let (s, e) = (p.gpu_start_ms.unwrap_or(0), p.gpu_end_ms.unwrap_or(0));
            ev.push(slice(label(p), "gpu", PID_GPU0 + g, tid, s, e, args(p)));
        }
    }
    for &(g, busy, at) in &t.busy {
        ev.push(json!({"name": "GPU busy", "ph": "C", "ts": us(at), "pid": PID_GPU0 + g, "args": {"busy": u8::from(busy)}}));
    }
    for gap in &t.gaps {
        ev.push(meta(
            "thread_name",
            PID_GPU0 + gap.gpu,
            0,
            "idle gaps".into(),
        ));
        ev.push(slice(
            format!("idle {:.1} s ({})", gap.len_ms() as f64 / 1000.0, gap.boundary.as_str()),
            "idle",
            PID_GPU0 + gap.gpu,
            0,
            gap.start_ms,
            gap.end_ms,
            json!({"boundary": gap.boundary.as_str(), "next_job": &*gap.next_job, "with_queue_ms": gap.with_queue_ms}),
        ));
    }
    json!({"displayTimeUnit": "ms", "traceEvents": ev, "otherData": {"producer": "proofline"}})
}
