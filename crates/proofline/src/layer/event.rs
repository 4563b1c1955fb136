//! What an event carries: the one place that decides the fields of an event built from a
//! span edge or read from a `timeline` event.

use std::sync::atomic::Ordering;

use proofline_core::{EventKind, EventRef, TimelineEvent};
use tracing::field::{Field, Visit};

use super::stats::*;
use crate::clock::{Clock, Raw};
use crate::fields::{FieldNames, FieldVisitor, SpanFields, parse_index, with_formatted};
use crate::queued::Queued;

/// The event as cuzk prints it: the proof kind only where cuzk writes `kind=`.
pub(crate) fn printed<'a>(ev: &EventRef<'a>) -> EventRef<'a> {
    let mut p = ev.clone();
    if !(ev.kind.carries().proof_kind_if_whole && ev.partition.is_none()) {
        p.proof_kind = None;
    }
    p
}

/// The GPU_QUEUE that follows a SYNTH_END (cuzk prints one), from the SYNTH_END itself.
pub(crate) fn queue_after<'a>(synth_end: &EventRef<'a>) -> EventRef<'a> {
    let mut g = TimelineEvent::new(synth_end.offset_ms, EventKind::GpuQueue, synth_end.job_id);
    g.partition = synth_end.partition;
    g.request = synth_end.request;
    g.monolithic = EventKind::GpuQueue.carries().monolithic_if_whole && g.partition.is_none();
    g
}

/// The queue entry of a span edge's event (`Queued::span_edge`); a span without a job id
/// emits nothing, and is counted.
pub(crate) fn edge(
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
    let c = kind.carries();
    let mut ev = TimelineEvent::new(offset_ms, kind, f.job_id()?);
    ev.partition = f.partition;
    let whole = ev.partition.is_none();
    if c.worker_gpu {
        ev.worker = f.worker;
        ev.gpu = f.gpu;
    }
    ev.proof_kind = f.proof_kind();
    if c.duration {
        match kind {
            EventKind::SynthEnd => ev.synth_ms = ms,
            _ => ev.gpu_ms = ms,
        }
    }
    ev.monolithic = c.monolithic_if_whole && whole;
    ev.request = f.printed_request();
    Some(ev)
}

/// A line the prover logged through `tracing`, as the layer takes it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Logged {
    /// It holds the TIMELINE marker: parsed as a TIMELINE line.
    Timeline(String),
    /// It holds the `CUZK_TIMING:` marker and not the TIMELINE one: parsed on the worker.
    Timing(String),
}

/// Whether `s` holds the TIMELINE marker, and the `CUZK_TIMING:` one, in one look at each
/// `T` (both markers have one; two substring searches were a tenth of what a `CUZK_TIMING:`
/// line logged through `tracing` cost the prover).
pub(crate) fn markers(s: &str) -> (bool, bool) {
    use proofline_core::{codec::MARKER, timing::TIMING_MARKER};
    // where the `T` of `CUZK_TIMING:` is
    const AT: usize = 5;
    const _: () = assert!(TIMING_MARKER.as_bytes()[AT] == b'T' && MARKER.as_bytes()[0] == b'T');
    let b = s.as_bytes();
    let (mut timeline, mut timing) = (false, false);
    for p in memchr::memchr_iter(b'T', b) {
        timeline |= b[p..].starts_with(MARKER.as_bytes());
        timing |= p >= AT && b[p - AT..].starts_with(TIMING_MARKER.as_bytes());
        if timeline && timing {
            break;
        }
    }
    (timeline, timing)
}

/// Reads a `timeline` event: `event`, `job_id`, the detail pairs, or one `detail` string.
pub(crate) struct TimelineVisitor<'a> {
    pub(crate) names: &'a FieldNames,
    pub(crate) fields: SpanFields,
    pub(crate) ev: Option<EventKind>,
    pub(crate) detail: Option<String>,
    /// The message, when it is a TIMELINE line (`timeline_event()` logging its line through
    /// `tracing` instead of printing it) or a `CUZK_TIMING:` one.
    pub(crate) line: Option<Logged>,
    pub(crate) synth_ms: Option<u64>,
    pub(crate) gpu_ms: Option<u64>,
    /// `CUZK_TIMING` keys given as fields (`pre_lock_cpu_ms = 12, ...`), if any.
    pub(crate) timing: Option<proofline_core::timing::Timing>,
}

impl TimelineVisitor<'_> {
    pub(crate) fn set_ms(&mut self, name: &str, v: u64) -> bool {
        match name {
            "synth_ms" => self.synth_ms = Some(v),
            "gpu_ms" => self.gpu_ms = Some(v),
            "gpu_tid" => {
                self.timing.get_or_insert_default().gpu_tid =
                    Some(u32::try_from(v).unwrap_or(u32::MAX));
            }
            // cuzk's timing keys all end in `_ms` but `num_circuits`: the fields every
            // timeline event has (partition, worker, ...) skip the lookup
            name if name.ends_with("_ms") || name == "num_circuits" => {
                match proofline_core::timing::TimingKey::from_name(name) {
                    Some(k) => self.timing.get_or_insert_default().set(k, v),
                    None => return false,
                }
            }
            _ => return false,
        }
        true
    }

    pub(crate) fn field_str(&mut self, field: &Field, s: &str) {
        match field.name() {
            "event" => self.ev = EventKind::from_name(s),
            "detail" => self.detail = Some(s.to_owned()),
            "message" => {
                self.line = match markers(s) {
                    (true, _) => Some(Logged::Timeline(s.to_owned())),
                    (false, true) => Some(Logged::Timing(s.to_owned())),
                    (false, false) => None,
                };
            }
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
        with_formatted(format_args!("{value:?}"), |text| {
            self.field_str(field, text.trim_matches('"'));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// The markers are found where substring searches find them, whatever the pieces
        /// around them.
        #[test]
        fn the_markers_are_found_where_substring_searches_find_them(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("TIMELINE,"), Just("TIMELINE"), Just("CUZK_TIMING:"), Just("CUZK_TIMING"),
                    Just("CUZK_"), Just("TIMING:"), Just("T"), Just("C"), Just("K_T"), Just(" "),
                    Just(","), Just("é"), Just("x=1"),
                ],
                0..12,
            )
        ) {
            let s = pieces.concat();
            prop_assert_eq!(
                markers(&s),
                (
                    s.contains(proofline_core::codec::MARKER),
                    s.contains(proofline_core::timing::TIMING_MARKER)
                ),
                "{:?}", s
            );
        }
    }
}
