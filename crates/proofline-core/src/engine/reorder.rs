//! The reorder buffer: events wait here until the newest offset is a reorder window past
//! them, then leave in time order.
//!
//! Lines from many threads arrive nearly sorted, so inserting from the back is O(1) in the
//! common case (a binary heap was a visible share of analyze time). How long an event waits: until an
//! event at least `reorder_window_ms` newer arrives, or until a live caller's clock passes
//! it by that much ([`super::Engine::advance`]).

use std::collections::VecDeque;

use crate::event::EventKind;

/// An event whose strings were interned, waiting in the reorder buffer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ev {
    /// Timeline time: the run's base plus the line's offset.
    pub t: u64,
    /// Arrival number: ties in `t` keep arrival order.
    pub seq: u64,
    /// Which TIMELINE event.
    pub kind: EventKind,
    /// Interned job id (one reference held while the event is buffered).
    pub name: u32,
    /// `partition=`, `None` for whole-proof jobs.
    pub partition: Option<u32>,
    /// `worker=`.
    pub worker: Option<u32>,
    /// `gpu=` (proofline's own writer only).
    pub gpu: Option<u32>,
    /// `synth_ms=` as printed.
    pub synth_ms: Option<u64>,
    /// `gpu_ms=` as printed.
    pub gpu_ms: Option<u64>,
    /// Interned `kind=`.
    pub proof_kind: Option<u16>,
}

impl Ev {
    /// What a duplicate must repeat besides its time.
    pub fn signature(&self) -> u64 {
        let w = u64::from(self.worker.unwrap_or(u32::MAX));
        let n = self.synth_ms.or(self.gpu_ms).unwrap_or(u64::MAX);
        w.rotate_left(40) ^ n
    }

    fn key(&self) -> (u64, u64) {
        (self.t, self.seq)
    }
}

/// Events sorted by (time, arrival).
#[derive(Debug, Default)]
pub(super) struct Reorder {
    /// Sorted by [`Ev::key`].
    pending: VecDeque<Ev>,
    /// The last arrival number given.
    seq: u64,
}

impl Reorder {
    /// The next arrival number.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Buffers an event in its place.
    pub fn insert(&mut self, e: Ev) {
        let mut at = self.pending.len();
        while at > 0 && self.pending[at - 1].key() > e.key() {
            at -= 1;
        }
        self.pending.insert(at, e);
    }

    /// The oldest event, if it is at or before `horizon`.
    pub fn pop_until(&mut self, horizon: u64) -> Option<Ev> {
        if self.pending.front().is_some_and(|e| e.t <= horizon) {
            self.pending.pop_front()
        } else {
            None
        }
    }

    /// The oldest event, whatever its time.
    pub fn pop(&mut self) -> Option<Ev> {
        self.pending.pop_front()
    }
}
