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
//! [`ExportCounters::links_unplaced`].
//!
//! The exporter runs on its own thread: a collector that is down, slow or hanging costs the
//! prover nothing; traces that do not fit are dropped and counted
//! ([`ExportCounters`]), and [`OtlpHandle::shutdown`] returns within its timeout, saying what
//! was not delivered.

#![warn(missing_docs)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use proofline_core::ids::trace_id;
use proofline_core::report::{JobRecord, JobStatus, PartitionRecord, TransitionRecord};
use proofline_core::sink::{ExportCounters, SinkError, Update, UpdateSink};

mod tls;
pub use tls::TlsSettings;

/// Traces the export queue holds before new ones are dropped.
pub const DEFAULT_QUEUE_CAPACITY: usize = 256;
/// How long `shutdown` waits for the queue to drain by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// An export's timeout when neither the configuration nor the variables say.
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// `service.name` when `OTEL_SERVICE_NAME` does not say.
pub const DEFAULT_SERVICE_NAME: &str = "cuzk";

/// How traces travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// OTLP/HTTP with protobuf bodies (default; `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`).
    #[default]
    HttpProtobuf,
    /// OTLP/gRPC (the `grpc` feature).
    #[cfg(feature = "grpc")]
    Grpc,
}

impl Transport {
    /// The transport an `OTEL_EXPORTER_OTLP_PROTOCOL` value names: `http/protobuf`, or
    /// `grpc` (with the `grpc` feature).
    pub fn parse(value: &str) -> Result<Transport, OtlpError> {
        match value.trim() {
            "http/protobuf" => Ok(Transport::HttpProtobuf),
            #[cfg(feature = "grpc")]
            "grpc" => Ok(Transport::Grpc),
            #[cfg(not(feature = "grpc"))]
            "grpc" => Err(OtlpError::Build(
                "protocol `grpc`: this build has no gRPC (proofline-otlp's `grpc` feature); use http/protobuf".into(),
            )),
            "http/json" => Err(OtlpError::Build(
                "protocol `http/json` is not supported; use http/protobuf or grpc".into(),
            )),
            other => Err(OtlpError::Build(format!(
                "protocol `{other}`: expected http/protobuf or grpc"
            ))),
        }
    }

    /// The transport of `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`, else HTTP/protobuf.
    pub fn from_env() -> Result<Transport, OtlpError> {
        match otel_var("PROTOCOL") {
            None => Ok(Transport::HttpProtobuf),
            Some((var, value)) => Transport::parse(&value).map_err(|e| match e {
                OtlpError::Build(m) => OtlpError::Build(format!("{var}: {m}")),
                other => other,
            }),
        }
    }
}

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
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
    "the OTLP exporter did not finish within {waited:?}: {queued} traces queued, {exported} spans exported, {failed} spans failed, {dropped} traces dropped; the rest was not delivered"
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
}

/// Settings of the OTLP exporter. Unset endpoint, headers, timeout and resource come from
/// the standard `OTEL_*` variables.
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// The run key of trace ids ([`proofline_core::ids::run_key`]).
    pub run_key: String,
    /// Wall-clock instant (Unix ms) that TIMELINE offsets count from.
    pub epoch_unix_ms: u64,
    /// Transport.
    pub transport: Transport,
    /// Collector endpoint; `None`: the `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` variables.
    pub endpoint: Option<String>,
    /// Export timeout; `None`: `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`, else 10 s.
    pub timeout: Option<Duration>,
    /// Traces the queue holds.
    pub queue_capacity: usize,
    /// `service.name` when `OTEL_SERVICE_NAME`/`OTEL_RESOURCE_ATTRIBUTES` do not set one.
    pub default_service_name: String,
    /// Wait for room in the queue instead of dropping (for replays, never for a live prover).
    pub block_when_full: bool,
    /// With `block_when_full`, wait for room until this instant at most: past it, traces
    /// are dropped and counted (a replay's deadline). `None`: no limit.
    pub block_until: Option<Instant>,
    /// TLS trust and client identity for `https://` endpoints; unset fields come from the
    /// `OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE`, `..._CLIENT_CERTIFICATE` and
    /// `..._CLIENT_KEY` variables. Headers (an API key) come from
    /// `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`.
    pub tls: TlsSettings,
}

impl Default for OtlpConfig {
    /// The defaults, for a sink whose run is given later ([`UpdateSink::start_run`]: the
    /// layer's `build()` gives its own).
    fn default() -> Self {
        OtlpConfig::new(String::new(), 0)
    }
}

impl OtlpConfig {
    /// Defaults for a run.
    pub fn new(run_key: impl Into<String>, epoch_unix_ms: u64) -> Self {
        OtlpConfig {
            run_key: run_key.into(),
            epoch_unix_ms,
            transport: Transport::default(),
            endpoint: None,
            timeout: None,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            default_service_name: DEFAULT_SERVICE_NAME.to_owned(),
            block_when_full: false,
            block_until: None,
            tls: TlsSettings::default(),
        }
    }
}

/// The endpoint the standard variables name for traces, if any
/// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`).
pub fn endpoint_from_env() -> Option<String> {
    otel_var("ENDPOINT").map(|(_, v)| v)
}

/// The traces variable `OTEL_EXPORTER_OTLP_TRACES_<suffix>`, else the general
/// `OTEL_EXPORTER_OTLP_<suffix>`: the one set (and not blank), and its trimmed value.
pub(crate) fn otel_var(suffix: &str) -> Option<(String, String)> {
    [
        format!("OTEL_EXPORTER_OTLP_TRACES_{suffix}"),
        format!("OTEL_EXPORTER_OTLP_{suffix}"),
    ]
    .into_iter()
    .find_map(|var| {
        let value = std::env::var(&var).ok()?.trim().to_owned();
        (!value.is_empty()).then_some((var, value))
    })
}

/// A warning when TLS variables are set but `endpoint` (or, without it, the variables' own)
/// is plain `http://`: the operator meant TLS, and the traces (and any API-key header) would
/// go in clear. `None` when there is nothing to say.
pub fn cleartext_warning(endpoint: Option<&str>) -> Option<String> {
    let url = endpoint.map(str::to_owned).or_else(endpoint_from_env)?;
    if !url.trim().to_ascii_lowercase().starts_with("http://") {
        return None;
    }
    let set: Vec<String> = ["CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"]
        .into_iter()
        .filter_map(|suffix| otel_var(suffix).map(|(var, _)| var))
        .collect();
    (!set.is_empty()).then(|| {
        format!(
            "{} set, but the endpoint {url} is plain HTTP: traces and headers go in clear and the certificates are not used; use https://",
            set.join(" and ")
        )
    })
}

/// The resource: the `OTEL_*` detectors, with `service.name` defaulting to `cuzk`.
pub fn resource(default_service_name: &str) -> Resource {
    let env_sets_name = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|s| !s.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|s| s.contains("service.name="));
    let b = Resource::builder();
    if env_sets_name {
        b.build()
    } else {
        b.with_service_name(default_service_name.to_owned()).build()
    }
}

/// Sends `trace`, waiting for room until `until` at most; false when it was not sent.
fn send_until(tx: &SyncSender<Trace>, mut trace: Trace, until: Option<Instant>) -> bool {
    let Some(until) = until else {
        return tx.send(trace).is_ok();
    };
    let mut pause = Duration::from_millis(1);
    loop {
        match tx.try_send(trace) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(t)) => trace = t,
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        std::thread::sleep(pause.min(until - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// One kind of export failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFailure {
    /// What kind: `HTTP 500`, `connection refused`, `cannot resolve host`, ...
    pub kind: String,
    /// Traces that failed so.
    pub traces: u64,
    /// Their spans.
    pub spans: u64,
    /// The first failure of the kind, in words.
    pub first: String,
}

/// Export failures by kind.
#[derive(Debug, Default)]
struct Failures {
    kinds: Mutex<Vec<ExportFailure>>,
    /// The last probe and when: a failing collector is probed every few seconds at most.
    probed: Mutex<Option<(Instant, String)>>,
}

impl Failures {
    fn record(&self, message: &str, spans: u64, endpoint: &Endpoint) {
        // the exporter reports a transport failure only as "network error": find which
        let network = message.contains("network error") || message.contains("transport error");
        let (kind, first) = if let Some(code) = message
            .rsplit_once("status code: ")
            .and_then(|(_, c)| c.trim().parse::<u16>().ok())
        {
            let hint = if code == 401 || code == 403 {
                ": it did not accept the request's credentials (the headers of OTEL_EXPORTER_OTLP_HEADERS)"
            } else {
                ""
            };
            (
                format!("HTTP {code}"),
                format!("the collector answered HTTP {code}{hint}"),
            )
        } else if let Some(code) = (!network)
            .then(|| message.split_once("gRPC code: "))
            .flatten()
            .map(|(_, rest)| rest.split([':', ' ']).next().unwrap_or(rest))
        {
            let hint = if code == "Unauthenticated" || code == "PermissionDenied" {
                ": it did not accept the request's credentials (the headers of OTEL_EXPORTER_OTLP_HEADERS)"
            } else {
                ""
            };
            (
                format!("gRPC {code}"),
                format!("the collector answered gRPC status {code}{hint}: {message}"),
            )
        } else if network {
            let mut probed = lock(&self.probed);
            let found = match &*probed {
                Some((at, found)) if at.elapsed() < Duration::from_secs(5) => found.clone(),
                _ => {
                    let found = endpoint.probe(Duration::from_secs(2));
                    *probed = Some((Instant::now(), found.clone()));
                    found
                }
            };
            (kind_of_probe(&found).to_owned(), found)
        } else {
            ("export error".to_owned(), message.to_owned())
        };
        let mut kinds = lock(&self.kinds);
        match kinds.iter_mut().find(|k| k.kind == kind) {
            Some(k) => {
                k.traces += 1;
                k.spans += spans;
            }
            None => kinds.push(ExportFailure {
                kind,
                traces: 1,
                spans,
                first,
            }),
        }
    }
}

fn kind_of_probe(found: &str) -> &'static str {
    if found.starts_with("TLS:") {
        if found.contains("is not trusted") {
            "TLS: untrusted certificate"
        } else if found.contains("refused the handshake") {
            "TLS: handshake refused"
        } else if found.contains("does not speak TLS") || found.contains("no TLS answer") {
            "TLS: not a TLS endpoint"
        } else if found.contains("HTTP/2") {
            "TLS: not a gRPC endpoint"
        } else if found.contains("not valid for that host") {
            "TLS: certificate for another name"
        } else {
            "TLS error"
        }
    } else if found.contains("cannot resolve") {
        "cannot resolve host"
    } else if found.contains("refused") {
        "connection refused"
    } else if found.contains("no answer to connect") {
        "connect timed out"
    } else if found.contains("accepts connections") {
        "no answer from the collector"
    } else {
        "network error"
    }
}

/// The collector's address, as far as a probe needs it.
#[derive(Debug, Clone)]
struct Endpoint {
    /// As configured or from the environment (for messages).
    url: String,
    /// `host:port`.
    authority: String,
    /// The host, as its certificate names it.
    #[cfg(feature = "tls")]
    host: String,
    /// For `https://`: the TLS configuration the probe shakes hands with.
    #[cfg(feature = "tls")]
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The files that configuration was built from (gRPC builds its own from them).
    #[cfg(feature = "tls")]
    files: Option<tls::Files>,
}

impl Endpoint {
    /// Resolves and connects (without sending anything), and says what it found.
    fn probe(&self, timeout: Duration) -> String {
        use std::net::{TcpStream, ToSocketAddrs};
        // one budget for all of it: connect, and with TLS the handshake and its answer
        #[cfg(feature = "tls")]
        let until = Instant::now() + timeout;
        let addrs: Vec<_> = match self.authority.to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                return format!("cannot resolve host of {} ({e})", self.url);
            }
        };
        let Some(addr) = addrs.first() else {
            return format!("cannot resolve host of {} (no address)", self.url);
        };
        match TcpStream::connect_timeout(addr, timeout) {
            #[cfg(feature = "tls")]
            Ok(tcp) if self.tls.is_some() => {
                let config = self.tls.clone().expect("checked");
                let trust = self
                    .files
                    .as_ref()
                    .map(tls::Files::trust)
                    .unwrap_or_default();
                match tls::handshake(tcp, &self.host, config, (&self.url, &trust), until) {
                    Err(why) => why,
                    Ok(()) => format!(
                        "the collector at {} ({addr}) completes a TLS handshake but did not answer the export in time",
                        self.url
                    ),
                }
            }
            Ok(_) => format!(
                "the collector at {} ({addr}) accepts connections but did not answer the export in time",
                self.url
            ),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                format!(
                    "connection refused by {addr} ({}): is the collector up there?",
                    self.url
                )
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                format!(
                    "no answer to connect from {addr} within {timeout:?} ({})",
                    self.url
                )
            }
            Err(e) => format!("cannot connect to {addr} ({}): {e}", self.url),
        }
    }
}

/// The endpoint the exporter will use, checked: a scheme it can speak, a host.
fn check_endpoint(cfg: &OtlpConfig) -> Result<Endpoint, OtlpError> {
    let url = cfg
        .endpoint
        .clone()
        .or_else(endpoint_from_env)
        .unwrap_or_else(|| match cfg.transport {
            Transport::HttpProtobuf => "http://localhost:4318".to_owned(),
            #[cfg(feature = "grpc")]
            Transport::Grpc => "http://localhost:4317".to_owned(),
        });
    let no_scheme = || {
        OtlpError::Build(format!(
            "endpoint `{url}` has no scheme: use http://HOST:PORT or https://HOST:PORT"
        ))
    };
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .ok_or_else(no_scheme)?;
    if scheme != "http" && scheme != "https" {
        return Err(OtlpError::Build(format!(
            "endpoint `{url}`: unsupported scheme `{scheme}`; use http://HOST:PORT or https://HOST:PORT"
        )));
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e| OtlpError::Build(format!("endpoint `{url}` is not a URL: {e}")))?;
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| OtlpError::Build(format!("endpoint `{url}` names no host")))?;
    check_headers()?;
    let https = scheme == "https";
    let authority = format!(
        "{host}:{}",
        uri.port_u16().unwrap_or(if https { 443 } else { 80 })
    );
    let needs = match cfg.transport {
        Transport::HttpProtobuf => (!cfg!(feature = "tls")).then_some("tls"),
        #[cfg(feature = "grpc")]
        Transport::Grpc => (!cfg!(feature = "grpc-tls")).then_some("grpc-tls"),
    };
    if let (true, Some(feature)) = (https, needs) {
        return Err(OtlpError::Build(format!(
            "endpoint `{url}`: https needs proofline-otlp's `{feature}` feature, which this build has not (the proofline command has it)"
        )));
    }
    #[cfg(feature = "tls")]
    let tls = if https {
        let alpn: &[&[u8]] = match cfg.transport {
            Transport::HttpProtobuf => &[b"http/1.1"],
            #[cfg(feature = "grpc")]
            Transport::Grpc => &[b"h2"],
        };
        let files = tls::Files::read(&cfg.tls.resolve())?;
        Some((Arc::new(tls::client_config(&files, alpn)?), files))
    } else {
        None
    };
    Ok(Endpoint {
        url,
        authority,
        #[cfg(feature = "tls")]
        host: tls::host_for_name(host).to_owned(),
        #[cfg(feature = "tls")]
        files: tls.as_ref().map(|(_, f)| f.clone()),
        #[cfg(feature = "tls")]
        tls: tls.map(|(c, _)| c),
    })
}

/// The headers variable, checked for its form (`key=value,key2=value2`): the exporter drops
/// an item without `=` silently, and an API key that is not sent reads as a rejected one. The
/// values are never printed.
fn check_headers() -> Result<(), OtlpError> {
    let Some((var, value)) = otel_var("HEADERS") else {
        return Ok(());
    };
    for (i, item) in value.split(',').enumerate() {
        let ok = item.trim().is_empty()
            || item
                .split_once('=')
                .is_some_and(|(k, _)| !k.trim().is_empty());
        if !ok {
            return Err(OtlpError::Build(format!(
                "{var}: item {} is not key=value (the form is key=value,key2=value2; values are not shown here)",
                i + 1
            )));
        }
    }
    Ok(())
}

/// The export timeout `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT`
/// (milliseconds), if either is set.
pub fn timeout_from_env() -> Option<Duration> {
    otel_var("TIMEOUT")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .map(Duration::from_millis)
}

/// The export timeout: the configuration's, else the variables', else 10 s.
fn export_timeout(cfg: &OtlpConfig) -> Duration {
    cfg.timeout
        .or_else(timeout_from_env)
        .unwrap_or(DEFAULT_EXPORT_TIMEOUT)
}

/// A trace: the spans of one job.
type Trace = Vec<SpanData>;

/// A transition's numbers, as the root of the job it leads into carries them (and a
/// `next_sector` link, when that job's trace went out first).
fn push_transition_numbers(attrs: &mut Vec<KeyValue>, t: &TransitionRecord) {
    attrs.push(KeyValue::new("transition.gap_ms", t.gap_ms));
    attrs.push(KeyValue::new("transition.overlap_ms", t.overlap_ms as i64));
    if let Some(h) = t.handoff_ms {
        attrs.push(KeyValue::new("transition.handoff_ms", h));
    }
    if let Some(l) = t.synthesis_lead_ms {
        attrs.push(KeyValue::new("synthesis.lead_ms", l));
    }
}

/// The transitions a job's trace carries.
#[derive(Debug, Clone, Copy, Default)]
pub struct Transitions<'a> {
    /// Into the job, from the job before it on each GPU: the root's `transition.*`
    /// attributes (the first GPU's) and a `previous_sector` link per GPU.
    pub into: &'a [Arc<TransitionRecord>],
    /// Out of the job, into one that finished, and was sent, before the transition was
    /// known: a `next_sector` link each, with the transition's numbers on the link.
    pub out_of: &'a [Arc<TransitionRecord>],
}

/// Builds traces from engine updates and queues them for export.
#[derive(Debug)]
pub struct OtlpSink {
    builder: TraceBuilder,
    /// The export queue; `None` once the sink was shut down (the exporter then finishes).
    tx: Option<SyncSender<Trace>>,
    counters: Arc<ExportCounters>,
    /// The exporter thread, shared with the handle.
    export: Arc<ExportThread>,
    parts: HashMap<(u32, Arc<str>), Vec<Arc<PartitionRecord>>>,
    /// Transitions since the last job record (they all come just before one).
    transitions: Vec<Arc<TransitionRecord>>,
    block_when_full: bool,
    block_until: Option<Instant>,
}

/// Controls the exporter thread: keep it until the sink was shut down (the layer's guard
/// does that), then [`OtlpHandle::shutdown`] for the result. Dropped while its sink is still
/// alive, it leaves the export to the sink's own shutdown. Shutting down either the sink ([`UpdateSink::shutdown`],
/// which the layer's guard does for every sink) or the handle waits for the same export;
/// the first to finish waiting keeps the result for the other.
#[derive(Debug)]
#[must_use = "keep the OtlpHandle until the sink was shut down, then call shutdown() for the result"]
pub struct OtlpHandle {
    export: Arc<ExportThread>,
}

/// The exporter thread and what its shutdown found.
#[derive(Debug)]
struct ExportThread {
    counters: Arc<ExportCounters>,
    /// Why exports failed.
    failures: Arc<Failures>,
    /// When the export in progress began, if one is.
    flight: Arc<Mutex<Option<Instant>>>,
    /// Where traces go (for the diagnosis of a failure).
    endpoint: Endpoint,
    done: Mutex<Receiver<()>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    result: Mutex<Option<Result<(), ShutdownError>>>,
    /// the sink's sender is dropped to close the queue; keep a way to close it if the sink is
    /// still alive (shutdown before the engine finished)
    closer: Arc<Mutex<bool>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ExportThread {
    /// Waits until `deadline` at most for the queue to be exported. The first wait that
    /// sees the export finish keeps the result for later calls. A `last` wait (the handle's)
    /// that times out stops the export and keeps its error; a wait that is not the last (the
    /// sink's, within the layer's deadline) leaves the export running, so that the handle
    /// can still give it more time.
    fn wait(&self, deadline: Instant, last: bool) -> Result<(), ShutdownError> {
        let started = Instant::now();
        loop {
            if let Some(r) = &*lock(&self.result) {
                return r.clone();
            }
            // another waiter may hold the receiver: poll for it, within our own deadline
            if let Ok(done) = self.done.try_lock() {
                let left = deadline.saturating_duration_since(Instant::now());
                match done.recv_timeout(left.min(Duration::from_millis(50))) {
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                        if let Some(t) = lock(&self.thread).take() {
                            let _ = t.join();
                        }
                        *lock(&self.result) = Some(Ok(()));
                        return Ok(());
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                }
            } else {
                std::thread::sleep(Duration::from_millis(5));
            }
            if Instant::now() >= deadline {
                let c = &self.counters;
                let err = ShutdownError {
                    waited: started.elapsed(),
                    queued: c.traces_queued.load(Ordering::Relaxed),
                    exported: c.spans_exported.load(Ordering::Relaxed),
                    failed: c.spans_failed.load(Ordering::Relaxed),
                    dropped: c.traces_dropped.load(Ordering::Relaxed),
                };
                if last {
                    // stop exporting what is left; the thread ends when its current export does
                    *lock(&self.closer) = true;
                    *lock(&self.result) = Some(Err(err.clone()));
                }
                return Err(err);
            }
        }
    }

    fn decided(&self) -> bool {
        lock(&self.result).is_some()
    }
}

/// Starts the exporter thread; returns the sink to add to the layer (or any engine) and the
/// handle that shuts the exporter down.
pub fn start(cfg: OtlpConfig) -> Result<(OtlpSink, OtlpHandle), OtlpError> {
    let endpoint = check_endpoint(&cfg)?;
    let endpoint_for_probe = endpoint.clone();
    let mut exporter = build_exporter(&cfg, &endpoint)?;
    let failures = Arc::new(Failures::default());
    let flight: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    exporter.set_resource(&resource(&cfg.default_service_name));
    let counters = Arc::new(ExportCounters::default());
    let (tx, rx) = mpsc::sync_channel::<Trace>(cfg.queue_capacity.max(1));
    let (done_tx, done_rx) = mpsc::channel();
    let c = counters.clone();
    let closer = Arc::new(Mutex::new(false));
    let closed = closer.clone();
    let (failures_t, flight_t) = (failures.clone(), flight.clone());
    let thread = std::thread::Builder::new()
        .name("proofline-otlp".into())
        .spawn(move || {
            let (failures, flight) = (failures_t, flight_t);
            for trace in rx {
                if *closed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                {
                    break;
                }
                let n = trace.len() as u64;
                *lock(&flight) = Some(Instant::now());
                let result = exporter.export_blocking(trace);
                *lock(&flight) = None;
                match result {
                    Ok(()) => {
                        c.spans_exported.fetch_add(n, Ordering::Relaxed);
                        c.traces_exported.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        c.spans_failed.fetch_add(n, Ordering::Relaxed);
                        c.traces_failed.fetch_add(1, Ordering::Relaxed);
                        failures.record(&e.to_string(), n, &endpoint);
                    }
                };
            }
            let _ = exporter.shutdown();
            let _ = done_tx.send(());
        })
        .map_err(OtlpError::Thread)?;
    let export = Arc::new(ExportThread {
        counters: counters.clone(),
        failures,
        flight,
        endpoint: endpoint_for_probe,
        done: Mutex::new(done_rx),
        thread: Mutex::new(Some(thread)),
        result: Mutex::new(None),
        closer,
    });
    let sink = OtlpSink {
        builder: TraceBuilder {
            run_key: cfg.run_key,
            epoch_unix_ms: cfg.epoch_unix_ms,
            gpu_interval_source: None,
        },
        tx: Some(tx),
        counters: counters.clone(),
        export: export.clone(),
        parts: HashMap::new(),
        transitions: Vec::new(),
        block_when_full: cfg.block_when_full,
        block_until: cfg.block_until,
    };
    let handle = OtlpHandle { export };
    Ok((sink, handle))
}

impl OtlpSink {
    /// The exporter's counters (share them with the Prometheus sink).
    pub fn counters(&self) -> Arc<ExportCounters> {
        self.counters.clone()
    }

    /// The trace builder (for tests and replays that want the spans themselves).
    pub fn builder(&self) -> &TraceBuilder {
        &self.builder
    }

    /// Changes the run (for readers that learn the epoch from the first event they read).
    pub fn set_run(&mut self, run_key: impl Into<String>, epoch_unix_ms: u64) {
        self.builder = TraceBuilder {
            run_key: run_key.into(),
            epoch_unix_ms,
            gpu_interval_source: self.builder.gpu_interval_source.take(),
        };
    }
}

impl UpdateSink for OtlpSink {
    fn start_run(&mut self, run: &proofline_core::RunInfo) {
        self.builder.run_key.clone_from(&run.run_key);
        self.builder.epoch_unix_ms = run.epoch_unix_ms;
        self.builder
            .gpu_interval_source
            .clone_from(&run.gpu_interval_source);
    }

    fn export_counters(&self) -> Option<Arc<ExportCounters>> {
        Some(self.counters.clone())
    }

    fn update(&mut self, update: Update) {
        match update {
            Update::Partition(p) => self
                .parts
                .entry((p.run, p.job_id.clone()))
                .or_default()
                .push(p),
            Update::Transition(t) => self.transitions.push(t),
            Update::Job(j) => {
                let parts = self
                    .parts
                    .remove(&(j.run, j.job_id.clone()))
                    .unwrap_or_default();
                let is = |run: u32, job: &Arc<str>, attempt: u32| {
                    (run, job, attempt) == (j.run, &j.job_id, j.attempt)
                };
                let (into, rest): (Vec<_>, Vec<_>) = self
                    .transitions
                    .drain(..)
                    .partition(|t| is(t.run, &t.to_job, t.to_attempt));
                let (out_of, unplaced): (Vec<_>, Vec<_>) = rest
                    .into_iter()
                    .partition(|t| is(t.run, &t.from_job, t.from_attempt));
                self.counters
                    .links_unplaced
                    .fetch_add(unplaced.len() as u64, Ordering::Relaxed);
                let trs = Transitions {
                    into: &into,
                    out_of: &out_of,
                };
                let trace = self.builder.trace(&j, &parts, trs);
                self.counters.traces_queued.fetch_add(1, Ordering::Relaxed);
                let Some(tx) = &self.tx else {
                    // shut down: nothing more is exported
                    self.counters.traces_queued.fetch_sub(1, Ordering::Relaxed);
                    self.counters.traces_dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                if self.block_when_full {
                    if !send_until(tx, trace, self.block_until) {
                        self.counters.traces_queued.fetch_sub(1, Ordering::Relaxed);
                        self.counters.traces_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
                match tx.try_send(trace) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                        self.counters.traces_queued.fetch_sub(1, Ordering::Relaxed);
                        self.counters.traces_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Update::NewRun { .. } => {
                self.parts.clear();
                self.transitions.clear();
            }
            Update::IdleGap(_) | Update::GpuBusy { .. } => {}
        }
    }

    /// Closes the export queue (nothing more is sent) and waits until `deadline` at most for
    /// what it holds to be exported.
    fn shutdown(&mut self, deadline: Instant) -> Result<(), SinkError> {
        self.tx = None;
        self.export.wait(deadline, false).map_err(|e| SinkError {
            sink: "otlp".into(),
            message: e.to_string(),
        })
    }
}

impl OtlpHandle {
    /// The exporter's counters.
    pub fn counters(&self) -> Arc<ExportCounters> {
        self.export.counters.clone()
    }

    /// Why exports failed so far: each kind of failure once, with its counts and its first
    /// message, in the order they first happened.
    pub fn failures(&self) -> Vec<ExportFailure> {
        lock(&self.export.failures.kinds).clone()
    }

    /// How long the export in progress has been waiting for the collector, if one is.
    pub fn in_flight_for(&self) -> Option<Duration> {
        lock(&self.export.flight).map(|t| t.elapsed())
    }

    /// What a connection to the collector finds now (resolved? refused? accepted?): the
    /// cause of a failure the exporter itself reports only as a network error, or of an
    /// export that hangs.
    pub fn probe(&self) -> String {
        self.export.endpoint.probe(Duration::from_secs(2))
    }

    /// Waits, at most `timeout`, for the queue to be exported. Call it after the engine has
    /// finished (the layer's guard shut down, or the replay read to its end) and the sink was
    /// dropped or shut down. Safe to call twice: later calls return the first result (also
    /// when the sink's own shutdown waited first).
    pub fn shutdown(&mut self, timeout: Duration) -> Result<(), ShutdownError> {
        self.export.wait(Instant::now() + timeout, true)
    }
}

impl Drop for OtlpHandle {
    fn drop(&mut self) {
        // the sink (in the layer, or not dropped yet) shuts the export down itself
        let sink_alive = Arc::strong_count(&self.export) > 1;
        if !sink_alive && !self.export.decided() {
            if let Err(e) = self.shutdown(DEFAULT_SHUTDOWN_TIMEOUT) {
                eprintln!("proofline: {e}");
            }
        }
    }
}

/// Turns job records into spans.
#[derive(Debug, Clone)]
pub struct TraceBuilder {
    /// The run key of trace ids.
    pub run_key: String,
    /// Unix ms of TIMELINE offset 0.
    pub epoch_unix_ms: u64,
    /// Where GPU intervals come from when not the prover's own events (span edges): the
    /// `gpu` stage spans carry it as `proofline.gpu_interval_source`.
    pub gpu_interval_source: Option<String>,
}

/// A span id derived from the trace id and a name ([`proofline_core::ids::span_id`]).
fn span_id(trace: &[u8; 16], what: &str) -> SpanId {
    SpanId::from_bytes(proofline_core::ids::span_id(
        &proofline_core::ids::TraceId(*trace),
        what,
    ))
}

impl TraceBuilder {
    fn time(&self, ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.epoch_unix_ms + ms)
    }

    /// A link to the root span of a job's trace.
    fn root_link(&self, (run, job, attempt): (u32, &str, u32), attrs: Vec<KeyValue>) -> Link {
        let context = self.context(
            self.trace_id(run, job, attempt),
            self.root_id(run, job, attempt),
        );
        Link::new(context, attrs, 0)
    }

    fn context(&self, trace: TraceId, span: SpanId) -> SpanContext {
        SpanContext::new(
            trace,
            span,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        trace: TraceId,
        id: SpanId,
        parent: SpanId,
        name: String,
        start: u64,
        end: u64,
        attributes: Vec<KeyValue>,
        links: Vec<Link>,
        status: Status,
    ) -> SpanData {
        SpanData {
            span_context: self.context(trace, id),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Owned(name),
            start_time: self.time(start),
            end_time: self.time(end.max(start)),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: {
                let mut l = SpanLinks::default();
                l.links = links;
                l
            },
            status,
            instrumentation_scope: InstrumentationScope::builder("proofline")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }

    /// The trace id of a job.
    pub fn trace_id(&self, run: u32, job: &str, attempt: u32) -> TraceId {
        TraceId::from_bytes(trace_id(&self.run_key, run, job, attempt).0)
    }

    /// The root span id of a job's trace.
    pub fn root_id(&self, run: u32, job: &str, attempt: u32) -> SpanId {
        span_id(&trace_id(&self.run_key, run, job, attempt).0, "root")
    }

    /// The spans of one job: root, partitions, stages.
    pub fn trace(
        &self,
        job: &JobRecord,
        parts: &[Arc<PartitionRecord>],
        transitions: Transitions<'_>,
    ) -> Trace {
        let raw = trace_id(&self.run_key, job.run, &job.job_id, job.attempt).0;
        let tid = TraceId::from_bytes(raw);
        let root = span_id(&raw, "root");
        let mut spans = Vec::with_capacity(1 + parts.len() * 5);

        let first = parts.iter().flat_map(|p| p.instants()).flatten().min();
        let last = parts.iter().flat_map(|p| p.instants()).flatten().max();
        let start = job.first_synth_start_ms.or(first).unwrap_or(0);
        let end = job
            .last_gpu_end_ms
            .or(last)
            .unwrap_or(start)
            .max(last.unwrap_or(0));

        let kind = job.proof_kind.as_deref().unwrap_or("unknown");
        let mut attrs = vec![
            KeyValue::new("job.id", job.job_id.to_string()),
            KeyValue::new("proof.kind", kind.to_owned()),
            KeyValue::new("job.attempt", i64::from(job.attempt)),
            KeyValue::new("job.run", i64::from(job.run)),
            KeyValue::new("job.status", job.status.as_str()),
            KeyValue::new("job.incomplete", job.status != JobStatus::Complete),
            KeyValue::new("partitions.done", i64::from(job.partitions_done)),
            KeyValue::new("synthesis.total_ms", job.synthesis_total_ms as i64),
            KeyValue::new("gpu.total_ms", job.gpu_total_ms as i64),
        ];
        if let Some(n) = job.partitions_expected {
            attrs.push(KeyValue::new("partitions.expected", i64::from(n)));
        }
        if let Some(w) = job.wall_ms {
            attrs.push(KeyValue::new("wall_ms", w as i64));
        }
        if let Some(c) = job.cold_start_ms {
            attrs.push(KeyValue::new("cold_start_ms", c as i64));
        }
        if job.unobserved_gpu {
            attrs.push(KeyValue::new("gpu.unobserved", true));
        }
        // the transition into this job (the first GPU's, when it ran on several)
        let mut trs: Vec<&Arc<TransitionRecord>> = transitions.into.iter().collect();
        trs.sort_by_key(|t| t.gpu);
        if let Some(t) = trs.first() {
            attrs.push(KeyValue::new("transition.from_job", t.from_job.to_string()));
            attrs.push(KeyValue::new("transition.gpu", i64::from(t.gpu)));
            push_transition_numbers(&mut attrs, t);
        }
        let status = match job.status {
            JobStatus::Complete => Status::Unset,
            other => Status::error(format!("incomplete: {}", other.as_str())),
        };
        // an unknown kind is left out of the name, not spelled `unknown`
        let root_name = match job.proof_kind.as_deref() {
            Some(k) => format!("{k} {}", job.job_id),
            None => job.job_id.to_string(),
        };
        spans.push(self.span(
            tid,
            root,
            SpanId::INVALID,
            root_name,
            start,
            end,
            attrs,
            Vec::new(),
            status,
        ));
        // Sector-to-sector links ride on children of the root: a root whose only reference
        // points into another trace reads, in Jaeger, as a trace with a missing parent
        // ("Incomplete"); a child has its parent and the link besides.
        if let Some(first) = trs.first() {
            let links = trs
                .iter()
                .map(|t| {
                    self.root_link(
                        (t.run, &t.from_job, t.from_attempt),
                        vec![
                            KeyValue::new("link.kind", "previous_sector"),
                            KeyValue::new("gpu", i64::from(t.gpu)),
                        ],
                    )
                })
                .collect();
            let mut a = vec![
                KeyValue::new("transition.from_job", first.from_job.to_string()),
                KeyValue::new("transition.gpu", i64::from(first.gpu)),
            ];
            push_transition_numbers(&mut a, first);
            let (s, e) = (
                first.from_last_gpu_end_ms.min(first.to_first_gpu_start_ms),
                first.from_last_gpu_end_ms.max(first.to_first_gpu_start_ms),
            );
            spans.push(self.span(
                tid,
                span_id(&raw, "previous sector"),
                root,
                "previous sector".to_owned(),
                s,
                e,
                a,
                links,
                Status::Unset,
            ));
        }
        if !transitions.out_of.is_empty() {
            // the jobs after this one, sent before their transitions were known
            let links = transitions
                .out_of
                .iter()
                .map(|t| {
                    let mut a = vec![
                        KeyValue::new("link.kind", "next_sector"),
                        KeyValue::new("gpu", i64::from(t.gpu)),
                    ];
                    push_transition_numbers(&mut a, t);
                    self.root_link((t.run, &t.to_job, t.to_attempt), a)
                })
                .collect();
            spans.push(self.span(
                tid,
                span_id(&raw, "next sector"),
                root,
                "next sector".to_owned(),
                end,
                end,
                Vec::new(),
                links,
                Status::Unset,
            ));
        }

        for p in parts {
            let name = p
                .partition
                .map_or_else(|| "proof".to_owned(), |n| format!("partition {n}"));
            let pid = span_id(&raw, &name);
            let (Some(ps), Some(pe)) = (
                p.instants().into_iter().flatten().min(),
                p.instants().into_iter().flatten().max(),
            ) else {
                continue;
            };
            let mut pattrs = Vec::new();
            if let Some(n) = p.partition {
                pattrs.push(KeyValue::new("partition", i64::from(n)));
            }
            if let Some(w) = p.worker {
                pattrs.push(KeyValue::new("gpu.worker", i64::from(w)));
            }
            if let Some(g) = p.gpu {
                pattrs.push(KeyValue::new("gpu.id", i64::from(g)));
            }
            let done = p.gpu_end_ms.is_some();
            let pstatus = if done {
                Status::Unset
            } else {
                Status::error("unfinished")
            };
            spans.push(self.span(
                tid,
                pid,
                root,
                name.clone(),
                ps,
                pe,
                pattrs.clone(),
                Vec::new(),
                pstatus,
            ));
            let stage = |stage: &str, s: Option<u64>, e: Option<u64>, extra: Vec<KeyValue>| {
                let (Some(s), Some(e)) = (s, e) else {
                    return None;
                };
                let mut a = pattrs.clone();
                a.extend(extra);
                Some(self.span(
                    tid,
                    span_id(&raw, &format!("{name}/{stage}")),
                    pid,
                    stage.to_owned(),
                    s,
                    e,
                    a,
                    Vec::new(),
                    Status::Unset,
                ))
            };
            let synth_extra = p
                .synth_reported_ms
                .map(|v| vec![KeyValue::new("synth_ms.reported", v as i64)])
                .unwrap_or_default();
            let mut gpu_extra = p
                .gpu_reported_ms
                .map(|v| vec![KeyValue::new("gpu_ms.reported", v as i64)])
                .unwrap_or_default();
            if let Some(src) = &self.gpu_interval_source {
                gpu_extra.push(KeyValue::new("proofline.gpu_interval_source", src.clone()));
            }
            spans.extend(
                [
                    stage("synthesis", p.synth_start_ms, p.synth_end_ms, synth_extra),
                    stage(
                        "queue",
                        p.queue_start_ms,
                        p.pickup_ms.or(p.gpu_start_ms),
                        Vec::new(),
                    ),
                    stage("lock_wait", p.pickup_ms, p.gpu_start_ms, Vec::new()),
                    stage("gpu", p.gpu_start_ms, p.gpu_end_ms, gpu_extra),
                ]
                .into_iter()
                .flatten(),
            );
        }
        spans
    }
}

/// The exporter behind one interface, whatever its transport.
enum Exporter {
    Http(opentelemetry_otlp::SpanExporter),
    #[cfg(feature = "grpc")]
    Grpc(opentelemetry_otlp::SpanExporter, tokio::runtime::Runtime),
}

impl Exporter {
    fn set_resource(&mut self, r: &Resource) {
        match self {
            Exporter::Http(e) => e.set_resource(r),
            #[cfg(feature = "grpc")]
            Exporter::Grpc(e, _) => e.set_resource(r),
        }
    }

    fn export_blocking(&self, trace: Trace) -> opentelemetry_sdk::error::OTelSdkResult {
        match self {
            // the blocking reqwest client runs the request inside the future: poll it here
            Exporter::Http(e) => block_on(e.export(trace)),
            #[cfg(feature = "grpc")]
            Exporter::Grpc(e, rt) => rt.block_on(e.export(trace)),
        }
    }

    fn shutdown(&mut self) -> opentelemetry_sdk::error::OTelSdkResult {
        match self {
            Exporter::Http(e) => e.shutdown(),
            #[cfg(feature = "grpc")]
            Exporter::Grpc(e, rt) => {
                let _g = rt.enter();
                e.shutdown()
            }
        }
    }
}

fn build_exporter(cfg: &OtlpConfig, endpoint: &Endpoint) -> Result<Exporter, OtlpError> {
    use opentelemetry_otlp::WithExportConfig;
    let timeout = export_timeout(cfg);
    match cfg.transport {
        Transport::HttpProtobuf => {
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(timeout);
            if let Some(e) = &cfg.endpoint {
                b = b.with_endpoint(e.clone());
            }
            #[cfg(feature = "tls")]
            let tls = match &endpoint.tls {
                Some(c) => (**c).clone(),
                None => tls::unused_config()?,
            };
            #[cfg(not(feature = "tls"))]
            let _ = endpoint;
            // reqwest's blocking client starts its own runtime: build it off any tokio runtime
            let exporter = std::thread::scope(|s| {
                s.spawn(move || {
                    // with TLS, our own client speaking it with our rustls configuration
                    // (reqwest is then built without a crypto provider of its own: it could
                    // not build one itself)
                    #[cfg(feature = "tls")]
                    let b = {
                        use opentelemetry_otlp::WithHttpConfig;
                        let client = reqwest::blocking::Client::builder()
                            .timeout(timeout)
                            .tls_backend_preconfigured(tls)
                            .build()
                            .map_err(|e| OtlpError::Build(format!("the HTTP client: {e}")))?;
                        b.with_http_client(client)
                    };
                    b.build().map_err(|e| OtlpError::Build(e.to_string()))
                })
                .join()
            })
            .map_err(|_| OtlpError::Build("the exporter builder panicked".into()))??;
            Ok(Exporter::Http(exporter))
        }
        #[cfg(feature = "grpc")]
        Transport::Grpc => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| OtlpError::Build(e.to_string()))?;
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_timeout(timeout);
            if let Some(e) = &cfg.endpoint {
                b = b.with_endpoint(e.clone());
            }
            #[cfg(feature = "grpc-tls")]
            if let Some(files) = &endpoint.files {
                use opentelemetry_otlp::WithTonicConfig;
                use tonic::transport::{Certificate, ClientTlsConfig, Identity};
                let mut t = ClientTlsConfig::new().domain_name(endpoint.host.clone());
                t = match &files.ca {
                    Some((_, pem)) => t.ca_certificate(Certificate::from_pem(pem)),
                    None => t.with_native_roots(),
                };
                if let Some(((_, chain), (_, key))) = &files.identity {
                    t = t.identity(Identity::from_pem(chain, key));
                }
                b = b.with_tls_config(t);
            }
            let exporter = {
                let _g = rt.enter();
                b.build().map_err(|e| OtlpError::Build(e.to_string()))?
            };
            Ok(Exporter::Grpc(exporter, rt))
        }
    }
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Exporter")
    }
}

/// Polls a future to completion on this thread, parking between polls.
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park_timeout(Duration::from_millis(50)),
        }
    }
}

pub use proofline_core::ids::unix_ms;

/// Parses an RFC 3339 timestamp (`2026-11-30T01:31:00Z`, `...T01:31:00.250+01:00`) to Unix ms.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let f = &frac[..digits];
        ms = format!("{:0<3}", &f[..f.len().min(3)]).parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        r if r.len() == 6 && (r.starts_with('+') || r.starts_with('-')) && &r[3..4] == ":" => {
            let sign = if r.starts_with('-') { -1 } else { 1 };
            sign * (r[1..3].parse::<i64>().ok()? * 60 + r[4..6].parse::<i64>().ok()?)
        }
        _ => return None,
    };
    // days from civil (Howard Hinnant)
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = if y2 >= 0 { y2 } else { y2 - 399 } / 400;
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let total = ((days * 24 + h) * 60 + mi - offset_min) * 60 + sec;
    u64::try_from(total * 1000 + ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2026-11-30T01:31:00Z"),
            Some(1_796_002_260_000)
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T02:31:00.25+01:00"),
            Some(1_796_002_260_250)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T12:00:00-05:30"),
            Some(1_709_227_800_000)
        );
        for bad in [
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-11-30T01:31:00",
            "yesterday",
            "2026-11-30T01:31:00.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
