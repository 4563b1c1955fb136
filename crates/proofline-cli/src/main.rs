//! `proofline`: where a GPU proving pipeline spends its time.

/// `eprintln!` that never panics: std's panics when standard error is a closed pipe
/// (`proofline watch 2>&1 | head -1`, a log collector that went away), which ended `watch`
/// and `/metrics` with it (status 101). A message that cannot be written is lost, as a
/// message to a closed pipe is; the work goes on. Defined before the modules, so that it
/// stands for std's in all of them.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod analyze;
mod chart;
mod compare;
mod demo;
mod export;
mod exporters;
mod follow_journal;
mod generate;
mod input;
mod journal;
mod json;
mod openmetrics;
mod replay;
mod rfc3339;
mod signals;
mod sim_args;
mod timeline;
mod watch;
mod whatif;

use clap::{Parser, Subcommand};

/// Shows where a GPU proving pipeline (cuzk and its kind) spends its time.
#[derive(Debug, Parser)]
#[command(name = "proofline", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Analyze a TIMELINE log (plain, gzip or stdin) and name the bottleneck.
    Analyze(analyze::AnalyzeArgs),
    /// Run a simulated cuzk prover with proofline inside it: live progress, TIMELINE log, report.
    Demo(demo::DemoArgs),
    /// Draw the pipeline as a Gantt chart: SVG, or HTML that zooms and pans.
    Chart(chart::ChartArgs),
    /// Export the pipeline for other viewers (Chrome/Perfetto trace-event JSON), or the
    /// metrics' history (OpenMetrics with timestamps) for backfilling and backtesting alerts.
    Export(export::ExportArgs),
    /// Send the traces of an old log to an OTLP collector (Jaeger, Tempo, ...): the traces the
    /// live layer would have sent.
    Replay(replay::ReplayArgs),
    /// Follow a live log like `tail -F` and serve its metrics (for provers not instrumented yet).
    Watch(watch::WatchArgs),
    /// Compare two runs (logs or JSON reports): every figure with its noise band, and a call
    /// (better, worse, same); `--fail-if` for CI.
    Compare(compare::CompareArgs),
    /// Predict the throughput under other settings (synthesis workers, GPUs, speeds) from a
    /// log's measured work: what would change it.
    Whatif(whatif::WhatifArgs),
    /// Write a simulated cuzk TIMELINE log (deterministic for a seed), for tests and benchmarks.
    Generate(generate::GenerateArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => analyze::run(&args),
        Command::Demo(args) => demo::demo(&args),
        Command::Chart(args) => chart::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Watch(args) => watch::watch(&args),
        Command::Generate(args) => generate::run(&args),
        Command::Whatif(args) => whatif::run(&args),
        Command::Compare(args) => compare::run(&args),
    };
    if let Err(e) = result {
        // stopped by a signal, after delivering what it could (it said what it did not)
        if let Some(s) = e.downcast_ref::<signals::Stopped>() {
            eprintln!("proofline: {s}");
            std::process::exit(s.status);
        }
        // the reader of our output went away (`| head`): end quietly, as Unix tools do when
        // SIGPIPE ends them (and with their status, 128 + 13)
        let broken_pipe =
            |kind: Option<std::io::ErrorKind>| kind == Some(std::io::ErrorKind::BrokenPipe);
        if e.chain().any(|c| {
            broken_pipe(c.downcast_ref::<std::io::Error>().map(std::io::Error::kind))
                // the JSON writer wraps the error of the stream it writes to
                || broken_pipe(c.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind))
        }) {
            std::process::exit(141);
        }
        eprintln!("proofline: error: {}", message(&e));
        std::process::exit(1);
    }
}

/// An error and its causes, each cause once: one that an error's own message already
/// quotes (an OS error it names) is not repeated.
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
