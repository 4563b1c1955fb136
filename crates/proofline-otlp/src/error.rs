//! The errors of starting and stopping the exporter.

use std::time::Duration;

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The OTLP exporter could not be built (a bad endpoint or header in the `OTEL_*` variables).
    #[error(
        "cannot build the OTLP exporter: {0} (check OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables)"
    )]
    Build(String),
    /// The exporter thread could not start.
    #[error("cannot start the OTLP exporter thread: {0}")]
    Thread(std::io::Error),
}

/// Why a shutdown did not deliver everything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the OTLP exporter did not finish within {waited:?}: {} of {queued} queued traces not delivered ({exported} spans exported, {failed} spans failed, {dropped} traces dropped before the queue)", queued.saturating_sub(*delivered)
)]
pub struct ShutdownError {
    /// How long we waited.
    pub waited: Duration,
    /// Traces handed to the queue.
    pub queued: u64,
    /// Spans the collector accepted.
    pub exported: u64,
    /// Spans whose export failed.
    pub failed: u64,
    /// Traces dropped, queue full.
    pub dropped: u64,
    /// Traces the collector accepted.
    pub delivered: u64,
}
