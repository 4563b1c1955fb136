//! The systemd journal as an input: cuzk's documented deployment is a systemd unit whose
//! stderr (TIMELINE, `CUZK_TIMING`) and stdout (`tracing`) lines go to the journal.
//!
//! Read by spawning `journalctl --output=json`, as Vector's journald source does, rather
//! than linking libsystemd as promtail does: no C library to build against or to match at
//! run time, it reads copied journal files on a machine without systemd running, and its
//! JSON output is stable and documented (systemd.journal-fields(7)). Each entry's
//! `MESSAGE` is one line; `_BOOT_ID` and `_PID` say which process wrote it, so a restart
//! is known, not guessed (a new process is a new run, however soon after the last); and
//! `__REALTIME_TIMESTAMP` says when on the wall clock.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use proofline_core::reader::LineFeeder;
use proofline_core::sink::UpdateSink;
use proofline_core::{Engine, EngineConfig};
use serde::Deserialize;

use crate::input::LogRun;

/// Where the journal is read from (any one of these makes a command read the journal).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct JournalArgs {
    /// Read the journal (the system's, or --journal-file/--journal-dir) for this systemd
    /// unit's entries, e.g. cuzk.service, instead of a log file.
    #[arg(long, value_name = "UNIT")]
    pub(crate) journal_unit: Option<String>,
    /// Read this journal file (repeatable), e.g. a copied system.journal.
    #[arg(long, value_name = "FILE")]
    pub(crate) journal_file: Vec<PathBuf>,
    /// Read the journal files in this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "journal_file")]
    pub(crate) journal_dir: Option<PathBuf>,
    /// With the journal (--journal-unit, --journal-file or --journal-dir; a log file has no
    /// times to choose by): its entries from this time on, as journalctl takes it
    /// ("2026-12-01 03:00:00", "yesterday", "-2h").
    // (a value may start with `-`, as `-2h` does; one starting with `--` is a flag forgotten
    // a value before it)
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = time_arg)]
    pub(crate) since: Option<String>,
    /// With the journal: its entries up to this time.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = time_arg)]
    pub(crate) until: Option<String>,
}

/// A `--since`/`--until` value: anything journalctl takes, but not a flag.
fn time_arg(s: &str) -> Result<String, String> {
    if s.starts_with("--") {
        return Err(format!(
            "`{s}` is a flag, not a time: give a time such as \"yesterday\" or -2h"
        ));
    }
    Ok(s.to_owned())
}

impl JournalArgs {
    /// An error when a time window is given with a log file (`input`): a file has no times
    /// to choose its lines by, and reading it whole would answer another question.
    pub(crate) fn check_window(&self, input: Option<&std::path::Path>) -> Result<()> {
        let window = self.since.is_some() || self.until.is_some();
        if let Some(file) = input.filter(|_| window) {
            bail!(
                "--since and --until choose a journal's entries (--journal-unit, --journal-file or --journal-dir): {} is a log file, which has no times to choose its lines by",
                file.display()
            );
        }
        Ok(())
    }
}

impl JournalArgs {
    /// What is read, in words.
    pub(crate) fn describe(&self) -> String {
        let mut s = String::from("the journal");
        if let Some(u) = &self.journal_unit {
            s.push_str(&format!(" of {u}"));
        }
        if let Some(d) = &self.journal_dir {
            s.push_str(&format!(" in {}", d.display()));
        }
        if !self.journal_file.is_empty() {
            let files: Vec<String> = self
                .journal_file
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            s.push_str(&format!(" in {}", files.join(", ")));
        }
        s
    }

    pub(crate) fn command(&self) -> Command {
        let mut c = Command::new("journalctl");
        c.args([
            "--output=json",
            "--no-pager",
            "--quiet",
            // the fields used; journalctl adds the cursor and the timestamps
            "--output-fields=MESSAGE,_PID,_BOOT_ID,_SYSTEMD_UNIT",
        ]);
        if let Some(u) = &self.journal_unit {
            c.arg("--unit").arg(u);
        }
        for f in &self.journal_file {
            c.arg("--file").arg(f);
        }
        if let Some(d) = &self.journal_dir {
            c.arg("--directory").arg(d);
        }
        if let Some(s) = &self.since {
            c.arg("--since").arg(s);
        }
        if let Some(u) = &self.until {
            c.arg("--until").arg(u);
        }
        c
    }
}

/// One journal entry, the fields used (by the history reader here and by `watch`).
#[derive(Debug, Deserialize)]
pub(crate) struct Entry {
    #[serde(rename = "__CURSOR")]
    pub(crate) cursor: Option<String>,
    #[serde(rename = "MESSAGE")]
    message: Option<Message>,
    #[serde(rename = "_PID")]
    pid: Option<String>,
    #[serde(rename = "_BOOT_ID")]
    boot: Option<String>,
    #[serde(rename = "__REALTIME_TIMESTAMP")]
    realtime_us: Option<String>,
    #[serde(rename = "_SYSTEMD_UNIT")]
    pub(crate) unit: Option<String>,
}

impl Entry {
    /// When it was written, µs since the Unix epoch (0 when the journal does not say).
    pub(crate) fn realtime_us(&self) -> u64 {
        self.realtime_us
            .as_deref()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    }

    /// The process that wrote it: boot id and pid.
    pub(crate) fn process(&self) -> (String, String) {
        (
            self.boot.clone().unwrap_or_default(),
            self.pid.clone().unwrap_or_default(),
        )
    }

    /// Its message as lines (a newline added), into `line`; false when it has none.
    pub(crate) fn line_into(&mut self, line: &mut Vec<u8>) -> bool {
        line.clear();
        match self.message.take() {
            Some(Message::Text(t)) => line.extend_from_slice(t.as_bytes()),
            Some(Message::Bytes(b)) => line.extend_from_slice(&b),
            _ => return false,
        }
        line.push(b'\n');
        true
    }
}

/// journalctl running: its output, and its errors read beside it on a thread (so that
/// neither pipe fills and blocks it).
pub(crate) struct Journalctl {
    pub(crate) child: std::process::Child,
    pub(crate) stdout: std::process::ChildStdout,
    pub(crate) errors: std::thread::JoinHandle<String>,
}

/// Starts `c` (a [`JournalArgs::command`] and its own arguments).
pub(crate) fn spawn(mut c: Command) -> Result<Journalctl> {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run journalctl, which reads the journal (Debian's systemd package)")?;
    let stdout = child.stdout.take().context("journalctl's output")?;
    let mut stderr = child.stderr.take().context("journalctl's errors")?;
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    Ok(Journalctl {
        child,
        stdout,
        errors,
    })
}

/// The processes a journal's entries came from, in order: each new one is a new run, and a
/// process seen before (an old one's late entry at a restart's seam, as the journal orders
/// entries by time) goes with the run in progress.
#[derive(Debug, Default)]
pub(crate) struct Processes(Vec<Process>);

impl Processes {
    /// Whether `e`'s process is new (then it is noted, with when it began).
    pub(crate) fn is_new(&mut self, e: &Entry) -> bool {
        let (boot, pid) = e.process();
        let same = |p: &Process| p.boot == boot && p.pid == pid;
        if self.0.last().is_some_and(same) || self.0.iter().any(same) {
            return false;
        }
        self.0.push(Process {
            boot,
            pid,
            first_unix_ms: e.realtime_us.is_some().then(|| e.realtime_us() / 1000),
        });
        true
    }

    /// How many there were.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there was none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl JournalArgs {
    /// Whether an entry of `unit` (its `_SYSTEMD_UNIT`) is the prover's own: `journalctl
    /// --unit` also gives systemd's messages about the unit (PID 1's "Stopping cuzk.service",
    /// systemd-coredump's), which are no lines of it and no process of its.
    pub(crate) fn is_own(&self, unit: Option<&str>) -> bool {
        let Some(want) = &self.journal_unit else {
            return true;
        };
        unit.is_some_and(|u| u == want || u.strip_suffix(".service") == Some(want.as_str()))
    }
}

/// `MESSAGE` is a string, or an array of bytes when it is not valid UTF-8 (or null when
/// too large for journalctl's limit).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Message {
    Text(String),
    Bytes(Vec<u8>),
    Other(serde::de::IgnoredAny),
}

/// A process the journal's entries came from: one run of the prover.
#[derive(Debug, Clone, PartialEq)]
struct Process {
    boot: String,
    pid: String,
    /// Wall-clock time of its first entry, ms since the Unix epoch.
    first_unix_ms: Option<u64>,
}

/// Reads the journal through the engine: every entry's message is a line; a new process
/// (`_BOOT_ID`, `_PID`) is a new run. The processes, with when each began, are said on
/// stderr.
pub(crate) fn run_journal(
    j: &JournalArgs,
    cfg: EngineConfig,
    sink: impl UpdateSink,
) -> Result<LogRun> {
    run_journal_until(j, cfg, sink, None, &mut || false)
}

/// [`run_journal`], stopping early when `stop` says so (asked every few thousand entries);
/// with `anchor` (the instance name of run keys), the sink is told each run's place on the
/// wall clock ([`UpdateSink::start_run`]) from the `__REALTIME_TIMESTAMP` of the entry that
/// brought its first TIMELINE offset, before any of its updates: replay's spans sit at their
/// true times, with no `--epoch`.
pub(crate) fn run_journal_until(
    j: &JournalArgs,
    cfg: EngineConfig,
    mut sink: impl UpdateSink,
    anchor: Option<&str>,
    stop: &mut dyn FnMut() -> bool,
) -> Result<LogRun> {
    let Journalctl {
        mut child,
        stdout,
        errors,
    } = spawn(j.command())?;
    let mut engine = Engine::new(cfg);
    let mut feeder = LineFeeder::new();
    let mut processes = Processes::default();
    let mut bad_entries = 0u64;
    let mut line = Vec::with_capacity(256);
    let mut raw = Vec::with_capacity(1024);
    let mut reader = BufReader::with_capacity(256 * 1024, stdout);
    let mut read_error = None;
    let mut stopped = false;
    // the run's epoch is still to be told to the sink (with an anchor)
    let mut epoch_pending = anchor.is_some();
    let mut entries = 0u64;
    loop {
        entries += 1;
        if entries % 4096 == 0 && stop() {
            stopped = true;
            let _ = child.kill();
            break;
        }
        raw.clear();
        match reader.read_until(b'\n', &mut raw) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                read_error = Some(e);
                break;
            }
        }
        let Ok(mut entry) = serde_json::from_slice::<Entry>(&raw) else {
            bad_entries += 1;
            continue;
        };
        if !j.is_own(entry.unit.as_deref()) {
            continue;
        }
        if processes.is_new(&entry) {
            if processes.len() > 1 {
                engine.restart(&mut sink);
                epoch_pending = anchor.is_some();
            }
            // its start-up lines (how its GPU workers map to GPUs) come before its first
            // TIMELINE line
            feeder.expect_startup();
        }
        if !entry.line_into(&mut line) {
            continue;
        }
        if epoch_pending {
            // the run's first TIMELINE offset, placed on the wall clock before its events
            // reach the sink (they wait a reorder window in the engine)
            if let Some(offset) = first_offset(&line) {
                let at_ms = entry.realtime_us() / 1000;
                sink.start_run(&run_info(
                    anchor.unwrap_or_default(),
                    at_ms.saturating_sub(offset),
                    engine.run_base(),
                ));
                epoch_pending = false;
            }
        }
        // a message holding several lines is several lines
        feeder.feed_lines(&line, &mut engine, &mut sink);
    }
    let status = child.wait().context("waiting for journalctl")?;
    let status_ok = status.success() || stopped;
    let errors = errors.join().unwrap_or_default();
    engine.finish(&mut sink);
    let mut report = engine.into_report();
    report.lines = feeder.stats;
    report.lines.from_input = true;
    if !status_ok {
        bail!(
            "journalctl failed ({status}) reading {}: {}",
            j.describe(),
            errors.trim()
        );
    }
    if bad_entries > 0 {
        eprintln!(
            "proofline: warning: {bad_entries} journal entr{} from journalctl were not JSON objects and were skipped",
            if bad_entries == 1 { "y" } else { "ies" }
        );
    }
    if processes.is_empty() {
        bail!(
            "{} holds no entry{}",
            j.describe(),
            match (&j.since, &j.until) {
                (None, None) => String::new(),
                _ => " in that time (--since, --until)".to_owned(),
            }
        );
    }
    say_processes(j, &processes.0);
    let error =
        read_error.map(|e| anyhow::Error::new(e).context(format!("reading {}", j.describe())));
    Ok(LogRun {
        report,
        error,
        stopped,
    })
}

/// The processes (runs) the journal's entries came from, on stderr.
fn say_processes(j: &JournalArgs, processes: &[Process]) {
    let list: Vec<String> = processes
        .iter()
        .map(|p| {
            format!(
                "pid {}{}",
                p.pid,
                p.first_unix_ms
                    .map(|t| format!(" from {}", crate::rfc3339::format_rfc3339(t)))
                    .unwrap_or_default()
            )
        })
        .collect();
    eprintln!(
        "proofline: {}: {} process{} (each a run): {}",
        j.describe(),
        processes.len(),
        if processes.len() == 1 { "" } else { "es" },
        list.join(", ")
    );
}

/// The offset of the first TIMELINE line of `text`, if it has one that parses.
pub(crate) fn first_offset(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    text.lines()
        .find_map(|l| proofline_core::parse_line(l).ok().flatten())
        .map(|ev| ev.offset_ms)
}

/// A run's information from its process's wall-clock offset 0 (`zero_ms`): the run key
/// derives from it alone (so `watch`, however it started, and `replay` give the same trace
/// ids for the same process), the epoch places the run where the engine laid it
/// (`run_base` on its timeline).
pub(crate) fn run_info(instance: &str, zero_ms: u64, run_base: u64) -> proofline_core::RunInfo {
    let mut info = proofline_core::RunInfo::new(instance, zero_ms.saturating_sub(run_base));
    info.run_key = proofline_core::ids::run_key(instance, zero_ms);
    info
}
