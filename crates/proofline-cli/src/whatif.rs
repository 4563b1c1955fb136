//! `proofline whatif`: the log's measured work replayed under other settings.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::ValueEnum;
use proofline_core::whatif::{self, Answer, Changes, Collector, Figures, Prediction, Sweep};

use crate::input::{EngineArgs, run_log};
use crate::journal::{JournalArgs, run_journal};

/// Output formats of `whatif`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A table for people.
    Text,
    /// The answer as JSON.
    Json,
}

#[derive(Debug, clap::Args)]
// the change is `--gpu-workers-per-device`; how the log's own workers map to GPUs (analyze's
// flag of that name) is `--log-gpu-workers-per-device` here
#[command(mut_arg("gpu_workers_per_device", |a| a.long("log-gpu-workers-per-device")))]
pub(crate) struct WhatifArgs {
    /// The log: a file (plain or gzip, detected by content) or `-` for stdin; or the
    /// journal, with --journal-unit, --journal-file or --journal-dir.
    #[arg(value_name = "FILE|-",
        required_unless_present_any = ["journal_unit", "journal_file", "journal_dir"],
        conflicts_with_all = ["journal_unit", "journal_file", "journal_dir"])]
    input: Option<PathBuf>,
    /// Synthesis workers (partitions synthesized at once). Range 1..=4096.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    synthesis_workers: Option<u32>,
    /// GPU devices. Range 1..=1024.
    #[arg(long, value_name = "G", value_parser = clap::value_parser!(u32).range(1..=1024))]
    gpus: Option<u32>,
    /// GPU workers per device, sharing its lock. Range 1..=64. (How the log's workers map
    /// to GPUs, when its lines carry no gpu=, is --log-gpu-workers-per-device.)
    #[arg(long = "gpu-workers-per-device", id = "to_gpu_workers_per_device", value_name = "W",
        value_parser = clap::value_parser!(u32).range(1..=64))]
    workers_per_gpu: Option<u32>,
    /// GPU work (the lock's held time, less CPU work inside it that CUZK_TIMING shows) X
    /// times as fast; CPU work unchanged.
    #[arg(long, value_name = "X", value_parser = positive)]
    gpu_speed: Option<f64>,
    /// Synthesis X times as fast.
    #[arg(long, value_name = "X", value_parser = positive)]
    synthesis_speed: Option<f64>,
    /// A memory budget: at most N partitions synthesizing or waiting for a GPU. Range
    /// 1..=1000000.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_ahead: Option<u32>,
    /// Vary one setting: NAME=A..B (whole numbers), NAME=A..B:STEP or NAME=V1,V2,... with
    /// NAME one of synthesis-workers, gpus, gpu-workers-per-device, gpu-speed,
    /// synthesis-speed, max-ahead; the other changes apply to every row.
    #[arg(long, value_name = "NAME=RANGE")]
    sweep: Option<Sweep>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(flatten)]
    journal: JournalArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

fn positive(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    let (lo, hi) = whatif::Param::GpuSpeed.range();
    if !v.is_finite() || v < lo || v > hi {
        return Err(format!("`{s}`: a speed is from {lo} to {hi}"));
    }
    Ok(v)
}

pub(crate) fn run(args: &WhatifArgs) -> Result<()> {
    args.journal.check_window(args.input.as_deref())?;
    args.engine.check()?;
    let changes = Changes {
        synthesis_workers: args.synthesis_workers,
        gpus: args.gpus,
        gpu_workers_per_device: args.workers_per_gpu,
        gpu_speed: args.gpu_speed,
        synthesis_speed: args.synthesis_speed,
        max_ahead: args.max_ahead,
    };
    // the sweep sets its setting in every row: the flag of the same setting would be
    // overridden in the rows and still head the answer
    if let Some(sw) = args.sweep.as_ref().filter(|sw| changes.is_set(sw.param)) {
        let name = sw.param.name();
        bail!(
            "--sweep {name}=... varies {name} row by row, and --{name} sets it too: give one of the two"
        );
    }
    let cfg = args.engine.config()?;
    let mut collector = Collector::default();
    let sink = |u| proofline_core::UpdateSink::update(&mut collector, u);
    let (log, source) = match &args.input {
        Some(p) => (run_log(p, cfg.clone(), sink)?, p.display().to_string()),
        None => (
            run_journal(&args.journal, cfg.clone(), sink)?,
            args.journal.describe(),
        ),
    };
    if let Some(e) = &log.error {
        bail!(
            "{source}: the input ended early ({e:#}); a prediction from part of a log is not made"
        );
    }
    let learned = collector
        .learn(&log.report)
        .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    whatif::check_workers(&learned.pipeline, &changes, args.sweep.as_ref())
        .map_err(anyhow::Error::msg)?;
    // (a prediction learned from runs cut by restarts that were not, or from jobs
    // completed early by a count set too low; a prefix rule that matched no job)
    for w in proofline_core::text::doubts(&log.report.events) {
        eprintln!("proofline: warning: {w}");
    }
    let answer = whatif::answer(&learned, &log.report, &changes, args.sweep.as_ref(), &cfg);
    let mut out = io::BufWriter::new(io::stdout().lock());
    match args.format {
        Format::Json => {
            crate::json::to_writer_pretty(&mut out, &answer)?;
            writeln!(out)?;
        }
        Format::Text => out.write_all(render(&answer).as_bytes())?,
    }
    out.flush()?;
    Ok(())
}

fn spp(f: &Figures) -> String {
    f.seconds_per_proof
        .map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

fn busy(f: &Figures) -> String {
    f.gpu_busy_ratio
        .map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{:+.1} %", v * 100.0))
}

fn shape(p: &whatif::Pipeline) -> String {
    let mut s = format!(
        "{} synthesis workers, {} GPU{} x {} worker{}",
        p.synthesis_workers,
        p.gpus,
        if p.gpus == 1 { "" } else { "s" },
        p.gpu_workers_per_device,
        if p.gpu_workers_per_device == 1 {
            ""
        } else {
            "s"
        }
    );
    if (p.gpu_speed - 1.0).abs() > 1e-12 {
        let _ = write!(s, ", GPU {}x", p.gpu_speed);
    }
    if (p.synthesis_speed - 1.0).abs() > 1e-12 {
        let _ = write!(s, ", synthesis {}x", p.synthesis_speed);
    }
    if let Some(m) = p.max_ahead {
        let _ = write!(s, ", {m} ahead at most");
    }
    s
}

/// The figures' column heads, aligned with [`render`]'s rows.
const HEADER: &str = "  s/proof  GPU busy  verdict         ";

/// The width of the longest bar of a sweep's table.
const BAR_WIDTH: usize = 30;

/// The answer as text.
fn render(a: &Answer) -> String {
    let mut o = String::new();
    let b = &a.basis;
    let _ = writeln!(
        o,
        "what if: {}",
        if a.changes.is_empty() {
            "no change (the model's replay of the log)".to_owned()
        } else {
            a.changes.join(", ")
        }
    );
    let _ = writeln!(
        o,
        "log: {} ({} complete jobs{})",
        shape(&a.log_pipeline),
        b.jobs,
        if b.runs > 1 {
            format!(", {} runs", b.runs)
        } else {
            String::new()
        }
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "  {:<22} {}", "", HEADER.trim_end());
    let row = |o: &mut String, name: &str, f: &Figures, note: String| {
        let line = format!(
            "  {:<22} {:>9} {:>9}  {:<16} {}",
            name,
            spp(f),
            busy(f),
            f.verdict,
            note
        );
        let _ = writeln!(o, "{}", line.trim_end());
    };
    row(
        &mut o,
        "measured (the log)",
        &a.baseline.measured,
        String::new(),
    );
    row(
        &mut o,
        "replayed (the model)",
        &a.baseline.replayed,
        match a.baseline.replay_error {
            Some(e) => format!("{} from measured", pct(Some(e))),
            None => String::new(),
        },
    );
    if !a.changes.is_empty() {
        row(
            &mut o,
            "predicted",
            &a.predicted.figures,
            note(&a.predicted),
        );
    }
    if let Some(s) = &a.sweep {
        let _ = writeln!(o);
        let _ = writeln!(o, "  {:<22} {HEADER} from replayed", s.param.name());
        // a bar per row, its length the seconds per proof (the longest row the full width)
        let longest = s
            .rows
            .iter()
            .filter_map(|r| r.predicted.figures.seconds_per_proof)
            .fold(0.0, f64::max);
        for r in &s.rows {
            let bar = r
                .predicted
                .figures
                .seconds_per_proof
                .filter(|_| longest > 0.0)
                .map_or(0, |v| (v / longest * BAR_WIDTH as f64).round() as usize);
            row(
                &mut o,
                &trim_float(r.value),
                &r.predicted.figures,
                format!(
                    "{:<9} {}",
                    pct(r.predicted.change_from_replayed),
                    "#".repeat(bar.max(1))
                ),
            );
        }
    }
    let m = &a.model;
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "model: synthesis {:.0} ms a partition; GPU lock {:.0} ms a call ({}), CPU before it {:.0} ms, after it {:.0} ms{}; queue in {} order",
        m.synthesis_ms,
        m.lock_ms,
        if b.gpu_lock == "lock_held" {
            "CUZK_TIMING mutex_held_ms"
        } else {
            "inferred from the TIMELINE"
        },
        m.prep_ms,
        m.finalize_ms,
        if m.cpu_in_lock_ms > 0.0 {
            format!(", CPU inside it {:.0} ms", m.cpu_in_lock_ms)
        } else {
            String::new()
        },
        match a.log_pipeline.queue_order {
            whatif::QueueOrder::Dispatch => "dispatch",
            whatif::QueueOrder::Fifo => "FIFO",
        }
    );
    let _ = writeln!(o, "assumes:");
    for s in &b.assumptions {
        let _ = writeln!(o, "  - {s}");
    }
    o
}

fn note(p: &Prediction) -> String {
    match p.change_from_replayed {
        Some(c) => format!("{} from replayed", pct(Some(c))),
        None => String::new(),
    }
}

fn trim_float(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}
