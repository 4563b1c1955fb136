//! What an event carries: the one place that decides the fields of an event built from a
//! span edge or read from a `timeline` event.

use std::sync::atomic::Ordering;

use proofline_core::{EventKind, EventRef, TimelineEvent, codec};
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
    let q = Queued::span_edge(f, kind, clock.offset_ms(at), ms, then_queue, stats.layer);
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

/// A line the prover logged through `tracing` that holds one of the markers: handed to the
/// worker as it is, and read there ([`read_timeline_line`], or as `analyze` reads a log's
/// line), not on the prover's thread.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LoggedLine {
    pub text: String,
    /// Whether it holds the TIMELINE marker (else the `CUZK_TIMING:` one).
    pub timeline: bool,
}

/// A logged line that holds the TIMELINE marker, as the worker takes it.
#[derive(Debug)]
pub(crate) enum Logged {
    /// A TIMELINE line: its event's entry, at the line's own offset.
    Event(Queued),
    /// A TIMELINE line that does not parse: counted, nothing else.
    Malformed,
    /// One whose marker is no line's start: read as `analyze` reads it.
    Text,
}

/// Reads a logged line that holds the TIMELINE marker ([`LoggedLine::timeline`]).
pub(crate) fn read_timeline_line(s: &str) -> Logged {
    match codec::parse_line(s) {
        Ok(Some(ev)) => Logged::Event(Queued::new(&ev, false).with_own_offset()),
        Ok(None) => Logged::Text,
        Err(_) => Logged::Malformed,
    }
}

thread_local! {
    /// A buffer for the next logged line the worker is to read, given back once the line is
    /// handed over ([`recycle_line`]): no allocation for each line.
    static LINE: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// The longest buffer [`recycle_line`] keeps.
const LINE_KEPT: usize = 4096;

/// `s` in this thread's line buffer (a new one while it is out: a line logged while another's
/// fields are read).
fn line_buffer(s: &str) -> String {
    let mut line = LINE.try_with(std::cell::Cell::take).unwrap_or_default();
    line.clear();
    line.push_str(s);
    line
}

/// Gives a line's buffer back to this thread for the next one, unless it grew long.
pub(crate) fn recycle_line(line: String) {
    if line.capacity() <= LINE_KEPT {
        let _ = LINE.try_with(|l| l.set(line));
    }
}

/// Which marker a logged line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Timeline,
    Timing,
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

/// What a logged line is taken as, by its markers ([`markers`]); a line that starts with the
/// TIMELINE marker, as cuzk's do, is one without a look at its other `T`s (a `memchr` call
/// for each: ~360 of the ~2 070 instructions a logged TIMELINE line cost the prover).
fn marker_of(s: &str) -> Option<Marker> {
    if s.starts_with(codec::MARKER) {
        return Some(Marker::Timeline);
    }
    match markers(s) {
        (true, _) => Some(Marker::Timeline),
        (false, true) => Some(Marker::Timing),
        (false, false) => None,
    }
}

/// Reads a `timeline` event: `event`, `job_id`, the detail pairs, or one `detail` string.
pub(crate) struct TimelineVisitor<'a> {
    pub(crate) names: &'a FieldNames,
    pub(crate) fields: SpanFields,
    pub(crate) ev: Option<EventKind>,
    pub(crate) detail: Option<String>,
    /// The message, when it is a TIMELINE line (`timeline_event()` logging its line through
    /// `tracing` instead of printing it) or a `CUZK_TIMING:` one.
    pub(crate) line: Option<LoggedLine>,
    pub(crate) synth_ms: Option<u64>,
    pub(crate) gpu_ms: Option<u64>,
    /// `CUZK_TIMING` keys given as fields (`pre_lock_cpu_ms = 12, ...`), if any.
    pub(crate) timing: Option<proofline_core::timing::Timing>,
}

impl<'a> TimelineVisitor<'a> {
    /// A visitor that has read nothing yet.
    pub(crate) fn new(names: &'a FieldNames) -> Self {
        TimelineVisitor {
            names,
            fields: SpanFields::default(),
            ev: None,
            detail: None,
            line: None,
            synth_ms: None,
            gpu_ms: None,
            timing: None,
        }
    }

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

    /// Takes the message, when it holds a marker, to be read on the worker.
    fn message(&mut self, s: &str) {
        self.line = marker_of(s).map(|m| LoggedLine {
            text: line_buffer(s),
            timeline: m == Marker::Timeline,
        });
    }

    pub(crate) fn field_str(&mut self, field: &Field, s: &str) {
        match field.name() {
            "event" => self.ev = EventKind::from_name(s),
            "detail" => self.detail = Some(s.to_owned()),
            "message" => self.message(s),
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// A logged message is taken as the full marker search and the line parser say,
        /// whether or not it starts with the TIMELINE marker: one with a marker is kept whole
        /// for the worker, which reads a line that parses as its event (at its own offset),
        /// one that holds the TIMELINE marker and does not as malformed, a timing line, or one
        /// the parser passes over, as `analyze` reads a log's; anything else is nothing.
        #[test]
        fn a_logged_message_is_taken_as_its_markers_and_the_parser_say(
            before in proptest::collection::vec(
                prop_oneof![Just("INFO "), Just("T"), Just(" "), Just("é"), Just("x,")],
                0..3,
            ),
            body in prop_oneof![
                Just("TIMELINE,12,SYNTH_START,porep-1-2,partition=3"),
                Just("TIMELINE,40,GPU_END,porep-1-2,partition=3,worker=1,gpu_ms=9"),
                Just("TIMELINE,7,SYNTH_END,winpost-1-ab,synth_ms=895,kind=winning-post"),
                Just("TIMELINE,oops,GPU_END,x,worker=0"),
                Just("TIMELINE,12"),
                Just("TIMELINE"),
                Just("CUZK_TIMING: gpu_tid=0 mutex_held_ms=9"),
                Just("nothing of ours"),
                Just(""),
            ],
            after in proptest::collection::vec(
                prop_oneof![Just(" CUZK_TIMING:"), Just(","), Just("TIMELINE,"), Just("é")],
                0..2,
            ),
        ) {
            let s = format!("{}{body}{}", before.concat(), after.concat());
            let names = FieldNames::default();
            let mut v = TimelineVisitor::new(&names);
            v.message(&s);
            let (timeline, timing) = markers(&s);
            let Some(line) = v.line else {
                prop_assert!(!timeline && !timing, "{:?}: a marker, and nothing kept", s);
                return Ok(());
            };
            prop_assert_eq!(&line.text, &s);
            prop_assert_eq!(line.timeline, timeline, "{:?}", s);
            if !timeline {
                prop_assert!(timing, "{:?}: kept, and no marker", s);
                return Ok(());
            }
            match (read_timeline_line(&line.text), codec::parse_line(&s)) {
                (Logged::Event(q), Ok(Some(ev))) => {
                    prop_assert_eq!(q.event(), ev, "{:?}", s);
                    prop_assert!(q.own_offset(), "{:?}: the line's own offset", s);
                }
                (Logged::Malformed, Err(_)) | (Logged::Text, Ok(None)) => {}
                (got, parsed) => {
                    prop_assert!(false, "{s:?}: {got:?}, parser {parsed:?}");
                }
            }
        }
    }
}
