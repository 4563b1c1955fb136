//! The queue entry: one event in one cache line.
//!
//! A prover thread writes the entry and the worker, on another core, reads it: every cache
//! line of an entry crosses between the cores once. An [`proofline_core::Event`] is 104
//! bytes (two lines) and holds the job id as an `Arc<str>`, whose reference count the prover
//! raised and the worker then lowered: a third line bouncing between the cores for every
//! event, since a job's spans share one `Arc`. An entry is 64 bytes with the job id copied
//! in, which the worker reads in place; only what few events carry (a long job id, a proof
//! kind, both durations) goes behind a box. A span that closes before the worker has taken
//! its first-enter event from the span table sends both in one entry (`start`), and its
//! creation's event too when that waited as well (a GPU worker's GPU_PICKUP: `lead`).

use std::sync::Arc;

use proofline_core::{EventKind, EventRef, TimelineEvent};

use crate::fields::{HEAD as INLINE, Name, SpanFields, padded};

const PARTITION: u8 = 1;
const WORKER: u8 = 1 << 1;
const GPU: u8 = 1 << 2;
const MS: u8 = 1 << 3;
const MONOLITHIC: u8 = 1 << 4;
const THEN_QUEUE: u8 = 1 << 5;
const OWN_OFFSET: u8 = 1 << 6;
/// The entry holds a logged line, not a TIMELINE event: `CUZK_TIMING:` values or a line's
/// text in `ext`, or (no `ext`) its text's length in `ms`, the text in the thread's text ring
/// (a TIMELINE line if `OWN_OFFSET` is set); or (`ext` holding it) that text ring.
const TIMING: u8 = 1 << 7;

/// An entry that carries a lead event (see [`Queued::lead_event`]) holds its offset in the
/// low bits of `offset_ms` (35 years of milliseconds) and how long before the start the
/// lead was in the high ones (4.6 hours); what does not fit goes in an entry of its own.
const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
const LEAD_MAX_MS: u64 = (1 << (64 - OFFSET_BITS)) - 1;

/// A layer's number, a job id and a proof kind (see [`kind_sent`]).
type Sent = (u64, Arc<Name>, Arc<Name>);

/// How many layers' records ([`kind_sent`]) a thread keeps: each of two layers in one
/// subscriber keeps its own, however their entries alternate (one record for both, each
/// layer's entry would overwrite the other's, and every edge of both would box the kind); a
/// third takes the place of the one told least recently.
const KIND_SENT_LAYERS: usize = 2;

thread_local! {
    /// For each of the last [`KIND_SENT_LAYERS`] layers this thread's entries went to, the
    /// job id and proof kind whose kind they carried last (the names held, so that their
    /// addresses are not reused while they are compared), the most recent layer first. Kept
    /// per layer: the entries of two layers on one thread go to two engines, and each must
    /// be told.
    static KIND_SENT: std::cell::RefCell<[Option<Sent>; KIND_SENT_LAYERS]> =
        const { std::cell::RefCell::new([const { None }; KIND_SENT_LAYERS]) };
}

/// Whether this thread's entries for layer `layer` carried `kind` for `job` last (then this
/// one need not); else it is recorded as carried now, as the entry is built. An entry built
/// inside its ring's slot is built only when it is pushed; one built before its push and
/// then dropped (the queue full, or the worker stopped) while it carried the kind must be
/// followed by [`forget_kind_sent`].
fn kind_sent(layer: u64, job: &Arc<Name>, kind: &Arc<Name>) -> bool {
    KIND_SENT
        .try_with(|sent| {
            let mut sent = sent.borrow_mut();
            // the layer's record first (or an empty place, or the place of the layer told
            // least recently)
            let at = (sent
                .iter()
                .position(|s| s.as_ref().is_some_and(|s| s.0 == layer)))
            .or_else(|| sent.iter().position(Option::is_none))
            .unwrap_or(KIND_SENT_LAYERS - 1);
            if at > 0 {
                sent[..=at].rotate_right(1);
            }
            if let Some((l, j, k)) = &sent[0] {
                if *l == layer && Arc::ptr_eq(j, job) && Arc::ptr_eq(k, kind) {
                    return true;
                }
            }
            sent[0] = Some((layer, job.clone(), kind.clone()));
            false
        })
        .unwrap_or(false)
}

/// Forgets what [`kind_sent`] recorded for layer `layer`: an entry of that layer that
/// carried its job's kind was dropped (the ring full, or the worker stopped), so the next one
/// must carry it again.
#[cold]
#[inline(never)]
pub(crate) fn forget_kind_sent(layer: u64) {
    let _ = KIND_SENT.try_with(|sent| {
        for s in sent.borrow_mut().iter_mut() {
            if s.as_ref().is_some_and(|s| s.0 == layer) {
                *s = None;
            }
        }
    });
}

/// One event on the layer's queue, and whether a GPU_QUEUE at the same instant follows it
/// (one entry instead of two for the common SYNTH_END + GPU_QUEUE pair).
#[derive(Debug)]
#[repr(align(64))] // one entry, one cache line
pub(crate) struct Queued {
    /// The event's offset; with a lead event, also the lead's distance (see [`OFFSET_BITS`]).
    offset_ms: u64,
    ext: Option<Box<Ext>>,
    /// The event's own duration (`synth_ms` of a SYNTH_END, `gpu_ms` of a GPU_END).
    ms: u32,
    /// How many milliseconds before the event its start event was (see `start`).
    start_delta: u32,
    partition: u32,
    worker: u32,
    gpu: u32,
    kind: EventKind,
    flags: u8,
    /// The kind of the start event carried along (its index + 1) in the low four bits, 0
    /// for none; the kind of the lead event before it likewise in the high four.
    start: u8,
    job_len: u8,
    /// The job id, zero-padded, when it fits (else in `ext`).
    job: [u8; INLINE],
}

/// A span whose start and end one entry can carry ([`Queued::pair_of`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pair<'f> {
    fields: &'f SpanFields,
    id: &'f Name,
    start: EventKind,
    end: (EventKind, u64),
    /// How long before the end the start was, in ms.
    delta: u32,
    /// The event before the start (a GPU worker's GPU_PICKUP, at the span's creation), and
    /// how long before the start it was, in ms.
    lead: Option<(EventKind, u64)>,
}

impl Pair<'_> {
    /// The pair with a lead event at `lead.1` (a GPU worker's GPU_PICKUP at the span's
    /// creation) riding along: `None` when it cannot be rebuilt exactly (as for the start,
    /// [`Queued::pair_of`]) or its distance does not fit; it then goes in an entry of its
    /// own, before this one.
    #[inline(always)]
    pub fn with_lead(mut self, lead: (EventKind, u64)) -> Option<Self> {
        let start = self.end.1.checked_sub(u64::from(self.delta))?;
        let before = start.checked_sub(lead.1)?;
        if before > LEAD_MAX_MS
            || self.end.1 > OFFSET_MASK
            || rebuilt_differs(self.fields, lead.0, self.start)
        {
            return None;
        }
        self.lead = Some((lead.0, before));
        Some(self)
    }
}

/// Whether the event of `kind` rebuilt from its span's later event of kind `from` (copying
/// its job, partition, and worker and GPU when both are GPU events; never `monolithic`)
/// would differ from the event the span's fields give.
fn rebuilt_differs(f: &SpanFields, kind: EventKind, from: EventKind) -> bool {
    let carries_gpu_fields = f.worker.is_some() || f.gpu.is_some();
    (kind.is_gpu() && !from.is_gpu() && carries_gpu_fields)
        || (kind == EventKind::GpuQueue && f.partition.is_none())
}

/// The event of `kind` `before` ms before `from`, of the same span: its fields as
/// [`rebuilt_differs`] says.
fn rebuilt<'a>(kind: EventKind, from: &EventRef<'a>, before: u64) -> EventRef<'a> {
    let mut ev = TimelineEvent::new(from.offset_ms.saturating_sub(before), kind, from.job_id);
    ev.partition = from.partition;
    if kind.carries().worker_gpu {
        ev.worker = from.worker;
        ev.gpu = from.gpu;
    }
    ev.proof_kind = from.proof_kind;
    ev.request = from.request;
    ev
}

/// What does not fit in an entry.
#[derive(Debug, Default)]
struct Ext {
    job: Option<Arc<Name>>,
    proof_kind: Option<Arc<Name>>,
    synth_ms: Option<u64>,
    gpu_ms: Option<u64>,
    timing: Option<TimingIn>,
    /// The worker's end of the thread's text ring (see [`Queued::text_ring`]).
    text_ring: Option<rtrb::Consumer<u8>>,
    /// `request=` (a second request of the job id in flight).
    request: Option<u32>,
}

/// What a boxed logged-line entry holds: `CUZK_TIMING:` values the layer read from fields;
/// or a line the prover logged (TIMELINE or `CUZK_TIMING:`) that is too long for the thread's
/// text ring, read on the worker's thread (not the prover's).
#[derive(Debug)]
pub enum TimingIn {
    /// Read already (the prover gave the values as fields).
    Parsed(proofline_core::timing::TimingLine),
    /// The line as logged.
    Line(crate::layer::LoggedLine),
}

impl Queued {
    /// The entry, from its parts, written once: `flags` holds what is not an index (the
    /// indexes' bits are set here); `ms` is the event's own duration when it fits inline.
    #[inline(always)]
    fn from_parts(
        offset_ms: u64,
        kind: EventKind,
        mut flags: u8,
        [partition, worker, gpu]: [Option<u32>; 3],
        ms: Option<u32>,
        ext: Option<Box<Ext>>,
        (job, job_len): ([u8; INLINE], u8),
    ) -> Self {
        let mut opt = |bit: u8, v: Option<u32>| {
            if v.is_some() {
                flags |= bit;
            }
            v.unwrap_or(0)
        };
        let (partition, worker, gpu) = (
            opt(PARTITION, partition),
            opt(WORKER, worker),
            opt(GPU, gpu),
        );
        let ms = opt(MS, ms);
        Queued {
            offset_ms,
            ext,
            ms,
            start_delta: 0,
            partition,
            worker,
            gpu,
            kind,
            flags,
            start: 0,
            job_len,
            job,
        }
    }

    /// The entry for `ev`.
    pub fn new(ev: &EventRef<'_>, then_queue: bool) -> Self {
        let mut flags = if then_queue { THEN_QUEUE } else { 0 };
        if ev.monolithic {
            flags |= MONOLITHIC;
        }
        let mut ext = Ext::default();
        // the duration the event's kind carries fits inline; anything else goes in `ext`
        let ms = match (ev.kind, ev.synth_ms, ev.gpu_ms) {
            (EventKind::SynthEnd, Some(v), None) | (EventKind::GpuEnd, None, Some(v))
                if u32::try_from(v).is_ok() =>
            {
                Some(v as u32)
            }
            (_, synth_ms, gpu_ms) => {
                (ext.synth_ms, ext.gpu_ms) = (synth_ms, gpu_ms);
                None
            }
        };
        ext.proof_kind = ev.proof_kind.map(|k| Arc::new(Name::new(k)));
        let (job, job_len) = padded(ev.job_id).unwrap_or_else(|| {
            ext.job = Some(Arc::new(Name::new(ev.job_id)));
            ([0; INLINE], 0)
        });
        ext.request = ev.request;
        let needs_ext = ext.job.is_some()
            || ext.request.is_some()
            || ext.proof_kind.is_some()
            || ext.synth_ms.is_some()
            || ext.gpu_ms.is_some();
        Queued::from_parts(
            ev.offset_ms,
            ev.kind,
            flags,
            [ev.partition, ev.worker, ev.gpu],
            ms,
            needs_ext.then(|| Box::new(ext)),
            (job, job_len),
        )
    }

    /// The entry of a span edge's event, straight from the span's fields: what
    /// `Queued::new` makes of the event `span_event` builds for that edge (a property test
    /// holds the two equal), without building the event first. `None` without a job id.
    ///
    /// Which fields the event carries is `EventKind::carries`' decision; this only packs them.
    /// `layer` is the number of the layer whose entry it is (see [`kind_sent`]).
    #[inline(always)]
    pub fn span_edge(
        f: &SpanFields,
        kind: EventKind,
        offset_ms: u64,
        ms: Option<u64>,
        then_queue: bool,
        layer: u64,
    ) -> Option<Self> {
        let id = f.job_id.as_deref()?;
        Some(Queued::edge_of(
            f, id, kind, offset_ms, ms, then_queue, false, layer,
        ))
    }

    /// [`Queued::span_edge`] for the job id `id` (the one in `f`); with `kind_printed`, the
    /// proof kind goes along whatever this thread's entries for this layer carried last (an
    /// event rebuilt from this one prints it).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // inlined into its two callers; a struct of them would be built for nothing
    fn edge_of(
        f: &SpanFields,
        id: &Name,
        kind: EventKind,
        offset_ms: u64,
        ms: Option<u64>,
        then_queue: bool,
        kind_printed: bool,
        layer: u64,
    ) -> Self {
        let c = kind.carries();
        let whole = f.partition.is_none();
        let mut flags = if then_queue { THEN_QUEUE } else { 0 };
        let mut ext = None::<Box<Ext>>;
        let mut inline_ms = None;
        if let (true, Some(v)) = (c.duration, ms) {
            match u32::try_from(v) {
                Ok(v) => inline_ms = Some(v),
                Err(_) => {
                    let e = ext.get_or_insert_with(Box::default);
                    if kind == EventKind::SynthEnd {
                        e.synth_ms = Some(v);
                    } else {
                        e.gpu_ms = Some(v);
                    }
                }
            }
        }
        // the engine takes the job's kind from any event; the line printed keeps it only
        // where cuzk prints one (`Carries::proof_kind_if_whole`). So an edge of the job
        // whose kind this thread's entries for this layer carried last goes without it (no
        // box: a GPU worker's spans of one job share their job id and kind), unless its line
        // prints it.
        if let Some(k) = &f.proof_kind {
            // (a second request of a job id in flight is a job of its own to the engine,
            // with the same interned id and kind: the record cannot tell the two apart, and
            // such an entry has a box for its `request=` anyway)
            let printed =
                kind_printed || (c.proof_kind_if_whole && whole) || f.printed_request().is_some();
            if printed || !f.job_id.as_ref().is_some_and(|j| kind_sent(layer, j, k)) {
                ext.get_or_insert_with(Box::default).proof_kind = Some(k.clone());
            }
        }
        if c.monolithic_if_whole && whole {
            flags |= MONOLITHIC;
        }
        if let Some(r) = f.printed_request() {
            ext.get_or_insert_with(Box::default).request = Some(r);
        }
        // a fixed-size copy of the padded head
        let job = match id.head() {
            Some((head, len)) => (*head, len),
            None => {
                ext.get_or_insert_with(Box::default).job = f.job_id.clone();
                ([0; INLINE], 0)
            }
        };
        let gpu = c.worker_gpu;
        Queued::from_parts(
            offset_ms,
            kind,
            flags,
            [f.partition, f.worker.filter(|_| gpu), f.gpu.filter(|_| gpu)],
            inline_ms,
            ext,
            job,
        )
    }

    /// Whether one entry can carry a span's start and end events, both from its fields (see
    /// [`Queued::span_edge`]): it can when the start can be rebuilt from the end exactly,
    /// and the span has a job id. What [`Queued::span_pair`] needs when it can.
    #[inline(always)]
    pub fn pair_of<'f>(
        f: &'f SpanFields,
        start: (EventKind, u64),
        end: (EventKind, u64),
    ) -> Option<Pair<'f>> {
        let id = f.job_id.as_deref()?;
        let delta = u32::try_from(end.1.checked_sub(start.1)?).ok()?;
        // what `start_event` rebuilds from the end: the job and partition always, the
        // worker and GPU when both are GPU events, never `monolithic` (a start has no
        // duration: it is built without one)
        (!rebuilt_differs(f, start.0, end.0)).then_some(Pair {
            fields: f,
            id,
            start: start.0,
            end,
            delta,
            lead: None,
        })
    }

    /// The one entry for a span's start and end events (see [`Queued::pair_of`]), and its
    /// lead event if [`Pair::with_lead`] took one.
    #[inline(always)]
    pub fn span_pair(p: Pair<'_>, ms: Option<u64>, then_queue: bool, layer: u64) -> Self {
        let f = p.fields;
        // a whole proof's SYNTH_START carried along prints its kind: it is rebuilt from the
        // end's, which must then hold it
        let prints = |k: EventKind| k.carries().proof_kind_if_whole && f.partition.is_none();
        let kind_printed = prints(p.start) || p.lead.is_some_and(|(k, _)| prints(k));
        let mut q = Queued::edge_of(
            f,
            p.id,
            p.end.0,
            p.end.1,
            ms,
            then_queue,
            kind_printed,
            layer,
        );
        q.start = p.start.index() as u8 + 1;
        q.start_delta = p.delta;
        if let Some((kind, before)) = p.lead {
            q.start |= (kind.index() as u8 + 1) << 4;
            q.offset_ms |= before << OFFSET_BITS;
        }
        q
    }

    /// The entry's event offset (without a lead's distance).
    #[inline]
    fn offset(&self) -> u64 {
        if self.start >> 4 != 0 {
            self.offset_ms & OFFSET_MASK
        } else {
            self.offset_ms
        }
    }

    /// The start event carried along, if any, rebuilt from `end` (this entry's
    /// [`Queued::event`]): it comes before it.
    pub fn start_event<'a>(&'a self, end: &EventRef<'a>) -> Option<EventRef<'a>> {
        let kind = *EventKind::ALL.get(usize::from((self.start & 0x0f).checked_sub(1)?))?;
        Some(rebuilt(kind, end, u64::from(self.start_delta)))
    }

    /// The lead event carried along, if any, rebuilt from `start` (this entry's
    /// [`Queued::start_event`]): it comes before it.
    pub fn lead_event<'a>(&'a self, start: &EventRef<'a>) -> Option<EventRef<'a>> {
        let kind = *EventKind::ALL.get(usize::from((self.start >> 4).checked_sub(1)?))?;
        Some(rebuilt(kind, start, self.offset_ms >> OFFSET_BITS))
    }

    /// The entry of an event whose offset is the prover's own (a TIMELINE line it printed
    /// through `tracing`), not the layer's clock.
    pub fn with_own_offset(mut self) -> Self {
        self.flags |= OWN_OFFSET;
        self
    }

    /// The entry of `CUZK_TIMING:` values the prover logged through `tracing`.
    pub fn timing(t: TimingIn) -> Self {
        Queued::logged(Ext {
            timing: Some(t),
            ..Ext::default()
        })
    }

    /// A logged-line entry (no TIMELINE event) whose content is in `ext`.
    fn logged(ext: Ext) -> Self {
        Queued::from_parts(
            0,
            EventKind::SynthStart,
            TIMING,
            [None; 3],
            None,
            Some(Box::new(ext)),
            ([0; INLINE], 0),
        )
    }

    /// The entry of a line the prover logged, whose `len` bytes are next in the thread's text
    /// ring; `timeline`: it holds the TIMELINE marker.
    pub fn text(len: u32, timeline: bool) -> Self {
        Queued::from_parts(
            0,
            EventKind::SynthStart,
            if timeline {
                TIMING | OWN_OFFSET
            } else {
                TIMING
            },
            [None; 3],
            Some(len),
            None,
            ([0; INLINE], 0),
        )
    }

    /// How long the line is whose bytes are next in the thread's text ring, and whether it
    /// holds the TIMELINE marker, if the entry stands for one ([`Queued::text`]).
    #[inline]
    pub fn text_len(&self) -> Option<(usize, bool)> {
        (self.flags & TIMING != 0 && self.ext.is_none())
            .then_some((self.ms as usize, self.flags & OWN_OFFSET != 0))
    }

    /// The entry that hands the worker its end of a thread's text ring, ahead of the first
    /// line in it.
    pub fn text_ring(ring: rtrb::Consumer<u8>) -> Self {
        Queued::logged(Ext {
            text_ring: Some(ring),
            ..Ext::default()
        })
    }

    /// The worker's end of a text ring, if the entry hands one over ([`Queued::text_ring`]).
    #[inline]
    pub fn take_text_ring(&mut self) -> Option<rtrb::Consumer<u8>> {
        if self.flags & TIMING == 0 {
            return None;
        }
        self.ext.as_mut().and_then(|e| e.text_ring.take())
    }

    /// The `CUZK_TIMING:` values the entry holds, if it holds them.
    pub fn as_timing(&self) -> Option<&TimingIn> {
        if self.flags & TIMING == 0 {
            return None;
        }
        self.ext.as_ref().and_then(|e| e.timing.as_ref())
    }

    /// Whether the event's offset is the prover's own.
    pub fn own_offset(&self) -> bool {
        self.flags & OWN_OFFSET != 0
    }

    /// Whether a GPU_QUEUE follows the event.
    pub fn then_queue(&self) -> bool {
        self.flags & THEN_QUEUE != 0
    }

    /// Whether the entry carries its job's proof kind (and so, built before its push, may
    /// have been recorded as telling it: see [`kind_sent`]).
    #[inline(always)]
    pub fn carries_proof_kind(&self) -> bool {
        self.ext.as_ref().is_some_and(|e| e.proof_kind.is_some())
    }

    /// How many TIMELINE events the entry stands for.
    pub fn events(&self) -> u64 {
        if self.flags & TIMING != 0 {
            return 0;
        }
        1 + u64::from(self.then_queue())
            + u64::from(self.start & 0x0f != 0)
            + u64::from(self.start >> 4 != 0)
    }

    /// The event, its strings borrowed from the entry.
    pub fn event(&self) -> EventRef<'_> {
        let ext = self.ext.as_deref();
        let job = match ext.and_then(|e| e.job.as_deref()) {
            Some(long) => long.as_str(),
            // copied from a `&str` whole, so always UTF-8
            None => std::str::from_utf8(&self.job[..usize::from(self.job_len)]).unwrap_or(""),
        };
        let opt = |bit: u8, v: u32| (self.flags & bit != 0).then_some(v);
        let mut ev = TimelineEvent::new(self.offset(), self.kind, job);
        ev.partition = opt(PARTITION, self.partition);
        ev.worker = opt(WORKER, self.worker);
        ev.gpu = opt(GPU, self.gpu);
        ev.monolithic = self.flags & MONOLITHIC != 0;
        let ms = opt(MS, self.ms).map(u64::from);
        match self.kind {
            EventKind::SynthEnd => ev.synth_ms = ms,
            EventKind::GpuEnd => ev.gpu_ms = ms,
            _ => {}
        }
        if let Some(e) = ext {
            ev.proof_kind = e.proof_kind.as_deref().map(Name::as_str);
            ev.request = e.request;
            if e.synth_ms.is_some() || e.gpu_ms.is_some() {
                (ev.synth_ms, ev.gpu_ms) = (e.synth_ms, e.gpu_ms);
            }
        }
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::{printed, span_event};
    use proptest::prelude::*;

    #[test]
    fn an_entry_is_one_cache_line() {
        assert!(std::mem::size_of::<Queued>() <= 64);
    }

    /// A thread's edges of one job box its proof kind once: the engine names the job by the
    /// first; a whole proof's SYNTH_START, whose line prints it, always has it.
    #[test]
    fn a_jobs_kind_is_boxed_once_a_thread() {
        let f = |job: &Arc<Name>, partition: Option<u32>| SpanFields {
            job_id: Some(job.clone()),
            partition,
            worker: Some(0),
            gpu: Some(0),
            proof_kind: Some(Arc::new(Name::new("porep-c2"))),
            request: None,
        };
        let kind_in = |layer: u64, f: &SpanFields, kind: EventKind| {
            Queued::span_edge(f, kind, 1, None, false, layer)
                .unwrap()
                .event()
                .proof_kind
                .map(str::to_owned)
        };
        let kind_of = |f: &SpanFields, kind: EventKind| kind_in(1, f, kind);
        let (a, b) = (Arc::new(Name::new("a")), Arc::new(Name::new("b")));
        let fa = f(&a, Some(0));
        assert_eq!(
            kind_of(&fa, EventKind::GpuPickup).as_deref(),
            Some("porep-c2")
        );
        assert_eq!(kind_of(&fa, EventKind::GpuStart), None, "sent already");
        assert_eq!(kind_of(&fa, EventKind::GpuEnd), None);
        // another layer's entries go to another engine: told once too
        assert_eq!(
            kind_in(2, &fa, EventKind::GpuEnd).as_deref(),
            Some("porep-c2"),
            "another layer"
        );
        assert_eq!(kind_in(2, &fa, EventKind::GpuEnd), None);
        // each of two layers keeps its record, however their entries alternate
        for _ in 0..2 {
            assert_eq!(kind_in(1, &fa, EventKind::GpuEnd), None, "first layer");
            assert_eq!(kind_in(2, &fa, EventKind::GpuEnd), None, "second layer");
        }
        // a third takes the place of the one told least recently (the first)
        assert_eq!(
            kind_in(3, &fa, EventKind::GpuEnd).as_deref(),
            Some("porep-c2")
        );
        assert_eq!(kind_in(2, &fa, EventKind::GpuEnd), None, "kept");
        assert_eq!(
            kind_in(1, &fa, EventKind::GpuEnd).as_deref(),
            Some("porep-c2"),
            "given up"
        );
        // a dropped entry of one layer (`forget_kind_sent`) leaves the other's record
        forget_kind_sent(1);
        assert_eq!(
            kind_in(1, &fa, EventKind::GpuEnd).as_deref(),
            Some("porep-c2"),
            "forgotten"
        );
        assert_eq!(kind_in(2, &fa, EventKind::GpuEnd), None, "not forgotten");
        let fb = f(&b, Some(0));
        assert_eq!(
            kind_of(&fb, EventKind::GpuStart).as_deref(),
            Some("porep-c2"),
            "another job"
        );
        let whole = f(&b, None);
        assert_eq!(
            kind_of(&whole, EventKind::SynthStart).as_deref(),
            Some("porep-c2"),
            "printed: always carried"
        );
    }

    fn event() -> impl Strategy<Value = (proofline_core::Event, bool)> {
        (
            any::<u64>(),
            0usize..6,
            prop_oneof!["[a-z0-9-]{1,24}", "[a-z0-9-]{25,60}", "[é ]{1,20}"],
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(prop_oneof![0u64..100_000, any::<u64>()]),
            proptest::option::of(prop_oneof![0u64..100_000, any::<u64>()]),
            proptest::option::of("[a-z-]{1,12}"),
            any::<bool>(),
            any::<bool>(),
            proptest::option::of(2u32..6),
        )
            .prop_map(
                |(off, k, job, partition, worker, gpu, s, g, kind, mono, then_queue, request)| {
                    let mut ev = TimelineEvent::new(off, EventKind::ALL[k], Arc::from(job));
                    ev.partition = partition;
                    ev.worker = worker;
                    ev.gpu = gpu;
                    ev.synth_ms = s;
                    ev.gpu_ms = g;
                    ev.proof_kind = kind.map(Arc::from);
                    ev.monolithic = mono;
                    ev.request = request;
                    (ev, then_queue)
                },
            )
    }

    proptest! {
        /// Whatever goes in comes out: the entry loses nothing of any event.
        #[test]
        fn an_entry_gives_its_event_back((ev, then_queue) in event()) {
            let q = Queued::new(&ev.as_event_ref(), then_queue);
            prop_assert_eq!(q.event(), ev.as_event_ref());
            one_event_and_its_queue(&q, then_queue)?;
        }

        /// An entry built straight from a span's fields holds the very event the layer
        /// would build for that edge (`span_event`), whatever the fields and the kind.
        #[test]
        fn a_span_edge_is_the_event_of_its_fields(
            f in fields(),
            k in 0usize..6,
            off in any::<u64>(),
            ms in proptest::option::of(prop_oneof![0u64..100_000, any::<u64>()]),
            then_queue in any::<bool>(),
        ) {
            let kind = EventKind::ALL[k];
            let q = Queued::span_edge(&f, kind, off, ms, then_queue, 1);
            let ev = span_event(kind, &f, off, ms);
            prop_assert_eq!(q.as_ref().map(Queued::event), ev);
            if let Some(q) = q {
                one_event_and_its_queue(&q, then_queue)?;
            }
        }

        /// A span's start and end travel in one entry when the start can be rebuilt from
        /// the end exactly, and both come back as the layer builds them.
        #[test]
        fn a_span_pair_gives_both_events_back(
            f in fields(),
            ks in (0usize..6, 0usize..6),
            end_off in any::<u64>(),
            back in prop_oneof![0u64..100_000, any::<u64>()],
            ms in proptest::option::of(0u64..100_000),
            then_queue in any::<bool>(),
        ) {
            let (start, end) = (EventKind::ALL[ks.0], EventKind::ALL[ks.1]);
            let start_off = end_off.saturating_sub(back);
            let pair = Queued::pair_of(&f, (start, start_off), (end, end_off))
                .map(|p| Queued::span_pair(p, ms, then_queue, 1));
            match pair {
                Some(q) => {
                    prop_assert_eq!(q.start_event(&q.event()), span_event(start, &f, start_off, None));
                    prop_assert_eq!(Some(q.event()), span_event(end, &f, end_off, ms));
                    prop_assert_eq!(q.events(), 2 + u64::from(then_queue));
                }
                None => prop_assert!(
                    f.job_id.is_none()
                        || back > u64::from(u32::MAX)
                        || (start.is_gpu() && !end.is_gpu()
                            && (f.worker.is_some() || f.gpu.is_some()))
                        || (start == EventKind::GpuQueue && f.partition.is_none()),
                    "cuzk's pairs always ride: {start} {end}"
                ),
            }
        }
    }

    proptest! {
        /// A span's creation event rides along with its start and end when it can be
        /// rebuilt exactly and its distance fits; all three come back as the layer builds
        /// them, in order, and the end's offset is whole whatever the lead's distance.
        #[test]
        fn a_span_pair_with_its_lead_gives_three_events_back(
            f in fields(),
            ks in (0usize..6, 0usize..6, 0usize..6),
            end_off in prop_oneof![0u64..1 << 41, any::<u64>()],
            back in 0u64..100_000,
            lead_back in prop_oneof![0u64..100_000, 0u64..1 << 25],
            then_queue in any::<bool>(),
        ) {
            let (lead, start, end) = (EventKind::ALL[ks.0], EventKind::ALL[ks.1], EventKind::ALL[ks.2]);
            let start_off = end_off.saturating_sub(back);
            let lead_off = start_off.saturating_sub(lead_back);
            let Some(pair) = Queued::pair_of(&f, (start, start_off), (end, end_off)) else {
                return Ok(());
            };
            match pair.with_lead((lead, lead_off)) {
                Some(with) => {
                    let q = Queued::span_pair(with, Some(7), then_queue, 1);
                    let end_ev = q.event();
                    prop_assert_eq!(Some(end_ev.clone()), span_event(end, &f, end_off, Some(7)));
                    let start_ev = q.start_event(&end_ev);
                    prop_assert_eq!(start_ev.clone(), span_event(start, &f, start_off, None));
                    let start_ev = start_ev.expect("a start");
                    prop_assert_eq!(q.lead_event(&start_ev), span_event(lead, &f, lead_off, None));
                    prop_assert_eq!(q.events(), 3 + u64::from(then_queue));
                    prop_assert_eq!(q.then_queue(), then_queue);
                }
                None => prop_assert!(
                    end_off > OFFSET_MASK
                        || start_off - lead_off > LEAD_MAX_MS
                        || (lead.is_gpu() && !start.is_gpu()
                            && (f.worker.is_some() || f.gpu.is_some()))
                        || (lead == EventKind::GpuQueue && f.partition.is_none()),
                    "cuzk's GPU_PICKUP always rides: {lead} {start} {end}"
                ),
            }
            // without a lead, no lead comes back
            let q = Queued::span_pair(pair, None, then_queue, 1);
            let end_ev = q.event();
            let start_ev = q.start_event(&end_ev).expect("a start");
            prop_assert!(q.lead_event(&start_ev).is_none());
        }
    }

    /// A whole proof's SYNTH_START carried along with its end prints its kind even when this
    /// thread's entries carried that job's kind last (the end alone would go without it).
    #[test]
    fn a_carried_whole_proof_start_keeps_its_printed_kind() {
        let f = SpanFields {
            job_id: Some(Arc::new(Name::new("winpost-1-9"))),
            proof_kind: Some(Arc::new(Name::new("winning-post"))),
            ..SpanFields::default()
        };
        let part = SpanFields {
            partition: Some(2),
            ..f.clone()
        };
        // an edge of the job that carries its kind: the thread has sent it now
        let first = Queued::span_edge(&part, EventKind::GpuQueue, 1, None, false, 1).unwrap();
        assert_eq!(first.event().proof_kind, Some("winning-post"));
        let pair = Queued::pair_of(&f, (EventKind::SynthStart, 5), (EventKind::SynthEnd, 9))
            .map(|p| Queued::span_pair(p, Some(4), true, 1))
            .unwrap();
        let end = pair.event();
        let start = pair.start_event(&end).unwrap();
        assert_eq!(
            printed(&start),
            span_event(EventKind::SynthStart, &f, 5, None)
                .map(|e| printed(&e))
                .unwrap()
        );
        assert_eq!(start.proof_kind, Some("winning-post"));
        // a partition's start prints no kind: its end may go without (the thread sent it)
        let pair = Queued::pair_of(&part, (EventKind::SynthStart, 5), (EventKind::SynthEnd, 9))
            .map(|p| Queued::span_pair(p, Some(4), true, 1))
            .unwrap();
        assert_eq!(pair.event().proof_kind, None);
    }

    /// An entry of one event (no start carried along), with a GPU_QUEUE after it or not.
    fn one_event_and_its_queue(q: &Queued, then_queue: bool) -> Result<(), TestCaseError> {
        prop_assert_eq!(q.then_queue(), then_queue);
        prop_assert_eq!(q.events(), 1 + u64::from(then_queue));
        prop_assert!(q.start_event(&q.event()).is_none());
        prop_assert!(q.lead_event(&q.event()).is_none());
        Ok(())
    }

    fn fields() -> impl Strategy<Value = SpanFields> {
        (
            proptest::option::of(prop_oneof!["[a-z0-9-]{1,24}", "[a-z0-9-]{25,60}"]),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of("[a-z-]{1,12}"),
            proptest::option::of(1u32..4),
        )
            .prop_map(|(job, partition, worker, gpu, kind, request)| SpanFields {
                job_id: job.map(|j| Arc::new(Name::new(&j))),
                partition,
                worker,
                gpu,
                proof_kind: kind.map(|k| Arc::new(Name::new(&k))),
                request,
            })
    }
}
