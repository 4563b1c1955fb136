//! TLS set-up shared by the TLS tests: certificates made here (a private CA, a server
//! certificate for localhost, a client certificate, and a second CA that signed none of
//! them), `watch` serving /metrics with a web configuration, a TLS client of it, and OTLP
//! receivers over TLS, OTLP/HTTP (hyper on tokio-rustls) and OTLP/gRPC (tonic), that answer
//! only requests carrying the right API-key header.
#![allow(dead_code)] // each test file uses a part

use std::convert::Infallible;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::{Proc, free_port, fresh_dir, generated_log, http_get, proofline};

pub fn tmp(name: &str) -> PathBuf {
    fresh_dir("tls", name)
}

/// A log of `jobs` PoRep jobs on two GPUs.
pub fn two_gpu_log(dir: &Path, jobs: u32) -> PathBuf {
    generated_log(dir, &["--jobs", &jobs.to_string(), "--gpus", "2"])
}

pub const API_KEY: &str = "sesame-7f3a";

/// The test's certificates, as PEM files in `dir`: `ca.crt` (signed the server's and the
/// client's), `server.crt`/`.key` (localhost, 127.0.0.1), `client.crt`/`.key`, and
/// `other-ca.crt`, a CA that signed nothing here.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(dir: &Path) -> Pki {
        let other = ca("another CA");
        let ca = ca("proofline test CA");
        let server = leaf(
            &ca,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let client = leaf(&ca, &["prometheus"], ExtendedKeyUsagePurpose::ClientAuth);
        let stranger = leaf(&other, &["stranger"], ExtendedKeyUsagePurpose::ClientAuth);
        for (name, pem) in [
            ("ca.crt", ca.pem()),
            ("other-ca.crt", other.pem()),
            ("server.crt", server.0),
            ("server.key", server.1),
            ("client.crt", client.0),
            ("client.key", client.1),
            ("other-client.crt", stranger.0),
            ("other-client.key", stranger.1),
        ] {
            std::fs::write(dir.join(name), pem).unwrap();
        }
        Pki {
            dir: dir.to_path_buf(),
            ca,
        }
    }

    /// A new server certificate (a new key) from the same CA, written to `stem`.crt/.key.
    pub fn reissue_server(&self, stem: &str) {
        let (cert, key) = leaf(
            &self.ca,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        // the key first, as a careless rotation would: the pair loads once both are new
        std::fs::write(self.path(&format!("{stem}.key")), key).unwrap();
        std::fs::write(self.path(&format!("{stem}.crt")), cert).unwrap();
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA, as a root store.
    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&self.read("ca.crt")) {
            roots.add(c.unwrap()).unwrap();
        }
        roots
    }

    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    /// A rustls server configuration with the server certificate; client certificates
    /// signed by the CA required when `verify_clients`.
    pub fn server_config(&self, verify_clients: bool, alpn: &[u8]) -> rustls::ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let b = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let b = if verify_clients {
            let roots = self.roots();
            b.with_client_cert_verifier(
                rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .unwrap(),
            )
        } else {
            b.with_no_client_auth()
        };
        let chain = CertificateDer::pem_slice_iter(&self.read("server.crt"))
            .map(Result::unwrap)
            .collect();
        let key = PrivateKeyDer::from_pem_slice(&self.read("server.key")).unwrap();
        let mut c = b.with_single_cert(chain, key).unwrap();
        c.alpn_protocols = vec![alpn.to_vec()];
        c
    }
}

pub fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// A certificate for `names` signed by `issuer`, and its key.
pub fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, names[0]);
    p.extended_key_usages = vec![usage];
    let cert = p.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// `proofline watch` of `log` serving /metrics on a port of its choosing (with the web
/// configuration, if any); the process and the port it says it serves on.
pub fn watch(log: &Path, web_config: Option<&Path>) -> (Proc, u16) {
    let mut opts = vec!["--from-start", "--poll-ms", "50"];
    if let Some(w) = web_config {
        opts.extend(["--web.config.file", w.to_str().unwrap()]);
    }
    let (p, _, addr) = super::watch(&opts, log);
    let port = addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
    (p, port.unwrap_or_else(|| panic!("{addr}")))
}

/// How [`https_get`] connects.
#[derive(Clone, Copy)]
pub struct Client<'a> {
    /// The client certificate's file stem (`client`, `other-client`), if any.
    pub cert: Option<&'a str>,
    pub auth: Option<(&'a str, &'a str)>,
    pub tls12_only: bool,
}

pub const WITH_CERT: Client<'static> = Client {
    cert: Some("client"),
    auth: None,
    tls12_only: false,
};

/// One HTTPS GET over rustls: the response (status line, headers, body), and the server's
/// certificate; or the TLS error.
pub fn https_get(
    port: u16,
    pki: &Pki,
    path: &str,
    c: Client<'_>,
) -> Result<(String, Vec<u8>), String> {
    let roots = pki.roots();
    let versions: &[&rustls::SupportedProtocolVersion] = if c.tls12_only {
        &[&rustls::version::TLS12]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots);
    let config = match c.cert {
        Some(stem) => {
            let chain = CertificateDer::pem_slice_iter(&pki.read(&format!("{stem}.crt")))
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_slice(&pki.read(&format!("{stem}.key"))).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
        None => b.with_no_client_auth(),
    };
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    let auth = c
        .auth
        .map(|(u, p)| {
            format!(
                "Authorization: Basic {}\r\n",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        })
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    match tls.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if got.is_empty() => return Err(e.to_string()),
        Err(_) => {}
    }
    let peer = conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&got);
    Ok((text.into_owned(), peer))
}

/// Prometheus' view of its targets: (job, health, last error).
pub fn targets(api: &str) -> Vec<(String, String, String)> {
    let (_, _, body) = http_get(api, "/api/v1/targets", None).unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"]["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["labels"]["job"].as_str().unwrap().to_owned(),
                t["health"].as_str().unwrap().to_owned(),
                t["lastError"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A receiver: where to send, and the spans it accepted.
pub struct Receiver {
    pub endpoint: String,
    pub spans: mpsc::Receiver<Span>,
    pub _rt: tokio::runtime::Runtime,
}

impl Receiver {
    pub fn roots(&self) -> usize {
        self.spans
            .try_iter()
            .filter(|s| s.parent_span_id.is_empty())
            .count()
    }
}

pub fn send_spans(tx: &mpsc::Sender<Span>, req: ExportTraceServiceRequest) {
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            for s in ss.spans {
                let _ = tx.send(s);
            }
        }
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// OTLP/HTTP over TLS (the server certificate only); answers 401 without the API key.
pub fn https_receiver(pki: &Pki) -> Receiver {
    let rt = runtime();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(pki.server_config(false, b"http/1.1")));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let tx = tx.clone();
                    async move {
                        let keyed = req.headers().get("x-api-key").is_some_and(|v| v == API_KEY);
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        if !keyed {
                            let mut r = Response::new(Full::new(Bytes::new()));
                            *r.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                            return Ok::<_, Infallible>(r);
                        }
                        send_spans(&tx, ExportTraceServiceRequest::decode(body).unwrap());
                        let answer = ExportTraceServiceResponse {
                            partial_success: None,
                        };
                        Ok(Response::new(Full::new(Bytes::from(
                            answer.encode_to_vec(),
                        ))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Receiver {
        endpoint: format!("https://localhost:{port}"),
        spans: rx,
        _rt: rt,
    }
}

pub struct Collector(mpsc::Sender<Span>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        send_spans(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// OTLP/gRPC over TLS requiring a client certificate signed by the CA; `Unauthenticated`
/// without the API key.
pub fn grpc_receiver(pki: &Pki) -> Receiver {
    use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
    let rt = runtime();
    let port = free_port();
    let (tx, rx) = mpsc::channel();
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(
            pki.read("server.crt"),
            pki.read("server.key"),
        ))
        .client_ca_root(Certificate::from_pem(pki.read("ca.crt")));
    let service = TraceServiceServer::with_interceptor(Collector(tx), |req: tonic::Request<()>| {
        match req.metadata().get("x-api-key") {
            Some(v) if v == API_KEY => Ok(req),
            _ => Err(tonic::Status::unauthenticated("no or wrong x-api-key")),
        }
    });
    rt.spawn(
        Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(service)
            .serve(([127, 0, 0, 1], port).into()),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "gRPC receiver did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    Receiver {
        endpoint: format!("https://localhost:{port}"),
        spans: rx,
        _rt: rt,
    }
}

/// Variables and their values.
pub type Env<'a> = Vec<(&'a str, &'a std::ffi::OsStr)>;

/// `proofline replay` with the OTEL variables `env` (the rest of them unset): status,
/// stderr, how long it took.
pub fn replay(
    log: &Path,
    endpoint: &str,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> (bool, String, Duration) {
    let mut cmd = proofline();
    cmd.args(["replay", "--endpoint", endpoint])
        .args(args)
        .arg(log);
    for v in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stderr).unwrap(),
        t.elapsed(),
    )
}
