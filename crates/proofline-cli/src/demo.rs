//! `proofline demo`: the simulated prover, instrumented by the layer, with live progress.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use proofline::TimelineLayer;
use proofline_core::EngineConfig;
use proofline_core::report::JobStatus;
use proofline_core::sink::{LiveState, TelemetryCounts, Update, UpdateSink};
use proofline_sim::SimConfig;
use proofline_sim::threaded::{self, Progress};
use tracing_subscriber::prelude::*;

use crate::exporters::Exporters;
use crate::sim_args::SimArgs;

/// Runs a simulated cuzk prover with proofline inside it and shows where its time goes.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    #[command(flatten)]
    sim: SimArgs,
    /// Simulated time runs this many times faster than cuzk (6: a 37 s proof takes 6 s).
    /// Range 0.01..=10000.
    #[arg(long, default_value_t = 6.0, value_parser = parse_speed)]
    speed: f64,
    /// Keep proving new jobs until the process is stopped (for dashboards).
    #[arg(long)]
    forever: bool,
    /// Name of this prover, used in file names (run several side by side).
    #[arg(long, default_value = "demo")]
    instance: String,
    /// Folder for the TIMELINE log and the report.
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// Where to serve Prometheus /metrics and /healthz (loopback unless told otherwise).
    #[arg(long, default_value = proofline_prometheus::DEFAULT_ADDR, value_name = "ADDR:PORT",
        value_parser = crate::exporters::parse_listen_addr)]
    metrics_addr: SocketAddr,
    #[command(flatten)]
    serve: crate::exporters::ServeArgs,
    /// Shorthand: serve /metrics on this port (of --metrics-addr's address).
    #[arg(long)]
    port: Option<u16>,
    /// Serve no metrics.
    #[arg(long)]
    no_metrics: bool,
    /// Keep serving metrics this many seconds after the last job (so a scraper sees the end).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    linger: u64,
}

/// Prints a progress line to stderr once a second.
struct ProgressLine {
    start: Instant,
    speed: f64,
    total: Option<usize>,
    done: u64,
    incomplete: u64,
    tty: bool,
    last: Instant,
    printed: u64,
}

impl UpdateSink for ProgressLine {
    fn update(&mut self, update: Update) {
        if let Update::Job(j) = update {
            if j.status == JobStatus::Complete {
                self.done += 1;
            } else {
                self.incomplete += 1;
            }
        }
    }

    fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        // once a second, and whenever a job ends (so the last state is always shown)
        let ended = self.done + self.incomplete;
        if self.last.elapsed() < Duration::from_millis(900) && ended == self.printed {
            return;
        }
        self.printed = ended;
        self.last = Instant::now();
        let spp = live.seconds_per_proof.map_or_else(
            || "- s/proof".to_owned(),
            |spp| format!("{:.1} s/proof", spp * self.speed),
        );
        let busy: Vec<String> = live
            .gpus
            .iter()
            .map(|g| format!("GPU{} busy {:.0}%", g.gpu, g.busy_ratio * 100.0))
            .collect();
        let total = self.total.map_or_else(|| "∞".to_owned(), |t| t.to_string());
        let line = format!(
            "[{:>4}s] sectors {}/{} done{} · {} (cuzk scale) · {} · queue {} · dropped {}",
            self.start.elapsed().as_secs(),
            self.done,
            total,
            if self.incomplete > 0 {
                format!(", {} incomplete", self.incomplete)
            } else {
                String::new()
            },
            spp,
            if busy.is_empty() {
                "GPU idle".to_owned()
            } else {
                busy.join(" ")
            },
            live.queue_depth,
            counts.events_dropped,
        );
        let mut err = io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
}

fn engine_for_chart(cfg: &SimConfig) -> EngineConfig {
    EngineConfig::default().gpu_workers_per_device(cfg.workers_per_gpu)
}

pub fn demo(args: &DemoArgs) -> Result<()> {
    let cfg = args.sim.sim_config(args.forever)?;
    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let log_path = args.out.join(format!("{}-timeline.log", args.instance));
    let report_path = args.out.join(format!("{}-report.json", args.instance));
    let log = fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let tty = io::stderr().is_terminal();
    // the layer's live defaults (1 s reorder window), with the GPU shape the simulator has
    let engine = EngineConfig::default()
        .gpu_workers_per_device(cfg.workers_per_gpu)
        .reorder_window_ms(proofline::DEFAULT_LIVE_REORDER_WINDOW_MS)
        .completion_grace_ms(proofline::DEFAULT_LIVE_REORDER_WINDOW_MS)
        .max_rows(proofline::DEFAULT_LIVE_MAX_ROWS);
    let metrics_addr = if args.no_metrics {
        None
    } else {
        let mut addr = args.metrics_addr;
        if let Some(p) = args.port {
            addr.set_port(p);
        }
        Some((addr, args.serve.options()?))
    };
    let mut exporters = Exporters::start(
        "proofline demo",
        metrics_addr,
        &proofline_core::Nouns::default(),
        proofline_prometheus::Buckets::default(),
    )?;
    if let Some(url) = exporters.metrics_url() {
        eprintln!("proofline demo: metrics on {url}");
    }
    let builder = TimelineLayer::builder()
        .instance(args.instance.as_str())
        .sink(exporters.take_sink());
    let (layer, mut guard) = builder
        .engine_config(engine)
        .timeline_to_writer(io::BufWriter::new(log))
        .sink(ProgressLine {
            start: Instant::now(),
            speed: args.speed,
            total: (!args.forever).then_some(cfg.jobs.len()),
            done: 0,
            incomplete: 0,
            tty,
            last: Instant::now(),
            printed: 0,
        })
        .build();
    eprintln!(
        "proofline demo: {} {} job(s) on {} GPU(s) x {} workers, {} synthesis workers, {}x cuzk speed; TIMELINE log: {}",
        cfg.jobs.len(),
        if args.sim.mixed { "mixed" } else { "PoRep" },
        cfg.gpus,
        cfg.workers_per_gpu,
        cfg.synth_workers,
        args.speed,
        log_path.display()
    );
    // SIGTERM/SIGINT stop the simulated prover; what it finished is still reported
    let signals = crate::signals::Stop::install()?;
    let stop = signals.flag();
    let summary =
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            threaded::run(
                &cfg,
                args.speed,
                args.forever,
                stop,
                Arc::new(Progress::default()),
            )
        });
    let report = match guard.shutdown(Duration::from_secs(10)) {
        Ok(report) => report,
        // an exporter could not deliver everything: say so, the report is still whole
        Err(proofline::ShutdownError::Sink { report, error }) => {
            eprintln!("proofline demo: {error}");
            *report
        }
        Err(e) => return Err(e.into()),
    };
    let stats = guard.stats();
    exporters.finish("proofline demo", Duration::from_secs(10));
    if tty {
        eprintln!();
    }
    fs::write(&report_path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("cannot write {}", report_path.display()))?;
    let mut text = proofline_core::text::render(&report);
    // the chart of the log it wrote, next to it
    let chart_path = args.out.join(format!("{}-timeline.html", args.instance));
    let chart = crate::input::OutputFile::create(&log_path, &chart_path, crate::chart::FORMATS)
        .and_then(|out| {
            let (t, run) = crate::timeline::Timeline::from_log(
                crate::input::Source::Log(&log_path),
                engine_for_chart(&cfg),
                0,
                crate::timeline::DEFAULT_MAX_PARTITIONS,
            )?;
            crate::chart::write(&t, &format!("proofline demo: {}", args.instance), out)?;
            run.result()
        });
    if let Err(e) = &chart {
        eprintln!("proofline demo: no chart: {e:#}");
    }
    text.push('\n');
    let _ = writeln!(
        text,
        "Simulated at {}x: multiply times by {} for cuzk's scale. {} partitions proved{}.",
        args.speed,
        args.speed,
        summary.proved,
        match cfg.faults.panic_worker {
            _ if summary.panicked_calls > 0 => {
                format!(", {} GPU call(s) panicked", summary.panicked_calls)
            }
            // (the threads' timing decides which worker takes which call)
            Some((w, n)) => format!(
                ", no GPU call panicked: worker {w} did not come to its call {n} (--panic-worker)"
            ),
            None => String::new(),
        }
    );
    let _ = writeln!(
        text,
        "Files: {} (TIMELINE log), {} (report)",
        log_path.display(),
        report_path.display()
    );
    if chart.is_ok() {
        let _ = writeln!(text, "Chart: {}", chart_path.display());
    }
    let _ = writeln!(
        text,
        "Telemetry: {} events taken in, {} dropped (queue full), {} TIMELINE lines written",
        stats.received, stats.dropped, stats.written
    );
    let _ = writeln!(
        text,
        "Same numbers offline: proofline analyze {}",
        log_path.display()
    );
    // a closed pipe ends the demo quietly (main); the files are written already
    io::stdout().lock().write_all(text.as_bytes())?;
    if let Some(stopped) = signals.stopped() {
        eprintln!(
            "proofline demo: stopped by {}: {} job(s) finished; the report, the log and the chart are written",
            stopped.name, report.summary.jobs_complete
        );
        return Err(stopped.into());
    }
    if exporters.server.is_some() && args.linger > 0 {
        std::thread::sleep(Duration::from_secs(args.linger));
    }
    drop(exporters);
    Ok(())
}

/// `--speed`: a finite factor in 0.01..=10000 (0 or less would never finish).
fn parse_speed(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() && (0.01..=10_000.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s}: the valid range is 0.01..=10000"))
    }
}
