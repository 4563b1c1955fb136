//! Which span edges become which TIMELINE events, and which callsites the layer wants.

use proofline_core::EventKind;
use tracing::Metadata;

use super::callsites::*;
use crate::fields::FieldNames;

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

    /// cuzk's span names:
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
pub(crate) type RuleMask = [u8; 3];

/// Settings the layer and its filter share (read-only after `build`).
#[derive(Debug)]
pub(crate) struct LayerConfig {
    pub rules: Vec<SpanRule>,
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

    /// What the layer needs to know of a callsite it wants, worked out once.
    pub(crate) fn info(&self, meta: &Metadata<'_>) -> CallsiteInfo {
        CallsiteInfo {
            rules: self.rules_for(meta.name()),
            slots: meta
                .fields()
                .iter()
                .map(|f| self.fields.slot(f.name()))
                .collect(),
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
                .any(|f| self.fields.slot(f.name()).is_some())
    }
}

/// The kind a mask holds when it holds exactly one.
pub(crate) fn only_kind(mask: u8) -> Option<EventKind> {
    if mask.count_ones() != 1 {
        return None;
    }
    EventKind::ALL
        .into_iter()
        .find(|k| mask & (1 << k.index()) != 0)
}
