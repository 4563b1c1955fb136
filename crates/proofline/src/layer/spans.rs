//! The layer's span table: per-span state, by span id, in shards.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use proofline_core::EventKind;
use rustc_hash::FxHashMap as HashMap;
use tracing::span;

use super::event::*;
use super::rules::*;
use super::stats::*;
use crate::clock::{Clock, Raw};
use crate::fields::SpanFields;
use crate::queued::Queued;

/// The layer's per-span state, by span id, in shards of its own: a span's edges cost a
/// short uncontended lock here instead of a registry lookup plus its extension map (the
/// extension map's boxed insert and remove were a large share of a mapped span's cost:
/// BENCHMARKS.md).
///
/// Beside the shards, a count of the table's spans by span id modulo [`SpanTable::LIVE`]:
/// a zero says "not one of ours" with one load, so that the enter and close of a span the
/// layer does not map touch no lock. Every id counted in one slot lives in one shard (the
/// slot count is a multiple of the shard count), so the counts change under that shard's
/// lock, with plain stores.
#[derive(Debug)]
pub(crate) struct SpanTable {
    pub(crate) shards: Box<[Shard]>,
    pub(crate) live: Box<[AtomicU32]>,
}

impl SpanTable {
    pub(crate) const SHARDS: usize = 64;
    pub(crate) const LIVE: usize = 4096;

    pub fn new() -> Self {
        SpanTable {
            shards: (0..Self::SHARDS)
                .map(|_| Shard(Mutex::new(HashMap::default())))
                .collect(),
            live: (0..Self::LIVE).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    pub(crate) fn shard(
        &self,
        id: &span::Id,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, SpanState>> {
        self.shards[id.into_u64() as usize % Self::SHARDS]
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[inline]
    pub(crate) fn live(&self, id: &span::Id) -> &AtomicU32 {
        &self.live[id.into_u64() as usize % Self::LIVE]
    }

    /// Whether the span may be in the table: `false` means it is not (one atomic load).
    #[inline]
    pub(crate) fn maybe(&self, id: &span::Id) -> bool {
        self.live(id).load(Ordering::Relaxed) != 0
    }

    pub(crate) fn insert(&self, id: &span::Id, st: SpanState) {
        let mut shard = self.shard(id);
        if shard.insert(id.into_u64(), st).is_none() {
            // under the shard's lock: no other thread changes this count now
            let n = self.live(id);
            n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    /// Runs `f` on the span's state, if the span is in the table.
    #[inline]
    pub(crate) fn with<R>(&self, id: &span::Id, f: impl FnOnce(&mut SpanState) -> R) -> Option<R> {
        if !self.maybe(id) {
            return None;
        }
        self.shard(id).get_mut(&id.into_u64()).map(f)
    }

    /// Takes the span's state out of the table, if the span is in it.
    #[inline]
    pub(crate) fn remove(&self, id: &span::Id) -> Option<SpanState> {
        if !self.maybe(id) {
            return None;
        }
        let mut shard = self.shard(id);
        let st = shard.remove(&id.into_u64())?;
        // under the shard's lock: no other thread changes this count now
        let n = self.live(id);
        n.store(n.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        Some(st)
    }

    /// Takes the creation and first-enter events still waiting in the table (spans not yet
    /// closed), each creation before its start; each shard is locked only to copy its events
    /// out.
    pub fn take_starts(&self, clock: &Clock, stats: &LayerStats, out: &mut Vec<Queued>) {
        for shard in &self.shards {
            let mut shard = shard
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // written only where an event waits: the prover's lines stay clean
            for st in shard
                .values_mut()
                .filter(|st| st.start_pending || st.created_pending.is_some())
            {
                out.extend(st.take_created(clock, stats));
                out.extend(st.pending_start(clock, stats));
                st.start_pending = false;
            }
        }
    }
}

const _: () = assert!(SpanTable::LIVE % SpanTable::SHARDS == 0);

/// One shard, on a cache line of its own: the worker locks every shard at each poll, and
/// must not take the line of a shard a prover thread is using along with its own.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Shard(Mutex<HashMap<u64, SpanState>>);

/// A clock reading kept in a span's state, in 8 bytes where an `Option<Raw>` takes 16: the
/// table's entries stay the size they were before a span's creation time was kept there. A
/// reading of 0 is kept as 1 (a tick, which no millisecond offset sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At(std::num::NonZeroU64);

impl At {
    pub(crate) fn new(raw: Raw) -> Self {
        At(std::num::NonZeroU64::new(raw).unwrap_or(std::num::NonZeroU64::MIN))
    }

    pub(crate) fn raw(self) -> Raw {
        self.0.get()
    }
}

/// Per-span state, kept in the layer's span table.
#[derive(Debug)]
pub(crate) struct SpanState {
    /// The span's fields: its own, and what its nearest mapped-or-field-carrying ancestor
    /// knew when it was created for those it lacks (`record` updates its own).
    pub(crate) fields: SpanFields,
    /// Where the info of its callsite is.
    pub(crate) callsite: Option<u32>,
    pub(crate) rules: RuleMask,
    pub(crate) first_enter: Option<At>,
    /// When the span was made, while its creation's event (a GPU worker's GPU_PICKUP) is
    /// not sent yet: as a first enter's, it waits for the worker's next look at the table or
    /// goes with the close (see `on_new_span`).
    pub(crate) created_pending: Option<At>,
    /// The first enter's event is not sent yet: the worker's next look at the table, or
    /// the close if it comes first, sends it (see `on_enter`).
    pub(crate) start_pending: bool,
    /// The span recorded an error (an `error` field recorded on it, or an ERROR event directly
    /// inside it): its SYNTH_END (and GPU_QUEUE) and GPU_END are not emitted, as cuzk prints
    /// none for failed work.
    pub(crate) failed: bool,
    /// The span is a request span (see `layer::requests`): its job id and number, given
    /// back when it closes (the id as it was then: a later `record` may change the field).
    pub(crate) request_origin: Option<(std::sync::Arc<crate::fields::Name>, u32)>,
}

impl SpanState {
    /// The one event the first enter emits, when it emits exactly one (the common case:
    /// SYNTH_START, GPU_START), which can wait in the table for the worker.
    pub(crate) fn single_start(&self) -> Option<EventKind> {
        only_kind(self.rules[Edge::FirstEnter.index()])
    }

    /// The one event the creation emits, when it emits exactly one (a GPU worker's
    /// GPU_PICKUP), which can wait in the table.
    pub(crate) fn single_created(&self) -> Option<EventKind> {
        only_kind(self.rules[Edge::Created.index()])
    }

    /// The queue entry of the creation's event, if it is still waiting.
    pub(crate) fn pending_created(&self, clock: &Clock, stats: &LayerStats) -> Option<Queued> {
        self.waiting(Edge::Created, self.created_pending, clock, stats)
    }

    /// [`SpanState::pending_created`], no longer waiting once taken.
    pub(crate) fn take_created(&mut self, clock: &Clock, stats: &LayerStats) -> Option<Queued> {
        let q = self.pending_created(clock, stats);
        self.created_pending = None;
        q
    }

    /// The queue entry of the first-enter event, if it is still waiting.
    pub(crate) fn pending_start(&self, clock: &Clock, stats: &LayerStats) -> Option<Queued> {
        let at = self.first_enter.filter(|_| self.start_pending);
        self.waiting(Edge::FirstEnter, at, clock, stats)
    }

    /// The entry of the one event `edge` emits, waiting since `at`.
    fn waiting(
        &self,
        edge_of: Edge,
        at: Option<At>,
        clock: &Clock,
        stats: &LayerStats,
    ) -> Option<Queued> {
        let kind = only_kind(self.rules[edge_of.index()])?;
        edge(clock, stats, kind, &self.fields, at?.raw(), None, false)
    }
}

#[cfg(test)]
mod tests {
    /// A span's state (the table's entry) keeps its times in 8 bytes each: the creation's
    /// time added nothing to it.
    #[test]
    fn a_spans_state_stays_96_bytes() {
        assert!(
            std::mem::size_of::<super::SpanState>() <= 96,
            "{}",
            std::mem::size_of::<super::SpanState>()
        );
        assert_eq!(super::At::new(0).raw(), 1);
        assert_eq!(super::At::new(7).raw(), 7);
    }
}
