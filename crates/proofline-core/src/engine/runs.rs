//! Runs, and lines out of the window: a daemon restart is decided by evidence, not by one
//! line.
//!
//! An event whose offset falls back behind the newest line by more than the reorder window is
//! held, as is one more than `restart_after_ms` ahead of the newest line. (A restart less
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

use super::Engine;
use super::reorder::Ev;
use crate::report::JobStatus;
use crate::sink::{Update, UpdateSink};

/// Lines in a row that confirm a restart.
pub const RESTART_CONFIRMATIONS: usize = 3;

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
    /// Their offsets and events (with no timeline time yet), in arrival order.
    pub events: Vec<(u64, Ev)>,
}

impl Engine {
    /// Where an event at `offset` stands against the newest line of the run.
    pub(super) fn side_of(&self, offset: u64) -> Option<Side> {
        let max = self.max_event_offset?;
        if offset < max {
            (max - offset > self.cfg.reorder_window_ms).then_some(Side::Behind)
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
                    self.hold(Side::Ahead, offset, e);
                }
            }
            Some(Side::Behind) => {
                if self.held.side == Some(Side::Ahead) {
                    self.stray_held();
                }
                // held lines far apart from one another are not one restart's first lines
                let apart =
                    self.held.events.first().is_some_and(|&(first, _)| {
                        first.abs_diff(offset) > self.cfg.restart_after_ms
                    });
                if apart {
                    self.stray_held();
                }
                self.hold(Side::Behind, offset, e);
                if self.held.events.len() >= RESTART_CONFIRMATIONS {
                    self.new_run(sink);
                    self.accept_held(sink);
                }
            }
        }
    }

    fn hold(&mut self, side: Side, offset: u64, e: Ev) {
        self.held.side = Some(side);
        self.held.events.push((offset, e));
    }

    /// The held lines are used, in the run in progress.
    pub(super) fn accept_held(&mut self, sink: &mut impl UpdateSink) {
        self.held.side = None;
        for (offset, e) in std::mem::take(&mut self.held.events) {
            self.accept(offset, e, sink);
        }
    }

    /// The held lines are strays: counted, named, not used.
    pub(super) fn stray_held(&mut self) {
        let Some(side) = self.held.side.take() else {
            return;
        };
        let newest = self.max_event_offset.unwrap_or(0);
        for (offset, e) in std::mem::take(&mut self.held.events) {
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
                    e.kind
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
            && self.held.events.first().is_some_and(|&(first, _)| {
                offset.saturating_add(self.cfg.reorder_window_ms) >= first
            });
        if reached {
            self.accept_held(sink);
        }
    }

    pub(super) fn new_run(&mut self, sink: &mut impl UpdateSink) {
        self.end_run(JobStatus::Restarted, sink);
        self.totals.recent_completions.clear();
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
    use crate::sink::NoUpdates;
    use crate::{Engine, EngineConfig, parse_line};

    /// A restart the source knows (a new process in the journal) ends the run there, even
    /// 4 ms after the start, where no heuristic could see one: the same lines again are a
    /// second run, not duplicates, and the first run's job is `restarted`.
    #[test]
    fn a_known_restart_is_a_new_run_however_soon() {
        let mut e = Engine::new(EngineConfig {
            expected_partitions: Some(1),
            ..EngineConfig::default()
        });
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
