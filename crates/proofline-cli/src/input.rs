//! Reading a log: plain, gzip or stdin, through the engine.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use proofline_core::reader::LineFeeder;
use proofline_core::report::Report;
use proofline_core::sink::UpdateSink;
use proofline_core::{Engine, EngineConfig, engine};

/// Settings of the analysis engine shared by the commands that run one.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EngineArgs {
    /// GPU workers per device: GPU = worker / N. Default: what cuzk's start-up lines say
    /// when the log has them (`initializing GPU workers`, `pipeline GPU worker started`),
    /// else cuzk's default, 2. Given, it wins over the start-up lines (a disagreement is
    /// warned about). Range 1..=1024.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) gpu_workers_per_device: Option<u32>,
    /// Partitions of a job that no --partitions-for prefix and not its id's form tells
    /// (porep-* is 10, snap-* 16, whole-proof jobs 1). Default: the highest partition seen
    /// + 1, once the job is quiet. Range 1..=65536.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) partitions: Option<u32>,
    /// Partitions of jobs whose id starts with PREFIX (repeatable, each prefix once; the
    /// longest matching prefix wins over every other rule), e.g. --partitions-for porep-=3.
    /// A PREFIX no job id starts with (case and all) is warned about by analyze, export,
    /// whatif and compare.
    #[arg(long, value_name = "PREFIX=N", value_parser = parse_prefix_partitions)]
    pub(crate) partitions_for: Vec<(String, u32)>,
    /// The proof kind of jobs whose id starts with PREFIX where their lines name none
    /// (repeatable, each prefix once; the longest matching prefix wins over the id's form;
    /// an empty PREFIX is every job's), e.g. --proof-kind-for batch-=batch. Default: the
    /// id's form (porep-* is porep-c2, ...), else unknown. A PREFIX no job id starts with
    /// is warned about by analyze, export, whatif and compare.
    #[arg(long, value_name = "PREFIX=KIND", value_parser = parse_prefix_kind)]
    pub(crate) proof_kind_for: Vec<(String, String)>,
    /// How far out of time order lines may be and still be processed in order (0: none).
    /// A line further behind the newest line is used at once and counted late; one more
    /// than this and more than 500 ms behind is held: a restart's first line (three in a
    /// row) or a stray.
    /// Range 0..=600000 (10 min).
    #[arg(long, default_value_t = engine::DEFAULT_REORDER_WINDOW_MS, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub(crate) reorder_window_ms: u64,
    /// A job with no event for this long is evicted and counted as incomplete. Range
    /// 1..=604800 (a week).
    #[arg(long, default_value_t = engine::DEFAULT_JOB_TIMEOUT_MS / 1000, value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub(crate) job_timeout_s: u64,
    /// A line this far ahead of the newest one, alone, is a stray early line; lines falling
    /// back behind it are one restart only if within this of one another. Range 1..=86400.
    #[arg(long, default_value_t = engine::DEFAULT_RESTART_AFTER_MS / 1000, value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) restart_after_s: u64,
    /// Rows of jobs and transitions kept in the report (aggregates always count all).
    /// Range 0..=10000000.
    #[arg(long, default_value_t = engine::DEFAULT_MAX_ROWS, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=10_000_000))]
    pub(crate) max_rows: usize,
    /// Jobs in flight at most: past it the oldest in flight is evicted as incomplete and
    /// counted (memory stays bounded whatever the log; about 1 KB a job). Range
    /// 1..=10000000.
    #[arg(long, default_value_t = engine::DEFAULT_MAX_JOBS_IN_FLIGHT, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000_000))]
    pub(crate) max_jobs_in_flight: usize,
    /// A GPU interval open longer than the larger of this and --stuck-factor times the
    /// longest its GPU closed is stuck (a call that never returned, a prover dead inside GPU
    /// work): no longer counted busy, and counted. 0 turns this off. Range 0..=86400.
    #[arg(long, default_value_t = engine::DEFAULT_STUCK_MIN_MS / 1000, value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub(crate) stuck_min_s: u64,
    /// See --stuck-min-s. Range 1..=1000.
    #[arg(long, default_value_t = engine::DEFAULT_STUCK_FACTOR, value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) stuck_factor: u32,
}

impl EngineArgs {
    /// The engine's configuration; an error when a prefix is given twice to
    /// `--partitions-for` or `--proof-kind-for` (which of two values was meant is not
    /// guessed: the last one won, unsaid).
    pub(crate) fn config(&self) -> Result<EngineConfig> {
        self.check()?;
        let mut cfg = EngineConfig::default()
            .expected_partitions(self.partitions)
            .reorder_window_ms(self.reorder_window_ms)
            .completion_grace_ms(self.reorder_window_ms)
            .job_timeout_ms(self.job_timeout_s.saturating_mul(1000))
            .restart_after_ms(self.restart_after_s.saturating_mul(1000))
            .max_rows(self.max_rows)
            .max_jobs_in_flight(self.max_jobs_in_flight)
            .stuck_min_ms(self.stuck_min_s.saturating_mul(1000))
            .stuck_factor(self.stuck_factor);
        // not given, cuzk's start-up lines in the log may set it
        if let Some(n) = self.gpu_workers_per_device {
            cfg = cfg.gpu_workers_per_device(n);
        }
        for (prefix, n) in &self.partitions_for {
            cfg = cfg.partitions_for(prefix.clone(), *n);
        }
        for (prefix, kind) in &self.proof_kind_for {
            cfg = cfg.proof_kind_for(prefix.clone(), kind.clone());
        }
        Ok(cfg)
    }
}

impl EngineArgs {
    /// What [`EngineArgs::config`] refuses, checked at a command's start (before it binds
    /// a port, reads a file for its epoch or writes a header).
    pub(crate) fn check(&self) -> Result<()> {
        once_each(
            "--partitions-for",
            self.partitions_for.iter().map(|(p, _)| p),
        )?;
        once_each(
            "--proof-kind-for",
            self.proof_kind_for.iter().map(|(p, _)| p),
        )
    }
}

/// An error naming `flag` when one of its prefixes is given twice.
fn once_each<'a>(flag: &str, prefixes: impl Iterator<Item = &'a String>) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for p in prefixes {
        if !seen.insert(p) {
            anyhow::bail!(
                "{flag} {}=... is given twice: a prefix has one value",
                proofline_core::text::printable(p)
            );
        }
    }
    Ok(())
}

/// Opens a log: `-` is stdin; gzip is detected by its magic bytes.
pub(crate) fn open_log(
    path: &Path,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<Box<dyn BufRead + Send>> {
    open_log_giving_up(path, progress, None)
}

/// [`open_log`]; a stream (`-`, a FIFO) is read by a thread of its own, and reads of it end
/// (as at the end of the input) once `give_up` is set, even while the stream is silent: a
/// caller's deadline or a signal does not wait for a writer that stalled.
fn open_log_giving_up(
    path: &Path,
    progress: Option<&indicatif::ProgressBar>,
    give_up: Option<Arc<AtomicBool>>,
) -> Result<Box<dyn BufRead + Send>> {
    const BUF: usize = 256 * 1024;
    let stream = path.as_os_str() == "-" || is_fifo(path);
    let raw: Box<dyn Read + Send> = match give_up {
        Some(give_up) if stream => {
            let source: Box<dyn Read + Send> = if path.as_os_str() == "-" {
                Box::new(io::stdin())
            } else {
                Box::new(
                    File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
                )
            };
            Box::new(Detached::spawn(source, give_up)?)
        }
        _ if path.as_os_str() == "-" => Box::new(io::stdin()),
        _ => {
            let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            // a directory opens, and fails only when read: say so before any report is made
            if f.metadata().is_ok_and(|m| m.is_dir()) {
                anyhow::bail!(
                    "{} is a directory: name a log file in it (or `-` for standard input)",
                    path.display()
                );
            }
            if let Some(pb) = progress {
                if let Ok(meta) = f.metadata() {
                    pb.set_length(meta.len());
                }
                Box::new(pb.wrap_read(f))
            } else {
                Box::new(f)
            }
        }
    };
    let mut buffered = BufReader::with_capacity(BUF, raw);
    let is_gzip = buffered
        .fill_buf()
        .map(|b| b.starts_with(&[0x1f, 0x8b]))
        .unwrap_or(false);
    Ok(if is_gzip {
        Box::new(BufReader::with_capacity(BUF, GzMembers::new(buffered)))
    } else {
        Box::new(buffered)
    })
}

/// The gzip members of a stream one after another, as `gzip -d` reads them: zero bytes
/// after the last member (what a tape, or a writer that preallocates, leaves) end the input,
/// as they end gzip's with a warning; other bytes there are an error. (flate2's
/// `MultiGzDecoder` read the zeros as a member's header and failed with "invalid gzip header"
/// after every line was read.)
struct GzMembers<R: BufRead> {
    state: Members<R>,
}

/// Where [`GzMembers`] is.
enum Members<R: BufRead> {
    /// Inside a member.
    In(flate2::bufread::GzDecoder<R>),
    /// Past one: what follows is looked at (kept here across an error, so that a read
    /// retried after one goes on from the same place).
    Between(R),
    /// The input ended.
    Done,
}

impl<R: BufRead> GzMembers<R> {
    fn new(input: R) -> Self {
        GzMembers {
            state: Members::In(flate2::bufread::GzDecoder::new(input)),
        }
    }
}

impl<R: BufRead> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match &mut self.state {
                Members::Done => return Ok(0),
                Members::In(member) => {
                    let n = member.read(buf)?;
                    if n > 0 || buf.is_empty() {
                        return Ok(n);
                    }
                    // the member ended (a bufread decoder takes no byte past it)
                    let Members::In(member) = std::mem::replace(&mut self.state, Members::Done)
                    else {
                        unreachable!("matched above")
                    };
                    self.state = Members::Between(member.into_inner());
                }
                Members::Between(rest) => {
                    let next = rest.fill_buf()?;
                    match next.first() {
                        None => self.state = Members::Done,
                        Some(0x1f) => {
                            let Members::Between(rest) =
                                std::mem::replace(&mut self.state, Members::Done)
                            else {
                                unreachable!("matched above")
                            };
                            self.state = Members::In(flate2::bufread::GzDecoder::new(rest));
                        }
                        // zeros to the end end the input; anything else is no gzip
                        Some(_) if next.iter().all(|&b| b == 0) => {
                            let n = next.len();
                            rest.consume(n);
                        }
                        Some(_) => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "trailing bytes after the gzip data that are neither a gzip member nor zeros",
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// Whether `path` is a named pipe.
fn is_fifo(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// A stream read by a detached thread, its bytes handed over in chunks: a read waits for the
/// next chunk, and ends (0 bytes) once `give_up` is set. The thread may stay blocked in its
/// own read until the stream gives more or the process exits; nothing waits for it.
struct Detached {
    chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
    give_up: Arc<AtomicBool>,
    current: Vec<u8>,
    at: usize,
}

impl Detached {
    fn spawn(mut source: Box<dyn Read + Send>, give_up: Arc<AtomicBool>) -> Result<Detached> {
        let (tx, chunks) = mpsc::sync_channel(4);
        std::thread::Builder::new()
            .name("proofline-stream".into())
            .spawn(move || {
                loop {
                    let mut chunk = vec![0; 64 * 1024];
                    let sent = match source.read(&mut chunk) {
                        Ok(0) => return,
                        Ok(n) => {
                            chunk.truncate(n);
                            tx.send(Ok(chunk))
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => tx.send(Err(e)),
                    };
                    if sent.is_err() {
                        return;
                    }
                }
            })
            .context("cannot start a thread to read the stream")?;
        Ok(Detached {
            chunks,
            give_up,
            current: Vec::new(),
            at: 0,
        })
    }
}

impl Read for Detached {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if self.give_up.load(Ordering::Relaxed) {
                return Ok(0);
            }
            match self.chunks.recv_timeout(Duration::from_millis(50)) {
                Ok(chunk) => {
                    self.current = chunk?;
                    self.at = 0;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Where a command reads from: a log (a file, gzip, `-`), or the journal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    Log(&'a Path),
    Journal(&'a crate::journal::JournalArgs),
}

impl<'a> Source<'a> {
    /// The log if one is given, else the journal.
    pub(crate) fn of(log: Option<&'a Path>, journal: &'a crate::journal::JournalArgs) -> Self {
        match log {
            Some(p) => Source::Log(p),
            None => Source::Journal(journal),
        }
    }

    /// What is read, in words.
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Log(p) => p.display().to_string(),
            Source::Journal(j) => j.describe(),
        }
    }

    /// The input's path, for the check that an output does not overwrite it (`-` for the
    /// journal, which no output can be).
    pub(crate) fn path(&self) -> &'a Path {
        match self {
            Source::Log(p) => p,
            Source::Journal(_) => Path::new("-"),
        }
    }

    /// Reads it through the engine, stopping early when `stop` says so; from the journal,
    /// with `anchor`, the sink is told each run's wall-clock place.
    pub(crate) fn read(
        &self,
        cfg: EngineConfig,
        sink: impl UpdateSink,
        anchor: Option<&str>,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<LogRun> {
        match self {
            Source::Log(p) => run_log_until(p, cfg, sink, stop),
            Source::Journal(j) => crate::journal::run_journal_until(j, cfg, sink, anchor, stop),
        }
    }
}

/// A log read through the engine.
#[derive(Debug)]
pub(crate) struct LogRun {
    /// The report of what was read (all of it, or up to the read error).
    pub report: Report,
    /// Reading stopped at this error (e.g. a truncated compressed log); the report covers
    /// the lines before it.
    pub error: Option<anyhow::Error>,
    /// Reading stopped early because the caller said so.
    pub stopped: bool,
}

impl LogRun {
    /// The read error, if any, as the command's failure (after its output was written).
    pub fn result(self) -> Result<()> {
        match self.error {
            Some(e) => Err(e.context(format!(
                "the input ended early: what came out covers the {} lines read before the error",
                self.report.lines.lines
            ))),
            None => Ok(()),
        }
    }
}

/// Reads a whole log through the engine; `sink` sees every update. A read error after the
/// log was opened ends the reading, not the run: the report covers what was read, and the
/// error is in [`LogRun::error`].
pub(crate) fn run_log(path: &Path, cfg: EngineConfig, sink: impl UpdateSink) -> Result<LogRun> {
    run_log_until(path, cfg, sink, &mut || false)
}

/// [`run_log`], stopping early (after a block of lines) when `stop` says so.
pub(crate) fn run_log_until(
    path: &Path,
    cfg: EngineConfig,
    mut sink: impl UpdateSink,
    stop: &mut dyn FnMut() -> bool,
) -> Result<LogRun> {
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
    // a stream's reads end once the caller stops (its deadline, a signal): reading a silent
    // pipe would otherwise hold the stop until the writer wrote again
    let give_up = Arc::new(AtomicBool::new(false));
    let input = open_log_giving_up(path, progress.as_ref(), Some(give_up.clone()))?;
    let mut engine = Engine::new(cfg);
    let mut feeder = LineFeeder::new();
    let mut stop = || {
        let stop = stop();
        if stop {
            give_up.store(true, Ordering::Relaxed);
        }
        stop
    };
    // read and parse on one thread, run the engine (and the sink) on this one
    let read = feeder.feed_all_parallel_until(input, &mut engine, &mut sink, &mut stop);
    engine.finish(&mut sink);
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    let mut report = engine.into_report();
    report.lines = feeder.stats;
    report.lines.from_input = true;
    if report.lines.timeline_lines == 0 && report.lines.lines > 0 {
        if let Some(hint) = foreign_format(path) {
            anyhow::bail!("{} holds no TIMELINE line: {hint}", path.display());
        }
    }
    let (stopped, error) = match read {
        Ok(stopped) => (stopped, None),
        Err(e) => {
            report.lines.read_error = Some(e.to_string());
            (
                false,
                Some(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
            )
        }
    };
    Ok(LogRun {
        report,
        error,
        stopped,
    })
}

/// The compressed format other than gzip that `head` (a file's first bytes) starts with,
/// by its magic number as the format's documentation gives it, and the command that
/// decompresses it to standard output.
pub(crate) fn packed_format(head: &[u8]) -> Option<(&'static str, &'static str)> {
    const PACKED: [(&[u8], &str, &str); 5] = [
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", "zstd -dc"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz", "xz -dc"),
        (b"BZh", "bzip2", "bzip2 -dc"),
        (&[0x04, 0x22, 0x4d, 0x18], "lz4", "lz4 -dc"),
        (b"PK\x03\x04", "zip", "unzip -p"),
    ];
    PACKED
        .iter()
        .find(|(magic, ..)| head.starts_with(magic))
        .map(|&(_, name, cmd)| (name, cmd))
}

/// What a log that held no TIMELINE line looks like, when it is a format we can name: a
/// file compressed other than with gzip (zstd, xz, bzip2, lz4, zip: read as a few lines of
/// bytes, it held no TIMELINE line and was no error), or a Docker json-file log (each line a
/// JSON object whose `log` is the line the program wrote).
fn foreign_format(path: &Path) -> Option<String> {
    if path.as_os_str() == "-" {
        return None;
    }
    let mut first = Vec::new();
    open_log(path, None)
        .ok()?
        .take(4096)
        .read_until(b'\n', &mut first)
        .ok()?;
    if let Some((name, cmd)) = packed_format(&first) {
        return Some(format!(
            "it is {name}-compressed (proofline reads plain and gzip logs); decompress it first: {cmd} {} | proofline ... -",
            path.display()
        ));
    }
    let first = String::from_utf8_lossy(&first);
    let docker = first.trim_start().starts_with("{\"log\":") && first.contains("TIMELINE,");
    docker.then(|| {
        format!(
            "it is a Docker json-file log (each line a JSON object holding the program's line in `log`); take the lines out first: jq -j .log {} | proofline ... -",
            path.display()
        )
    })
}

/// The newest TIMELINE offset of a log (a quick scan), for the default replay epoch; an
/// error if the scan is not done by `deadline`.
pub(crate) fn newest_offset(path: &Path, deadline: std::time::Instant) -> Result<u64> {
    let mut input = open_log(path, None)?;
    let mut newest = 0;
    let mut line = Vec::new();
    for n in 0u64.. {
        if n % 65_536 == 0 && std::time::Instant::now() >= deadline {
            bail!(
                "the deadline came while scanning {} for its newest offset: pass --epoch, or a longer --timeout-s",
                path.display()
            );
        }
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(newest),
            Ok(_) => {}
            // a log cut short (a .gz whose writer died): the newest offset read so far; the
            // replay reads as far as it can and says where it stopped
            Err(_) => return Ok(newest),
        }
        if let Ok(Some(ev)) =
            std::str::from_utf8(&line).map(|l| proofline_core::parse_line(l).ok().flatten())
        {
            newest = newest.max(ev.offset_ms);
        }
    }
    Ok(newest)
}

/// A file a command writes: refused when it is the input, named with an extension of a
/// format the command writes, written under a temporary name beside it and renamed into
/// place when complete (a failed run leaves no half file under the name).
#[derive(Debug)]
pub(crate) struct OutputFile {
    path: PathBuf,
    tmp: PathBuf,
    ext: &'static str,
    committed: bool,
}

impl OutputFile {
    /// Checks `output` against `input` and the formats (`(extension, what)`) the command
    /// writes.
    pub(crate) fn create(
        input: &Path,
        output: &Path,
        formats: &[(&'static str, &str)],
    ) -> Result<Self> {
        let ext = output
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        let Some(&(ext, _)) = formats.iter().find(|(e, _)| *e == ext) else {
            let can: Vec<String> = formats
                .iter()
                .map(|(e, what)| format!(".{e} ({what})"))
                .collect();
            bail!(
                "cannot write {}: the format follows the file's extension, and this command writes {}",
                output.display(),
                can.join(", ")
            );
        };
        if input.as_os_str() != "-" && same_file(input, output) {
            bail!(
                "{} is the input: refusing to write over it (choose another output file)",
                output.display()
            );
        }
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = output.with_file_name(format!(".{name}.{}.partial", std::process::id()));
        Ok(OutputFile {
            path: output.to_owned(),
            tmp,
            ext,
            committed: false,
        })
    }

    /// The format's extension (lower case).
    pub(crate) fn ext(&self) -> &'static str {
        self.ext
    }

    /// The file to write to (under the temporary name).
    pub(crate) fn file(&self) -> Result<File> {
        File::create(&self.tmp).with_context(|| format!("cannot create {}", self.path.display()))
    }

    /// Moves the written file into place.
    pub(crate) fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Whether two paths name one file (the same path, a link to it, or another name of it).
fn same_file(a: &Path, b: &Path) -> bool {
    if let (Ok(ca), Ok(cb)) = (a.canonicalize(), b.canonicalize()) {
        if ca == cb {
            return true;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return (ma.dev(), ma.ino()) == (mb.dev(), mb.ino());
        }
    }
    false
}

/// Parses `PREFIX=KIND` for `--proof-kind-for`.
fn parse_prefix_kind(s: &str) -> Result<(String, String), String> {
    let (prefix, kind) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("expected PREFIX=KIND (e.g. batch-=batch), got `{s}`"))?;
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if kind.is_empty() || kind.len() > 64 || !kind.chars().all(ok) {
        return Err(format!(
            "`{kind}` is not a proof kind: 1 to 64 letters, digits, `-`, `_` or `.`"
        ));
    }
    Ok((prefix.to_owned(), kind.to_owned()))
}

/// Parses `PREFIX=N` for `--partitions-for`.
fn parse_prefix_partitions(s: &str) -> Result<(String, u32), String> {
    let (prefix, n) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("expected PREFIX=N (e.g. porep-=3), got `{s}`"))?;
    let n: u32 = n
        .parse()
        .map_err(|_| format!("`{n}` is not a number of partitions"))?;
    if !(1..=65536).contains(&n) {
        return Err(format!("{n} partitions: the valid range is 1..=65536"));
    }
    Ok((prefix.to_owned(), n))
}
