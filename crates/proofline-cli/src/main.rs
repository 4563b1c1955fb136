//! `proofline`: where a GPU proving pipeline spends its time.

mod analyze;
mod chart;
mod demo;
mod export;
mod exporters;
mod generate;
mod input;
mod replay;
mod timeline;
mod watch;

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
    /// Export the pipeline for other viewers (Chrome/Perfetto trace-event JSON).
    Export(export::ExportArgs),
    /// Send the traces of an old log to an OTLP collector (Jaeger, Tempo, ...): the traces the
    /// live layer would have sent.
    Replay(replay::ReplayArgs),
    /// Follow a live log like `tail -F` and serve its metrics (for provers not instrumented yet).
    Watch(watch::WatchArgs),
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
    };
    if let Err(e) = result {
        eprintln!("proofline: error: {e:#}");
        std::process::exit(1);
    }
}
