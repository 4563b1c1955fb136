//! `proofline`: where a GPU proving pipeline spends its time.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod chart;
mod demo;
mod export;
mod timeline;
mod watch;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use proofline_core::engine::{self, Engine, EngineConfig};
use proofline_core::reader::LineFeeder;
use proofline_core::report::{PartitionRecord, Report};
use proofline_core::sink::{NoUpdates, Update, UpdateSink};

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
    Analyze(AnalyzeArgs),
    /// Run a simulated cuzk prover with proofline inside it: live progress, TIMELINE log, report.
    Demo(demo::DemoArgs),
    /// Draw the pipeline as a Gantt chart: SVG, or HTML that zooms and pans.
    Chart(ChartArgs),
    /// Export the pipeline for other viewers (Chrome/Perfetto trace-event JSON).
    Export(ExportArgs),
    /// Send the traces of an old log to an OTLP collector (Jaeger, Tempo, ...): the traces the
    /// live layer would have sent.
    Replay(ReplayArgs),
    /// Follow a live log like `tail -F` and serve its metrics (for provers not instrumented yet).
    Watch(watch::WatchArgs),
    /// Write a simulated cuzk TIMELINE log (deterministic for a seed), for tests and benchmarks.
    Generate(GenerateArgs),
}

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

/// Settings of the analysis engine shared by the commands that run one.
#[derive(Debug, Clone, clap::Args)]
struct EngineArgs {
    /// GPU workers per device: GPU = worker / N (cuzk's default is 2).
    #[arg(long, default_value_t = engine::DEFAULT_GPU_WORKERS_PER_DEVICE, value_name = "N")]
    gpu_workers_per_device: u32,
    /// Partitions per job when the job id does not tell (porep-* is 10, snap-* 16);
    /// default: the highest partition seen + 1.
    #[arg(long, value_name = "N")]
    partitions: Option<u32>,
    /// How far out of time order lines may be and still be processed in order.
    #[arg(long, default_value_t = engine::DEFAULT_REORDER_WINDOW_MS, value_name = "MS")]
    reorder_window_ms: u64,
    /// A job with no event for this long is evicted and counted as incomplete.
    #[arg(long, default_value_t = engine::DEFAULT_JOB_TIMEOUT_MS / 1000, value_name = "SECONDS")]
    job_timeout_s: u64,
    /// An offset this far behind the newest one means the daemon restarted (a new run).
    #[arg(long, default_value_t = engine::DEFAULT_RESTART_AFTER_MS / 1000, value_name = "SECONDS")]
    restart_after_s: u64,
    /// Rows of jobs and transitions kept in the report (aggregates always count all).
    #[arg(long, default_value_t = engine::DEFAULT_MAX_ROWS, value_name = "N")]
    max_rows: usize,
}

impl EngineArgs {
    fn config(&self) -> EngineConfig {
        EngineConfig {
            gpu_workers_per_device: self.gpu_workers_per_device,
            expected_partitions: self.partitions,
            reorder_window_ms: self.reorder_window_ms,
            completion_grace_ms: self.reorder_window_ms,
            job_timeout_ms: self.job_timeout_s.saturating_mul(1000),
            restart_after_ms: self.restart_after_s.saturating_mul(1000),
            max_rows: self.max_rows,
            ..EngineConfig::default()
        }
    }
}

#[derive(Debug, clap::Args)]
struct AnalyzeArgs {
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

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// The log: a file (plain or gzip) or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,
    /// Wall-clock time of TIMELINE offset 0 (RFC 3339, e.g. 2026-11-30T01:31:00Z). Default:
    /// the file's modification time minus its newest offset (stdin: now).
    #[arg(long, value_name = "RFC3339")]
    epoch: Option<String>,
    /// Collector endpoint (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT, OTLP/HTTP).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Name of the prover in trace ids (use the one its live metrics used, to match exemplars).
    #[arg(long, default_value = "cuzk")]
    instance: String,
    /// How long to wait at the end for the collector to take everything.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    timeout_s: u64,
    #[command(flatten)]
    engine: EngineArgs,
}

/// The newest TIMELINE offset of a log (a quick scan), for the default replay epoch.
fn newest_offset(path: &Path) -> Result<u64> {
    let mut input = open_log(path, None)?;
    let mut newest = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(newest);
        }
        if let Ok(Some(ev)) =
            std::str::from_utf8(&line).map(|l| proofline_core::parse_line(l).ok().flatten())
        {
            newest = newest.max(ev.offset_ms);
        }
    }
}

fn replay_cmd(args: &ReplayArgs) -> Result<()> {
    if args.endpoint.is_none() && proofline_otlp::endpoint_from_env().is_none() {
        bail!(
            "no collector: pass --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318)"
        );
    }
    let epoch = match &args.epoch {
        Some(e) => proofline_otlp::parse_rfc3339(e).with_context(|| {
            format!("--epoch `{e}` is not an RFC 3339 time such as 2026-11-30T01:31:00Z")
        })?,
        None if args.input.as_os_str() == "-" => {
            proofline_otlp::unix_ms(std::time::SystemTime::now())
        }
        None => {
            let mtime = std::fs::metadata(&args.input)
                .and_then(|m| m.modified())
                .with_context(|| {
                    format!(
                        "cannot read the modification time of {}",
                        args.input.display()
                    )
                })?;
            proofline_otlp::unix_ms(mtime).saturating_sub(newest_offset(&args.input)?)
        }
    };
    let mut cfg =
        proofline_otlp::OtlpConfig::new(proofline_core::ids::run_key(&args.instance, epoch), epoch);
    // --endpoint is read like OTEL_EXPORTER_OTLP_ENDPOINT (the base URL); without it the
    // exporter reads the OTEL_* variables itself
    cfg.endpoint = args.endpoint.as_ref().map(|e| {
        let e = e.trim_end_matches('/');
        if e.ends_with("/v1/traces") {
            e.to_owned()
        } else {
            format!("{e}/v1/traces")
        }
    });
    cfg.block_when_full = true;
    let (mut sink, mut handle) = proofline_otlp::start(cfg)?;
    let counters = sink.counters();
    let report = run_log(&args.input, args.engine.config(), |u| sink.update(u))?;
    drop(sink);
    let result = handle.shutdown(Duration::from_secs(args.timeout_s));
    use std::sync::atomic::Ordering::Relaxed;
    eprintln!(
        "proofline replay: {} jobs -> {} traces queued, {} spans exported, {} spans failed",
        report.summary.jobs_complete + report.summary.jobs_incomplete,
        counters.traces_queued.load(Relaxed),
        counters.spans_exported.load(Relaxed),
        counters.spans_failed.load(Relaxed),
    );
    let unplaced = counters.links_unplaced.load(Relaxed);
    if unplaced > 0 {
        eprintln!(
            "proofline replay: {unplaced} sector-to-sector links had no trace to carry them (both sectors finished before the one ahead of them on their GPU)"
        );
    }
    result?;
    if counters.spans_failed.load(Relaxed) > 0 {
        bail!("some spans were not accepted by the collector (is it up at the endpoint?)");
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
struct ChartArgs {
    /// The log: a file (plain or gzip) or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,
    /// Where to write the chart: `.svg`, or `.html` for a page that zooms and pans.
    #[arg(short, long, default_value = "timeline.svg")]
    output: PathBuf,
    /// Draw at most this many partitions (the first ones).
    #[arg(long, default_value_t = timeline::DEFAULT_MAX_PARTITIONS)]
    max_partitions: usize,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ExportFormat {
    /// Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing).
    Perfetto,
}

#[derive(Debug, clap::Args)]
struct ExportArgs {
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

fn chart_cmd(args: &ChartArgs) -> Result<()> {
    let t = timeline::Timeline::from_log(&args.input, args.engine.config(), args.max_partitions)?;
    let title = format!("proofline timeline: {}", args.input.display());
    chart::write(&t, &title, &args.output)?;
    eprintln!("proofline: wrote {}", args.output.display());
    Ok(())
}

fn export_cmd(args: &ExportArgs) -> Result<()> {
    let t = timeline::Timeline::from_log(&args.input, args.engine.config(), args.max_partitions)?;
    let ExportFormat::Perfetto = args.format;
    let trace = export::perfetto(&t);
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

#[derive(Debug, clap::Args)]
struct GenerateArgs {
    #[command(flatten)]
    sim: demo::SimArgs,
    /// Print lines up to this many ms out of time order, as concurrent threads do.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    shuffle_ms: u64,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => analyze(&args),
        Command::Demo(args) => demo::demo(&args),
        Command::Chart(args) => chart_cmd(&args),
        Command::Replay(args) => replay_cmd(&args),
        Command::Export(args) => export_cmd(&args),
        Command::Watch(args) => watch::watch(&args),
        Command::Generate(args) => generate(&args),
    };
    if let Err(e) = result {
        eprintln!("proofline: error: {e:#}");
        std::process::exit(1);
    }
}

/// Opens a log: `-` is stdin; gzip is detected by its magic bytes.
fn open_log(
    path: &Path,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<Box<dyn BufRead + Send>> {
    const BUF: usize = 256 * 1024;
    let raw: Box<dyn Read + Send> = if path.as_os_str() == "-" {
        Box::new(io::stdin())
    } else {
        let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        if let Some(pb) = progress {
            if let Ok(meta) = f.metadata() {
                pb.set_length(meta.len());
            }
            Box::new(pb.wrap_read(f))
        } else {
            Box::new(f)
        }
    };
    let mut buffered = BufReader::with_capacity(BUF, raw);
    let is_gzip = buffered
        .fill_buf()
        .map(|b| b.starts_with(&[0x1f, 0x8b]))
        .unwrap_or(false);
    Ok(if is_gzip {
        Box::new(BufReader::with_capacity(
            BUF,
            flate2::bufread::MultiGzDecoder::new(buffered),
        ))
    } else {
        Box::new(buffered)
    })
}

/// Reads a whole log through the engine; `on_update` sees every update.
fn run_log(path: &Path, cfg: EngineConfig, mut sink: impl UpdateSink) -> Result<Report> {
    let progress = (io::stderr().is_terminal() && path.as_os_str() != "-").then(|| {
        let pb = indicatif::ProgressBar::new(0);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb
    });
    let input = open_log(path, progress.as_ref())?;
    let mut engine = Engine::new(cfg);
    let mut feeder = LineFeeder::new();
    // read and parse on one thread, run the engine (and `on_update`) on this one
    feeder
        .feed_all_parallel(input, &mut engine, &mut sink)
        .with_context(|| format!("reading {}", path.display()))?;
    engine.finish(&mut sink);
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    let mut report = engine.report();
    report.lines = feeder.stats;
    Ok(report)
}

fn analyze(args: &AnalyzeArgs) -> Result<()> {
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

/// Parses `A:B` flag values.
fn parse_pair<A: std::str::FromStr, B: std::str::FromStr>(s: &str, flag: &str) -> Result<(A, B)> {
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

fn generate(args: &GenerateArgs) -> Result<()> {
    let mut cfg = args.sim.sim_config()?;
    cfg.shuffle_ms = args.shuffle_ms;
    match &args.output {
        Some(p) => {
            let mut w = io::BufWriter::new(
                File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
            );
            proofline_sim::instant::write_log(&cfg, &mut w)?;
            w.flush()?;
        }
        None => {
            let mut w = io::BufWriter::new(io::stdout().lock());
            proofline_sim::instant::write_log(&cfg, &mut w)?;
            w.flush()?;
        }
    }
    Ok(())
}
