//! The exporter's settings: [`OtlpConfig`], and the standard `OTEL_*` variables it falls back
//! on, each read here and nowhere else.
//!
//! A traces variable (`OTEL_EXPORTER_OTLP_TRACES_<X>`) wins over the general one
//! (`OTEL_EXPORTER_OTLP_<X>`); a setting in [`OtlpConfig`] wins over both.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use opentelemetry_sdk::Resource;

use crate::OtlpError;
use crate::tls::TlsSettings;

/// Traces the export queue holds before new ones are dropped.
pub const DEFAULT_QUEUE_CAPACITY: usize = 256;
/// How long `shutdown` waits for the queue to drain by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// An export's timeout when neither the configuration nor the variables say.
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// `service.name` when `OTEL_SERVICE_NAME` does not say.
pub const DEFAULT_SERVICE_NAME: &str = "cuzk";
/// The collector's OTLP/HTTP address when nothing names one.
pub const DEFAULT_HTTP_ENDPOINT: &str = "http://localhost:4318";
/// The collector's OTLP/gRPC address when nothing names one.
pub const DEFAULT_GRPC_ENDPOINT: &str = "http://localhost:4317";
/// The path of traces under an OTLP/HTTP base address (`OTEL_EXPORTER_OTLP_ENDPOINT`).
pub const HTTP_TRACES_PATH: &str = "/v1/traces";

/// How traces travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
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

/// Settings of the OTLP exporter: [`OtlpConfig::default`] (or [`OtlpConfig::new`] for a run
/// known now), then what differs, e.g.
/// `OtlpConfig::default().endpoint("http://127.0.0.1:4318/v1/traces")`. Unset endpoint,
/// headers, timeout and resource come from the standard `OTEL_*` variables. The fields are
/// private, so that a new setting is no breaking change.
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    pub(crate) run_key: String,
    pub(crate) epoch_unix_ms: u64,
    pub(crate) transport: Transport,
    pub(crate) endpoint: Option<String>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) queue_capacity: usize,
    pub(crate) default_service_name: String,
    pub(crate) block_when_full: bool,
    pub(crate) block_until: Option<Instant>,
    pub(crate) stop_waiting: Option<Arc<AtomicBool>>,
    pub(crate) tls: TlsSettings,
    pub(crate) nouns: proofline_core::Nouns,
}

impl Default for OtlpConfig {
    /// The defaults, for a sink whose run is given later
    /// ([`proofline_core::sink::UpdateSink::start_run`]: the layer's `build()` gives its own).
    fn default() -> Self {
        OtlpConfig::new(String::new(), 0)
    }
}

impl OtlpConfig {
    /// Defaults for a run: `run_key` is the run key of trace ids
    /// ([`proofline_core::ids::run_key`]), `epoch_unix_ms` the wall-clock instant (Unix ms)
    /// that TIMELINE offsets count from.
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
            stop_waiting: None,
            tls: TlsSettings::default(),
            nouns: proofline_core::Nouns::default(),
        }
    }

    /// The prover's words for a job and its parts in span names (`previous batch`,
    /// `segment 3`; default cuzk's: `previous sector`, `partition 3`). Span ids and
    /// attributes do not change with them.
    pub fn nouns(mut self, nouns: proofline_core::Nouns) -> Self {
        self.nouns = nouns;
        self
    }

    /// The transport (default: HTTP/protobuf; [`Transport::from_env`] reads the `OTEL_*`
    /// variables).
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// The collector endpoint, used as it is (for OTLP/HTTP the whole URL, `/v1/traces`
    /// included; [`crate::traces_url`] makes it from a base URL). Default: the
    /// `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` variables.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// The export timeout. Default: `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`, else 10 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Traces the queue holds (default [`DEFAULT_QUEUE_CAPACITY`]).
    pub fn queue_capacity(mut self, traces: usize) -> Self {
        self.queue_capacity = traces;
        self
    }

    /// `service.name` when `OTEL_SERVICE_NAME`/`OTEL_RESOURCE_ATTRIBUTES` do not set one
    /// (default [`DEFAULT_SERVICE_NAME`]).
    pub fn default_service_name(mut self, name: impl Into<String>) -> Self {
        self.default_service_name = name.into();
        self
    }

    /// Waits for room in the queue instead of dropping, until `until` at most (past it,
    /// traces are dropped and counted: a replay's deadline; `None`: no limit), and no longer
    /// once `stop` is set (a replay told to stop). For replays, never for a live prover.
    pub fn block_when_full(
        mut self,
        until: Option<Instant>,
        stop: Option<Arc<AtomicBool>>,
    ) -> Self {
        self.block_when_full = true;
        self.block_until = until;
        self.stop_waiting = stop;
        self
    }

    /// TLS trust and client identity for `https://` endpoints; unset fields come from the
    /// `OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE`, `..._CLIENT_CERTIFICATE` and
    /// `..._CLIENT_KEY` variables. Headers (an API key) come from
    /// `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`.
    pub fn tls(mut self, tls: TlsSettings) -> Self {
        self.tls = tls;
        self
    }

    /// The export timeout: the configuration's, else the variables', else 10 s.
    pub(crate) fn export_timeout(&self) -> Duration {
        self.timeout
            .or_else(timeout_from_env)
            .unwrap_or(DEFAULT_EXPORT_TIMEOUT)
    }

    /// Where exports are sent, and the address as given (for messages): see
    /// [`resolve_endpoint`].
    pub(crate) fn export_url(&self) -> (String, String) {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        resolve_endpoint(
            self.endpoint.as_deref(),
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").as_deref(),
            var("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
            self.transport,
        )
    }
}

/// The URL traces are sent to under a collector's base address: for OTLP/HTTP the base with
/// `/v1/traces` appended (once), for gRPC the base itself.
pub fn traces_url(base: &str, transport: Transport) -> String {
    let base = base.trim().trim_end_matches('/');
    if transport == Transport::HttpProtobuf && !base.ends_with(HTTP_TRACES_PATH) {
        format!("{base}{HTTP_TRACES_PATH}")
    } else {
        base.to_owned()
    }
}

/// Where exports are sent, as the OTLP specification resolves it: an `explicit` endpoint as it
/// is; else the traces variable's (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) as it is; else the
/// general variable's (`OTEL_EXPORTER_OTLP_ENDPOINT`), a base address ([`traces_url`]); else
/// the transport's default address. The second value is the address as given.
fn resolve_endpoint(
    explicit: Option<&str>,
    traces_var: Option<&str>,
    general_var: Option<&str>,
    transport: Transport,
) -> (String, String) {
    fn given(e: Option<&str>) -> Option<&str> {
        e.map(str::trim).filter(|e| !e.is_empty())
    }
    if let Some(e) = given(explicit).or(given(traces_var)) {
        return (e.to_owned(), e.to_owned());
    }
    let base = given(general_var).unwrap_or(match transport {
        Transport::HttpProtobuf => DEFAULT_HTTP_ENDPOINT,
        #[cfg(feature = "grpc")]
        Transport::Grpc => DEFAULT_GRPC_ENDPOINT,
    });
    (traces_url(base, transport), base.to_owned())
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

/// The export timeout `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT`
/// (milliseconds), if either is set and valid ([`check_timeout_env`] says why one is not).
pub fn timeout_from_env() -> Option<Duration> {
    otel_var("TIMEOUT")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

/// The timeout variable checked: a value that is no whole number of milliseconds, or 0
/// (every export would fail at once), is an error naming the variable.
pub fn check_timeout_env() -> Result<(), OtlpError> {
    let Some((var, v)) = otel_var("TIMEOUT") else {
        return Ok(());
    };
    match v.parse::<u64>() {
        Ok(0) => Err(OtlpError::Build(format!(
            "{var}=0: every export would time out at once; unset it (10 s) or give milliseconds, e.g. 10000"
        ))),
        Ok(_) => Ok(()),
        Err(_) => Err(OtlpError::Build(format!(
            "{var}=`{v}`: not a whole number of milliseconds, e.g. 10000"
        ))),
    }
}

/// A warning when TLS variables are set but `endpoint` (or, without it, the variables' own)
/// is plain `http://`: the operator meant TLS, and the traces (and any API-key header) would
/// go in clear. `None` when there is nothing to say.
pub fn cleartext_warning(endpoint: Option<&str>) -> Option<String> {
    let url = endpoint.map(str::to_owned).or_else(endpoint_from_env)?;
    let url = crate::endpoint::redacted(&url);
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

/// The headers of `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` (`key=value,key2=value2`, values
/// percent-decoded as the specification's W3C form says), checked: an item that is not
/// `key=value` is an error (other SDKs drop it silently, and an API key that is not sent
/// reads as a rejected one). Values are never printed.
pub(crate) fn headers_from_env() -> Result<Vec<(String, String)>, OtlpError> {
    let Some((var, value)) = otel_var("HEADERS") else {
        return Ok(Vec::new());
    };
    parse_headers(&value).map_err(|item| {
        OtlpError::Build(format!(
            "{var}: item {item} is not key=value (the form is key=value,key2=value2, values percent-encoded; values are not shown here)"
        ))
    })
}

/// `key=value,key2=value2`; the error is the 1-based index of the bad item.
fn parse_headers(value: &str) -> Result<Vec<(String, String)>, usize> {
    let mut out = Vec::new();
    for (i, item) in value.split(',').enumerate() {
        if item.trim().is_empty() {
            continue;
        }
        let (k, v) = item
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or(i + 1)?;
        let v = percent_decode(v.trim()).ok_or(i + 1)?;
        out.push((k.trim().to_ascii_lowercase(), v));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_key_value_items_with_percent_decoded_values() {
        assert_eq!(
            parse_headers("api-key=a%20b, X-Tenant=t1,,").unwrap(),
            [
                ("api-key".to_owned(), "a b".to_owned()),
                ("x-tenant".to_owned(), "t1".to_owned())
            ]
        );
        assert_eq!(parse_headers("a=1,novalue"), Err(2));
        assert_eq!(parse_headers("=1"), Err(1));
        assert_eq!(parse_headers("a=%zz"), Err(1));
    }

    #[test]
    fn endpoints_resolve_as_the_specification_says() {
        let http = Transport::HttpProtobuf;
        let url = |e, t, g, tr| resolve_endpoint(e, t, g, tr).0;
        // explicit, then the traces variable, each as it is
        assert_eq!(
            url(
                Some("http://a:1/x"),
                Some("http://b:2/y"),
                Some("http://c:3"),
                http
            ),
            "http://a:1/x"
        );
        assert_eq!(
            url(None, Some("http://b:2/y"), Some("http://c:3"), http),
            "http://b:2/y"
        );
        assert_eq!(
            url(Some("  "), Some("http://b:2/y"), None, http),
            "http://b:2/y"
        );
        // the general variable is a base: the traces path added once
        assert_eq!(
            url(None, None, Some("http://c:3"), http),
            "http://c:3/v1/traces"
        );
        assert_eq!(
            url(None, None, Some("http://c:3/"), http),
            "http://c:3/v1/traces"
        );
        assert_eq!(
            url(None, None, Some("http://c:3/v1/traces"), http),
            "http://c:3/v1/traces"
        );
        assert_eq!(
            url(None, None, None, http),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            resolve_endpoint(None, None, Some("http://c:3"), http).1,
            "http://c:3"
        );
        #[cfg(feature = "grpc")]
        {
            let grpc = Transport::Grpc;
            assert_eq!(url(None, None, Some("http://c:3"), grpc), "http://c:3");
            assert_eq!(url(None, None, None, grpc), "http://localhost:4317");
        }
    }
}
