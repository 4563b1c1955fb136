//! Runs, and lines out of the window: a daemon restart is decided by evidence, not by one
//! line.
//!
//! An event whose offset falls back behind the newest line by more than the reorder window
//! (and more than [`MIN_BEHIND_MS`]) is held, as is one more than `restart_after_ms` ahead of
//! the newest line. (A restart less
//! than a reorder window after the daemon started cannot be told from reordering: it is
//! merged into the run before.) The lines that
//! follow decide:
//!
//! - behind: [`RESTART_CONFIRMATIONS`] such lines in a row, close to one another, are a
//!   restart (a new run begins with them); a line back in the window first makes the held
//!   ones stray late lines;
//! - ahead: a second line ahead confirms the jump (the prover was quiet; the live clock reaching
//!   it does too); a line back in the window first makes the held one a stray early line;
//! - stray lines are counted (`events.stray_late`, `events.stray_early`) and named, and not
//!   used: they change no job's figures. At the end of the input, held lines ahead are used,
//!   held lines behind are strays.
//!
//! A new run begins with SYNTH_STARTs, and a restarted prover never prints them again to
//! the millisecond; a log shipper that sends a block again, or a file concatenated into
//! itself, does. So the SYNTH_STARTs a run used are remembered (the same job, partition and
//! offset), and a restart needs [`RESTART_CONFIRMATIONS`] held lines among which a
//! SYNTH_START the run never had, and more such than repeated ones (a block sent again from
//! far back has a few forgotten). Otherwise, when a line comes back into the window, when they
//! spread further apart than one restart's first lines, at the end of the input, or past
//! [`MAX_HELD_REPEATS`] held, the held SYNTH_STARTs that repeat are duplicates and the other
//! held lines strays: none is used. [`Recent`] is a fixed table of 16,384 hashes in sets of
//! four (a line falls out once four newer ones share its set), filled in order from a ring of
//! the last few thousand when it is full or a line behind the window asks: SYNTH_STARTs only,
//! a sixth of a cuzk log's lines (a 160-sector log, 9,600 lines, concatenated with itself
//! reads as one run: tests/known_answers.rs).

use super::Engine;
use super::reorder::Ev;
use crate::report::JobStatus;
use crate::sink::{Update, UpdateSink};

/// How far behind the newest line an event must fall, at least, to be held as a restart's or
/// a stray: with a reorder window shorter than this (0 turns reordering off), a line a few
/// milliseconds out of order is used, late, not taken for a restart's first line (three
/// such in a row were: a cuzk-shaped log with 20 ms of disorder read as 6 runs, with stuck
/// GPU intervals and lines lost). A restart sooner than this after the daemon started is
/// merged into the run before, as one within the reorder window is.
pub const MIN_BEHIND_MS: u64 = 500;

/// Lines in a row that confirm a restart.
pub const RESTART_CONFIRMATIONS: usize = 3;

/// Lines held behind at most while they are no restart: past it the repeats among them are
/// duplicates and the others strays (the memory a block sent again can take is bounded).
pub const MAX_HELD_REPEATS: usize = 4096;

/// Which way held lines left the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    /// Behind the newest line: a restart, or stray late lines.
    Behind,
    /// Ahead of it: a jump, or a stray early line.
    Ahead,
}

/// Lines held until the ones that follow decide what they are.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// Which way they left the window (`None`: nothing held).
    pub side: Option<Side>,
    /// Their offsets and events (with no timeline time yet), in arrival order, each with
    /// whether it repeats a line the run used.
    pub events: Vec<(u64, Ev, bool)>,
    /// SYNTH_STARTs among them the run never had.
    pub fresh_starts: usize,
    /// SYNTH_STARTs among them that repeat one the run had.
    pub repeat_starts: usize,
}

/// Sets of [`Recent`] (a power of two), each of [`WAYS`] keys: 16,384 keys, 128 KiB.
const RECENT_SETS: usize = 1 << 12;

/// Keys per set: a set holds its newest four, so a line is lost from the table only when four
/// newer lines fell in its set (a direct-mapped table lost ~1 % of even the newest lines).
const WAYS: usize = 4;

/// Keys the lines used are held in, in order, before they go into the table: when it is
/// full, or when a line asks.
const RING: usize = 4096;

/// Hashes of the lines the run used recently, in sets of four (one cache line each), the
/// newest first.
///
/// A line used is written at the end of a ring (a sequential write); the ring's keys go
/// into the table, in order, when it is full or when a line behind the window asks, so that
/// the table a line asks is the one inserting each key at once would have built. A set's
/// read-modify-write per SYNTH_START, a random access to 128 KiB between the engine's other
/// work, was three quarters of `Engine::accept`'s time; done in runs, one after the other,
/// the same inserts cost half as much (`accept` with them 6.6 % -> 3.1 % of analyze's
/// samples on a TIMELINE-only log, BENCHMARKS.md).
#[derive(Debug)]
pub(super) struct Recent {
    sets: Box<[[u64; WAYS]]>,
    ring: Box<[u64]>,
    /// Keys written to the ring in all, and how many of them the table has taken.
    written: u64,
    synced: u64,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            sets: vec![[0; WAYS]; RECENT_SETS].into_boxed_slice(),
            ring: vec![0; RING].into_boxed_slice(),
            written: 0,
            synced: 0,
        }
    }
}

impl Recent {
    /// The line's key: its job id's hash, offset, event, partition and signature, mixed
    /// (never 0, the empty slot).
    pub fn key(name_hash: u64, offset: u64, e: &Ev) -> u64 {
        let part = e.nums.partition().map_or(u64::MAX, u64::from);
        let h = (name_hash ^ offset.rotate_left(24) ^ part.rotate_left(48) ^ e.nums.kind as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ e.signature();
        // one more multiply: every input bit reaches the set index (the high bits)
        h.wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1
    }

    fn set(key: u64) -> usize {
        (key >> 52) as usize & (RECENT_SETS - 1)
    }

    /// Remembers a line (a line used twice takes two ways of its set: rare, and harmless).
    #[inline]
    pub fn insert(&mut self, key: u64) {
        if self.written - self.synced == RING as u64 {
            self.sync();
        }
        self.ring[(self.written % RING as u64) as usize] = key;
        self.written += 1;
    }

    /// The ring's keys the table has not taken go in, oldest first.
    fn sync(&mut self) {
        for i in self.synced..self.written {
            let k = self.ring[(i % RING as u64) as usize];
            let set = &mut self.sets[Self::set(k)];
            *set = [k, set[0], set[1], set[2]];
        }
        self.synced = self.written;
    }

    /// Whether a line was used recently.
    pub fn contains(&mut self, key: u64) -> bool {
        self.sync();
        self.sets[Self::set(key)].contains(&key)
    }

    pub fn clear(&mut self) {
        self.sets.fill([0; WAYS]);
        self.synced = self.written;
    }
}

impl Engine {
    /// The key of an event at `offset` in the table of recent lines.
    pub(super) fn recent_key(&self, offset: u64, e: &Ev) -> u64 {
        Recent::key(self.names.get(e.name).hash, offset, e)
    }

    /// Where an event at `offset` stands against the newest line of the run.
    pub(super) fn side_of(&self, offset: u64) -> Option<Side> {
        let max = self.max_event_offset?;
        if offset < max {
            (max - offset > self.cfg.reorder_window_ms.max(MIN_BEHIND_MS)).then_some(Side::Behind)
        } else {
            (offset > max.saturating_add(self.cfg.restart_after_ms)).then_some(Side::Ahead)
        }
    }

    /// Takes in an interned event at `offset`: held, used, or deciding what the held ones are.
    pub(super) fn admit(&mut self, offset: u64, e: Ev, sink: &mut impl UpdateSink) {
        match self.side_of(offset) {
            None => {
                self.stray_held();
                self.accept(offset, e, sink);
            }
            Some(Side::Ahead) => {
                if self.held.side == Some(Side::Behind) {
                    self.stray_held();
                }
                if self.held.side == Some(Side::Ahead) {
                    // a second line out ahead: the prover was quiet, the jump is real
                    self.accept_held(sink);
                    self.accept(offset, e, sink);
                } else {
                    self.hold(Side::Ahead, offset, e, false);
                }
            }
            Some(Side::Behind) => {
                // only SYNTH_STARTs are remembered (a sixth of the lines: the table's cost on
                // the hot path), and they are what a new run begins with
                let start = e.nums.kind == crate::event::EventKind::SynthStart;
                let repeat = start && {
                    let key = self.recent_key(offset, &e);
                    self.recent.contains(key)
                };
                if self.held.side == Some(Side::Ahead) {
                    self.stray_held();
                }
                // held lines far apart from one another are not one restart's first lines
                let apart = self.held.events.first().is_some_and(|&(first, _, _)| {
                    first.abs_diff(offset) > self.cfg.restart_after_ms
                });
                if apart {
                    self.stray_held();
                }
                self.hold(Side::Behind, offset, e, repeat);
                self.held.fresh_starts += usize::from(start && !repeat);
                self.held.repeat_starts += usize::from(repeat);
                let held = self.held.events.len();
                // a restart: lines enough, among them a SYNTH_START the run never had (a new
                // run begins with them), and more such than repeated ones (a block sent again
                // whose oldest lines fell out of the table has a few)
                if held >= RESTART_CONFIRMATIONS
                    && self.held.fresh_starts > 0
                    && self.held.fresh_starts > self.held.repeat_starts
                {
                    self.note_shallow_restart();
                    self.new_run(sink);
                    self.accept_held(sink);
                } else if held >= MAX_HELD_REPEATS {
                    self.stray_held();
                }
            }
        }
    }

    /// Counts the restart the held lines begin when they fell back less than halfway to
    /// offset 0 (a line 20 s behind at 3 h, where a restarted prover's first line is
    /// seconds into its run: lines shuffled further than the reorder window read as dozens
    /// of restarts without a word).
    fn note_shallow_restart(&mut self) {
        let (Some(newest), Some(&(first, _, _))) =
            (self.max_event_offset, self.held.events.first())
        else {
            return;
        };
        if first > newest.saturating_sub(first) {
            let s = &mut self.totals.stats;
            s.shallow_restarts += 1;
            s.shallow_restart_example
                .get_or_insert_with(|| format!("from {newest} ms back to {first} ms"));
        }
    }

    fn hold(&mut self, side: Side, offset: u64, e: Ev, repeat: bool) {
        self.held.side = Some(side);
        self.held.events.push((offset, e, repeat));
    }

    /// The held lines are used, in the run in progress.
    pub(super) fn accept_held(&mut self, sink: &mut impl UpdateSink) {
        self.held.side = None;
        self.held.fresh_starts = 0;
        self.held.repeat_starts = 0;
        for (offset, e, _) in std::mem::take(&mut self.held.events) {
            self.accept(offset, e, sink);
        }
    }

    /// The held lines are strays (counted, named, not used), or duplicates where they repeat
    /// a line the run used.
    pub(super) fn stray_held(&mut self) {
        let Some(side) = self.held.side.take() else {
            return;
        };
        self.held.fresh_starts = 0;
        self.held.repeat_starts = 0;
        let newest = self.max_event_offset.unwrap_or(0);
        for (offset, e, repeat) in std::mem::take(&mut self.held.events) {
            if repeat {
                self.totals.stats.duplicates += 1;
                self.names.unref(e.name);
                continue;
            }
            let name = self.names.name(e.name).clone();
            let way = match side {
                Side::Behind => {
                    self.totals.stats.stray_late += 1;
                    "behind"
                }
                Side::Ahead => {
                    self.totals.stats.stray_early += 1;
                    "ahead of"
                }
            };
            self.example(|| {
                format!(
                    "{name}: {} at {offset} ms, {way} the newest line ({newest} ms) out of the window and alone: a stray line, not used",
                    e.nums.kind
                )
            });
            self.names.unref(e.name);
        }
    }

    /// At the end of the input: held lines ahead are used, held lines behind are strays.
    pub(super) fn settle_held_at_end(&mut self, sink: &mut impl UpdateSink) {
        match self.held.side {
            Some(Side::Ahead) => self.accept_held(sink),
            Some(Side::Behind) => self.stray_held(),
            None => {}
        }
    }

    /// The live clock reached `offset`: held lines ahead it has reached are real.
    pub(super) fn clock_reached(&mut self, offset: u64, sink: &mut impl UpdateSink) {
        let reached = self.held.side == Some(Side::Ahead)
            && self.held.events.first().is_some_and(|&(first, _, _)| {
                offset.saturating_add(self.cfg.reorder_window_ms) >= first
            });
        if reached {
            self.accept_held(sink);
        }
    }

    pub(super) fn new_run(&mut self, sink: &mut impl UpdateSink) {
        self.end_run(JobStatus::Restarted, sink);
        self.totals.recent_completions.clear();
        self.recent.clear();
        self.run += 1;
        self.totals.stats.runs += 1;
        sink.update(Update::NewRun {
            run: self.run,
            t_ms: self.run_base,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{RING, Recent};
    use crate::sink::NoUpdates;
    use crate::{Engine, EngineConfig, parse_line};

    /// Whatever the keys and wherever the questions fall (between ring flushes, right after
    /// one, after a long stretch with none), the table answers as one that took each key
    /// at once: the sets of four, newest first, of the engine before the ring.
    #[test]
    fn the_table_answers_as_if_each_key_went_in_at_once() {
        let mut next = super::super::xorshift(0x2545_f491_4f6c_dd1d);
        let mut eager = vec![[0u64; super::WAYS]; super::RECENT_SETS];
        let mut r = Recent::default();
        let mut used = Vec::new();
        let (mut asked, mut found) = (0, 0);
        for step in 0..(6 * RING as u64) {
            // now and then a key used before (a repeat), else a new one
            let key = if step % 7 == 3 && !used.is_empty() {
                used[(next() % used.len() as u64) as usize]
            } else {
                next() | 1
            };
            r.insert(key);
            let set = &mut eager[Recent::set(key)];
            *set = [key, set[0], set[1], set[2]];
            used.push(key);
            // questions in bursts, with stretches of none longer than the ring
            if (step / 2000) % 7 == 0 {
                let q = if next() % 2 == 0 {
                    used[(next() % used.len() as u64) as usize]
                } else {
                    next() | 1
                };
                let want = eager[Recent::set(q)].contains(&q);
                assert_eq!(r.contains(q), want, "step {step}");
                asked += 1;
                found += usize::from(want);
            }
        }
        // the questions found old keys and missed others: both answers were tested
        assert!(found > 100 && asked - found > 100, "{found} of {asked}");
        r.insert(7);
        r.clear();
        assert!(!r.contains(7));
    }

    /// With no reorder window, lines a few milliseconds out of order are used late, in the
    /// one run: three SYNTH_STARTs 7-21 ms behind the newest line in a row were a "restart"
    /// (a second run, its jobs cut), or strays not used. A fall of more than
    /// [`MIN_BEHIND_MS`] is still a restart.
    #[test]
    fn no_reorder_window_takes_jitter_late_not_for_a_restart() {
        let run = |lines: &[String]| {
            let mut e = Engine::new(
                EngineConfig::default()
                    .reorder_window_ms(0)
                    .expected_partitions(Some(4)),
            );
            for l in lines {
                e.ingest(&parse_line(l).unwrap().unwrap(), &mut NoUpdates);
            }
            e.finish(&mut NoUpdates);
            e.report()
        };
        let mut lines = vec!["TIMELINE,100000,SYNTH_START,a,partition=0".to_owned()];
        // three partitions' SYNTH_STARTs printed 21, 14 and 7 ms behind the newest line
        lines.push("TIMELINE,100030,SYNTH_START,b,partition=0".to_owned());
        for (p, t) in [(1, 100009), (2, 100016), (3, 100023)] {
            lines.push(format!("TIMELINE,{t},SYNTH_START,a,partition={p}"));
        }
        let r = run(&lines);
        assert_eq!(r.events.runs, 1, "{:?}", r.events);
        assert_eq!(
            (r.events.stray_late, r.events.late),
            (0, 3),
            "{:?}",
            r.events
        );
        // a 100 ms window: 400 ms behind is used late, 600 ms behind is held (a restart)
        for (behind, runs) in [(400, 1), (600, 2)] {
            let mut e = Engine::new(
                EngineConfig::default()
                    .reorder_window_ms(100)
                    .expected_partitions(Some(4)),
            );
            for l in lines[..2].iter().cloned().chain((1..4).map(|p| {
                format!(
                    "TIMELINE,{},SYNTH_START,a,partition={p}",
                    100030 - behind + p
                )
            })) {
                e.ingest(&parse_line(&l).unwrap().unwrap(), &mut NoUpdates);
            }
            e.finish(&mut NoUpdates);
            let r = e.report();
            assert_eq!(r.events.runs, runs, "{behind} ms behind: {:?}", r.events);
            assert_eq!(r.events.stray_late, 0, "{behind}");
        }
        // the same three 100 s behind: a restart
        let far: Vec<String> = lines[..2]
            .iter()
            .cloned()
            .chain((1..4).map(|p| format!("TIMELINE,{},SYNTH_START,c,partition={p}", 30 + p)))
            .collect();
        let r = run(&far);
        assert_eq!(r.events.runs, 2, "{:?}", r.events);
    }

    /// A restart whose first line fell back less than halfway to offset 0 is counted as
    /// shallow, with the first named; one back to halfway or nearer 0 is not.
    #[test]
    fn a_restart_that_falls_back_less_than_halfway_is_counted_shallow() {
        let run = |back_to: u64| {
            let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(4)));
            let lines = std::iter::once("TIMELINE,100000,SYNTH_START,a,partition=0".to_owned())
                .chain(
                    (1..4).map(|p| format!("TIMELINE,{},SYNTH_START,c,partition={p}", back_to + p)),
                );
            for l in lines {
                e.ingest(&parse_line(&l).unwrap().unwrap(), &mut NoUpdates);
            }
            e.finish(&mut NoUpdates);
            e.report().events
        };
        for (back_to, shallow) in [(30, 0), (49_999, 0), (50_000, 1), (80_000, 1)] {
            let ev = run(back_to);
            assert_eq!(
                (ev.runs, ev.shallow_restarts),
                (2, shallow),
                "{back_to}: {ev:?}"
            );
        }
        assert_eq!(
            run(80_000).shallow_restart_example.as_deref(),
            Some("from 100000 ms back to 80001 ms")
        );
    }

    /// A restart the source knows (a new process in the journal) ends the run there, even
    /// 4 ms after the start, where no heuristic could see one: the same lines again are a
    /// second run, not duplicates, and the first run's job is `restarted`.
    #[test]
    fn a_known_restart_is_a_new_run_however_soon() {
        let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(1)));
        let lines = [
            "TIMELINE,0,SYNTH_START,a,partition=0",
            "TIMELINE,4,SYNTH_END,a,partition=0,synth_ms=4",
        ];
        // a restart before any event is no run
        e.restart(&mut NoUpdates);
        for l in lines {
            e.ingest(&parse_line(l).unwrap().unwrap(), &mut NoUpdates);
        }
        e.restart(&mut NoUpdates);
        for l in lines {
            e.ingest(&parse_line(l).unwrap().unwrap(), &mut NoUpdates);
        }
        e.finish(&mut NoUpdates);
        let r = e.report();
        assert_eq!(r.events.runs, 2, "{:?}", r.events);
        assert_eq!((r.events.duplicates, r.events.conflicts), (0, 0));
        assert_eq!(r.incomplete.len(), 2);
        assert_eq!(r.incomplete[0].status, crate::report::JobStatus::Restarted);
    }
}
