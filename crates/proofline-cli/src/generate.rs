//! `proofline generate`: a simulated cuzk TIMELINE log, deterministic for a seed.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::sim_args::SimArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct GenerateArgs {
    #[command(flatten)]
    sim: SimArgs,
    /// Print lines up to this many ms out of time order, as concurrent threads do.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    shuffle_ms: u64,
    /// Write one of the daemon's ordinary log lines (tracing's format, a timestamp and a
    /// level and a target first) beside each TIMELINE line, as a real cuzk log has.
    #[arg(long)]
    log_lines: bool,
    /// Print this share of the TIMELINE and `CUZK_TIMING:` lines after a log prefix
    /// (tracing's timestamp, level and target), as a log whose lines went through a logger.
    /// Range 0..=100.
    #[arg(long, default_value_t = 0, value_name = "PCT",
        value_parser = clap::value_parser!(u8).range(0..=100))]
    prefixed_pct: u8,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Writes the simulator's lines with what a real daemon's log has around them: an ordinary
/// log line beside each TIMELINE line, a share of the lines after a log prefix.
struct Daemon<W: Write> {
    out: W,
    log_lines: bool,
    prefixed_pct: u8,
    /// The line being gathered (the simulator writes whole lines, but `Write` promises none).
    line: Vec<u8>,
    /// The newest TIMELINE offset, for the timestamps.
    ms: u64,
    /// Lines written (the timestamps' microseconds).
    n: u64,
    /// Which lines are prefixed: the same each run.
    pick: SmallRng,
}

impl<W: Write> Daemon<W> {
    fn new(out: W, log_lines: bool, prefixed_pct: u8) -> Self {
        Daemon {
            out,
            log_lines,
            prefixed_pct,
            line: Vec::with_capacity(256),
            ms: 0,
            n: 0,
            pick: SmallRng::seed_from_u64(1),
        }
    }

    /// tracing's default timestamp and level for the newest offset (the daemon started at
    /// 2026-12-01T03:00:00Z).
    fn stamp(&self, level: &str, target: &str) -> String {
        let (s, ms) = (self.ms / 1000 + 3 * 3600, self.ms % 1000);
        let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
        format!(
            "2026-12-{:02}T{h:02}:{m:02}:{s:02}.{ms:03}{:03}Z {level:>5} {target}: ",
            1 + d % 28,
            (self.n * 7) % 1000
        )
    }

    /// Writes the simulated log, flushed, after cuzk's start-up lines when the daemon's own
    /// lines are asked for or its GPUs have other than cuzk's default of 2 workers each:
    /// without them, `analyze` places the workers by that default (3 workers per GPU read
    /// as 1.5 GPUs per GPU).
    fn log(&mut self, cfg: &proofline_sim::SimConfig) -> io::Result<()> {
        let per_gpu = cfg.workers_per_gpu.max(1);
        if self.log_lines || per_gpu != 2 {
            let gpus = cfg.gpus;
            let mut l = self.stamp("INFO", "cuzk_core::engine");
            l.push_str(&format!(
                "initializing GPU workers num_gpus={gpus} gpu_workers_per_device={per_gpu} total_workers={}\n",
                gpus * per_gpu
            ));
            for w in 0..gpus * per_gpu {
                l.push_str(&self.stamp("INFO", "cuzk_core::engine"));
                l.push_str(&format!(
                    "pipeline GPU worker started worker_id={w} gpu={} sub_id={}\n",
                    w / per_gpu,
                    w % per_gpu
                ));
            }
            self.out.write_all(l.as_bytes())?;
        }
        proofline_sim::instant::write_log(cfg, self)?;
        self.flush()
    }

    fn write_line(&mut self) -> io::Result<()> {
        let text = String::from_utf8_lossy(&self.line);
        let mut fields = text.trim_end().splitn(5, ',');
        let timeline = fields.next() == Some("TIMELINE");
        if timeline {
            self.ms = fields
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or(self.ms);
        }
        self.n += 1;
        if self.pick.random_range(0..100u8) < self.prefixed_pct {
            self.out
                .write_all(self.stamp("INFO", "cuzk_core::engine").as_bytes())?;
        }
        self.out.write_all(&self.line)?;
        if self.log_lines && timeline {
            // what the daemon's own tracing says of the same step, in its words
            let (event, job, detail) = (
                fields.next().unwrap_or(""),
                fields.next().unwrap_or(""),
                fields.next().unwrap_or(""),
            );
            let words = event.to_ascii_lowercase().replace('_', " ");
            let mut l = self.stamp("INFO", "cuzk_core::pipeline");
            l.push_str(&words);
            l.push_str(" job_id=");
            l.push_str(job);
            for pair in detail.split(',').filter(|p| !p.is_empty()) {
                l.push(' ');
                l.push_str(pair);
            }
            l.push('\n');
            self.out.write_all(l.as_bytes())?;
        }
        drop(text);
        self.line.clear();
        Ok(())
    }
}

impl<W: Write> Write for Daemon<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.log_lines && self.prefixed_pct == 0 {
            // nothing to add: the lines as the simulator wrote them
            return self.out.write(buf);
        }
        let mut rest = buf;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            self.line.extend_from_slice(&rest[..=end]);
            self.write_line()?;
            rest = &rest[end + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.line.is_empty() {
            self.write_line()?;
        }
        self.out.flush()
    }
}

pub(crate) fn run(args: &GenerateArgs) -> Result<()> {
    let mut cfg = args.sim.sim_config(false)?;
    cfg.shuffle_ms = args.shuffle_ms;
    if let Some((w, n)) = cfg.faults.panic_worker {
        // The worker's own calls: the run is the same without the fault up to its call n
        // (it is simulated once more, for this flag only). Bounded by the run's calls alone,
        // a call the worker never makes was taken, and nothing panicked.
        let mut probe = cfg.clone();
        probe.faults.panic_worker = None;
        let mut made = 0u32;
        proofline_sim::instant::simulate(&probe, |ev| {
            if ev.kind == proofline_core::EventKind::GpuPickup && ev.worker == Some(w) {
                made += 1;
            }
        });
        anyhow::ensure!(
            n < made,
            "--panic-worker: worker {w} makes {made} GPU call(s) in this run (numbered from 0), so its call {n} never comes"
        );
    }
    match &args.output {
        Some(p) => {
            let mut w = Daemon::new(
                io::BufWriter::new(
                    File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
                ),
                args.log_lines,
                args.prefixed_pct,
            );
            let written = w.log(&cfg).map_err(anyhow::Error::from);
            if let Err(e) = written {
                // no truncated log left behind to be taken for a whole one (a regular file
                // only: never a device or a pipe named as the output)
                if std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) {
                    let _ = std::fs::remove_file(p);
                    return Err(e.context(format!("cannot write {} (removed)", p.display())));
                }
                return Err(e.context(format!("cannot write {}", p.display())));
            }
        }
        None => {
            let mut w = Daemon::new(
                io::BufWriter::new(io::stdout().lock()),
                args.log_lines,
                args.prefixed_pct,
            );
            w.log(&cfg)?;
        }
    }
    Ok(())
}
