#![doc = include_str!("../README.md")]
//!
//! OTLP traces for proofline: one trace per job (sector), built when the job completes or is
//! given up on, and sent to a collector (Jaeger, Tempo, an OpenTelemetry Collector).
//!
//! ```text
//!  engine ─► Update::Partition (kept per job) ─┐
//!           Update::Transition (just before) ─┼─► Update::Job ─► trace ─try_send─► queue ─► exporter thread ─► OTLP
//!                                              │                (bounded: full = dropped, counted)
//! ```
//!
//! A trace: a root span for the job (its totals, cold start and transition numbers as
//! attributes), a `previous sector` child carrying the link to the root of the job before it
//! on the GPU (a link on the root itself reads in Jaeger as a missing parent), a span per
//! partition, and
//! under each the stages `synthesis`, `queue`, `lock_wait` and `gpu` with their real start and
//! end (the run's epoch + the TIMELINE offset). Trace ids come from
//! [`proofline_core::ids::trace_id`], the ids of the Prometheus exemplars; span ids are derived
//! from the trace id too, so replaying a log sends the very traces the live layer sent.
//!
//! A job that finishes before the job ahead of it on the GPU is sent before their transition
//! is known: the link then goes the other way, from the earlier job's root (sent later) to
//! its root, as a `next_sector` link (on a `next sector` child of its root) carrying the
//! transition's numbers. When both were sent
//! already (two jobs overtook a third), the link is counted in
//! [`proofline_core::sink::ExportTotals::links_unplaced`].
//!
//! The exporter runs on its own thread: a collector that is down, slow or hanging costs the
//! prover nothing; traces that do not fit are dropped and counted
//! ([`proofline_core::sink::ExportCounters`]), and [`OtlpHandle::shutdown`] returns within its timeout, saying what
//! was not delivered.

#![warn(missing_docs)]

//! | module | holds |
//! |---|---|
//! | `config` | [`OtlpConfig`], [`Transport`], the `OTEL_*` variables |
//! | `endpoint` | the collector's address checked, and probed ([`Probe`]) |
//! | `trace` | [`TraceBuilder`]: job records into spans |
//! | `transport` | the OTLP/HTTP and OTLP/gRPC client, retries, partial success |
//! | `export` | the exporter thread, [`start`] |
//! | `diagnose` | failures classified by type ([`FailureKind`]) |
//! | `sink` | [`OtlpSink`] and [`OtlpHandle`] |
//! | `tls` | rustls for `https://` endpoints (the `tls` feature) |

mod config;
mod diagnose;
mod endpoint;
mod error;
mod export;
mod sink;
mod tls;
mod trace;
mod transport;

pub use config::{
    DEFAULT_EXPORT_TIMEOUT, DEFAULT_GRPC_ENDPOINT, DEFAULT_HTTP_ENDPOINT, DEFAULT_QUEUE_CAPACITY,
    DEFAULT_SERVICE_NAME, DEFAULT_SHUTDOWN_TIMEOUT, HTTP_TRACES_PATH, OtlpConfig, Transport,
    check_timeout_env, cleartext_warning, endpoint_from_env, resource, timeout_from_env,
    traces_url,
};
pub use diagnose::{ExportFailure, FailureKind};
pub use endpoint::{Found, Probe};
pub use error::{OtlpError, ShutdownError};
pub use export::start;
pub use sink::{OtlpHandle, OtlpSink};
pub use tls::TlsSettings;
pub use trace::{TraceBuilder, Transitions};

/// A mutex's guard, whether or not a thread panicked holding it (the data here stays valid).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
