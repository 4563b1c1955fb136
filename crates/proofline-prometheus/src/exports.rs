//! The OTLP exporter's counters, read when `/metrics` is scraped: a prometheus-client
//! [`Collector`] over the run's [`Exports`], which the exporter registers its counters in
//! (`UpdateSink::start_run`). Nothing copies them on the event path.

use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use proofline_core::Nouns;
use proofline_core::sink::{ExportTotals, Exports};

/// Which figure of the totals a counter publishes.
type Figure = fn(&ExportTotals) -> u64;

/// The counters it publishes: name (without `_total`), help, and the figure.
const COUNTERS: [(&str, &str, Figure); 4] = [
    (
        "proofline_otlp_traces_dropped",
        "{Job} traces dropped because the OTLP export queue was full.",
        |t| t.traces_dropped,
    ),
    (
        "proofline_otlp_spans_exported",
        "Spans the OTLP collector accepted.",
        |t| t.spans_exported,
    ),
    (
        "proofline_otlp_spans_failed",
        "Spans whose OTLP export failed (collector down, refused, timed out) or that the collector rejected (partial success).",
        |t| t.spans_failed,
    ),
    (
        "proofline_otlp_links_unplaced",
        "{Job}-to-{job} links no trace could carry: both {jobs}' traces were sent before their transition was known.",
        |t| t.links_unplaced,
    ),
];

/// Publishes the exporters' counters of the run it was given (zeros before, or without an
/// exporter).
#[derive(Debug)]
pub(crate) struct ExportCollector {
    exports: Mutex<Option<Arc<Exports>>>,
    /// The counters' HELP texts, in the prover's words.
    helps: Vec<String>,
}

impl ExportCollector {
    /// Zeros until [`ExportCollector::follow`]; HELP texts in `nouns`.
    pub(crate) fn new(nouns: &Nouns) -> Self {
        ExportCollector {
            exports: Mutex::new(None),
            helps: COUNTERS.iter().map(|(_, h, _)| nouns.fill(h)).collect(),
        }
    }

    /// Reads the counters of `exports` from now on.
    pub(crate) fn follow(&self, exports: &Arc<Exports>) {
        *self
            .exports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(exports.clone());
    }
}

impl Collector for ExportCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let totals = self
            .exports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|e| e.totals())
            .unwrap_or_default();
        for ((name, _, value), help) in COUNTERS.iter().zip(&self.helps) {
            let c = ConstCounter::new(value(&totals));
            let m = encoder.encode_descriptor(name, help, None, c.metric_type())?;
            c.encode(m)?;
        }
        Ok(())
    }
}
