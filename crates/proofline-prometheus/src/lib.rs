#![doc = include_str!("../README.md")]
//!
//! Prometheus metrics for proofline: a sink of engine updates that keeps the metric set in a
//! `prometheus-client` registry, an HTTP endpoint that serves it, and [`Metrics::render`] for
//! provers that serve metrics their own way.
//!
//! ```text
//!  engine ─► Update / tick ─► PrometheusSink ─► registry (atomics) ◄─ GET /metrics: encode only
//! ```
//!
//! The event path updates the registry; a scrape only encodes. Labels are bounded: never a
//! job id; GPUs and proof kinds beyond a cap fold into `other` (counted in
//! `proofline_label_values_folded_total`). Gap, lead and sector histograms carry exemplars
//! with the sector's trace id ([`proofline_core::ids::trace_id`]), the same id the OTLP
//! exporter gives the sector's trace.

#![warn(missing_docs)]

mod exports;
mod formatting;
mod labels;
mod metrics;
mod server;
mod sink;
#[cfg(feature = "web-config")]
mod web;

pub use labels::{TraceL, escape_label_value};
pub use metrics::{Buckets, BucketsError, MAX_BUCKETS, Metrics};
pub use server::{
    DEFAULT_ADDR, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    MetricsServer, ServeError, ServeOptions, serve, serve_with,
};
pub use sink::PrometheusSink;
#[cfg(feature = "web-config")]
pub use web::{ClientAuth, WebConfig, WebConfigError};

/// At most this many distinct `gpu` label values; more fold into `other`.
pub const MAX_GPUS: usize = 64;
/// At most this many distinct `proof_kind` label values; more fold into `other`.
pub const MAX_PROOF_KINDS: usize = 16;
