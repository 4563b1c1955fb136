//! `proofline analyze`: a log's report, as text, JSON or CSV.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::ValueEnum;
use proofline_core::report::PartitionRecord;
use proofline_core::sink::{NoUpdates, Update};

use proofline_core::sink::UpdateSink;

use crate::input::{EngineArgs, LogRun, run_log_until};
use crate::journal::{JournalArgs, run_journal};
use proofline_core::text::none_readable;

/// Output formats of `analyze`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Tables for people.
    Text,
    /// The report as JSON (versioned schema, see docs/analysis.md).
    Json,
    /// One row per partition with every stage.
    Csv,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AnalyzeArgs {
    /// The log: a file (plain or gzip, detected by content) or `-` for stdin; or the
    /// journal, with --journal-unit, --journal-file or --journal-dir.
    #[arg(value_name = "FILE|-",
        required_unless_present_any = ["journal_unit", "journal_file", "journal_dir"],
        conflicts_with_all = ["journal_unit", "journal_file", "journal_dir"])]
    input: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit with an error if any line was not used: a malformed TIMELINE or CUZK_TIMING line
    /// (a CUZK_TIMING line with a pair that is no whole number is used in part), a line over
    /// the length limit, a last TIMELINE line without its newline, an event rejected as
    /// impossible (an absurd partition, worker or GPU index or offset), a conflicting record
    /// (a second, different one of an event already recorded, or an event of a job that had
    /// ended: a resubmitted job's second attempt under the same id included), a stray line
    /// far out of order, a CUZK_TIMING line ignored for a value over an hour (they are always
    /// reported). Exact duplicates are not counted: the event they repeat was used.
    #[arg(long)]
    strict: bool,
    /// The prover's words for a job and its parts in the text report (`batch,segment`:
    /// "Batches" where cuzk's says "Sectors"). Default: sector,partition.
    #[arg(long, value_name = "JOB,PART", value_parser = proofline_core::Nouns::parse)]
    nouns: Option<proofline_core::Nouns>,
    #[command(flatten)]
    journal: JournalArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

impl AnalyzeArgs {
    /// What is read, in words.
    fn source(&self) -> String {
        match &self.input {
            Some(p) => p.display().to_string(),
            None => self.journal.describe(),
        }
    }

    /// Reads the input through the engine.
    fn read(&self, sink: impl UpdateSink, stop: &mut dyn FnMut() -> bool) -> Result<LogRun> {
        match &self.input {
            Some(p) => run_log_until(p, self.engine.config()?, sink, stop),
            None => run_journal(&self.journal, self.engine.config()?, sink),
        }
    }
}

pub(crate) fn run(args: &AnalyzeArgs) -> Result<()> {
    args.journal.check_window(args.input.as_deref())?;
    args.engine.check()?;
    let stdout = io::stdout();
    // a report of a long log is megabytes (JSON: 10 MB for 30 000 jobs), written in small
    // pieces: in 256 KiB writes, not 8 KiB ones
    let mut out = io::BufWriter::with_capacity(256 * 1024, stdout.lock());
    let mut run = match args.format {
        Format::Csv => {
            // the header first, so that even an empty log gives a CSV with one
            let mut w = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(&mut out);
            w.write_record(CSV_HEADER).map_err(csv_io)?;
            let mut err = None;
            // a write error (the reader went away) stops the reading too
            let failed = std::cell::Cell::new(false);
            let run = args.read(
                |u: Update| {
                    if let (Update::Partition(p), None) = (&u, &err) {
                        if let Err(e) = w.serialize(CsvRow::from(&**p)) {
                            err = Some(e);
                            failed.set(true);
                        }
                    }
                },
                &mut || failed.get(),
            )?;
            if let Some(e) = err {
                // as an I/O error, so that a closed pipe is seen as one
                return Err(csv_io(e).into());
            }
            w.flush()?;
            run
        }
        Format::Text | Format::Json => {
            let run = args.read(NoUpdates, &mut || false)?;
            if args.format == Format::Json {
                crate::json::to_writer_pretty(&mut out, &run.report)?;
                writeln!(out)?;
            } else {
                let nouns = args.nouns.clone().unwrap_or_default();
                out.write_all(proofline_core::text::render_with(&run.report, &nouns).as_bytes())?;
            }
            run
        }
    };
    out.flush()?;
    let lines = &run.report.lines;
    let none_readable_said = none_readable(lines).filter(|_| run.error.is_none());
    if lines.lines == 0 && run.error.is_none() {
        eprintln!(
            "proofline: warning: {} is empty: there is nothing to analyze",
            args.source()
        );
    } else if let Some(w) = none_readable_said.as_ref() {
        eprintln!("proofline: warning: {} {w}", args.source());
    } else if lines.timeline_lines == 0 && run.error.is_none() {
        // (a binary file, or another program's log: a report of nothing, said)
        eprintln!(
            "proofline: warning: {} holds no TIMELINE line in its {} line(s): is it the prover's log?",
            args.source(),
            lines.lines
        );
    }
    // (in the text report, among its warnings)
    if args.format != Format::Text {
        for w in proofline_core::text::doubts(&run.report.events) {
            eprintln!("proofline: warning: {w}");
        }
    }
    // what was not used: lines that do not parse, lines over the length limit, a last
    // TIMELINE line without its newline (a writer cut short; as printed, it may read
    // wrong), events the engine turned down
    let unused = proofline_core::text::not_used(&run.report, &args.engine.config()?);
    if !unused.is_empty() {
        let msg = unused.join("; ");
        if args.strict {
            run.result()?;
            bail!("{msg} (--strict)");
        }
        // (a log of nothing but lines over the limit was said so above, with them)
        let left = match none_readable_said {
            Some(_) => proofline_core::text::not_used_but_oversized(&unused, lines),
            None => unused,
        };
        if args.format != Format::Text && !left.is_empty() {
            eprintln!("proofline: warning: {}", left.join("; "));
        }
    }
    // The command ends here, and the process with it: the report's rows go back with the
    // process's memory, not freed one by one (20 000 rows took 2 ms after the output).
    for rows in [&mut run.report.jobs, &mut run.report.incomplete] {
        std::mem::forget(std::mem::take(rows));
    }
    std::mem::forget(std::mem::take(&mut run.report.transitions));
    run.result()
}

/// A CSV error as the I/O error it holds, if it holds one (so that a closed pipe is seen
/// as one).
fn csv_io(e: csv::Error) -> io::Error {
    if matches!(e.kind(), csv::ErrorKind::Io(_)) {
        if let csv::ErrorKind::Io(io) = e.into_kind() {
            return io;
        }
        unreachable!("checked above");
    }
    io::Error::other(e)
}

/// The CSV columns, in [`CsvRow`]'s order (a test checks them against it).
const CSV_HEADER: [&str; 19] = [
    "job_id",
    "run",
    "proof_kind",
    "partition",
    "worker",
    "gpu",
    "synth_start_ms",
    "synth_end_ms",
    "queue_start_ms",
    "pickup_ms",
    "gpu_start_ms",
    "gpu_end_ms",
    "synthesis_ms",
    "queue_ms",
    "lock_wait_ms",
    "gpu_ms",
    "synth_reported_ms",
    "gpu_reported_ms",
    "kernel_ms",
];

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
    kernel_ms: Option<u64>,
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
            kernel_ms: p.kernel_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csv_header_names_the_row_fields_in_order() {
        let p: PartitionRecord = serde_json::from_str(r#"{"job_id": "j", "run": 0}"#).unwrap();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(CsvRow::from(&p)).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next().unwrap(), CSV_HEADER.join(","));
    }
}
