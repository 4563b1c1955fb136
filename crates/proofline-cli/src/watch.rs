//! `proofline watch`: follows a live log like `tail -F` and serves the same metrics as the
//! layer, for provers that are not instrumented yet.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use proofline_core::Engine;
use proofline_core::reader::{LineFeeder, MAX_LINE_BYTES};
use proofline_core::sink::{RunInfo, TelemetryCounts, UpdateSink};

use crate::exporters::Exporters;
use crate::input::EngineArgs;

/// Follows a live TIMELINE log and serves its metrics.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The log a prover is writing (followed across rotation and truncation).
    #[arg(value_name = "LOG")]
    log: PathBuf,
    /// Read the log from its beginning (default: from its end, only what comes next).
    #[arg(long)]
    from_start: bool,
    /// Where to serve /metrics and /healthz (loopback unless told otherwise).
    #[arg(long, default_value = proofline_prometheus::DEFAULT_ADDR, value_name = "ADDR:PORT")]
    metrics_addr: SocketAddr,
    /// How often to look for new lines, in milliseconds. Range 10..=60000.
    #[arg(long, default_value_t = 250, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(10..=60_000))]
    poll_ms: u64,
    /// Name of this prover in trace ids (exemplars).
    #[arg(long, default_value = "cuzk")]
    instance: String,
    #[command(flatten)]
    engine: EngineArgs,
}

/// A file followed like `tail -F`.
struct Tail {
    path: PathBuf,
    file: Option<File>,
    id: Option<(u64, u64)>,
    pos: u64,
    partial: Vec<u8>,
    /// Inside a line longer than `MAX_LINE_BYTES`: skipping to its newline.
    skipping: bool,
    /// Lines longer than `MAX_LINE_BYTES` skipped so far.
    oversized: u64,
    line: u64,
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

impl Tail {
    fn new(path: &Path) -> Self {
        Tail {
            path: path.to_owned(),
            file: None,
            id: None,
            pos: 0,
            partial: Vec::new(),
            skipping: false,
            oversized: 0,
            line: 0,
        }
    }

    /// Opens the file; at its end (after its last complete line) unless `from_start`.
    fn open(&mut self, from_start: bool) -> io::Result<bool> {
        let mut f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let meta = f.metadata()?;
        self.id = Some(file_id(&meta));
        self.pos = 0;
        self.line = 0;
        self.partial.clear();
        self.skipping = false;
        if !from_start {
            // start after the last complete line, so a line being written is read whole
            let len = meta.len();
            let back = len.min(64 * 1024);
            f.seek(SeekFrom::Start(len - back))?;
            let mut tail = Vec::with_capacity(back as usize);
            f.read_to_end(&mut tail)?;
            let keep = tail
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(len - back, |i| len - back + i as u64 + 1);
            self.pos = keep;
            // count the lines skipped, so that reported line numbers are the file's
            f.seek(SeekFrom::Start(0))?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut left = keep;
            while left > 0 {
                let want = left.min(buf.len() as u64) as usize;
                let n = f.read(&mut buf[..want])?;
                if n == 0 {
                    break;
                }
                self.line += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                left -= n as u64;
            }
        }
        f.seek(SeekFrom::Start(self.pos))?;
        self.file = Some(f);
        Ok(true)
    }

    /// Reads what was appended; calls `line` for each complete line with its 1-based number
    /// in the file. Handles truncation (start over) and rotation (finish the old file, then
    /// follow the new one from its start).
    fn poll(&mut self, mut line: impl FnMut(&[u8], u64)) -> io::Result<Event> {
        let mut event = Event::None;
        if self.file.is_none() {
            if !self.open(true)? {
                return Ok(Event::Missing);
            }
            event = Event::Opened;
        }
        let current = std::fs::metadata(&self.path).ok();
        let rotated = current
            .as_ref()
            .is_some_and(|m| Some(file_id(m)) != self.id);
        if let (Some(m), false) = (&current, rotated) {
            if m.len() < self.pos {
                // truncated in place: start over
                if let Some(f) = &mut self.file {
                    f.seek(SeekFrom::Start(0))?;
                }
                self.pos = 0;
                self.line = 0;
                self.partial.clear();
                self.skipping = false;
                event = Event::Truncated;
            }
        }
        self.read_available(&mut line)?;
        if rotated {
            // the old file is complete: what is left unterminated was cut
            let cut = !self.partial.is_empty();
            self.file = None;
            self.open(true)?;
            self.read_available(&mut line)?;
            event = Event::Rotated { cut };
        }
        Ok(event)
    }

    fn read_available(&mut self, line: &mut impl FnMut(&[u8], u64)) -> io::Result<()> {
        let Some(f) = &mut self.file else {
            return Ok(());
        };
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            self.pos += n as u64;
            let mut chunk = &buf[..n];
            while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                self.line += 1;
                let number = self.line;
                if std::mem::take(&mut self.skipping) {
                    self.oversized += 1;
                } else if self.partial.is_empty() {
                    line(&chunk[..=i], number);
                } else {
                    self.partial.extend_from_slice(&chunk[..=i]);
                    let whole = std::mem::take(&mut self.partial);
                    line(&whole, number);
                }
                chunk = &chunk[i + 1..];
            }
            if !self.skipping {
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

#[derive(Debug, PartialEq, Eq)]
enum Event {
    None,
    Missing,
    Opened,
    Truncated,
    Rotated { cut: bool },
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

pub fn watch(args: &WatchArgs) -> Result<()> {
    let mut bad_lines = BadLines {
        window_start: Instant::now(),
        named: 0,
        quiet: 0,
    };
    let mut exporters = Exporters::start("proofline watch", Some(args.metrics_addr))?;
    // until the first lines tell the log's epoch: now
    exporters.start_run(&args.instance, unix_ms());
    let metrics_addr = exporters.metrics_addr().unwrap_or(args.metrics_addr);
    let sink = &mut exporters.sink;
    let mut engine = Engine::new(args.engine.config());
    let mut feeder = LineFeeder::new();
    let mut epoch_known = false;
    let mut tail = Tail::new(&args.log);
    let mut first_open = true;
    let mut warned_missing = false;
    // the engine's clock between lines: the newest offset a line brought, when it came (and
    // in which run); it moves on at wall speed until a newer line comes
    let mut newest: Option<(u64, Instant, u32)> = None;
    let poll = Duration::from_millis(args.poll_ms.max(10));
    let path = args.log.display().to_string();
    loop {
        if first_open {
            match tail.open(args.from_start || warned_missing) {
                Ok(true) => {
                    first_open = false;
                    // said once the place to read from is fixed, so that what a writer
                    // appends after this line is read
                    eprintln!(
                        "proofline watch: following {path} from {}; metrics on http://{}/metrics",
                        if args.from_start || warned_missing {
                            "its start"
                        } else {
                            "its end"
                        },
                        metrics_addr
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
            .poll(|line, number| {
                if let Some(e) = feeder.feed_line(line, &mut engine, sink) {
                    if bad_lines.allow() {
                        eprintln!("proofline watch: {path}:{number}: {}", e.error);
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
                eprintln!("proofline watch: {path} was truncated; reading it again from the start")
            }
            Event::Rotated { cut } => eprintln!(
                "proofline watch: {path} was rotated; following the new file{}",
                if cut {
                    " (the old file ended in a cut line, not used)"
                } else {
                    ""
                }
            ),
            Event::Missing | Event::Opened | Event::None => {}
        }
        if let Some(o) = engine.newest_offset() {
            // only a line ahead of the clock (or a new run) sets it: what `advance` itself
            // raised the newest offset to is the clock's own reading
            let clock = newest.map(|(n, at, run)| (n + at.elapsed().as_millis() as u64, run));
            if clock.is_none_or(|(now, run)| o > now || run != engine.run()) {
                newest = Some((o, Instant::now(), engine.run()));
            }
            if !epoch_known {
                // the run's epoch: now minus the newest offset when reading starts
                let epoch = unix_ms().saturating_sub(o);
                sink.start_run(&RunInfo::new(args.instance.as_str(), epoch));
                epoch_known = true;
            }
        }
        if let Some((offset, at, _)) = newest {
            engine.advance(offset + at.elapsed().as_millis() as u64, sink);
        }
        feeder.stats.oversized = tail.oversized;
        let counts = TelemetryCounts {
            events_dropped: 0,
            malformed_lines: feeder.stats.malformed,
        };
        sink.tick(&engine.live(), &counts);
        std::thread::sleep(poll);
    }
}
