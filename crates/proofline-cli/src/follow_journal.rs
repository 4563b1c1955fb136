//! `watch` of the journal: `journalctl --follow --output=json`, as Vector's journald source
//! follows it, each entry's process telling runs apart and its wall-clock time anchoring the
//! run's offsets; with `--state-dir`, a cursor kept there, so that a restarted `watch` goes on
//! where it stopped.
//!
//! Resuming loses nothing and counts nothing twice: the state keeps, beside the cursor of the
//! last entry whose updates were delivered, the cursor of the first entry read of the process
//! then running and the engine's clock at that moment. A restarted `watch` reads that process's
//! entries again up to the cursor with its sinks muted (the engine's state, the jobs in flight
//! with their partitions, is rebuilt; nothing is sent or counted), sets the clock where it was,
//! takes what the counters had counted as their starting point ([`Driver::baseline`]), and
//! goes on from there.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use proofline_core::Engine;
use proofline_core::reader::LineFeeder;
use proofline_core::sink::{Driver, NoUpdates};
use serde::{Deserialize, Serialize};

use crate::journal::JournalArgs;

/// What `watch` keeps under `--state-dir` (`journal.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct State {
    /// The last entry whose updates were delivered.
    cursor: String,
    /// Its wall-clock time, µs since the Unix epoch.
    realtime_us: u64,
    /// The first entry read of the process then running (reading again starts there).
    process_cursor: String,
    /// The engine's clock (an offset of that process's run) when the state was written.
    clock_ms: Option<u64>,
}

impl State {
    fn path(dir: &Path) -> PathBuf {
        dir.join("journal.json")
    }

    fn load(dir: &Path) -> Result<Option<State>> {
        let path = State::path(dir);
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(s) => Ok(Some(s)),
                Err(e) => {
                    eprintln!(
                        "proofline watch: warning: {} is not a state this watch wrote ({e}); following from the journal's end",
                        path.display()
                    );
                    Ok(None)
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Written whole or not at all (a temporary file renamed over the old one).
    fn save(&self, dir: &Path) -> Result<()> {
        let path = State::path(dir);
        let tmp = dir.join("journal.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// What the reader thread hands over.
enum Item {
    Entry(crate::journal::Entry),
    /// A line journalctl printed that is not an entry.
    Bad,
    /// journalctl ended: its status and what it said.
    Ended(String),
}

/// Where reading starts.
enum Start<'a> {
    /// At this entry (inclusive).
    Cursor(&'a str),
    /// The journal's first entry (of the unit).
    Beginning,
    /// What comes next.
    End,
}

fn spawn(j: &JournalArgs, start: Start<'_>) -> Result<(Child, mpsc::Receiver<Item>)> {
    let mut c: Command = j.command();
    c.arg("--follow");
    match start {
        Start::Cursor(cursor) => c.arg(format!("--cursor={cursor}")),
        Start::Beginning => c.arg("--lines=all"),
        Start::End => c.arg("--lines=0"),
    };
    let crate::journal::Journalctl {
        child,
        stdout,
        errors,
    } = crate::journal::spawn(c)?;
    let (tx, rx) = mpsc::sync_channel(4096);
    std::thread::Builder::new()
        .name("proofline-journal".into())
        .spawn(move || {
            let mut r = BufReader::with_capacity(256 * 1024, stdout);
            let mut raw = Vec::with_capacity(1024);
            loop {
                raw.clear();
                match r.read_until(b'\n', &mut raw) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let item = match serde_json::from_slice(&raw) {
                    Ok(e) => Item::Entry(e),
                    Err(_) => Item::Bad,
                };
                if tx.send(item).is_err() {
                    return;
                }
            }
            let _ = tx.send(Item::Ended(errors.join().unwrap_or_default()));
        })
        .context("cannot start the journal's reader thread")?;
    Ok((child, rx))
}

/// What `watch` gives the follower.
pub(crate) struct Watching<'a> {
    pub journal: &'a JournalArgs,
    pub from_start: bool,
    pub state_dir: Option<&'a Path>,
    pub instance: &'a str,
    pub poll: Duration,
    pub metrics_url: &'a str,
}

/// Entries taken in one poll at most (a long history must not keep watch from its signals and
/// ticks).
const ENTRIES_PER_POLL: usize = 65_536;

/// With no entry for this long, the entries read again are over even if the previous watch's
/// last was not met (its entry is gone from the journal).
const REPLAY_IDLE: Duration = Duration::from_secs(2);

/// With no entry at all for this long, reading again is over: journalctl found nothing
/// from the cursor on (a large journal can take seconds before its first entry).
const REPLAY_NOTHING: Duration = Duration::from_secs(30);

/// How often the state is written while entries come.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// Makes the state directory if it is missing, but not its parent: a mistyped path is an
/// error, not a tree of directories made where none was meant (systemd's `StateDirectory=`
/// makes the whole path before the service starts).
fn make_state_dir(dir: &std::path::Path) -> Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if let Some(target) = std::fs::read_link(dir).ok().filter(|_| !dir.exists()) {
                anyhow::bail!(
                    "--state-dir {} is a symbolic link to {}, which does not exist",
                    dir.display(),
                    target.display()
                );
            }
            anyhow::ensure!(
                dir.is_dir(),
                "--state-dir {} is not a directory",
                dir.display()
            );
            Ok(())
        }
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && !dir.parent().is_some_and(std::path::Path::is_dir) =>
        {
            anyhow::bail!(
                "--state-dir {}: its parent directory does not exist (the state directory is made, its parents are not)",
                dir.display()
            )
        }
        Err(e) => {
            Err(e).with_context(|| format!("cannot make the state directory {}", dir.display()))
        }
    }
}

/// Follows the journal through the engine until a signal; the state is written at the end.
pub(crate) fn follow(
    w: &Watching<'_>,
    engine: &mut Engine,
    feeder: &mut LineFeeder,
    driver: &mut Driver,
    stop: &crate::signals::Stop,
) -> Result<()> {
    if let Some(dir) = w.state_dir {
        make_state_dir(dir)?;
    }
    let saved = match w.state_dir {
        Some(dir) => State::load(dir)?,
        None => None,
    };
    let start = match &saved {
        Some(s) => Start::Cursor(&s.process_cursor),
        None if w.from_start => Start::Beginning,
        None => Start::End,
    };
    let (mut child, rx) = spawn(w.journal, start)?;
    eprintln!(
        "proofline watch: following {} {}; metrics on {}",
        w.journal.describe(),
        match &saved {
            Some(_) => "from where the last watch stopped (its state in --state-dir)",
            None if w.from_start => "from its start",
            None => "from its end",
        },
        w.metrics_url
    );
    let mut f = Follower {
        replaying: saved.clone(),
        replayed: 0,
        processes: crate::journal::Processes::default(),
        epoch_pending: false,
        newest: None,
        state: saved.clone().unwrap_or_default(),
        saved_at: Instant::now(),
        bad: 0,
    };
    let mut idle_since = Instant::now();
    let mut got_any = false;
    let result = (|| -> Result<()> {
        loop {
            if stop.requested() {
                return Ok(());
            }
            let mut taken = 0;
            let mut wait = w.poll;
            // a whole poll with no entry: caught up, the prover quiet (only then does the
            // clock move at wall speed past the newest entry: a backlog read in bursts must
            // not move it to the present before its lines are in)
            let mut quiet = false;
            while taken < ENTRIES_PER_POLL {
                let item = match rx.recv_timeout(wait) {
                    Ok(item) => item,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        quiet = wait > Duration::ZERO;
                        break;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        bail!("journalctl's reader ended unexpectedly")
                    }
                };
                wait = Duration::ZERO;
                taken += 1;
                match item {
                    Item::Entry(e) => f.entry(e, w, engine, feeder, driver),
                    Item::Bad => f.bad += 1,
                    Item::Ended(said) => {
                        let status = child.wait().context("waiting for journalctl")?;
                        // a service manager's stop signals journalctl (in watch's process
                        // group, or its cgroup) as it signals watch: a stop, not a failure
                        std::thread::sleep(Duration::from_millis(100));
                        if stop.requested() {
                            return Ok(());
                        }
                        bail!(
                            "journalctl ended ({status}) following {}: {}",
                            w.journal.describe(),
                            said.trim()
                        );
                    }
                }
            }
            // nothing more to read for a while: the history read again is over (the cursor's
            // own entry is gone from the journal, or journalctl found nothing after it)
            if taken > 0 {
                idle_since = Instant::now();
                got_any = true;
            } else if f.replaying.is_some()
                && idle_since.elapsed() >= if got_any { REPLAY_IDLE } else { REPLAY_NOTHING }
            {
                f.resume(engine, feeder, driver);
            }
            if f.replaying.is_none() {
                let clock = f.clock(quiet);
                if let Some(c) = clock {
                    engine.advance(c, driver.sinks());
                }
                f.state.clock_ms = clock;
                driver.tick(&engine.live(), &feeder.telemetry_counts());
                // each second while there is a cursor: the clock moves on between entries (and
                // with it what the sinks were told), so it is kept even when no entry came
                if let Some(dir) = w.state_dir {
                    if !f.state.cursor.is_empty() && f.saved_at.elapsed() >= SAVE_EVERY {
                        f.state.save(dir)?;
                        f.saved_at = Instant::now();
                    }
                }
            }
        }
    })();
    let _ = child.kill();
    let _ = child.wait();
    if f.bad > 0 {
        eprintln!(
            "proofline watch: warning: {} journal entr{} from journalctl were not JSON objects and were skipped",
            f.bad,
            if f.bad == 1 { "y" } else { "ies" }
        );
    }
    // the cursor of what was delivered, whatever ended the following (the sinks are
    // flushed after this; the clock is where the last tick left it)
    if let (Some(dir), None) = (w.state_dir, &f.replaying) {
        if !f.state.cursor.is_empty() {
            if let Err(e) = f.state.save(dir) {
                eprintln!("proofline watch: {e:#}");
            }
        }
    }
    result
}

struct Follower {
    /// The previous watch's state while its entries are read again (sinks muted).
    replaying: Option<State>,
    replayed: u64,
    /// The processes seen.
    processes: crate::journal::Processes,
    /// The run's epoch is to be taken from its next entry that moves the engine.
    epoch_pending: bool,
    /// The newest offset of the run and the wall-clock time of its entry, ms.
    newest: Option<(u64, u64, u32)>,
    /// What is written to the state directory.
    state: State,
    saved_at: Instant,
    bad: u64,
}

impl Follower {
    fn entry(
        &mut self,
        mut e: crate::journal::Entry,
        w: &Watching<'_>,
        engine: &mut Engine,
        feeder: &mut LineFeeder,
        driver: &mut Driver,
    ) {
        let realtime_us = e.realtime_us();
        let cursor = e.cursor.take().unwrap_or_default();
        // an entry past the previous watch's last (its own entry gone from the journal, the
        // journal rotated or vacuumed): what was read again is over
        if self
            .replaying
            .as_ref()
            .is_some_and(|s| realtime_us > s.realtime_us && cursor != s.cursor)
        {
            self.resume(engine, feeder, driver);
        }
        if !w.journal.is_own(e.unit.as_deref()) {
            return;
        }
        // a process seen before (an old one's late entry at a restart's seam) goes with the
        // run in progress, as in the journal's history reader
        if self.processes.is_new(&e) {
            // the old run's offset is no clock for the new one
            self.newest = None;
            let first = self.processes.len() == 1;
            if !first {
                match self.replaying {
                    Some(_) => engine.restart(&mut NoUpdates),
                    None => engine.restart(driver.sinks()),
                }
            }
            if self.replaying.is_none() {
                eprintln!(
                    "proofline watch: pid {} from {}: {}",
                    e.process().1,
                    crate::rfc3339::format_rfc3339(realtime_us / 1000),
                    if first {
                        "the prover's process"
                    } else {
                        "a new process, a new run"
                    }
                );
            }
            self.epoch_pending = true;
            feeder.expect_startup();
            self.state.process_cursor = cursor.clone();
        }
        let mut line = Vec::new();
        if e.line_into(&mut line) {
            if self.epoch_pending {
                // the run's offsets on the wall clock from its first TIMELINE line, as the
                // history reader places them (the sinks place updates at the engine's
                // timeline, where the run starts at its base)
                if let Some(offset) = crate::journal::first_offset(&line) {
                    let zero = (realtime_us / 1000).saturating_sub(offset);
                    driver.restart(crate::journal::run_info(
                        w.instance,
                        zero,
                        engine.run_base(),
                    ));
                    self.epoch_pending = false;
                }
            }
            match self.replaying {
                Some(_) => feeder.feed_lines(&line, engine, &mut NoUpdates),
                None => feeder.feed_lines(&line, engine, driver.sinks()),
            }
        }
        if let Some(o) = engine.newest_offset() {
            let run = engine.run();
            if self.newest.is_none_or(|(n, _, r)| o != n || r != run) {
                self.newest = Some((o, realtime_us / 1000, run));
            }
        }
        self.state.cursor = cursor;
        self.state.realtime_us = realtime_us;
        match &self.replaying {
            Some(s) if s.cursor == self.state.cursor => self.resume(engine, feeder, driver),
            Some(_) => self.replayed += 1,
            None => {}
        }
    }

    /// The entries the previous watch had delivered are read again: the clock is set where
    /// it was, the counters take what they count now as their start, and the sinks hear
    /// what comes next.
    fn resume(&mut self, engine: &mut Engine, feeder: &LineFeeder, driver: &mut Driver) {
        let Some(s) = self.replaying.take() else {
            return;
        };
        if let Some(c) = s.clock_ms {
            engine.advance(c, &mut NoUpdates);
        }
        driver.baseline(&engine.live(), &feeder.telemetry_counts());
        eprintln!(
            "proofline watch: resumed after the last entry the previous watch delivered ({} entries of the run in progress read again, not sent or counted twice)",
            self.replayed
        );
    }

    /// The engine's clock: the newest offset, plus, when `quiet` (caught up with the
    /// journal), the wall-clock time since its entry was written (entries read late, after a
    /// restart of watch, are not taken as new). `None` before the run in progress has an
    /// offset (a new process still starting: the old run's offset is not its clock).
    fn clock(&self, quiet: bool) -> Option<u64> {
        let (offset, at_ms, _) = self.newest?;
        if !quiet {
            return Some(offset);
        }
        let now = proofline_core::ids::unix_ms(std::time::SystemTime::now());
        Some(offset + now.saturating_sub(at_ms))
    }
}
