//! Label sets, label-value escaping, and the cardinality cap.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GpuL {
    pub(crate) gpu: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GapL {
    pub(crate) gpu: String,
    pub(crate) boundary: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BoundaryL {
    pub(crate) boundary: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindL {
    pub(crate) proof_kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StageL {
    pub(crate) stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonL {
    pub(crate) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SourceL {
    pub(crate) source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LabelL {
    pub(crate) label: String,
}

/// The exemplar's label set: the sector's trace id.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceL {
    pub(crate) trace_id: String,
}

pub(crate) type ExHist<L> =
    Family<L, HistogramWithExemplars<TraceL>, fn() -> HistogramWithExemplars<TraceL>>;
pub(crate) type PlainHist<L> = Family<L, Histogram, fn() -> Histogram>;
pub(crate) type FloatCounter = Counter<f64, AtomicU64>;
pub(crate) type FloatGauge = Gauge<f64, AtomicU64>;

/// Caps the distinct values of a label.
#[derive(Debug)]
pub(crate) struct Cap {
    pub(crate) seen: HashMap<String, String>,
    pub(crate) max: usize,
    pub(crate) name: &'static str,
}

impl Cap {
    pub(crate) fn new(name: &'static str, max: usize) -> Self {
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
                        label: self.name.to_owned(),
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
                    label: self.name.to_owned(),
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
        let mut cap = Cap::new("proof_kind", 2);
        assert_eq!(cap.get("x", &m.folded), "x");
        assert_eq!(cap.get("y\"", &m.folded), "y\\\"");
        assert_eq!(cap.get("z", &m.folded), "other");
        assert_eq!(cap.get("x", &m.folded), "x");
        assert_eq!(
            m.folded
                .get_or_create(&LabelL {
                    label: "proof_kind".into()
                })
                .get(),
            1
        );
    }
}
