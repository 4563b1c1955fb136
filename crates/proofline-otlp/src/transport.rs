//! The OTLP client: a trace encoded as an `ExportTraceServiceRequest` (opentelemetry-proto's
//! messages and its span conversion) and sent over OTLP/HTTP (reqwest's blocking client) or
//! OTLP/gRPC (tonic), with the retries the OTLP specification asks for.
//!
//! Why not opentelemetry-otlp's exporter, which does the same: it reports every failure as
//! a string (`OTelSdkError::InternalFailure`), so telling a refused connection from an HTTP
//! 401 meant matching its messages, which change between its releases; and it logs an OTLP
//! partial success and reports the export as a success. Here each failure is a
//! [`SendError`] the transport builds from status codes and error types, and a partial
//! success is counted.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::trace::SpanData;
use prost::Message;

use crate::OtlpError;
use crate::config::{OtlpConfig, Transport, headers_from_env, resource};
use crate::diagnose::SendError;
use crate::endpoint::Endpoint;

/// The `User-Agent` of exports, as the OTLP specification asks exporters to send one.
const USER_AGENT: &str = concat!("proofline-otlp/", env!("CARGO_PKG_VERSION"));

/// Retries after the first attempt, at most (as opentelemetry-otlp's default policy).
const MAX_RETRIES: u32 = 3;
/// The first retry's delay; each next one doubles it.
const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest delay between attempts, unless the collector asks for more (`Retry-After`).
const MAX_DELAY: Duration = Duration::from_millis(1600);

/// What the collector took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Delivered {
    /// Spans it rejected (OTLP partial success).
    pub rejected: u64,
    /// What it said about them.
    pub message: String,
}

/// An OTLP client for one endpoint.
pub(crate) struct Client {
    kind: Kind,
    /// Each export's time, retries included.
    timeout: Duration,
    resource: ResourceAttributesWithSchema,
}

enum Kind {
    Http {
        client: reqwest::blocking::Client,
        url: String,
        headers: reqwest::header::HeaderMap,
    },
    #[cfg(feature = "grpc")]
    Grpc {
        rt: tokio::runtime::Runtime,
        client: opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient<
            tonic::transport::Channel,
        >,
        metadata: tonic::metadata::MetadataMap,
    },
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Whether a failure may pass if tried again (the OTLP specification's list), and how long
/// the collector asked to wait.
fn retryable(e: &SendError, retry_after: Option<Duration>) -> Option<Option<Duration>> {
    let again = match e {
        SendError::Http { status } => matches!(status, 429 | 502 | 503 | 504),
        // Cancelled, DeadlineExceeded, Aborted, OutOfRange, Unavailable, DataLoss
        SendError::Grpc { code, .. } => matches!(code, 1 | 4 | 10 | 11 | 14 | 15),
        SendError::Network(_) | SendError::TimedOut(_) => true,
        SendError::Request(_) => false,
    };
    again.then_some(retry_after)
}

/// A delay with up to 10 % of jitter, so that provers that failed together do not retry
/// together (std's randomly keyed hasher as the source: no random-number crate for this).
fn jittered(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    d + d.mul_f64((r % 1000) as f64 / 10_000.0)
}

impl Client {
    /// The client for `endpoint`; the headers of `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` are
    /// checked here.
    pub(crate) fn build(cfg: &OtlpConfig, endpoint: &Endpoint) -> Result<Client, OtlpError> {
        crate::config::check_timeout_env()?;
        let timeout = cfg.export_timeout();
        let headers = headers_from_env()?;
        let resource = ResourceAttributesWithSchema::from(&resource(&cfg.default_service_name));
        let kind = match cfg.transport {
            Transport::HttpProtobuf => http_client(endpoint, timeout, &headers)?,
            #[cfg(feature = "grpc")]
            Transport::Grpc => grpc_client(endpoint, timeout, &headers)?,
        };
        Ok(Client {
            kind,
            timeout,
            resource,
        })
    }

    /// Sends one trace, retrying what may pass, within the export timeout.
    pub(crate) fn export(&self, spans: Vec<SpanData>) -> Result<Delivered, SendError> {
        let request = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans, &self.resource),
        };
        let deadline = Instant::now() + self.timeout;
        with_retries(
            deadline,
            |left| match &self.kind {
                Kind::Http {
                    client,
                    url,
                    headers,
                } => send_http(client, url, headers, &request, left),
                #[cfg(feature = "grpc")]
                Kind::Grpc {
                    rt,
                    client,
                    metadata,
                } => (send_grpc(rt, client, metadata, &request, left), None),
            },
            std::thread::sleep,
        )
    }
}

/// The retry loop: `send` (given the time left) until it succeeds, fails for good, has been
/// retried [`MAX_RETRIES`] times, or the next wait (the collector's `Retry-After`, else a
/// doubling delay with jitter) would pass `deadline`.
fn with_retries(
    deadline: Instant,
    mut send: impl FnMut(Duration) -> (Result<Delivered, SendError>, Option<Duration>),
    mut sleep: impl FnMut(Duration),
) -> Result<Delivered, SendError> {
    let mut delay = FIRST_DELAY;
    let mut retries = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (result, retry_after) = send(left);
        let err = match result {
            Ok(d) => return Ok(d),
            Err(e) => e,
        };
        let Some(asked) = retryable(&err, retry_after) else {
            return Err(err);
        };
        let wait = asked.unwrap_or_else(|| jittered(delay));
        retries += 1;
        if retries > MAX_RETRIES || Instant::now() + wait >= deadline {
            return Err(err);
        }
        sleep(wait);
        delay = (delay * 2).min(MAX_DELAY);
    }
}

fn http_client(
    endpoint: &Endpoint,
    timeout: Duration,
    headers: &[(String, String)],
) -> Result<Kind, OtlpError> {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (i, (k, v)) in headers.iter().enumerate() {
        let bad = || {
            OtlpError::Build(format!(
                "OTEL_EXPORTER_OTLP_HEADERS: item {} is not a valid HTTP header (values are not shown here)",
                i + 1
            ))
        };
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(v).map_err(|_| bad())?;
        map.insert(name, value);
    }
    #[cfg(feature = "tls")]
    let tls = match &endpoint.tls {
        Some(c) => (**c).clone(),
        None => crate::tls::unused_config()?,
    };
    // reqwest's blocking client starts a runtime of its own: build it off any tokio runtime
    let client = std::thread::scope(|s| {
        s.spawn(move || {
            let b = reqwest::blocking::Client::builder()
                .timeout(timeout)
                .user_agent(USER_AGENT);
            // with TLS, our rustls configuration (reqwest is built without a crypto
            // provider of its own: it could not build one itself)
            #[cfg(feature = "tls")]
            let b = b.tls_backend_preconfigured(tls);
            b.build()
                .map_err(|e| OtlpError::Build(format!("the HTTP client: {e}")))
        })
        .join()
    })
    .map_err(|_| OtlpError::Build("the HTTP client's builder panicked".into()))??;
    Ok(Kind::Http {
        client,
        url: endpoint.export_url.clone(),
        headers: map,
    })
}

/// `e` and its sources, in words.
fn chain(e: &dyn std::error::Error) -> String {
    let mut words = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        words.push_str(": ");
        words.push_str(&s.to_string());
        source = s.source();
    }
    words
}

/// One OTLP/HTTP request; the second value is the collector's `Retry-After`, if it sent one.
fn send_http(
    client: &reqwest::blocking::Client,
    url: &str,
    headers: &reqwest::header::HeaderMap,
    request: &ExportTraceServiceRequest,
    left: Duration,
) -> (Result<Delivered, SendError>, Option<Duration>) {
    let sent = client
        .post(url)
        .timeout(left.max(Duration::from_millis(1)))
        .headers(headers.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
        .body(request.encode_to_vec())
        .send();
    let response = match sent {
        Ok(r) => r,
        // the URL left out of the words: it may carry a password (the endpoint is named,
        // without it, by the messages that quote these words)
        Err(e) if e.is_builder() => {
            return (Err(SendError::Request(chain(&e.without_url()))), None);
        }
        Err(e) if e.is_timeout() => {
            return (Err(SendError::TimedOut(chain(&e.without_url()))), None);
        }
        Err(e) => return (Err(SendError::Network(chain(&e.without_url()))), None),
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    if !status.is_success() {
        return (
            Err(SendError::Http {
                status: status.as_u16(),
            }),
            retry_after,
        );
    }
    // a 2xx took the spans: an answer whose body cannot be read is still a delivery (sending
    // again would send them twice)
    let body = response.bytes().unwrap_or_default();
    (Ok(partial_success(&body)), None)
}

/// What a successful answer says of rejected spans (an empty or unreadable body: none).
fn partial_success(body: &[u8]) -> Delivered {
    ExportTraceServiceResponse::decode(body)
        .map(Delivered::from)
        .unwrap_or_default()
}

impl From<ExportTraceServiceResponse> for Delivered {
    fn from(r: ExportTraceServiceResponse) -> Delivered {
        r.partial_success
            .map(|p| Delivered {
                rejected: u64::try_from(p.rejected_spans).unwrap_or(0),
                message: p.error_message,
            })
            .unwrap_or_default()
    }
}

#[cfg(feature = "grpc")]
fn grpc_client(
    endpoint: &Endpoint,
    timeout: Duration,
    headers: &[(String, String)],
) -> Result<Kind, OtlpError> {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OtlpError::Build(format!("the gRPC runtime: {e}")))?;
    let mut metadata = MetadataMap::new();
    for (i, (k, v)) in headers.iter().enumerate() {
        let bad = || {
            OtlpError::Build(format!(
                "OTEL_EXPORTER_OTLP_HEADERS: item {} is not valid gRPC metadata (values are not shown here)",
                i + 1
            ))
        };
        let key = MetadataKey::from_bytes(k.as_bytes()).map_err(|_| bad())?;
        let value = MetadataValue::try_from(v.as_str()).map_err(|_| bad())?;
        metadata.insert(key, value);
    }
    // https: the connection is made by our own connector (TCP, then rustls with the same
    // configuration as OTLP/HTTP's, pinning included: tonic's own TLS cannot take a custom
    // verifier, and refused a self-signed collector certificate given as the CA file). tonic
    // is given the http:// form of the address, so that its own TLS (when some other crate
    // of the build enables it) never wraps ours; the requests still say https and the
    // collector's authority (`origin`).
    #[cfg(feature = "grpc-tls")]
    let tls = endpoint.tls.clone();
    #[cfg(not(feature = "grpc-tls"))]
    let tls: Option<()> = None;
    let connect_url = match &tls {
        Some(_) => endpoint.export_url.replacen("https://", "http://", 1),
        None => endpoint.export_url.clone(),
    };
    #[cfg_attr(not(feature = "grpc-tls"), allow(unused_mut))]
    let mut ep = tonic::transport::Endpoint::from_shared(connect_url)
        .map_err(|e| OtlpError::Build(format!("endpoint `{}`: {e}", endpoint.url)))?
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(USER_AGENT)
        .map_err(|e| OtlpError::Build(format!("the gRPC user agent: {e}")))?;
    let channel = {
        let _g = rt.enter();
        match tls {
            #[cfg(feature = "grpc-tls")]
            Some(config) => {
                let origin = endpoint
                    .export_url
                    .parse()
                    .map_err(|e| OtlpError::Build(format!("endpoint `{}`: {e}", endpoint.url)))?;
                let name = rustls::pki_types::ServerName::try_from(endpoint.host.clone())
                    .map_err(|e| OtlpError::Build(format!("endpoint `{}`: {e}", endpoint.url)))?;
                ep = ep.origin(origin);
                ep.connect_with_connector_lazy(tls_connector(config, name))
            }
            _ => ep.connect_lazy(),
        }
    };
    Ok(Kind::Grpc {
        rt,
        client: TraceServiceClient::new(channel),
        metadata,
    })
}

/// Connects to the address tonic asks for over TCP, then TLS with `config` for `name`.
#[cfg(feature = "grpc-tls")]
fn tls_connector(
    config: std::sync::Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
) -> impl tower::Service<
    http::Uri,
    Response = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>,
    Error = std::io::Error,
    Future = impl Send,
> + Send
+ 'static {
    let connector = tokio_rustls::TlsConnector::from(config);
    tower::service_fn(move |uri: http::Uri| {
        let (connector, name) = (connector.clone(), name.clone());
        async move {
            let host = uri
                .host()
                .map(crate::tls::host_for_name)
                .unwrap_or_default()
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let tls = connector.connect(name, tcp).await?;
            Ok(hyper_util::rt::TokioIo::new(tls))
        }
    })
}

#[cfg(feature = "grpc")]
fn send_grpc(
    rt: &tokio::runtime::Runtime,
    client: &opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient<
        tonic::transport::Channel,
    >,
    metadata: &tonic::metadata::MetadataMap,
    request: &ExportTraceServiceRequest,
    left: Duration,
) -> Result<Delivered, SendError> {
    let mut req = tonic::Request::new(request.clone());
    *req.metadata_mut() = metadata.clone();
    // the collector knows how long we wait (grpc-timeout)
    req.set_timeout(left);
    let mut client = client.clone();
    let answer = rt.block_on(async { tokio::time::timeout(left, client.export(req)).await });
    match answer {
        Err(_) => Err(SendError::TimedOut(format!("no answer within {left:?}"))),
        Ok(Ok(r)) => Ok(Delivered::from(r.into_inner())),
        // a status with a source was made by the client's own transport (no connection, a
        // broken one, a time-out), not sent by the collector
        Ok(Err(status)) if std::error::Error::source(&status).is_some() => {
            Err(SendError::Network(chain(&status)))
        }
        Ok(Err(status)) => Err(SendError::Grpc {
            code: status.code() as i32,
            message: status.message().to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_for_what_may_pass() {
        let http = |status| SendError::Http { status };
        assert_eq!(retryable(&http(503), None), Some(None));
        let wait = Some(Duration::from_secs(2));
        assert_eq!(retryable(&http(429), wait), Some(wait));
        assert_eq!(retryable(&http(500), None), None);
        assert_eq!(retryable(&http(401), None), None);
        let grpc = |code| SendError::Grpc {
            code,
            message: String::new(),
        };
        assert!(retryable(&grpc(14), None).is_some());
        assert!(retryable(&grpc(16), None).is_none());
        assert!(retryable(&SendError::Network("x".into()), None).is_some());
        assert!(retryable(&SendError::Request("x".into()), None).is_none());
    }

    /// The loop with a scripted `send`: the waits it asked for, the attempts it made.
    fn scripted(
        timeout: Duration,
        answers: Vec<(Result<Delivered, SendError>, Option<Duration>)>,
    ) -> (Result<Delivered, SendError>, Vec<Duration>, usize) {
        let mut answers = answers.into_iter();
        let (mut waits, mut attempts) = (Vec::new(), 0);
        let r = with_retries(
            Instant::now() + timeout,
            |_| {
                attempts += 1;
                answers
                    .next()
                    .unwrap_or((Err(SendError::Http { status: 503 }), None))
            },
            |d| waits.push(d),
        );
        (r, waits, attempts)
    }

    #[test]
    fn the_retry_loop_keeps_its_bounds() {
        let busy = || (Err(SendError::Http { status: 503 }), None);
        // always 503: the first attempt and three retries, with doubling delays
        let (r, waits, attempts) = scripted(Duration::from_secs(60), vec![]);
        assert_eq!(r, Err(SendError::Http { status: 503 }));
        assert_eq!(attempts, 4);
        assert_eq!(waits.len(), 3);
        for (w, base) in waits.iter().zip([100, 200, 400]) {
            let base = Duration::from_millis(base);
            assert!(*w >= base && *w <= base + base / 10, "{w:?} for {base:?}");
        }
        // Retry-After is honoured as asked
        let asked = Some(Duration::from_secs(2));
        let (r, waits, _) = scripted(
            Duration::from_secs(60),
            vec![
                (Err(SendError::Http { status: 429 }), asked),
                (Ok(Delivered::default()), None),
            ],
        );
        assert_eq!(
            (r, waits),
            (Ok(Delivered::default()), vec![Duration::from_secs(2)])
        );
        // a Retry-After past the deadline: given up at once, no wait
        let (r, waits, attempts) = scripted(
            Duration::from_secs(1),
            vec![(
                Err(SendError::Http { status: 503 }),
                Some(Duration::from_secs(30)),
            )],
        );
        assert!(r.is_err() && waits.is_empty() && attempts == 1);
        // a network failure is retried; a 400 is not
        let (r, _, attempts) = scripted(
            Duration::from_secs(60),
            vec![
                (Err(SendError::Network("refused".into())), None),
                (Ok(Delivered::default()), None),
            ],
        );
        assert!(r.is_ok() && attempts == 2);
        let (_, waits, attempts) = scripted(
            Duration::from_secs(60),
            vec![(Err(SendError::Http { status: 400 }), None), busy()],
        );
        assert!(waits.is_empty() && attempts == 1);
    }

    #[test]
    fn a_partial_success_is_read_from_the_answer() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTracePartialSuccess;
        let body = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess {
                rejected_spans: 40,
                error_message: "too old".into(),
            }),
        }
        .encode_to_vec();
        assert_eq!(
            partial_success(&body),
            Delivered {
                rejected: 40,
                message: "too old".into()
            }
        );
        assert_eq!(partial_success(b""), Delivered::default());
    }
}
