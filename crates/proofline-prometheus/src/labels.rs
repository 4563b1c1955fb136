//! Label sets, label-value escaping, and the cardinality cap.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use proofline_core::report::{Boundary, JobStatus, Stage};

/// Escapes a label value for the text formats (`\`, `"`, newline), which prometheus-client
/// leaves to its caller.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A label value of a closed set, as the metrics spell it.
pub(crate) trait Named: Copy + std::fmt::Debug + std::hash::Hash + Eq {
    fn name(self) -> &'static str;
}

impl Named for Stage {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for Boundary {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for JobStatus {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// Why the metrics endpoint refused a connection or a request.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A failed TLS handshake.
    TlsHandshake,
    /// No or wrong user and password.
    #[cfg_attr(not(feature = "web-config"), allow(dead_code))]
    Unauthorized,
    /// Two password checks were running.
    #[cfg_attr(not(feature = "web-config"), allow(dead_code))]
    TooManyChecks,
}

impl Refused {
    pub(crate) const ALL: [Refused; 3] = [
        Refused::TlsHandshake,
        Refused::Unauthorized,
        Refused::TooManyChecks,
    ];
}

impl Named for Refused {
    fn name(self) -> &'static str {
        match self {
            Refused::TlsHandshake => "tls_handshake",
            Refused::Unauthorized => "unauthorized",
            Refused::TooManyChecks => "too_many_checks",
        }
    }
}

/// The labels whose values the cardinality cap folds.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Folded {
    Gpu,
    ProofKind,
}

impl Named for Folded {
    fn name(self) -> &'static str {
        match self {
            Folded::Gpu => "gpu",
            Folded::ProofKind => "proof_kind",
        }
    }
}

/// A closed-set label value: a type, encoded by its name.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) struct V<T>(pub(crate) T);

impl<T: Named> EncodeLabelValue for V<T> {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        encoder.write_str(self.0.name())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GpuL {
    pub(crate) gpu: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GapL {
    pub(crate) gpu: String,
    pub(crate) boundary: V<Boundary>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BoundaryL {
    pub(crate) boundary: V<Boundary>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindL {
    pub(crate) proof_kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StageL {
    pub(crate) stage: V<Stage>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct IncompleteL {
    pub(crate) reason: V<JobStatus>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RefusedL {
    pub(crate) reason: V<Refused>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SourceL {
    pub(crate) source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LabelL {
    pub(crate) label: V<Folded>,
}

/// The exemplar's label set: the sector's trace id.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceL {
    pub(crate) trace_id: String,
}

pub(crate) type ExHist<L> = Family<L, HistogramWithExemplars<TraceL>, crate::metrics::HistOf>;
pub(crate) type PlainHist<L> = Family<L, Histogram, crate::metrics::HistOf>;
pub(crate) type FloatCounter = Counter<f64, AtomicU64>;
pub(crate) type FloatGauge = Gauge<f64, AtomicU64>;

/// Caps the distinct values of a label.
#[derive(Debug)]
pub(crate) struct Cap {
    pub(crate) seen: HashMap<String, String>,
    pub(crate) max: usize,
    pub(crate) name: Folded,
}

impl Cap {
    pub(crate) fn new(name: Folded, max: usize) -> Self {
        Cap {
            seen: HashMap::new(),
            max,
            name,
        }
    }

    pub(crate) fn get(&mut self, raw: &str, folded: &Family<LabelL, Counter>) -> String {
        if let Some(v) = self.seen.get(raw) {
            if v == "other" {
                folded
                    .get_or_create(&LabelL {
                        label: V(self.name),
                    })
                    .inc();
            }
            return v.clone();
        }
        let v = if self.seen.len() < self.max {
            escape_label_value(raw)
        } else {
            "other".to_owned()
        };
        if v == "other" {
            folded
                .get_or_create(&LabelL {
                    label: V(self.name),
                })
                .inc();
        }
        self.seen.insert(raw.to_owned(), v.clone());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metrics;

    #[test]
    fn label_values_are_escaped_and_capped() {
        assert_eq!(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let m = Metrics::new();
        let mut cap = Cap::new(Folded::ProofKind, 2);
        assert_eq!(cap.get("x", &m.folded), "x");
        assert_eq!(cap.get("y\"", &m.folded), "y\\\"");
        assert_eq!(cap.get("z", &m.folded), "other");
        assert_eq!(cap.get("x", &m.folded), "x");
        assert_eq!(
            m.folded
                .get_or_create(&LabelL {
                    label: V(Folded::ProofKind)
                })
                .get(),
            1
        );
    }
}
