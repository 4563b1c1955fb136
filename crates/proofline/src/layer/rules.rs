//! Which span edges become which TIMELINE events, and which callsites the layer wants.

use proofline_core::EventKind;
use tracing::Metadata;

use crate::fields::{FieldNames, Slots};

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
    pub(crate) const fn index(self) -> usize {
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

    /// The mapping for cuzk's spans as they are (curio `extern/cuzk` at e0294b0f), with no
    /// change to cuzk; see docs/layer.md, "Adopting proofline in cuzk":
    ///
    /// | event | span and edge |
    /// |---|---|
    /// | SYNTH_START | first enter of `synthesize_partition`, `synthesize_snap_deals_partition` and the whole-proof synthesis spans ([`cuzk_whole_proof_spans`]) |
    /// | SYNTH_END (and GPU_QUEUE) | close of that span, unless it recorded an error |
    /// | GPU_PICKUP | creation of `gpu_worker` |
    /// | GPU_START | first enter of `gpu_worker` |
    /// | GPU_END | close of `gpu_worker` |
    ///
    /// cuzk's default (split) GPU path has no span around the GPU work itself: `gpu_worker`
    /// closes once the GPU lock is released and the finalizer is handed the proof, so the
    /// GPU interval these rules give ends before the finalizer's CPU work, where cuzk's
    /// own GPU_END is printed. `gpu_prove` (the synchronous path only) carries no job id
    /// and is not mapped. `monolithic_worker` (pipeline disabled) gives SYNTH_START at its
    /// first enter and GPU_END at its close: its GPU time is reported as not observed.
    pub fn cuzk_defaults() -> Vec<SpanRule> {
        let mut v = Vec::new();
        let synth = ["synthesize_partition", "synthesize_snap_deals_partition"]
            .into_iter()
            .chain(CUZK_WHOLE_PROOF_SPANS.iter().map(|(s, _)| *s));
        for span in synth {
            v.push(SpanRule::new(span, EventKind::SynthStart, Edge::FirstEnter));
            v.push(SpanRule::new(span, EventKind::SynthEnd, Edge::Close));
        }
        v.push(SpanRule::new(
            "gpu_worker",
            EventKind::GpuPickup,
            Edge::Created,
        ));
        v.push(SpanRule::new(
            "gpu_worker",
            EventKind::GpuStart,
            Edge::FirstEnter,
        ));
        v.push(SpanRule::new("gpu_worker", EventKind::GpuEnd, Edge::Close));
        v.push(SpanRule::new(
            "monolithic_worker",
            EventKind::SynthStart,
            Edge::FirstEnter,
        ));
        v.push(SpanRule::new(
            "monolithic_worker",
            EventKind::GpuEnd,
            Edge::Close,
        ));
        v
    }
}

/// cuzk's whole-proof synthesis spans and the proof kind each one synthesizes (the `kind=`
/// cuzk prints on their SYNTH_START). Their events carry no partition, whatever fields the
/// span has (`synthesize_window_post` has a PoSt `partition` field).
const CUZK_WHOLE_PROOF_SPANS: [(&str, &str); 5] = [
    ("synthesize_winning_post", "winning-post"),
    ("synthesize_window_post", "window-post"),
    ("synthesize_porep_c2_batch", "porep-c2"),
    ("synthesize_porep_c2_multi", "porep-c2"),
    ("synthesize_snap_deals", "snap-update"),
];

/// cuzk's whole-proof spans: the synthesis spans above, each with its proof kind, and
/// `monolithic_worker` (whose `proof_kind` field names its kind).
pub fn cuzk_whole_proof_spans() -> Vec<(String, Option<String>)> {
    CUZK_WHOLE_PROOF_SPANS
        .iter()
        .map(|(s, k)| ((*s).to_owned(), Some((*k).to_owned())))
        .chain([("monolithic_worker".to_owned(), None)])
        .collect()
}

/// Events per edge, one bit per [`EventKind`].
pub(crate) type RuleMask = [u8; 3];

/// What the layer worked out once for a callsite it wants, so that a span's creation
/// compares no names: its rules, and which proofline field each of its fields is (by field
/// index).
#[derive(Debug)]
pub(crate) struct CallsiteInfo {
    pub(crate) rules: RuleMask,
    /// A whole-proof span (and the kind it synthesizes, if known).
    pub(crate) whole: Option<Option<std::sync::Arc<crate::fields::Name>>>,
    pub(crate) slots: Box<[Slots]>,
    /// The callsite declares a field named `error` (worked out once, not per span).
    pub(crate) error_field: bool,
}

/// Settings the layer and its filter share (read-only after `build`).
#[derive(Debug)]
pub(crate) struct LayerConfig {
    pub rules: Vec<SpanRule>,
    /// Whole-proof spans: their events carry no partition; the kind, when given, is the
    /// proof kind of their SYNTH_START unless the span records one.
    pub whole: Vec<(String, Option<String>)>,
    pub fields: FieldNames,
    pub event_target: String,
    pub gpu_queue_on_synth_end: bool,
}

impl LayerConfig {
    pub(crate) fn rules_for(&self, name: &str) -> RuleMask {
        let mut m = [0u8; 3];
        for r in &self.rules {
            if r.span == name {
                m[r.edge.index()] |= 1 << r.event.index();
            }
        }
        m
    }

    /// Whether spans of this name are whole-proof, and the kind they synthesize.
    pub(crate) fn whole_for(
        &self,
        name: &str,
    ) -> Option<Option<std::sync::Arc<crate::fields::Name>>> {
        self.whole
            .iter()
            .find(|(s, _)| s == name)
            .map(|(_, k)| k.as_deref().map(crate::fields::intern))
    }

    /// What the layer needs to know of a callsite it wants, worked out once.
    pub(crate) fn info(&self, meta: &Metadata<'_>) -> CallsiteInfo {
        CallsiteInfo {
            rules: self.rules_for(meta.name()),
            whole: self.whole_for(meta.name()),
            slots: meta
                .fields()
                .iter()
                .map(|f| self.fields.slots(f.name()))
                .collect(),
            error_field: meta.fields().field("error").is_some(),
        }
    }

    pub(crate) fn interesting(&self, meta: &Metadata<'_>) -> bool {
        if meta.is_event() {
            return meta.target() == self.event_target;
        }
        self.rules.iter().any(|r| r.span == meta.name())
            || meta
                .fields()
                .iter()
                .any(|f| !self.fields.slots(f.name()).is_empty())
    }
}

/// The kind a mask holds when it holds exactly one.
pub(crate) fn only_kind(mask: u8) -> Option<EventKind> {
    if !mask.is_power_of_two() {
        return None;
    }
    // (by its bit, not a walk through the kinds: a span asks four or five times)
    EventKind::ALL.get(mask.trailing_zeros() as usize).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mask of one kind gives it; none, two or a bit past the kinds give none.
    #[test]
    fn only_kind_is_the_single_kind_of_a_mask() {
        for kind in EventKind::ALL {
            assert_eq!(only_kind(1 << kind.index()), Some(kind));
        }
        assert_eq!(only_kind(0), None);
        assert_eq!(only_kind(0b11), None);
        assert_eq!(only_kind(1 << EventKind::ALL.len()), None);
        assert_eq!(only_kind(1 << 7), None);
    }
}
