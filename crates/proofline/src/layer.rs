//! The `tracing` layer: span edges in, TIMELINE events onto each thread's bounded ring.
//!
//! Everything here runs on the prover's threads, so it does no I/O, takes no lock an
//! exporter can hold (only the short locks of its own per-span table, which the worker also
//! takes, briefly, once a poll), reads the clock only at mapped edges, and pushes onto the
//! thread's own bounded ring (`handoff`) without waking anyone: a full ring drops and counts.
//!
//! A span's first-enter event (SYNTH_START, GPU_START) waits in the span's state: the worker
//! takes it from the table at its next poll, or the close sends it in the same queue entry
//! as the end event. So a span costs one queue entry, and its start is written as promptly
//! as a queued event.
//!
//! Interest is decided once per callsite (`register_callsite`) into a lock-free set of
//! callsite addresses, so a span the layer does not map costs one probe of that set when it
//! is created and one atomic load when it is entered and closed. The layer never filters
//! spans for the other layers.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use proofline_core::{EventKind, EventRef, TimelineEvent, codec};
use rustc_hash::FxHashMap as HashMap;
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::clock::{Clock, Raw};
use crate::fields::{FieldNames, FieldVisitor, Slot, SpanFields, StackStr, parse_index};
use crate::handoff::Handoff;
use crate::queued::Queued;

/// When, in a span's life, a TIMELINE event is emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Edge {
    /// When the span is created.
    Created,
    /// The first time the span is entered (later enters, on any thread, are ignored).
    FirstEnter,
    /// When the span closes (its last handle is dropped). The event's duration
    /// (`synth_ms`, `gpu_ms`) is close minus first enter.
    Close,
}

impl Edge {
    const fn index(self) -> usize {
        match self {
            Edge::Created => 0,
            Edge::FirstEnter => 1,
            Edge::Close => 2,
        }
    }
}

/// One mapping from a span edge to a TIMELINE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRule {
    /// The span's name.
    pub span: String,
    /// The event to emit.
    pub event: EventKind,
    /// At which edge.
    pub edge: Edge,
}

impl SpanRule {
    /// A rule.
    pub fn new(span: impl Into<String>, event: EventKind, edge: Edge) -> Self {
        SpanRule {
            span: span.into(),
            event,
            edge,
        }
    }

    /// cuzk's span names (DESIGN.md "Spans in the prover"):
    ///
    /// | event | span and edge |
    /// |---|---|
    /// | SYNTH_START | first enter of `synthesize_partition` / `synthesize_snap_deals_partition` |
    /// | SYNTH_END | close of that span |
    /// | GPU_PICKUP | creation of `gpu_worker` |
    /// | GPU_START | first enter of `gpu_prove` |
    /// | GPU_END | close of `gpu_prove` |
    pub fn cuzk_defaults() -> Vec<SpanRule> {
        let mut v = Vec::new();
        for synth in ["synthesize_partition", "synthesize_snap_deals_partition"] {
            v.push(SpanRule::new(
                synth,
                EventKind::SynthStart,
                Edge::FirstEnter,
            ));
            v.push(SpanRule::new(synth, EventKind::SynthEnd, Edge::Close));
        }
        v.push(SpanRule::new(
            "gpu_worker",
            EventKind::GpuPickup,
            Edge::Created,
        ));
        v.push(SpanRule::new(
            "gpu_prove",
            EventKind::GpuStart,
            Edge::FirstEnter,
        ));
        v.push(SpanRule::new("gpu_prove", EventKind::GpuEnd, Edge::Close));
        v
    }
}

/// Events per edge, one bit per [`EventKind`].
type RuleMask = [u8; 3];

/// Settings the layer and its filter share (read-only after `build`).
#[derive(Debug)]
pub(crate) struct LayerConfig {
    pub rules: Vec<SpanRule>,
    pub fields: FieldNames,
    pub event_target: String,
    pub gpu_queue_on_synth_end: bool,
}

impl LayerConfig {
    fn rules_for(&self, name: &str) -> RuleMask {
        let mut m = [0u8; 3];
        for r in &self.rules {
            if r.span == name {
                m[r.edge.index()] |= 1 << r.event.index();
            }
        }
        m
    }

    /// What the layer needs to know of a callsite it wants, worked out once.
    fn info(&self, meta: &Metadata<'_>) -> CallsiteInfo {
        CallsiteInfo {
            rules: self.rules_for(meta.name()),
            slots: meta
                .fields()
                .iter()
                .map(|f| self.fields.slot(f.name()))
                .collect(),
        }
    }

    fn interesting(&self, meta: &Metadata<'_>) -> bool {
        if meta.is_event() {
            return meta.target() == self.event_target;
        }
        self.rules.iter().any(|r| r.span == meta.name())
            || meta
                .fields()
                .iter()
                .any(|f| self.fields.slot(f.name()).is_some())
    }
}

/// Counters shared by the layer, its worker and its guard.
#[derive(Debug, Default)]
pub struct LayerStats {
    /// Events the worker took in: off the queue, or (first-enter events) from the span
    /// table. Counted by the worker, once per batch, so the prover's threads pay no shared
    /// counter for an event that fits.
    pub received: AtomicU64,
    /// Events dropped because the queue was full (or the worker had stopped).
    pub dropped: AtomicU64,
    /// TIMELINE lines written.
    pub written: AtomicU64,
    /// Close edges not emitted because the span closed while its thread panicked.
    pub aborted: AtomicU64,
    /// Events not emitted because no job id was found on the span or its ancestors.
    pub missing_job_id: AtomicU64,
}

/// A snapshot of [`LayerStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Events the worker took off the queue.
    pub received: u64,
    /// Events dropped because the queue was full (or the worker had stopped).
    pub dropped: u64,
    /// TIMELINE lines written.
    pub written: u64,
    /// Close edges not emitted because the span closed while its thread panicked.
    pub aborted: u64,
    /// Events not emitted for want of a job id.
    pub missing_job_id: u64,
}

impl LayerStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            received: self.received.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            aborted: self.aborted.load(Ordering::Relaxed),
            missing_job_id: self.missing_job_id.load(Ordering::Relaxed),
        }
    }
}

/// The layer's per-span state, by span id, in shards of its own: a span's edges cost a
/// short uncontended lock here instead of a registry lookup plus its extension map (the
/// extension map's boxed insert and remove were a third of a mapped span's cost).
///
/// Beside the shards, a count of the table's spans by span id modulo [`SpanTable::LIVE`]:
/// a zero says "not one of ours" with one load, so that the enter and close of a span the
/// layer does not map touch no lock. Every id counted in one slot lives in one shard (the
/// slot count is a multiple of the shard count), so the counts change under that shard's
/// lock, with plain stores.
#[derive(Debug)]
pub(crate) struct SpanTable {
    shards: Box<[Shard]>,
    live: Box<[AtomicU32]>,
}

impl SpanTable {
    const SHARDS: usize = 64;
    const LIVE: usize = 4096;

    pub fn new() -> Self {
        SpanTable {
            shards: (0..Self::SHARDS)
                .map(|_| Shard(Mutex::new(HashMap::default())))
                .collect(),
            live: (0..Self::LIVE).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn shard(&self, id: &span::Id) -> std::sync::MutexGuard<'_, HashMap<u64, SpanState>> {
        self.shards[id.into_u64() as usize % Self::SHARDS]
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[inline]
    fn live(&self, id: &span::Id) -> &AtomicU32 {
        &self.live[id.into_u64() as usize % Self::LIVE]
    }

    /// Whether the span may be in the table: `false` means it is not (one atomic load).
    #[inline]
    fn maybe(&self, id: &span::Id) -> bool {
        self.live(id).load(Ordering::Relaxed) != 0
    }

    fn insert(&self, id: &span::Id, st: SpanState) {
        let mut shard = self.shard(id);
        if shard.insert(id.into_u64(), st).is_none() {
            // under the shard's lock: no other thread changes this count now
            let n = self.live(id);
            n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    /// Runs `f` on the span's state, if the span is in the table.
    #[inline]
    fn with<R>(&self, id: &span::Id, f: impl FnOnce(&mut SpanState) -> R) -> Option<R> {
        if !self.maybe(id) {
            return None;
        }
        self.shard(id).get_mut(&id.into_u64()).map(f)
    }

    /// Takes the span's state out of the table, if the span is in it.
    #[inline]
    fn remove(&self, id: &span::Id) -> Option<SpanState> {
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

    /// Takes the first-enter events still waiting in the table (spans entered and not yet
    /// closed); each shard is locked only to copy its events out.
    pub fn take_starts(&self, clock: &Clock, stats: &LayerStats, out: &mut Vec<Queued>) {
        for shard in &self.shards {
            let mut shard = shard
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // written only where a start waits: the prover's lines stay clean
            for st in shard.values_mut().filter(|st| st.start_pending) {
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
struct Shard(Mutex<HashMap<u64, SpanState>>);

/// Per-span state, kept in the layer's span table.
#[derive(Debug)]
struct SpanState {
    /// The span's fields: its own, and what its nearest mapped-or-field-carrying ancestor
    /// knew when it was created for those it lacks (`record` updates its own).
    fields: SpanFields,
    /// Where the info of its callsite is.
    callsite: Option<u32>,
    rules: RuleMask,
    first_enter: Option<Raw>,
    /// The first enter's event is not sent yet: the worker's next look at the table, or
    /// the close if it comes first, sends it (see `on_enter`).
    start_pending: bool,
}

impl SpanState {
    /// The one event the first enter emits, when it emits exactly one (the common case:
    /// SYNTH_START, GPU_START), which can wait in the table for the worker.
    fn single_start(&self) -> Option<EventKind> {
        only_kind(self.rules[Edge::FirstEnter.index()])
    }

    /// The queue entry of the first-enter event, if it is still waiting.
    fn pending_start(&self, clock: &Clock, stats: &LayerStats) -> Option<Queued> {
        if !self.start_pending {
            return None;
        }
        let kind = self.single_start()?;
        edge(
            clock,
            stats,
            kind,
            &self.fields,
            self.first_enter?,
            None,
            false,
        )
    }
}

/// The kind a mask holds when it holds exactly one.
fn only_kind(mask: u8) -> Option<EventKind> {
    if mask.count_ones() != 1 {
        return None;
    }
    EventKind::ALL
        .into_iter()
        .find(|k| mask & (1 << k.index()) != 0)
}

/// The layer. Build it with [`crate::TimelineLayer::builder`].
#[derive(Debug)]
pub struct TimelineLayer {
    pub(crate) cfg: Arc<LayerConfig>,
    pub(crate) handoff: Arc<Handoff>,
    pub(crate) closed: Arc<AtomicBool>,
    pub(crate) stats: Arc<LayerStats>,
    pub(crate) clock: Clock,
    pub(crate) callsites: CallsiteSet,
    pub(crate) spans: Arc<SpanTable>,
}

/// What the layer worked out once for a callsite it wants, so that a span's creation
/// compares no names: its rules, and which proofline field each of its fields is (by field
/// index).
#[derive(Debug)]
pub(crate) struct CallsiteInfo {
    rules: RuleMask,
    slots: Box<[Option<Slot>]>,
}

/// A lock-free map from callsite (its metadata's address) to whether the layer wants it and,
/// if so, its [`CallsiteInfo`]: written under a mutex when a callsite is first seen (rare),
/// read with atomic loads on every span.
///
/// Every callsite the layer sees is classified here, not only the ones registered: a thread
/// may create a span while another thread is still registering its callsite (tracing then
/// answers "sometimes" and asks the subscriber), and such a span must not be taken for one
/// the layer does not want.
#[derive(Debug)]
pub(crate) struct CallsiteSet {
    /// The address, with the low bit set for a callsite the layer does not want (metadata
    /// is aligned, so the bit is free).
    slots: Box<[AtomicUsize]>,
    infos: Box<[OnceLock<CallsiteInfo>]>,
    insert: Mutex<()>,
}

/// What the callsite set knows of a callsite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Wanted; its info is at this index.
    Wanted(u32),
    /// Not wanted.
    Unwanted,
    /// Not classified yet (or the set is full).
    Missing,
}

impl CallsiteSet {
    const CAP: usize = 4096;
    const UNWANTED: usize = 1;

    pub fn new() -> Self {
        CallsiteSet {
            slots: (0..Self::CAP).map(|_| AtomicUsize::new(0)).collect(),
            infos: (0..Self::CAP).map(|_| OnceLock::new()).collect(),
            insert: Mutex::new(()),
        }
    }

    fn start(addr: usize) -> usize {
        ((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % Self::CAP
    }

    fn decode(slot: usize, at: usize) -> Known {
        if slot & Self::UNWANTED == 0 {
            Known::Wanted(at as u32)
        } else {
            Known::Unwanted
        }
    }

    fn find(&self, meta: &Metadata<'_>) -> Known {
        let addr = std::ptr::from_ref(meta) as usize;
        let start = Self::start(addr);
        for i in 0..Self::CAP {
            let at = (start + i) % Self::CAP;
            match self.slots[at].load(Ordering::Acquire) {
                0 => break,
                a if a & !Self::UNWANTED == addr => return Self::decode(a, at),
                _ => {}
            }
        }
        Known::Missing
    }

    /// Classifies a callsite once, by the layer's settings; `Missing` only when the set is
    /// full (the caller then classifies it at each span, the slow way).
    fn classify(&self, meta: &'static Metadata<'static>, cfg: &LayerConfig) -> Known {
        let addr = std::ptr::from_ref(meta) as usize;
        let _g = self
            .insert
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = Self::start(addr);
        for i in 0..Self::CAP {
            let at = (start + i) % Self::CAP;
            let slot = &self.slots[at];
            match slot.load(Ordering::Acquire) {
                0 => {
                    let wanted = cfg.interesting(meta);
                    if wanted {
                        // the info first: whoever sees the address sees its info
                        let _ = self.infos[at].set(cfg.info(meta));
                    }
                    let tagged = if wanted { addr } else { addr | Self::UNWANTED };
                    slot.store(tagged, Ordering::Release);
                    return Self::decode(tagged, at);
                }
                a if a & !Self::UNWANTED == addr => return Self::decode(a, at),
                _ => {}
            }
        }
        Known::Missing
    }

    fn info(&self, at: u32) -> Option<&CallsiteInfo> {
        self.infos.get(at as usize)?.get()
    }
}

impl TimelineLayer {
    /// Whether the layer wants the callsite, and where its info is (`None` for a wanted
    /// callsite the full set could not take).
    fn wants(&self, meta: &'static Metadata<'static>) -> Option<Option<u32>> {
        let known = match self.callsites.find(meta) {
            Known::Missing => self.callsites.classify(meta, &self.cfg),
            known => known,
        };
        match known {
            Known::Wanted(at) => Some(Some(at)),
            Known::Unwanted => None,
            Known::Missing => self.cfg.interesting(meta).then_some(None),
        }
    }

    /// Hands the entry to the worker, or drops and counts it (the worker warns, once).
    #[inline(always)]
    fn send(&self, q: Queued) {
        self.send_with(q.events(), move || q);
    }

    /// [`TimelineLayer::send`] for the entry (of `events` events) that `build` makes,
    /// straight into the ring's slot; not built at all when it would be dropped.
    #[inline(always)]
    fn send_with(&self, events: u64, build: impl FnOnce() -> Queued) {
        let pushed = !self.closed.load(Ordering::Relaxed) && self.handoff.push_with(build);
        if !pushed {
            self.stats.dropped.fetch_add(events, Ordering::Relaxed);
        }
    }

    fn emit_mask(&self, mask: u8, f: &SpanFields, at: Raw, ms: Option<u64>) {
        if mask == 0 {
            return;
        }
        for kind in EventKind::ALL {
            if mask & (1 << kind.index()) == 0 {
                continue;
            }
            let then_queue = self.then_queue(kind, mask);
            if let Some(q) = edge(&self.clock, &self.stats, kind, f, at, ms, then_queue) {
                self.send(q);
            }
        }
    }

    /// Whether a GPU_QUEUE goes with this event of an edge's `mask` (cuzk writes one at
    /// SYNTH_END), unless the mask maps GPU_QUEUE itself.
    fn then_queue(&self, kind: EventKind, mask: u8) -> bool {
        kind == EventKind::SynthEnd
            && self.cfg.gpu_queue_on_synth_end
            && mask & (1 << EventKind::GpuQueue.index()) == 0
    }
}

/// The queue entry of a span edge's event (`Queued::span_edge`); a span without a job id
/// emits nothing, and is counted.
fn edge(
    clock: &Clock,
    stats: &LayerStats,
    kind: EventKind,
    f: &SpanFields,
    at: Raw,
    ms: Option<u64>,
    then_queue: bool,
) -> Option<Queued> {
    let q = Queued::span_edge(f, kind, clock.offset_ms(at), ms, then_queue);
    if q.is_none() {
        stats.missing_job_id.fetch_add(1, Ordering::Relaxed);
    }
    q
}

/// Builds the event the way cuzk prints it for this edge, its strings borrowed from the
/// fields: what `Queued::span_edge` puts in an entry (a test holds them equal). `None`
/// without a job id.
pub(crate) fn span_event(
    kind: EventKind,
    f: &SpanFields,
    offset_ms: u64,
    ms: Option<u64>,
) -> Option<EventRef<'_>> {
    let mut ev = TimelineEvent::new(offset_ms, kind, f.job_id()?);
    ev.partition = f.partition;
    if kind.is_gpu() {
        ev.worker = f.worker;
        ev.gpu = f.gpu;
    }
    match kind {
        EventKind::SynthStart if ev.partition.is_none() => ev.proof_kind = f.proof_kind(),
        EventKind::SynthEnd => ev.synth_ms = ms,
        EventKind::GpuQueue => ev.monolithic = ev.partition.is_none(),
        EventKind::GpuEnd => ev.gpu_ms = ms,
        _ => {}
    }
    Some(ev)
}

impl TimelineLayer {
    /// Fills what `fields` lack from the nearest ancestor that carries fields (its own
    /// merged with what it inherited). The parent is looked up in the layer's table; the
    /// registry is walked only when the parent is not one of the layer's spans.
    fn inherit<S>(
        &self,
        attrs: &span::Attributes<'_>,
        ctx: &Context<'_, S>,
        fields: &mut SpanFields,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let parent = if let Some(p) = attrs.parent() {
            p.clone()
        } else if attrs.is_contextual() {
            match ctx.current_span().id() {
                Some(p) => p.clone(),
                None => return,
            }
        } else {
            return;
        };
        if self.inherit_from(&parent, fields) {
            return;
        }
        let Some(span) = ctx.span(&parent) else {
            return;
        };
        // the parent itself was looked up above
        for ancestor in span.scope().skip(1) {
            if self.inherit_from(&ancestor.id(), fields) {
                return;
            }
        }
    }

    /// Fills what `fields` lack from the span's, in place, if it is one of the layer's
    /// spans; `false` if it is not.
    fn inherit_from(&self, id: &span::Id, fields: &mut SpanFields) -> bool {
        self.spans
            .with(id, |st| fields.inherit(&st.fields))
            .is_some()
    }
}

impl TimelineLayer {
    /// A span's close edge, its state already out of the table.
    fn close(&self, st: &SpanState) {
        let mask = st.rules[Edge::Close.index()];
        let panicking = mask != 0 && std::thread::panicking();
        if mask == 0 || panicking {
            // it did start: a start still waiting goes out alone
            self.send_pending_start(st);
            if panicking {
                // the work did not finish: no end edge (the job shows as incomplete)
                self.stats.aborted.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let has_start = st.rules[Edge::FirstEnter.index()] != 0;
        let Some(first) = st.first_enter else {
            if has_start {
                return; // never entered: it never ran, so it neither started nor ended
            }
            self.emit_mask(mask, &st.fields, self.clock.now(), None);
            return;
        };
        let at = self.clock.now();
        let ms = self.clock.ms_between(first, at);
        // the usual span, start still waiting: its start and end (and a GPU_QUEUE) in one
        // entry (without a job id, the general path below counts what is missing)
        if st.start_pending {
            if let (Some(start), Some(end)) = (st.single_start(), only_kind(mask)) {
                let start = (start, self.clock.offset_ms(first));
                let end = (end, self.clock.offset_ms(at));
                if let Some(pair) = Queued::pair_of(&st.fields, start, end) {
                    let then_queue = self.then_queue(end.0, mask);
                    // built straight into the ring's slot: built first and then copied,
                    // the copy stalled on the entry's narrow stores (BENCHMARKS.md)
                    self.send_with(2 + u64::from(then_queue), || {
                        Queued::span_pair(pair, Some(ms), then_queue)
                    });
                    return;
                }
            }
        }
        self.send_pending_start(st);
        self.emit_mask(mask, &st.fields, at, Some(ms));
    }

    /// Sends a span's first-enter event if it is still waiting in its state.
    fn send_pending_start(&self, st: &SpanState) {
        if let Some(q) = st.pending_start(&self.clock, &self.stats) {
            self.send(q);
        }
    }
}

impl<S> Layer<S> for TimelineLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.callsites.classify(meta, &self.cfg);
        // never filter for the other layers: a prover's fmt layer decides for itself
        Interest::always()
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let Some(callsite) = self.wants(attrs.metadata()) else {
            return;
        };
        let info = callsite.and_then(|at| self.callsites.info(at));
        let mut state = SpanState {
            fields: SpanFields::default(),
            callsite,
            rules: match info {
                Some(i) => i.rules,
                None => self.cfg.rules_for(attrs.metadata().name()),
            },
            first_enter: None,
            start_pending: false,
        };
        attrs.record(&mut FieldVisitor {
            names: &self.cfg.fields,
            slots: info.map(|i| &*i.slots),
            out: &mut state.fields,
        });
        if !state.fields.complete() {
            self.inherit(attrs, &ctx, &mut state.fields);
        }
        let created = state.rules[Edge::Created.index()];
        if created != 0 {
            self.emit_mask(created, &state.fields, self.clock.now(), None);
        }
        self.spans.insert(id, state);
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, _ctx: Context<'_, S>) {
        self.spans.with(id, |st| {
            let info = st.callsite.and_then(|at| self.callsites.info(at));
            values.record(&mut FieldVisitor {
                names: &self.cfg.fields,
                slots: info.map(|i| &*i.slots),
                out: &mut st.fields,
            })
        });
    }

    fn on_enter(&self, id: &span::Id, _ctx: Context<'_, S>) {
        // A single first-enter event (SYNTH_START, GPU_START) stays in the span's state: the
        // worker takes it from the table at its next poll, or the close sends it with the
        // end event in one queue entry, whichever comes first. Either way it is written within
        // a poll interval, as an event through the queue is, and most spans push one entry
        // instead of two. Other masks are pushed now (under the shard lock: the push never
        // waits, and it saves copying the fields out).
        self.spans.with(id, |st| {
            let (enter, close) = (
                st.rules[Edge::FirstEnter.index()],
                st.rules[Edge::Close.index()],
            );
            if st.first_enter.is_some() || (enter == 0 && close == 0) {
                return;
            }
            let at = self.clock.now();
            st.first_enter = Some(at);
            // (after shutdown it goes to the queue, which counts it as dropped)
            if st.single_start().is_some() && !self.closed.load(Ordering::Relaxed) {
                st.start_pending = true;
            } else {
                self.emit_mask(enter, &st.fields, at, None);
            }
        });
    }

    fn on_close(&self, id: span::Id, _ctx: Context<'_, S>) {
        if let Some(st) = self.spans.remove(&id) {
            self.close(&st);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if self.wants(event.metadata()).is_none() {
            return;
        }
        let at = self.clock.now();
        let mut v = TimelineVisitor {
            names: &self.cfg.fields,
            fields: SpanFields::default(),
            ev: None,
            detail: None,
            synth_ms: None,
            gpu_ms: None,
        };
        event.record(&mut v);
        let Some(kind) = v.ev else { return };
        let mut f = v.fields;
        if !f.complete() {
            if let Some(mut scope) = ctx.event_scope(event) {
                // the nearest of the layer's spans
                scope.any(|span| self.inherit_from(&span.id(), &mut f));
            }
        }
        let Some(mut ev) = span_event(kind, &f, self.clock.offset_ms(at), None) else {
            self.stats.missing_job_id.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // (outlives `ev`, which may borrow its proof kind)
        let line;
        if let Some(d) = v.detail {
            // a `detail` string in TIMELINE form: its pairs win
            line = format!("TIMELINE,0,{kind},j,{d}");
            if let Ok(Some(p)) = codec::parse_line(&line) {
                ev.partition = p.partition.or(ev.partition);
                ev.worker = p.worker.or(ev.worker);
                ev.gpu = p.gpu.or(ev.gpu);
                ev.synth_ms = p.synth_ms;
                ev.gpu_ms = p.gpu_ms;
                ev.monolithic = p.monolithic;
                if let Some(k) = p.proof_kind {
                    ev.proof_kind = Some(k);
                }
            }
        } else {
            ev.synth_ms = v.synth_ms;
            ev.gpu_ms = v.gpu_ms;
        }
        self.send(Queued::new(&ev, false));
    }
}

/// Reads a `timeline` event: `event`, `job_id`, the detail pairs, or one `detail` string.
struct TimelineVisitor<'a> {
    names: &'a FieldNames,
    fields: SpanFields,
    ev: Option<EventKind>,
    detail: Option<String>,
    synth_ms: Option<u64>,
    gpu_ms: Option<u64>,
}

impl TimelineVisitor<'_> {
    fn set_ms(&mut self, name: &str, v: u64) -> bool {
        match name {
            "synth_ms" => self.synth_ms = Some(v),
            "gpu_ms" => self.gpu_ms = Some(v),
            _ => return false,
        }
        true
    }

    fn field_str(&mut self, field: &Field, s: &str) {
        match field.name() {
            "event" => self.ev = EventKind::from_name(s),
            "detail" => self.detail = Some(s.to_owned()),
            "message" => {}
            name => {
                if let Some(v) = parse_index(s).map(u64::from) {
                    if self.set_ms(name, v) {
                        return;
                    }
                }
                let mut fv = FieldVisitor {
                    names: self.names,
                    slots: None,
                    out: &mut self.fields,
                };
                fv.record_str(field, s);
            }
        }
    }
}

impl Visit for TimelineVisitor<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if !self.set_ms(field.name(), value) {
            FieldVisitor {
                names: self.names,
                slots: None,
                out: &mut self.fields,
            }
            .record_u64(field, value);
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(v) = u64::try_from(value) {
            self.record_u64(field, v);
        }
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        if let Ok(v) = u64::try_from(value) {
            self.record_u64(field, v);
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.field_str(field, value);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        let mut s = StackStr::new();
        let owned;
        let text = if write!(s, "{value:?}").is_ok() && s.as_str().is_some() {
            s.as_str().unwrap_or_default()
        } else {
            owned = format!("{value:?}");
            &owned
        };
        let text = text.trim_matches('"');
        self.field_str(field, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A span can be created while its callsite is still being registered on another
    /// thread: a callsite the set has never seen is classified then, not taken as unwanted.
    #[test]
    fn a_callsite_never_registered_is_classified_not_ignored() {
        let cfg = LayerConfig {
            rules: SpanRule::cuzk_defaults(),
            fields: FieldNames::default(),
            event_target: "timeline".into(),
            gpu_queue_on_synth_end: true,
        };
        let set = CallsiteSet::new();
        let (prove, other) =
            tracing::subscriber::with_default(tracing_subscriber::registry(), || {
                let prove = tracing::info_span!("gpu_prove", circuit = "x", partition = 1);
                let other = tracing::info_span!("deserialize_c1", bytes = 1);
                (
                    prove.metadata().expect("a callsite"),
                    other.metadata().expect("a callsite"),
                )
            });
        assert_eq!(set.find(prove), Known::Missing);
        let Known::Wanted(at) = set.classify(prove, &cfg) else {
            panic!("gpu_prove is mapped");
        };
        assert_eq!(set.find(prove), Known::Wanted(at));
        let info = set.info(at).expect("its info");
        assert_eq!(
            info.rules,
            [
                0,
                1 << EventKind::GpuStart.index(),
                1 << EventKind::GpuEnd.index()
            ]
        );
        assert_eq!(&*info.slots, &[None, Some(Slot::Partition)]);
        assert_eq!(set.find(other), Known::Missing);
        assert_eq!(set.classify(other, &cfg), Known::Unwanted);
        assert_eq!(set.find(other), Known::Unwanted);
        assert_eq!(
            set.find(prove),
            Known::Wanted(at),
            "{other:?} did not disturb it"
        );
    }
}
