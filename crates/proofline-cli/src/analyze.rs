//! `proofline analyze`: a log's report, as text, JSON or CSV.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::ValueEnum;
use proofline_core::report::PartitionRecord;
use proofline_core::sink::{NoUpdates, Update};

use crate::input::{EngineArgs, run_log};

/// Output formats of `analyze`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Tables for people.
    Text,
    /// The report as JSON (versioned schema, see README).
    Json,
    /// One row per partition with every stage.
    Csv,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AnalyzeArgs {
    /// The log: a file (plain or gzip, detected by content) or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit with an error if any TIMELINE line is malformed (they are always reported).
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

pub(crate) fn run(args: &AnalyzeArgs) -> Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let report = match args.format {
        Format::Csv => {
            let mut w = csv::Writer::from_writer(&mut out);
            let mut err = None;
            let report = run_log(&args.input, args.engine.config(), |u| {
                if let (Update::Partition(p), None) = (&u, &err) {
                    if let Err(e) = w.serialize(CsvRow::from(&**p)) {
                        err = Some(e);
                    }
                }
            })?;
            if let Some(e) = err {
                return Err(e.into());
            }
            w.flush()?;
            report
        }
        Format::Text | Format::Json => {
            let report = run_log(&args.input, args.engine.config(), NoUpdates)?;
            if args.format == Format::Json {
                serde_json::to_writer_pretty(&mut out, &report)?;
                writeln!(out)?;
            } else {
                out.write_all(proofline_core::text::render(&report).as_bytes())?;
            }
            report
        }
    };
    out.flush()?;
    if report.lines.malformed > 0 {
        let first = report.lines.malformed_examples.first();
        let msg = format!(
            "{} malformed TIMELINE line(s){}",
            report.lines.malformed,
            first
                .map(|m| format!(", first at line {}: {}", m.line, m.error))
                .unwrap_or_default()
        );
        if args.strict {
            bail!("{msg} (--strict)");
        }
        if args.format != Format::Text {
            eprintln!("proofline: warning: {msg}");
        }
    }
    Ok(())
}

/// One CSV row: a partition with every stage.
#[derive(Debug, serde::Serialize)]
struct CsvRow<'a> {
    job_id: &'a str,
    run: u32,
    proof_kind: Option<&'a str>,
    partition: Option<u32>,
    worker: Option<u32>,
    gpu: Option<u32>,
    synth_start_ms: Option<u64>,
    synth_end_ms: Option<u64>,
    queue_start_ms: Option<u64>,
    pickup_ms: Option<u64>,
    gpu_start_ms: Option<u64>,
    gpu_end_ms: Option<u64>,
    synthesis_ms: Option<u64>,
    queue_ms: Option<u64>,
    lock_wait_ms: Option<u64>,
    gpu_ms: Option<u64>,
    synth_reported_ms: Option<u64>,
    gpu_reported_ms: Option<u64>,
}

impl<'a> From<&'a PartitionRecord> for CsvRow<'a> {
    fn from(p: &'a PartitionRecord) -> Self {
        CsvRow {
            job_id: &p.job_id,
            run: p.run,
            proof_kind: p.proof_kind.as_deref(),
            partition: p.partition,
            worker: p.worker,
            gpu: p.gpu,
            synth_start_ms: p.synth_start_ms,
            synth_end_ms: p.synth_end_ms,
            queue_start_ms: p.queue_start_ms,
            pickup_ms: p.pickup_ms,
            gpu_start_ms: p.gpu_start_ms,
            gpu_end_ms: p.gpu_end_ms,
            synthesis_ms: p.synthesis_ms,
            queue_ms: p.queue_ms,
            lock_wait_ms: p.lock_wait_ms,
            gpu_ms: p.gpu_ms,
            synth_reported_ms: p.synth_reported_ms,
            gpu_reported_ms: p.gpu_reported_ms,
        }
    }
}
