//! The `tracing` layer: span edges in, TIMELINE events onto each thread's bounded ring.
//!
//! Everything here runs on the prover's threads, so it does no I/O, takes no lock an
//! exporter can hold (only the short locks of its own per-span table, which the worker also
//! takes, briefly, once a poll), reads the clock only at mapped edges, and pushes onto the
//! thread's own bounded ring (`handoff`) without waking anyone: a full ring drops and counts.
//!
//! A span's first-enter event (SYNTH_START, GPU_START) and creation event (GPU_PICKUP) wait
//! in the span's state: the worker takes them from the table at its next poll, or the close
//! sends them in the same queue entry as the end event. So a span costs one queue entry, and
//! its start is written as promptly as a queued event.
//!
//! Interest is decided once per callsite (`register_callsite`) into a lock-free set of
//! callsite addresses, so a span the layer does not map costs one probe of that set when it
//! is created and one atomic load when it is entered and closed. The layer never filters
//! spans for the other layers.

mod callsites;
mod event;
mod requests;
mod rules;
mod spans;
mod stats;

pub(crate) use callsites::CallsiteSet;
#[cfg(test)]
pub(crate) use event::span_event;
pub(crate) use event::{Logged, LoggedLine, printed, queue_after, read_timeline_line};
pub(crate) use requests::Requests;
pub(crate) use rules::LayerConfig;
pub use rules::{Edge, SpanRule, cuzk_whole_proof_spans};
pub(crate) use spans::SpanTable;
pub(crate) use stats::LayerStats;
pub use stats::StatsSnapshot;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proofline_core::{EventKind, codec};
use tracing::span;
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::clock::{Clock, Raw};
use crate::fields::{FieldVisitor, SpanFields};
use crate::handoff::Handoff;
use crate::queued::Queued;
use callsites::*;
use event::*;
use rules::*;
use spans::*;

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
    pub(crate) requests: Requests,
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
        // built before its push: if it carried its job's kind, it may be the entry recorded
        // as telling it (`queued::kind_sent`), and when it is dropped the next must tell it
        // again (entries built in their slot are built only when pushed)
        let tells_kind = q.carries_proof_kind();
        if !self.push_or_count(&self.stats.dropped, q.events(), move || q) && tells_kind {
            crate::queued::forget_kind_sent(self.stats.layer);
        }
    }

    /// [`TimelineLayer::send`] for the entry (of `events` events) that `build` makes,
    /// straight into the ring's slot; not built at all when it would be dropped. `build`
    /// must build the entry itself: an entry built before, carrying its job's kind, goes
    /// through `send`, which forgets the thread's record of the kind when it is dropped.
    #[inline(always)]
    fn send_with(&self, events: u64, build: impl FnOnce() -> Queued) {
        self.push_or_count(&self.stats.dropped, events, build);
    }

    /// Hands a `CUZK_TIMING:` entry to the worker, or drops and counts it (apart from the
    /// events: it stands for none).
    fn send_timing(&self, timing: crate::queued::TimingIn) {
        self.push_or_count(&self.stats.timing_dropped, 1, move || {
            Queued::timing(timing)
        });
    }

    /// Hands a logged line to the worker to read, as bytes on the thread's text ring, or drops
    /// and counts it (a TIMELINE line as an event, a `CUZK_TIMING:` one apart); a line too long
    /// for the ring goes in a box of its own.
    fn send_line(&self, line: event::LoggedLine) {
        let dropped = if line.timeline {
            &self.stats.dropped
        } else {
            &self.stats.timing_dropped
        };
        if line.text.len() > self.handoff.text_capacity() {
            self.push_or_count(dropped, 1, move || {
                Queued::timing(crate::queued::TimingIn::Line(line))
            });
            return;
        }
        let pushed = !self.closed.load(Ordering::Relaxed)
            && self.handoff.push_text(line.text.as_bytes(), line.timeline);
        if !pushed {
            dropped.fetch_add(1, Ordering::Relaxed);
        }
        event::recycle_line(line.text);
    }

    /// Pushes what `build` makes, unless the worker has stopped or the ring is full: then
    /// `n` is added to `dropped`. Whether it was pushed.
    #[inline(always)]
    fn push_or_count(
        &self,
        dropped: &std::sync::atomic::AtomicU64,
        n: u64,
        build: impl FnOnce() -> Queued,
    ) -> bool {
        let pushed = !self.closed.load(Ordering::Relaxed) && self.handoff.push_with(build);
        if !pushed {
            dropped.fetch_add(n, Ordering::Relaxed);
        }
        pushed
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
        let mut mask = st.rules[Edge::Close.index()];
        let ends = (1 << EventKind::SynthEnd.index()) | (1 << EventKind::GpuEnd.index());
        if st.failed && mask & ends != 0 {
            // failed work: no SYNTH_END (and so no GPU_QUEUE) and no GPU_END, as cuzk prints
            // none for a failed synthesis or a failed GPU call
            mask &= !ends;
            self.stats.failed.fetch_add(1, Ordering::Relaxed);
        }
        let panicking = mask != 0 && std::thread::panicking();
        if mask == 0 || panicking {
            // it did start: a start (and creation) still waiting goes out alone
            self.send_pending(st);
            if panicking {
                // the work did not finish: no end edge (the job shows as incomplete)
                self.stats.aborted.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let has_start = st.rules[Edge::FirstEnter.index()] != 0;
        let Some(first) = st.first_enter.map(At::raw) else {
            // (it was made, though: a GPU worker's pickup is told)
            self.send_pending(st);
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
                if let Some(mut pair) = Queued::pair_of(&st.fields, start, end) {
                    // a creation's event still waiting (a GPU worker's GPU_PICKUP) rides
                    // along too when it can, else goes first in an entry of its own: one
                    // entry for the span's three events instead of two
                    let lead = (st.created_pending.map(At::raw))
                        .zip(st.single_created())
                        .map(|(at, kind)| (kind, self.clock.offset_ms(at)));
                    let mut events = 2;
                    if let Some(lead) = lead {
                        match pair.with_lead(lead) {
                            Some(with) => (pair, events) = (with, 3),
                            None => self.send_pending_created(st),
                        }
                    }
                    let then_queue = self.then_queue(end.0, mask);
                    // built straight into the ring's slot: built first and then copied,
                    // the copy stalled on the entry's narrow stores (BENCHMARKS.md)
                    self.send_with(events + u64::from(then_queue), || {
                        Queued::span_pair(pair, Some(ms), then_queue, self.stats.layer)
                    });
                    return;
                }
            }
        }
        self.send_pending(st);
        self.emit_mask(mask, &st.fields, at, Some(ms));
    }

    /// Sends a span's creation and first-enter events, those still waiting in its state.
    fn send_pending(&self, st: &SpanState) {
        self.send_pending_created(st);
        if let Some(q) = st.pending_start(&self.clock, &self.stats) {
            self.send(q);
        }
    }

    /// Sends a span's creation event if it is still waiting in its state.
    fn send_pending_created(&self, st: &SpanState) {
        if let Some(q) = st.pending_created(&self.clock, &self.stats) {
            self.send(q);
        }
    }
}

impl<S> Layer<S> for TimelineLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if let callsites::Known::Wanted(at) = self.callsites.classify(meta, &self.cfg) {
            // a span the layer maps exists in the prover: its events should come
            if self.callsites.info(at).is_some_and(|i| i.rules != [0; 3]) {
                self.stats.mapped_callsites.fetch_add(1, Ordering::Relaxed);
            }
        }
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
            created_pending: None,
            start_pending: false,
            failed: false,
            request_origin: None,
        };
        attrs.record(&mut FieldVisitor {
            names: &self.cfg.fields,
            slots: info.map(|i| &*i.slots),
            out: &mut state.fields,
        });
        // `error` given when the span is made (a span opened for work already failed); the
        // values are visited again only for the rare callsite that declares the field
        let error_field = match info {
            Some(i) => i.error_field,
            None => attrs.metadata().fields().field("error").is_some(),
        };
        state.failed = error_field && has_error_field(attrs);
        let whole = match info {
            Some(i) => i.whole.clone(),
            None => self.cfg.whole_for(attrs.metadata().name()),
        };
        // a request span: one of the prover's own (no rule), for a whole request (a job
        // id, no partition), and not inside other work of that job (a span of the same job
        // id around it, or partition work): looked up only for such candidates
        let mut request_span = false;
        if state.rules == [0; 3]
            && whole.is_none()
            && state.fields.job_id.is_some()
            && state.fields.partition.is_none()
        {
            // what is around it, looked up once: it decides, and fills what the span lacks
            let mut around = SpanFields::default();
            self.inherit(attrs, &ctx, &mut around);
            request_span = around.partition.is_none() && around.job_id != state.fields.job_id;
            state.fields.inherit(&around);
        } else if whole.is_none() && (!state.fields.complete() || self.requests.any_open()) {
            // (a span with all its fields looks further only while a request span is open)
            self.inherit(attrs, &ctx, &mut state.fields);
        }
        if request_span && state.fields.request.is_none() {
            if let Some(job) = state.fields.job_id.clone() {
                let n = self.requests.open(job.as_str());
                state.fields.request = Some(n);
                state.request_origin = Some((job, n));
            }
        }
        if let Some(kind) = whole {
            // a whole proof: no partition, whatever the span's fields say
            if state.fields.job_id.is_none() {
                self.inherit(attrs, &ctx, &mut state.fields);
            } else if self.requests.any_open() {
                // only the request it is part of, if any (once a proof)
                let mut around = SpanFields {
                    job_id: state.fields.job_id.clone(),
                    ..SpanFields::default()
                };
                self.inherit(attrs, &ctx, &mut around);
                state.fields.request = around.request;
            }
            state.fields.partition = None;
            if state.fields.proof_kind.is_none() {
                state.fields.proof_kind = kind;
            }
        }
        let gpu_kinds = (1 << EventKind::GpuPickup.index())
            | (1 << EventKind::GpuStart.index())
            | (1 << EventKind::GpuEnd.index());
        if (state.rules[0] | state.rules[1] | state.rules[2]) & gpu_kinds != 0
            && state.fields.worker.is_some()
            && state.fields.gpu.is_none()
            && !self.stats.gpu_assumed.load(Ordering::Relaxed)
        {
            // (the prover's own lines and `timeline` events name no GPU either: cuzk's
            // layout is theirs; only spans the layer maps are said)
            self.stats.gpu_assumed.store(true, Ordering::Relaxed);
        }
        if state.fields.job_id.is_none()
            && state.rules != [0; 3]
            && self.stats.first_without_job_id.get().is_none()
        {
            let _ = self.stats.first_without_job_id.set(attrs.metadata().name());
        }
        // A single creation event (a GPU worker's GPU_PICKUP) waits in the span's state, as
        // a first enter's does: the worker's next look at the table or the close sends it,
        // with the start and end in one entry when it can. (Its own entry was a third of
        // cuzk's `gpu_worker` span's cost to the prover: BENCHMARKS.md.)
        let created = state.rules[Edge::Created.index()];
        if created != 0 {
            let now = self.clock.now();
            // (one a GPU_QUEUE must follow, a SYNTH_END mapped there, goes at once)
            let waits = only_kind(created).is_some_and(|k| !self.then_queue(k, created));
            if waits && !self.closed.load(Ordering::Relaxed) {
                state.created_pending = Some(At::new(now));
            } else {
                self.emit_mask(created, &state.fields, now, None);
            }
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
            });
            if has_error_field(values) {
                st.failed = true;
            }
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
            st.first_enter = Some(At::new(at));
            // (after shutdown it goes to the queue, which counts it as dropped)
            // (one a GPU_QUEUE must follow, a SYNTH_END mapped there, goes at once)
            let waits = st
                .single_start()
                .is_some_and(|k| !self.then_queue(k, enter));
            if waits && !self.closed.load(Ordering::Relaxed) {
                st.start_pending = true;
            } else {
                // (a creation event still waiting goes first)
                if let Some(q) = st.take_created(&self.clock, &self.stats) {
                    self.send(q);
                }
                self.emit_mask(enter, &st.fields, at, None);
            }
        });
    }

    fn on_close(&self, id: span::Id, _ctx: Context<'_, S>) {
        if let Some(st) = self.spans.remove(&id) {
            self.close(&st);
            if let Some((job, n)) = &st.request_origin {
                self.requests.close(job.as_str(), *n);
            }
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::ERROR {
            // an error inside one of the layer's spans, or inside a span within it (a kernel's
            // own span under the GPU work): the work the nearest of the layer's spans stands
            // for failed
            if let Some(scope) = ctx.event_scope(event) {
                for span in scope {
                    if self.spans.with(&span.id(), |st| st.failed = true).is_some() {
                        break;
                    }
                }
            }
        }
        if self.wants(event.metadata()).is_none() {
            return;
        }
        let mut v = TimelineVisitor::new(&self.cfg.fields);
        event.record(&mut v);
        let Some(kind) = v.ev else {
            // cuzk's CUZK_TIMING values, as fields or as its line
            if let Some(t) = v.timing.take() {
                self.send_timing(crate::queued::TimingIn::Parsed(
                    proofline_core::timing::TimingLine::Timing(t),
                ));
                return;
            }
            // the prover's own TIMELINE line, logged instead of printed, or a CUZK_TIMING one:
            // read on the worker's thread, not the prover's
            if let Some(line) = v.line {
                self.send_line(line);
            }
            return;
        };
        let at = self.clock.now();
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

/// Whether the values record a field named `error` (a span's work failed).
fn has_error_field(values: &impl RecordFields) -> bool {
    struct Find(bool);
    impl tracing::field::Visit for Find {
        fn record_debug(&mut self, field: &tracing::field::Field, _: &dyn std::fmt::Debug) {
            self.0 |= field.name() == "error";
        }
    }
    let mut f = Find(false);
    values.record(&mut f);
    f.0
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use proofline_core::EventKind;

    use super::TimelineLayer;
    use crate::fields::{Name, SpanFields};
    use crate::queued::Queued;

    /// A full queue drops a thread's entries. One that did not carry its job's proof kind
    /// (the thread's entries told it already) leaves the record of it: the job's next entry
    /// still goes without the kind (a dropped entry that told it clears the record:
    /// `tests/backpressure.rs`).
    #[test]
    fn a_dropped_entry_without_the_kind_leaves_the_record() {
        // the worker sleeps until woken: the queue of 4 fills
        let (layer, mut guard) = TimelineLayer::builder()
            .channel_capacity(4)
            .poll_interval(Duration::from_secs(120))
            .no_timeline()
            .build();
        let id = layer.stats.layer;
        let f = SpanFields {
            job_id: Some(Arc::new(Name::new("batch-7"))),
            partition: Some(0),
            worker: Some(0),
            gpu: Some(0),
            proof_kind: Some(Arc::new(Name::new("snap-prove"))),
            request: None,
        };
        let edge = |kind| Queued::span_edge(&f, kind, 1, None, false, id).unwrap();
        let first = edge(EventKind::GpuPickup);
        assert!(first.carries_proof_kind());
        layer.send(first);
        let mut dropped = false;
        for _ in 0..100_000 {
            let q = edge(EventKind::GpuStart);
            assert!(!q.carries_proof_kind(), "told already");
            let before = guard.stats().dropped;
            layer.send(q);
            if guard.stats().dropped > before {
                dropped = true;
                break;
            }
        }
        assert!(dropped, "the queue never filled: {:?}", guard.stats());
        assert!(
            !edge(EventKind::GpuEnd).carries_proof_kind(),
            "a dropped entry that did not tell the kind cleared the record"
        );
        drop(layer);
        guard.shutdown(Duration::from_secs(30)).unwrap();
    }
}
