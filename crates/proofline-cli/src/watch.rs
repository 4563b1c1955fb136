//! `proofline watch`: follows a live log like `tail -F` and serves the same metrics as the
//! layer, for provers that are not instrumented yet.

use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use proofline_core::Engine;
use proofline_core::reader::{LineFeeder, MAX_LINE_BYTES};
use proofline_core::sink::{Driver, RunInfo};

use crate::exporters::Exporters;
use crate::input::EngineArgs;

/// Follows a live TIMELINE log and serves its metrics.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The log a prover is writing (followed across rotation and truncation); `-` or a FIFO
    /// is read as its lines come. Or the journal, with --journal-unit, --journal-file or
    /// --journal-dir.
    #[arg(value_name = "LOG",
        required_unless_present_any = ["journal_unit", "journal_file", "journal_dir"],
        conflicts_with_all = ["journal_unit", "journal_file", "journal_dir"])]
    log: Option<PathBuf>,
    /// Read the log (or the journal) from its beginning (default: from its end, only what
    /// comes next).
    #[arg(long)]
    from_start: bool,
    #[command(flatten)]
    journal: crate::journal::JournalArgs,
    /// With the journal: keep the cursor of what was delivered in this directory (written
    /// each second and when stopped), and go on from it when started again, losing nothing
    /// and counting nothing twice. E.g. /var/lib/proofline (systemd: StateDirectory=).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Where to serve /metrics and /healthz (loopback unless told otherwise).
    #[arg(long, default_value = proofline_prometheus::DEFAULT_ADDR, value_name = "ADDR:PORT",
        value_parser = crate::exporters::parse_listen_addr)]
    metrics_addr: SocketAddr,
    #[command(flatten)]
    serve: crate::exporters::ServeArgs,
    /// How often to look for new lines, in milliseconds. Range 10..=60000.
    #[arg(long, default_value_t = 250, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(10..=60_000))]
    poll_ms: u64,
    /// Name of this prover in trace ids (exemplars).
    #[arg(long, default_value = "cuzk")]
    instance: String,
    /// The prover's words for a job and its parts (`batch,segment`), in the metrics' HELP
    /// texts and the trace spans' names (`segment 3`, `previous batch`); metric names, label
    /// values and attributes stay as they are. Default: sector,partition.
    #[arg(long, value_name = "JOB,PART", value_parser = proofline_core::Nouns::parse)]
    nouns: Option<proofline_core::Nouns>,
    /// Histogram buckets of the prover's own size, `HISTOGRAM=B1,B2,...` in seconds
    /// (repeatable): HISTOGRAM is job (proofline_sector_seconds), stage
    /// (proofline_partition_stage_seconds), idle_gap, transition (the transition and
    /// synthesis lead/lag histograms) or cold_start. Default: cuzk's (docs/metrics.md).
    #[arg(long = "buckets", value_name = "HISTOGRAM=B1,B2,...",
        value_parser = crate::exporters::parse_buckets)]
    buckets: Vec<(String, Vec<f64>)>,
    #[command(flatten)]
    engine: EngineArgs,
}

/// How long a rotated file is still read after `watch` moved on to the new one: a writer
/// that had it open may append its last lines after the rename.
const ROTATED_GRACE: Duration = Duration::from_secs(5);

/// Lines taken from a stream in one poll at most (a long history piped in at once must not
/// keep watch from its signals and ticks).
const STREAM_LINES_PER_POLL: usize = 65_536;

/// Bytes read from a file in one poll at most; past it the poll ends, and the next starts at
/// once.
const READ_PER_POLL: usize = 64 << 20;

/// How many of a file's first bytes tell it from another file at the same path and inode
/// (one truncated and written anew between two polls).
const FINGERPRINT_BYTES: usize = 256;

/// A file followed like `tail -F`; or a stream (`-` for standard input, or a FIFO: what
/// `journalctl -f | proofline watch -` and a named pipe give), read as it comes.
struct Tail {
    path: PathBuf,
    /// The file at the path.
    cur: Option<Followed>,
    /// The file rotated away, still read until the deadline.
    old: Option<(Followed, Instant)>,
    /// For a stream: its lines, read by a thread of their own (a read there blocks).
    stream: Option<Stream>,
    /// The last poll stopped at [`READ_PER_POLL`]: more is waiting, poll again at once.
    more: bool,
}

/// A stream's lines, as its reader thread sends them.
struct Stream {
    lines: mpsc::Receiver<StreamLine>,
    started: bool,
    /// Lines read (for their numbers).
    line: u64,
}

enum StreamLine {
    Line(Vec<u8>),
    Skipped,
    /// Standard input ended (a FIFO is opened again for its next writer).
    Ended,
    Failed(io::Error),
}

/// What a followed file looks like when it is no plain log watch can read: compressed, or a
/// Docker json-file log (analyze reads the first and names the second).
fn foreign_format(path: &Path) -> Option<&'static str> {
    if is_stream(path) {
        return None;
    }
    let mut head = Vec::new();
    File::open(path)
        .ok()?
        .take(4096)
        .read_to_end(&mut head)
        .ok()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        return Some(
            "is gzip-compressed: watch follows plain text (proofline analyze reads .gz logs)",
        );
    }
    if crate::input::packed_format(&head).is_some() {
        return Some(
            "is compressed (zstd, xz, bzip2, lz4 or zip): watch follows plain text; decompress it and give analyze the result",
        );
    }
    let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
    (first.starts_with(b"{\"log\":")).then_some(
        "is a Docker json-file log (each line a JSON object): follow the container's output instead, docker logs -f CONTAINER 2>&1 | proofline watch -",
    )
}

/// Whether `path` is read as a stream: `-`, or a FIFO.
fn is_stream(path: &Path) -> bool {
    #[cfg(unix)]
    let fifo = {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    };
    #[cfg(not(unix))]
    let fifo = false;
    path.as_os_str() == "-" || fifo
}

/// Reads the stream's lines into `tx` (at most [`MAX_LINE_BYTES`] kept of each) until it ends;
/// a FIFO is opened again when its writer closes it.
fn read_stream(path: PathBuf, tx: mpsc::SyncSender<StreamLine>) {
    let stdin = path.as_os_str() == "-";
    loop {
        let input: Box<dyn io::Read> = if stdin {
            Box::new(io::stdin())
        } else {
            match File::open(&path) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    let _ = tx.send(StreamLine::Failed(e));
                    return;
                }
            }
        };
        let mut r = io::BufReader::with_capacity(256 * 1024, input);
        loop {
            let mut line = Vec::new();
            // at most one byte past the limit is kept: a longer line is skipped to its end
            match r
                .by_ref()
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(0) => break,
                Ok(_) if line.last() == Some(&b'\n') => {
                    if tx.send(StreamLine::Line(line)).is_err() {
                        return;
                    }
                }
                Ok(_) if line.len() > MAX_LINE_BYTES => {
                    // skipped to its newline in place: memory stays flat whatever its length
                    loop {
                        let (done, used) = match r.fill_buf() {
                            Ok([]) | Err(_) => (true, 0),
                            Ok(b) => match memchr::memchr(b'\n', b) {
                                Some(i) => (true, i + 1),
                                None => (false, b.len()),
                            },
                        };
                        r.consume(used);
                        if done {
                            break;
                        }
                    }
                    if tx.send(StreamLine::Skipped).is_err() {
                        return;
                    }
                }
                // the stream ended inside a line: a cut line, not used
                Ok(_) => break,
                Err(e) => {
                    let _ = tx.send(StreamLine::Failed(e));
                    return;
                }
            }
        }
        if stdin {
            let _ = tx.send(StreamLine::Ended);
            return;
        }
    }
}

/// One open file and where its reading stands.
struct Followed {
    file: File,
    /// Device and inode.
    id: (u64, u64),
    /// Its first bytes as read (up to [`FINGERPRINT_BYTES`]).
    head: Vec<u8>,
    pos: u64,
    partial: Vec<u8>,
    /// Inside a line longer than `MAX_LINE_BYTES`: skipping to its newline.
    skipping: bool,
    /// Lines read (the file's own numbering).
    line: u64,
    /// The last bytes read, up to [`FINGERPRINT_BYTES`], ending at `pos`: a file truncated
    /// and written anew with the same first lines (a prover that restarts and retries the
    /// same jobs) has other bytes there.
    tail: Vec<u8>,
}

/// Up to `n` bytes of the file ending at `end`, read without moving its position.
fn bytes_before(f: &mut File, end: u64, n: usize) -> io::Result<Vec<u8>> {
    let at = f.stream_position()?;
    let from = end.saturating_sub(n as u64);
    f.seek(SeekFrom::Start(from))?;
    let mut got = Vec::with_capacity(n);
    f.by_ref().take(end - from).read_to_end(&mut got)?;
    f.seek(SeekFrom::Start(at))?;
    Ok(got)
}

#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    (
        0,
        meta.created()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64),
    )
}

/// Up to `n` of the file's first bytes, read without moving its position.
fn first_bytes(f: &mut File, n: usize) -> io::Result<Vec<u8>> {
    let at = f.stream_position()?;
    f.seek(SeekFrom::Start(0))?;
    let mut head = Vec::with_capacity(n);
    f.by_ref().take(n as u64).read_to_end(&mut head)?;
    f.seek(SeekFrom::Start(at))?;
    Ok(head)
}

impl Tail {
    fn new(path: &Path) -> Self {
        let stream = is_stream(path).then(|| Stream {
            lines: mpsc::sync_channel(1).1,
            started: false,
            line: 0,
        });
        Tail {
            path: path.to_owned(),
            cur: None,
            old: None,
            stream,
            more: false,
        }
    }

    /// Opens the file; at its end (after its last complete line) unless `from_start`. A
    /// stream starts its reader.
    fn open(&mut self, from_start: bool) -> io::Result<bool> {
        if let Some(s) = &mut self.stream {
            if !s.started {
                let (tx, rx) = mpsc::sync_channel(4096);
                let path = self.path.clone();
                std::thread::Builder::new()
                    .name("proofline-stdin".into())
                    .spawn(move || read_stream(path, tx))?;
                s.lines = rx;
                s.started = true;
            }
            return Ok(true);
        }
        let mut f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let meta = f.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "it is a directory",
            ));
        }
        let mut pos = 0;
        let mut line = 0;
        if !from_start {
            // start after the last complete line, so a line being written is read whole
            let len = meta.len();
            let back = len.min(64 * 1024);
            f.seek(SeekFrom::Start(len - back))?;
            let mut tail = Vec::with_capacity(back as usize);
            f.read_to_end(&mut tail)?;
            pos = tail
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(len - back, |i| len - back + i as u64 + 1);
            // count the lines skipped, so that reported line numbers are the file's
            f.seek(SeekFrom::Start(0))?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut left = pos;
            while left > 0 {
                let want = left.min(buf.len() as u64) as usize;
                let n = f.read(&mut buf[..want])?;
                if n == 0 {
                    break;
                }
                line += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                left -= n as u64;
            }
        }
        f.seek(SeekFrom::Start(pos))?;
        let head = first_bytes(&mut f, FINGERPRINT_BYTES)?;
        let tail = bytes_before(&mut f, pos, FINGERPRINT_BYTES)?;
        self.cur = Some(Followed {
            file: f,
            id: file_id(&meta),
            head,
            pos,
            partial: Vec::new(),
            skipping: false,
            line,
            tail,
        });
        Ok(true)
    }

    /// Reads what was appended; calls `line` for each complete line with its 1-based number
    /// in its file. Handles truncation, also a truncation followed by a regrowth past the old
    /// size between two polls (the first bytes differ: start over), and rotation (the old
    /// file is read to its end, and again for [`ROTATED_GRACE`] in case its writer still
    /// appends; the new one from its start).
    fn poll(&mut self, mut line: impl FnMut(Got<'_>, u64)) -> io::Result<Event> {
        if let Some(s) = &mut self.stream {
            self.more = false;
            for _ in 0..STREAM_LINES_PER_POLL {
                match s.lines.try_recv() {
                    Ok(StreamLine::Line(l)) => {
                        s.line += 1;
                        line(Got::Line(without_hole(&l)), s.line);
                    }
                    Ok(StreamLine::Skipped) => {
                        s.line += 1;
                        line(Got::Skipped, s.line);
                    }
                    Ok(StreamLine::Ended) => return Ok(Event::Ended),
                    Ok(StreamLine::Failed(e)) => return Err(e),
                    Err(_) => return Ok(Event::None),
                }
            }
            // a long history coming at once: the rest at the next poll, right away
            self.more = true;
            return Ok(Event::None);
        }
        self.more = false;
        let mut event = Event::None;
        // the rotated file first: its lines came before the new file's; it is let go once
        // its grace is over and it was read to its end
        if let Some((old, until)) = &mut self.old {
            let more = old.read_available(&mut line)?;
            self.more |= more;
            if Instant::now() >= *until && !more {
                self.old = None;
            }
        }
        if self.cur.is_none() {
            match self.open(true) {
                Ok(true) => event = Event::Opened,
                Ok(false) => return Ok(Event::Missing),
                // the file rotated in cannot be read (logrotate's `create` window, a
                // directory): said, and tried again at the next poll
                Err(e) => return Ok(Event::Unreadable(e)),
            }
        }
        let current = std::fs::metadata(&self.path).ok();
        let Some(cur) = &mut self.cur else {
            return Ok(event);
        };
        let rotated = current.as_ref().is_some_and(|m| file_id(m) != cur.id);
        // a device or a pipe at the path has no size nor a place to come back to
        let regular = current.as_ref().is_some_and(std::fs::Metadata::is_file);
        if let (Some(m), false, true) = (&current, rotated, regular) {
            let shrunk = m.len() < cur.pos;
            // the same inode with other first bytes: truncated and written anew
            let rewritten = !shrunk
                && ((!cur.head.is_empty()
                    && first_bytes(&mut cur.file, cur.head.len())? != cur.head)
                    // the same first bytes, other bytes where reading stopped
                    || (!cur.tail.is_empty()
                        && bytes_before(&mut cur.file, cur.pos, cur.tail.len())? != cur.tail));
            if shrunk || rewritten {
                cur.file.seek(SeekFrom::Start(0))?;
                cur.pos = 0;
                cur.line = 0;
                cur.partial.clear();
                cur.skipping = false;
                // the old first bytes are gone: the new ones are taken once read (keeping
                // the old made every later poll see a truncation, and read it all again)
                cur.head.clear();
                cur.tail.clear();
                event = Event::Truncated;
            }
        }
        self.more |= cur.read_available(&mut line)?;
        if cur.head.len() < FINGERPRINT_BYTES && (cur.head.len() as u64) < cur.pos {
            cur.head = first_bytes(&mut cur.file, FINGERPRINT_BYTES)?;
        }
        if rotated {
            // what is left unterminated may still be completed by its writer
            let cut = !cur.partial.is_empty();
            if let Some(old) = self.cur.take() {
                self.old = Some((old, Instant::now() + ROTATED_GRACE));
            }
            event = Event::Rotated { cut };
            match self.open(true) {
                Ok(_) => {
                    if let Some(cur) = &mut self.cur {
                        self.more |= cur.read_available(&mut line)?;
                    }
                }
                Err(e) => event = Event::Unreadable(e),
            }
        }
        Ok(event)
    }
}

impl Followed {
    /// Reads what was appended, [`READ_PER_POLL`] at most (a file that never ends, such as
    /// `/dev/zero`, or a hole of a GiB, must not keep watch from its signals and /metrics):
    /// returns whether more may be waiting.
    fn read_available(&mut self, line: &mut impl FnMut(Got<'_>, u64)) -> io::Result<bool> {
        let mut buf = vec![0u8; 256 * 1024];
        let mut read = 0;
        loop {
            if read >= READ_PER_POLL {
                return Ok(true);
            }
            let n = self.file.read(&mut buf)?;
            if n == 0 {
                return Ok(false);
            }
            read += n;
            self.pos += n as u64;
            // the bytes that end at `pos`, for telling a rewrite from an append
            if n >= FINGERPRINT_BYTES {
                self.tail.clear();
                self.tail.extend_from_slice(&buf[n - FINGERPRINT_BYTES..n]);
            } else {
                self.tail.extend_from_slice(&buf[..n]);
                let over = self.tail.len().saturating_sub(FINGERPRINT_BYTES);
                self.tail.drain(..over);
            }
            let mut chunk = &buf[..n];
            while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                self.line += 1;
                let number = self.line;
                // (a line longer than the limit before its newline is skipped, as the
                // library's readers skip it: it was read whole up to the limit and a read)
                if std::mem::take(&mut self.skipping) {
                    line(Got::Skipped, number);
                } else if self.partial.is_empty() {
                    let whole = without_hole(&chunk[..=i]);
                    if whole.len() - 1 > MAX_LINE_BYTES {
                        line(Got::Skipped, number);
                    } else {
                        line(Got::Line(whole), number);
                    }
                } else if self.partial.len() + i > MAX_LINE_BYTES {
                    self.partial = Vec::new();
                    line(Got::Skipped, number);
                } else {
                    self.partial.extend_from_slice(&chunk[..=i]);
                    let whole = std::mem::take(&mut self.partial);
                    line(Got::Line(&whole), number);
                }
                chunk = &chunk[i + 1..];
            }
            if !self.skipping {
                // a hole of NUL bytes before a line (copytruncate with a writer that does
                // not append: it writes on at its old offset) is no part of the line
                if self.partial.is_empty() {
                    chunk = without_hole(chunk);
                }
                self.partial.extend_from_slice(chunk);
                if self.partial.len() > MAX_LINE_BYTES {
                    // memory stays flat whatever the writer does: skip to the newline
                    self.partial = Vec::new();
                    self.skipping = true;
                }
            }
        }
    }
}

/// What reading found: a complete line, or a line over [`MAX_LINE_BYTES`] skipped.
#[derive(Debug, Clone, Copy)]
enum Got<'a> {
    Line(&'a [u8]),
    Skipped,
}

/// `b` without the NUL bytes it starts with.
fn without_hole(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|&&c| c == 0).count();
    &b[n..]
}

#[derive(Debug)]
enum Event {
    None,
    Missing,
    Opened,
    Truncated,
    Rotated {
        cut: bool,
    },
    /// The file at the path cannot be read (permissions, a directory): tried again.
    Unreadable(io::Error),
    /// Standard input ended.
    Ended,
}

fn unix_ms() -> u64 {
    proofline_core::ids::unix_ms(SystemTime::now())
}

/// Malformed lines are named on stderr at most [`BAD_LINES_NAMED`] times per
/// [`BAD_LINE_WINDOW`]; the rest are summed up once the window ends. `/metrics` counts all.
const BAD_LINES_NAMED: u32 = 10;
/// See [`BAD_LINES_NAMED`].
const BAD_LINE_WINDOW: Duration = Duration::from_secs(10);

/// A rate limit on the malformed lines named on stderr.
struct BadLines {
    window_start: Instant,
    named: u32,
    quiet: u64,
}

impl BadLines {
    /// Whether this malformed line is named (else it is counted for the summary).
    fn allow(&mut self) -> bool {
        self.roll();
        if self.named < BAD_LINES_NAMED {
            self.named += 1;
            true
        } else {
            self.quiet += 1;
            false
        }
    }

    /// The lines not named in a window that has ended, once.
    fn summary(&mut self) -> Option<u64> {
        if self.window_start.elapsed() < BAD_LINE_WINDOW {
            return None;
        }
        let quiet = std::mem::take(&mut self.quiet);
        self.roll();
        (quiet > 0).then_some(quiet)
    }

    fn roll(&mut self) {
        if self.window_start.elapsed() >= BAD_LINE_WINDOW && self.quiet == 0 {
            self.window_start = Instant::now();
            self.named = 0;
        }
    }
}

/// How long `watch`, once stopped, goes on delivering what its sinks hold: well inside
/// systemd's default stop timeout of 90 s.
const STOP_DELIVERY: Duration = Duration::from_secs(5);

pub fn watch(args: &WatchArgs) -> Result<()> {
    args.engine.check()?;
    if args.log.is_some() && args.state_dir.is_some() {
        anyhow::bail!(
            "--state-dir keeps the journal's cursor: it goes with --journal-unit, --journal-file or --journal-dir"
        );
    }
    if args.journal.since.is_some() || args.journal.until.is_some() {
        anyhow::bail!(
            "--since and --until choose a journal's history to read (analyze, chart, export, replay, whatif): watch follows what comes (--from-start for everything there is)"
        );
    }
    let mut exporters = Exporters::start(
        "proofline watch",
        Some((args.metrics_addr, args.serve.options()?)),
        &args.nouns.clone().unwrap_or_default(),
        crate::exporters::buckets(&args.buckets),
    )?;
    let metrics_url = exporters
        .metrics_url()
        .unwrap_or_else(|| format!("http://{}/metrics", args.metrics_addr));
    let poll = Duration::from_millis(args.poll_ms.max(10));
    // until the first lines tell the log's epoch: now
    let mut driver = Driver::start(
        exporters.take_sink(),
        RunInfo::new(args.instance.as_str(), unix_ms()),
        poll,
    );
    let mut engine = Engine::new(args.engine.config()?);
    let mut feeder = LineFeeder::new();
    // SIGTERM/SIGINT: stop following, deliver what the sinks hold, exit 0 (a service)
    let signals = crate::signals::Stop::install()?;
    let result = match &args.log {
        Some(log) => follow_file(
            args,
            log,
            &metrics_url,
            poll,
            &mut engine,
            &mut feeder,
            &mut driver,
            &signals,
        ),
        None => crate::follow_journal::follow(
            &crate::follow_journal::Watching {
                journal: &args.journal,
                from_start: args.from_start,
                state_dir: args.state_dir.as_deref(),
                instance: &args.instance,
                poll,
                metrics_url: &metrics_url,
            },
            &mut engine,
            &mut feeder,
            &mut driver,
            &signals,
        ),
    };
    if let Some(s) = signals.name() {
        eprintln!(
            "proofline watch: {s}: delivering what is queued ({} s at most), then exiting",
            STOP_DELIVERY.as_secs()
        );
    }
    // whether a signal stopped it or reading failed: what the sinks hold is delivered
    let counts = feeder.telemetry_counts();
    let deadline = Instant::now() + STOP_DELIVERY;
    match driver.finish(&engine.live(), &counts, deadline) {
        // the sinks said what they did not deliver: the exporter's handle is only closed
        // (it said the same again, "within 363ns", once the deadline had passed)
        Err(e) => {
            eprintln!("proofline watch: {e}");
            exporters.close();
        }
        Ok(()) => exporters.finish(
            "proofline watch",
            deadline.saturating_duration_since(Instant::now()),
        ),
    }
    result
}

/// Follows a file (or a stream) through the engine until a signal, or until a stream ends.
#[allow(clippy::too_many_arguments)]
fn follow_file(
    args: &WatchArgs,
    log: &Path,
    metrics_url: &str,
    poll: Duration,
    engine: &mut Engine,
    feeder: &mut LineFeeder,
    driver: &mut Driver,
    signals: &crate::signals::Stop,
) -> Result<()> {
    let mut bad_lines = BadLines {
        window_start: Instant::now(),
        named: 0,
        quiet: 0,
    };
    let mut epoch_known = false;
    let mut tail = Tail::new(log);
    let mut first_open = true;
    let mut warned_missing = false;
    let mut said_unreadable = false;
    // the engine's clock between lines: the newest offset a line brought, when it came (and
    // in which run); it moves on at wall speed until a newer line comes
    let mut newest: Option<(u64, Instant, u32)> = None;
    let path = log.display().to_string();
    let mut follow = || -> Result<()> {
        loop {
            if signals.requested() {
                return Ok(());
            }
            if first_open {
                match tail.open(args.from_start || warned_missing) {
                    Ok(true) => {
                        first_open = false;
                        if let Some(w) = foreign_format(log) {
                            eprintln!("proofline watch: warning: {path} {w}");
                        }
                        // said once the place to read from is fixed, so that what a writer
                        // appends after this line is read
                        eprintln!(
                            "proofline watch: following {path} {}; metrics on {metrics_url}",
                            if is_stream(log) {
                                "as its lines come"
                            } else if args.from_start || warned_missing {
                                "from its start"
                            } else {
                                "from its end"
                            }
                        );
                    }
                    Ok(false) => {
                        if !warned_missing {
                            eprintln!("proofline watch: {path} does not exist yet; waiting for it");
                            warned_missing = true;
                        }
                        std::thread::sleep(poll);
                        continue;
                    }
                    Err(e) => return Err(e).with_context(|| format!("cannot open {path}")),
                }
            }
            let event = tail
                .poll(|got, number| match got {
                    Got::Line(line) => {
                        let absurd_before = feeder.stats.first_absurd_timing.is_some();
                        if let Some(e) = feeder.feed_line(line, engine, driver.sinks()) {
                            if bad_lines.allow() {
                                eprintln!(
                                    "proofline watch: {path}:{number}: {}",
                                    proofline_core::text::printable(&e.error)
                                );
                            }
                        } else if !absurd_before && feeder.stats.first_absurd_timing.is_some() {
                            // (the first only: a prover that writes one such value writes it
                            // on every line)
                            eprintln!(
                                "proofline watch: {path}:{number}: a CUZK_TIMING line with a value over an hour{}, ignored (kernel time leaves such lines out; later ones are not said)",
                                over_an_hour(line)
                            );
                        }
                    }
                    Got::Skipped => {
                        feeder.stats.oversized += 1;
                        if bad_lines.allow() {
                            eprintln!(
                                "proofline watch: {path}:{number}: longer than {} MiB, skipped to its end (counted in proofline_malformed_lines_total)",
                                MAX_LINE_BYTES >> 20
                            );
                        }
                    }
                })
                .with_context(|| format!("reading {path}"))?;
            if let Some(quiet) = bad_lines.summary() {
                eprintln!(
                    "proofline watch: {quiet} more malformed lines in {path} in the last {}s (all counted in proofline_malformed_lines_total)",
                    BAD_LINE_WINDOW.as_secs()
                );
            }
            match event {
                Event::Truncated => {
                    eprintln!(
                        "proofline watch: {path} was truncated; reading it again from the start"
                    )
                }
                Event::Rotated { cut } => eprintln!(
                    "proofline watch: {path} was rotated; following the new file{}",
                    if cut {
                        " (the old file ended in a cut line: it is read for 5 s more in case its writer completes it)"
                    } else {
                        ""
                    }
                ),
                Event::Unreadable(e) => {
                    if !said_unreadable {
                        said_unreadable = true;
                        eprintln!(
                            "proofline watch: {path} cannot be read ({e}); /metrics goes on, and it is tried again each poll"
                        );
                    }
                }
                Event::Ended => {
                    eprintln!("proofline watch: {path} ended");
                    return Ok(());
                }
                Event::Opened => said_unreadable = false,
                Event::Missing | Event::None => {}
            }
            if let Some(o) = engine.newest_offset() {
                // a newer line (or a new run) restarts the clock from it
                if newest.is_none_or(|(n, _, run)| o != n || run != engine.run()) {
                    newest = Some((o, Instant::now(), engine.run()));
                }
                if !epoch_known {
                    // the run's epoch: now minus the newest offset when reading starts
                    let epoch = unix_ms().saturating_sub(o);
                    driver.restart(RunInfo::new(args.instance.as_str(), epoch));
                    epoch_known = true;
                }
            }
            if let Some((offset, at, _)) = newest {
                engine.advance(offset + at.elapsed().as_millis() as u64, driver.sinks());
            }
            let counts = feeder.telemetry_counts();
            driver.tick(&engine.live(), &counts);
            if !tail.more {
                std::thread::sleep(poll);
            }
        }
    };
    follow()
}

/// The first `key=value` over an hour of a timing line, as " (key=value)" (empty if the
/// line reads otherwise).
fn over_an_hour(line: &[u8]) -> String {
    use proofline_core::timing::{TimingLine, parse_timing};
    let Some(Ok(TimingLine::Timing(t))) = std::str::from_utf8(line).ok().and_then(parse_timing)
    else {
        return String::new();
    };
    t.over_max()
        .map(|(k, v)| format!(" ({}={v})", k.name()))
        .unwrap_or_default()
}
