//! `proofline export --format perfetto`: Chrome trace-event JSON, which ui.perfetto.dev and
//! chrome://tracing open. A process per GPU with a thread per worker (sub-rows where a
//! worker's intervals overlap, so that slices nest properly), a process for synthesis with a
//! thread per slot, one for the queue, and counters for queue depth and GPU busy.
//!
//! Written as the log is read: each partition goes out when the engine finishes its job,
//! so memory does not grow with the log. Rows are laid out on line: an interval takes the
//! first row whose last interval ended before it starts, else a new row (a log whose jobs
//! finish out of order gets a few more rows than the fewest possible). The queue-depth
//! counter needs its changes in time order: they wait in a buffer until the engine's
//! present is a job timeout past them ([`DEPTH_HORIZON_MS`] at least); a change older than
//! what was written already is written at the oldest instant still open, and counted.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::io::{self, Write};
use std::path::PathBuf;
use std::rc::Rc;

use anyhow::{Context, Result};
use clap::ValueEnum;
use proofline_core::report::PartitionRecord;
use proofline_core::sink::{Update, UpdateSink};
use serde_json::{Value, json};

use crate::input::{EngineArgs, OutputFile};

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing).
    Perfetto,
    /// The series `/metrics` would have shown, scraped every --step-s while the log was
    /// written, with timestamps (OpenMetrics text): for `promtool tsdb
    /// create-blocks-from openmetrics` or VictoriaMetrics, and alerts replayed over them.
    /// Needs --epoch.
    Openmetrics,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The log: a file (plain or gzip) or `-` for stdin. Or the journal, with
    /// --journal-unit, --journal-file or --journal-dir.
    #[arg(value_name = "FILE|-",
        required_unless_present_any = ["journal_unit", "journal_file", "journal_dir"],
        conflicts_with_all = ["journal_unit", "journal_file", "journal_dir"])]
    input: Option<PathBuf>,
    #[command(flatten)]
    journal: crate::journal::JournalArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Perfetto)]
    format: ExportFormat,
    /// Write to this file (`.json`) instead of stdout. It appears when complete.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Export at most this many partitions (the first to finish). Default: all of them
    /// (the export is written as it is read: memory does not grow with the log). At least 1.
    /// Perfetto only.
    #[arg(long, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_partitions: Option<usize>,
    /// OpenMetrics: the wall-clock time of the log's TIMELINE offset 0 (RFC 3339, e.g.
    /// 2026-11-30T01:31:00Z), which every sample's timestamp counts from: the prover's start.
    #[arg(long, value_name = "RFC3339")]
    epoch: Option<String>,
    /// OpenMetrics: seconds between two scrapes (the scrape_interval the history stands
    /// for). Range 1..=3600.
    #[arg(long, default_value_t = 15, value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=3600))]
    step_s: u64,
    /// OpenMetrics: a label every sample gets, as a scrape adds it (repeatable). Default:
    /// job=proofline (deploy/'s scrape job) and instance=the log's file name; a label of the
    /// same name in the exposition becomes exported_NAME, as in Prometheus.
    #[arg(long = "label", value_name = "NAME=VALUE", value_parser = crate::openmetrics::parse_label)]
    labels: Vec<(String, String)>,
    /// OpenMetrics: scrape on past the log's last line up to this time (RFC 3339), as a
    /// live /metrics goes on being scraped after the prover fell silent. Default: until the
    /// engine has taken every line (a reorder window and a job's completion grace after the
    /// last one).
    #[arg(long, value_name = "RFC3339")]
    scrape_until: Option<String>,
    /// OpenMetrics: histogram buckets as `watch --buckets` gives them (repeatable), so that
    /// the history's `le` bounds are the live sidecar's. Default: cuzk's.
    #[arg(long = "buckets", value_name = "HISTOGRAM=B1,B2,...",
        value_parser = crate::exporters::parse_buckets)]
    buckets: Vec<(String, Vec<f64>)>,
    #[command(flatten)]
    engine: EngineArgs,
}

pub(crate) fn run(args: &ExportArgs) -> Result<()> {
    args.journal.check_window(args.input.as_deref())?;
    args.engine.check()?;
    if args.format == ExportFormat::Openmetrics {
        return run_openmetrics(args);
    }
    for (given, flag) in [
        (args.epoch.is_some(), "--epoch"),
        (args.scrape_until.is_some(), "--scrape-until"),
        (!args.labels.is_empty(), "--label"),
        (!args.buckets.is_empty(), "--buckets"),
    ] {
        if given {
            anyhow::bail!("{flag} is for --format openmetrics (the Perfetto export has no clock)");
        }
    }
    let source = crate::input::Source::of(args.input.as_deref(), &args.journal);
    let target = match &args.output {
        Some(p) => Some(OutputFile::create(
            source.path(),
            p,
            &[("json", "Chrome trace-event JSON")],
        )?),
        None => None,
    };
    let out: Box<dyn Write> = match &target {
        Some(t) => Box::new(io::BufWriter::with_capacity(1 << 16, t.file()?)),
        None => Box::new(io::BufWriter::with_capacity(1 << 16, io::stdout().lock())),
    };
    let cfg = args.engine.config()?;
    let failed = Rc::new(Cell::new(false));
    let mut w = Perfetto::new(
        out,
        cfg.get_gpu_workers_per_device(),
        cfg.get_job_timeout_ms(),
        failed.clone(),
    );
    w.max_partitions = args.max_partitions;
    w.begin();
    let flag = failed.clone();
    let run = source.read(cfg.clone(), |u: Update| w.update(u), None, &mut || {
        flag.get()
    })?;
    let (written, error) = w.end();
    if let Some(e) = error {
        return Err(e).context("cannot write the export");
    }
    if let Some(max) = args.max_partitions.filter(|&m| written.partitions >= m) {
        eprintln!("proofline: exported the first {max} partitions to finish (--max-partitions)");
    }
    if written.late_depth > 0 {
        eprintln!(
            "proofline: {} queue-depth changes came after later ones were written: written at the oldest open instant",
            written.late_depth
        );
    }
    if let Some(t) = target {
        t.commit()?;
    }
    let lines = &run.report.lines;
    let mut unused = proofline_core::text::not_used(&run.report, &cfg);
    if lines.lines == 0 && run.error.is_none() {
        eprintln!(
            "proofline: warning: {} is empty: the export holds no slices",
            source.describe()
        );
    } else if let Some(w) =
        proofline_core::text::none_readable(lines).filter(|_| run.error.is_none())
    {
        eprintln!(
            "proofline: warning: {} {w}; the export holds no slices",
            source.describe()
        );
        // (the lines over the limit, said there)
        unused = proofline_core::text::not_used_but_oversized(&unused, lines);
    }
    warn_unused_and_doubts(&unused, &run.report.events);
    run.result()
}

/// What the reading did not use, in one warning, and what makes its figures doubtful, a
/// warning each (as `analyze` says them beside JSON and CSV).
fn warn_unused_and_doubts(unused: &[String], events: &proofline_core::report::EventStats) {
    if !unused.is_empty() {
        eprintln!("proofline: warning: {}", unused.join("; "));
    }
    for w in proofline_core::text::doubts(events) {
        eprintln!("proofline: warning: {w}");
    }
}

fn run_openmetrics(args: &ExportArgs) -> Result<()> {
    use crate::openmetrics::{Plan, check_until, gather};
    use crate::rfc3339::parse_rfc3339;
    if args.max_partitions.is_some() {
        anyhow::bail!("--max-partitions is for --format perfetto");
    }
    let Some(input) = args.input.as_deref() else {
        anyhow::bail!(
            "--format openmetrics reads a log file or `-`, not the journal yet: pipe it, e.g. `journalctl -u cuzk -o cat --since ... | proofline export --format openmetrics - --epoch ...` (TIMELINE offsets carry the time; give the epoch of the run the lines start in)"
        );
    };
    let Some(epoch) = &args.epoch else {
        anyhow::bail!(
            "--format openmetrics needs --epoch: the wall-clock time of the log's offset 0 (the prover's start), e.g. --epoch 2026-11-30T01:31:00Z"
        );
    };
    let rfc = |flag: &str, v: &str| {
        parse_rfc3339(v).map_err(|why| anyhow::anyhow!("{flag} `{v}` is {why}"))
    };
    let epoch_ms = rfc("--epoch", epoch)?;
    let until_ms = args
        .scrape_until
        .as_deref()
        .map(|u| rfc("--scrape-until", u))
        .transpose()?;
    check_until(epoch_ms, until_ms)?;
    let instance = if input.as_os_str() == "-" {
        "stdin".to_owned()
    } else {
        input
            .file_name()
            .map_or_else(|| "log".to_owned(), |n| n.to_string_lossy().into_owned())
    };
    let mut labels = args.labels.clone();
    for (i, (name, _)) in labels.iter().enumerate() {
        if labels[..i].iter().any(|(n, _)| n == name) {
            anyhow::bail!("--label {name}=... is given twice: a series has one value of a label");
        }
    }
    if let Some(u) = until_ms {
        let scrapes = (u - epoch_ms) / (args.step_s * 1000);
        if scrapes > crate::openmetrics::MAX_SCRAPES {
            anyhow::bail!(
                "--scrape-until is {} days after --epoch: {scrapes} scrapes at --step-s {}, over the {} an export takes (a wider step?)",
                (u - epoch_ms) / 86_400_000,
                args.step_s,
                crate::openmetrics::MAX_SCRAPES
            );
        }
    }
    for (name, value) in [
        ("job", "proofline".to_owned()),
        ("instance", instance.clone()),
    ] {
        if !labels.iter().any(|(n, _)| n == name) {
            labels.push((name.to_owned(), value));
        }
    }
    let target = match &args.output {
        Some(p) => Some(OutputFile::create(
            input,
            p,
            &[("om", "OpenMetrics text"), ("txt", "OpenMetrics text")],
        )?),
        None => None,
    };
    let instance = labels
        .iter()
        .find(|(n, _)| n == "instance")
        .map_or(instance, |(_, v)| v.clone());
    let mut done = gather(&Plan {
        input,
        cfg: args.engine.config()?,
        epoch_ms,
        step_ms: args.step_s * 1000,
        until_ms,
        labels,
        instance,
        buckets: crate::exporters::buckets(&args.buckets),
        spill_dir: args
            .output
            .as_deref()
            .and_then(|p| p.parent())
            .map(|d| {
                if d.as_os_str().is_empty() {
                    std::path::Path::new(".")
                } else {
                    d
                }
            })
            .map(std::path::Path::to_path_buf),
    })?;
    let points = done.history.points;
    {
        let mut out: Box<dyn Write> = match &target {
            Some(t) => Box::new(io::BufWriter::with_capacity(1 << 16, t.file()?)),
            None => Box::new(io::BufWriter::with_capacity(1 << 16, io::stdout().lock())),
        };
        done.history
            .write(&mut out)
            .context("cannot write the export")?;
    }
    if let Some(t) = target {
        t.commit()?;
    }
    match (done.first_ms, done.last_ms) {
        (Some(a), Some(b)) => eprintln!(
            "proofline: {points} scrapes from {} to {}, every {} s",
            crate::rfc3339::format_rfc3339(a),
            crate::rfc3339::format_rfc3339(b),
            args.step_s
        ),
        _ => match proofline_core::text::none_readable(&done.lines) {
            Some(w) => {
                eprintln!(
                    "proofline: warning: {} {w}; the export holds no samples",
                    input.display()
                );
                // (the lines over the limit, said there)
                done.not_used =
                    proofline_core::text::not_used_but_oversized(&done.not_used, &done.lines);
            }
            None => eprintln!(
                "proofline: warning: {} has no TIMELINE event: the export holds no samples",
                input.display()
            ),
        },
    }
    if done.events.runs > 1 {
        eprintln!(
            "proofline: the log holds {} runs (prover restarts, or lines far out of order: {} late events); each run's scrapes follow the one before (a file does not say how long the prover was down)",
            done.events.runs, done.events.late
        );
    }
    warn_unused_and_doubts(&done.not_used, &done.events);
    if done.until_too_early {
        eprintln!(
            "proofline: warning: --scrape-until is before the log's last line: the scrapes went on to the first after it"
        );
    }

    match done.error {
        Some(e) => Err(e.context(format!(
            "the input ended early: the export covers the {} lines read before the error",
            done.lines.lines
        ))),
        None => Ok(()),
    }
}

const PID_SYNTH: u32 = 1;
const PID_QUEUE: u32 = 2;
const PID_GPU0: u32 = 10;
/// Queue-depth changes wait at least this long (of the log's time) before they are
/// written; the job timeout, when longer, is the wait.
pub(crate) const DEPTH_HORIZON_MS: u64 = 10 * 60 * 1000;

fn us(ms: u64) -> u64 {
    ms * 1000
}

fn meta(kind: &str, pid: u32, tid: u32, name: String) -> Value {
    json!({"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
}

fn slice(name: String, cat: &str, pid: u32, tid: u32, s: u64, e: u64, args: Value) -> Value {
    json!({"name": name, "cat": cat, "ph": "X", "ts": us(s), "dur": us(e.saturating_sub(s)), "pid": pid, "tid": tid, "args": args})
}

fn label(p: &PartitionRecord) -> String {
    match p.partition {
        Some(n) => format!("{} p{n}", p.job_id),
        None => p.job_id.to_string(),
    }
}

fn args(p: &PartitionRecord) -> Value {
    json!({"job_id": &*p.job_id, "partition": p.partition, "worker": p.worker, "proof_kind": p.proof_kind.as_deref()})
}

/// Rows laid out on line: each row's last end.
#[derive(Debug, Default)]
struct Rows(Vec<u64>);

impl Rows {
    /// The row for `[s, e)`, and whether it is new.
    fn place(&mut self, s: u64, e: u64) -> (usize, bool) {
        let end = e.max(s + 1);
        match self.0.iter().position(|&last| last <= s) {
            Some(r) => {
                self.0[r] = end;
                (r, false)
            }
            None => {
                self.0.push(end);
                (self.0.len() - 1, true)
            }
        }
    }
}

/// What an export wrote.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Written {
    pub partitions: usize,
    pub late_depth: u64,
}

/// The trace-event writer, fed by the engine.
pub(crate) struct Perfetto<W: Write> {
    out: W,
    first: bool,
    error: Option<io::Error>,
    failed: Rc<Cell<bool>>,
    wpd: u32,
    max_partitions: Option<usize>,
    written: Written,
    synth: Rows,
    queue: Rows,
    workers: HashMap<(u32, u32), Rows>,
    gpus: BTreeSet<u32>,
    gap_tracks: BTreeSet<u32>,
    /// Queue-depth changes not written yet, oldest first.
    depth_pending: BinaryHeap<Reverse<(u64, i64)>>,
    depth: i64,
    /// Changes up to this instant were written.
    depth_written_to: u64,
    /// The newest instant seen: changes a horizon older than it are written.
    newest: u64,
    horizon: u64,
}

impl<W: Write> Perfetto<W> {
    pub(crate) fn new(out: W, wpd: u32, job_timeout_ms: u64, failed: Rc<Cell<bool>>) -> Self {
        Perfetto {
            out,
            first: true,
            error: None,
            failed,
            wpd: wpd.max(1),
            max_partitions: None,
            written: Written::default(),
            synth: Rows::default(),
            queue: Rows::default(),
            workers: HashMap::new(),
            gpus: BTreeSet::new(),
            gap_tracks: BTreeSet::new(),
            depth_pending: BinaryHeap::new(),
            depth: 0,
            depth_written_to: 0,
            newest: 0,
            horizon: job_timeout_ms.max(DEPTH_HORIZON_MS),
        }
    }

    fn raw(&mut self, s: &[u8]) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(s) {
                self.error = Some(e);
                self.failed.set(true);
            }
        }
    }

    fn event(&mut self, v: &Value) {
        if self.error.is_some() {
            return;
        }
        let sep: &[u8] = if self.first { b"\n" } else { b",\n" };
        self.first = false;
        self.raw(sep);
        if self.error.is_none() {
            if let Err(e) = serde_json::to_writer(&mut self.out, v) {
                self.error = Some(e.into());
                self.failed.set(true);
            }
        }
    }

    /// The document's head and the fixed tracks.
    pub(crate) fn begin(&mut self) {
        self.raw(
            br#"{"displayTimeUnit":"ms","otherData":{"producer":"proofline"},"traceEvents":["#,
        );
        self.event(&meta("process_name", PID_SYNTH, 0, "Synthesis".into()));
        self.event(&meta("process_name", PID_QUEUE, 0, "GPU queue".into()));
    }

    /// Writes what is pending and closes the document; what was written, and the first
    /// write error.
    pub(crate) fn end(mut self) -> (Written, Option<io::Error>) {
        self.flush_depth(u64::MAX);
        self.raw(b"\n]}\n");
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
        (self.written, self.error)
    }

    fn gpu(&mut self, g: u32) {
        if self.gpus.insert(g) {
            self.event(&meta("process_name", PID_GPU0 + g, 0, format!("GPU {g}")));
        }
    }

    fn flush_depth(&mut self, upto: u64) {
        while let Some(&Reverse((t, delta))) = self.depth_pending.peek() {
            if t > upto {
                break;
            }
            self.depth_pending.pop();
            self.depth += delta;
            self.depth_written_to = t;
            let d = self.depth;
            self.event(&json!({"name": "queue depth", "ph": "C", "ts": us(t), "pid": PID_QUEUE, "args": {"partitions": d}}));
        }
    }

    fn depth_change(&mut self, t: u64, delta: i64) {
        let t = if t < self.depth_written_to {
            self.written.late_depth += 1;
            self.depth_written_to
        } else {
            t
        };
        self.depth_pending.push(Reverse((t, delta)));
    }

    fn partition(&mut self, p: &PartitionRecord) {
        if self
            .max_partitions
            .is_some_and(|m| self.written.partitions >= m)
        {
            return;
        }
        self.written.partitions += 1;
        if let (Some(s), Some(e)) = (p.synth_start_ms, p.synth_end_ms) {
            let (r, new) = self.synth.place(s, e);
            if new {
                self.event(&meta(
                    "thread_name",
                    PID_SYNTH,
                    r as u32,
                    format!("slot {r}"),
                ));
            }
            self.event(&slice(
                label(p),
                "synthesis",
                PID_SYNTH,
                r as u32,
                s,
                e,
                args(p),
            ));
            self.newest = self.newest.max(e);
        }
        if let (Some(s), Some(e)) = (p.queue_start_ms, p.pickup_ms.or(p.gpu_start_ms)) {
            let (r, new) = self.queue.place(s, e);
            let tid = r as u32 + 1;
            if new {
                self.event(&meta("thread_name", PID_QUEUE, tid, format!("waiting {r}")));
            }
            self.event(&slice(label(p), "queue", PID_QUEUE, tid, s, e, args(p)));
            self.depth_change(s, 1);
            self.depth_change(e, -1);
            self.newest = self.newest.max(e);
        }
        if let (Some(start), Some(end)) = (p.gpu_start_ms, p.gpu_end_ms) {
            let g = p.gpu.or(p.worker.map(|w| w / self.wpd)).unwrap_or(0);
            let w = p.worker.unwrap_or(0);
            self.gpu(g);
            let from = p.pickup_ms.unwrap_or(start).min(start);
            let (r, new) = self.workers.entry((g, w)).or_default().place(from, end);
            let tid = w * 100 + r as u32 + 1;
            if new {
                let name = if r == 0 {
                    format!("worker {w}")
                } else {
                    format!("worker {w} (overlap {r})")
                };
                self.event(&meta("thread_name", PID_GPU0 + g, tid, name));
            }
            if start > from {
                self.event(&slice(
                    label(p),
                    "lock_wait",
                    PID_GPU0 + g,
                    tid,
                    from,
                    start,
                    args(p),
                ));
            }
            self.event(&slice(
                label(p),
                "gpu",
                PID_GPU0 + g,
                tid,
                start,
                end,
                args(p),
            ));
            self.newest = self.newest.max(end);
        }
        let upto = self.newest.saturating_sub(self.horizon);
        if upto > self.depth_written_to {
            self.flush_depth(upto);
        }
    }
}

impl<W: Write> UpdateSink for Perfetto<W> {
    fn update(&mut self, update: Update) {
        match update {
            Update::Partition(p) => self.partition(&p),
            Update::GpuBusy { gpu, busy, t_ms } => {
                self.gpu(gpu);
                self.event(&json!({"name": "GPU busy", "ph": "C", "ts": us(t_ms), "pid": PID_GPU0 + gpu, "args": {"busy": u8::from(busy)}}));
            }
            Update::IdleGap(gap) => {
                self.gpu(gap.gpu);
                if self.gap_tracks.insert(gap.gpu) {
                    self.event(&meta(
                        "thread_name",
                        PID_GPU0 + gap.gpu,
                        0,
                        "idle gaps".into(),
                    ));
                }
                self.event(&slice(
                    format!("idle {:.1} s ({})", gap.len_ms() as f64 / 1000.0, gap.boundary.as_str()),
                    "idle",
                    PID_GPU0 + gap.gpu,
                    0,
                    gap.start_ms,
                    gap.end_ms,
                    json!({"boundary": gap.boundary.as_str(), "next_job": &*gap.next_job, "with_queue_ms": gap.with_queue_ms}),
                ));
            }
            // Transition, Job, NewRun, and what a later version adds
            _ => {}
        }
    }

    fn wants_partitions(&self) -> bool {
        true
    }

    fn wants_records(&self) -> bool {
        false
    }
}
