//! TLS and authentication with real parts: certificates made here (a private CA, a server
//! certificate for localhost, a client certificate, and a second CA that signed none of
//! them), a real Prometheus scraping `watch` over TLS with basic auth and a client
//! certificate, and OTLP receivers over TLS, OTLP/HTTP (hyper on tokio-rustls) and OTLP/gRPC
//! (tonic), that answer only requests carrying the right API-key header.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
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

mod common;
use common::{
    Proc, free_port, fresh_dir, generated_log, http_get, prometheus, proofline, query,
    stderr_lines, wait_line,
};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("tls", name)
}

/// A log of `jobs` PoRep jobs on two GPUs.
fn two_gpu_log(dir: &Path, jobs: u32) -> PathBuf {
    generated_log(dir, &["--jobs", &jobs.to_string(), "--gpus", "2"])
}

const API_KEY: &str = "sesame-7f3a";

/// The test's certificates, as PEM files in `dir`: `ca.crt` (signed the server's and the
/// client's), `server.crt`/`.key` (localhost, 127.0.0.1), `client.crt`/`.key`, and
/// `other-ca.crt`, a CA that signed nothing here.
struct Pki {
    dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
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
    fn reissue_server(&self, stem: &str) {
        let (cert, key) = leaf(
            &self.ca,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        // the key first, as a careless rotation would: the pair loads once both are new
        std::fs::write(self.path(&format!("{stem}.key")), key).unwrap();
        std::fs::write(self.path(&format!("{stem}.crt")), cert).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA, as a root store.
    fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&self.read("ca.crt")) {
            roots.add(c.unwrap()).unwrap();
        }
        roots
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    /// A rustls server configuration with the server certificate; client certificates
    /// signed by the CA required when `verify_clients`.
    fn server_config(&self, verify_clients: bool, alpn: &[u8]) -> rustls::ServerConfig {
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

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
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
fn leaf(
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
fn watch(log: &Path, web_config: Option<&Path>) -> (Proc, u16) {
    let mut cmd = proofline();
    cmd.args([
        "watch",
        "--from-start",
        "--poll-ms",
        "50",
        "--metrics-addr",
        "127.0.0.1:0",
    ]);
    if let Some(w) = web_config {
        cmd.arg("--web.config.file").arg(w);
    }
    let mut child = cmd
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let p = Proc(child);
    let line = wait_line(&rx, "metrics on ");
    let port = line
        .split_once("://127.0.0.1:")
        .and_then(|(_, r)| r.split_once('/'))
        .and_then(|(port, _)| port.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    (p, port)
}

/// How [`https_get`] connects.
#[derive(Clone, Copy)]
struct Client<'a> {
    /// The client certificate's file stem (`client`, `other-client`), if any.
    cert: Option<&'a str>,
    auth: Option<(&'a str, &'a str)>,
    tls12_only: bool,
}

const WITH_CERT: Client<'static> = Client {
    cert: Some("client"),
    auth: None,
    tls12_only: false,
};

/// One HTTPS GET over rustls: the response (status line, headers, body), and the server's
/// certificate; or the TLS error.
fn https_get(port: u16, pki: &Pki, path: &str, c: Client<'_>) -> Result<(String, Vec<u8>), String> {
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
fn targets(api: &str) -> Vec<(String, String, String)> {
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

#[test]
fn prometheus_scrapes_watch_over_tls_with_basic_auth_and_a_client_certificate() {
    let dir = tmp("prometheus");
    let pki = Pki::new(&dir);
    let log = two_gpu_log(&dir, 6);
    // deploy/tls's two files, with the test's certificates under the names they use
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/tls");
    for (copy, of) in [
        ("prover.crt", "server.crt"),
        ("prover.key", "server.key"),
        ("clients-ca.crt", "ca.crt"),
        ("provers-ca.crt", "ca.crt"),
        ("prometheus.crt", "client.crt"),
        ("prometheus.key", "client.key"),
    ] {
        std::fs::copy(pki.path(of), dir.join(copy)).unwrap();
    }
    std::fs::write(dir.join("password"), "s3cret").unwrap();
    let hash = bcrypt::hash("s3cret", 8).unwrap();
    let web = dir.join("web-config.yml");
    let text = std::fs::read_to_string(deploy.join("web-config.yml")).unwrap();
    assert!(text.contains("REPLACE-WITH-A-BCRYPT-HASH"));
    std::fs::write(
        &web,
        text.replace("REPLACE-WITH-A-BCRYPT-HASH", &format!("'{hash}'")),
    )
    .unwrap();
    let job = std::fs::read_to_string(deploy.join("prometheus-job.yml"))
        .unwrap()
        .replace("/etc/prometheus/tls/", &format!("{}/", dir.display()))
        .replace("job_name: proofline", "job_name: tls");
    let job: String = job.lines().map(|l| format!("  {l}\n")).collect();
    let (_w1, secure) = watch(&log, Some(&web));
    let (_w2, plain) = watch(&log, None);

    // straight over rustls: the password, the client certificate and TLS itself are required,
    // on every path
    let right = Client {
        auth: Some(("prometheus", "s3cret")),
        ..WITH_CERT
    };
    let ok = https_get(secure, &pki, "/metrics", right).unwrap().0;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let wrong = Client {
        auth: Some(("prometheus", "guess")),
        ..WITH_CERT
    };
    let denied = https_get(secure, &pki, "/metrics", wrong).unwrap().0;
    assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");
    assert!(
        denied
            .to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"proofline\""),
        "{denied}"
    );
    let none = https_get(secure, &pki, "/metrics", WITH_CERT).unwrap().0;
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    let health = https_get(secure, &pki, "/healthz", WITH_CERT).unwrap().0;
    assert!(health.starts_with("HTTP/1.1 401"), "{health}");
    let health = https_get(secure, &pki, "/healthz", right).unwrap().0;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let no_cert = https_get(
        secure,
        &pki,
        "/metrics",
        Client {
            cert: None,
            ..right
        },
    );
    assert!(
        no_cert
            .as_ref()
            .is_err_and(|e| e.to_lowercase().contains("certificaterequired")),
        "{no_cert:?}"
    );
    let (status, _, body) = http_get(&format!("127.0.0.1:{secure}"), "/metrics", None)
        .expect("plain HTTP to the TLS port is answered");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("use https://"), "{body}");
    // and the endpoint counts what it refused: three 401s, two failed handshakes
    let body = https_get(secure, &pki, "/metrics", right).unwrap().0;
    let refused = |reason: &str| -> f64 {
        let prefix = format!("proofline_metrics_requests_refused_total{{reason=\"{reason}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(refused("unauthorized"), 3.0);
    assert_eq!(refused("tls_handshake"), 2.0);
    assert_eq!(refused("too_many_checks"), 0.0);

    let tls = |user: &str, password: &str, client_cert: bool| {
        let cert = if client_cert {
            format!(
                "\n      cert_file: {}\n      key_file: {}",
                pki.path("client.crt").display(),
                pki.path("client.key").display()
            )
        } else {
            String::new()
        };
        format!(
            "    scheme: https\n    tls_config:\n      ca_file: {}\n      server_name: localhost{cert}\n    basic_auth:\n      username: {user}\n      password: {password}\n",
            pki.path("ca.crt").display()
        )
    };
    let target =
        |port: u16| format!("    static_configs:\n      - targets: ['127.0.0.1:{port}']\n");
    std::fs::create_dir_all(dir.join("targets")).unwrap();
    std::fs::write(
        dir.join("targets/provers.yml"),
        format!("- targets: ['127.0.0.1:{secure}']\n"),
    )
    .unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n{job}  - job_name: plain\n{}  - job_name: wrong_password\n{}{}  - job_name: no_client_cert\n{}{}",
        target(plain),
        tls("prometheus", "guess", true),
        target(secure),
        tls("prometheus", "s3cret", false),
        target(secure),
    );
    let (_prom, api) = prometheus(&dir, "prometheus", &config, &[]);

    // the same figures over TLS as over plain HTTP
    let deadline = Instant::now() + Duration::from_secs(60);
    let both = |expr: &str| {
        let f = |job: &str| query(&api, &expr.replace("JOB", job));
        (f("tls"), f("plain"))
    };
    loop {
        if let (Some(a), Some(b)) = both("sum(proofline_proofs_completed_total{job=\"JOB\"})") {
            if a >= 6.0 && b >= 6.0 {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no complete scrape: {:?}",
            targets(&api)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    for expr in [
        "sum(proofline_proofs_completed_total{job=\"JOB\"})",
        "max(proofline_seconds_per_proof{job=\"JOB\"})",
        "sum(proofline_gpu_busy_seconds_total{job=\"JOB\", gpu=\"0\"})",
        "sum(proofline_gpu_busy_seconds_total{job=\"JOB\", gpu=\"1\"})",
        "sum(proofline_gpu_idle_gap_seconds_count{job=\"JOB\"})",
    ] {
        // the same log, summed in tick-dependent order: equal but for float rounding
        let (a, b) = both(expr);
        assert!(
            a.zip(b)
                .is_some_and(|(a, b)| (a - b).abs() <= 1e-9 * a.abs().max(1.0)),
            "{expr}: tls {a:?}, plain {b:?}"
        );
    }
    assert_eq!(
        both("sum(proofline_proofs_completed_total{job=\"JOB\"})").0,
        Some(6.0)
    );

    // and the scrapes that must fail do, for the reason they must
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = targets(&api);
        let of = |job: &str| t.iter().find(|(j, ..)| j == job).cloned().unwrap();
        let (_, wrong_health, wrong_error) = of("wrong_password");
        let (_, cert_health, cert_error) = of("no_client_cert");
        let (_, tls_health, _) = of("tls");
        if wrong_health == "down" && cert_health == "down" {
            assert!(wrong_error.contains("401"), "{wrong_error}");
            assert!(
                cert_error.contains("tls") && !cert_error.contains("401"),
                "{cert_error}"
            );
            assert_eq!(tls_health, "up");
            break;
        }
        assert!(Instant::now() < deadline, "targets: {t:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A receiver: where to send, and the spans it accepted.
struct Receiver {
    endpoint: String,
    spans: mpsc::Receiver<Span>,
    _rt: tokio::runtime::Runtime,
}

impl Receiver {
    fn roots(&self) -> usize {
        self.spans
            .try_iter()
            .filter(|s| s.parent_span_id.is_empty())
            .count()
    }
}

fn send_spans(tx: &mpsc::Sender<Span>, req: ExportTraceServiceRequest) {
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            for s in ss.spans {
                let _ = tx.send(s);
            }
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// OTLP/HTTP over TLS (the server certificate only); answers 401 without the API key.
fn https_receiver(pki: &Pki) -> Receiver {
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

struct Collector(mpsc::Sender<Span>);

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
fn grpc_receiver(pki: &Pki) -> Receiver {
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
type Env<'a> = Vec<(&'a str, &'a std::ffi::OsStr)>;

/// `proofline replay` with the OTEL variables `env` (the rest of them unset): status,
/// stderr, how long it took.
fn replay(
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

#[test]
fn replay_delivers_over_tls_with_a_private_ca_and_an_api_key_and_names_what_is_wrong() {
    let dir = tmp("replay");
    let pki = Pki::new(&dir);
    let log = two_gpu_log(&dir, 5);
    let key_header = format!("x-api-key={API_KEY}");
    let key = key_header.as_ref();
    let ca = pki.path("ca.crt");
    let ca = ca.as_os_str();
    let (cert, client_key) = (pki.path("client.crt"), pki.path("client.key"));
    let (cert, client_key) = (cert.as_os_str(), client_key.as_os_str());

    // OTLP/HTTP: the private CA and the key header
    let http = https_receiver(&pki);
    let (ok, err, _) = replay(
        &log,
        &http.endpoint,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
            ("OTEL_EXPORTER_OTLP_HEADERS", key),
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(http.roots(), 5, "one trace per sector: {err}");

    // OTLP/gRPC: the same, and a client certificate
    let grpc = grpc_receiver(&pki);
    let (ok, err, _) = replay(
        &log,
        &grpc.endpoint,
        &["--protocol", "grpc"],
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", client_key),
            ("OTEL_EXPORTER_OTLP_HEADERS", key),
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(grpc.roots(), 5, "one trace per sector over gRPC: {err}");

    // what goes wrong is named, within the deadline
    let other = pki.path("other-ca.crt");
    let other = other.as_os_str();
    let missing = dir.join("missing.crt");
    let no_key = "x-api-key=wrong".as_ref();
    let cases: [(&Receiver, &[&str], Env<'_>, &str); 5] = [
        (
            &http,
            &[],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", other),
                ("OTEL_EXPORTER_OTLP_HEADERS", key),
            ],
            "not trusted: signed by an unknown CA",
        ),
        (
            &http,
            &[],
            vec![("OTEL_EXPORTER_OTLP_HEADERS", key)],
            // the system's roots do not know the private CA
            "not trusted",
        ),
        (
            &http,
            &[],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
                ("OTEL_EXPORTER_OTLP_HEADERS", no_key),
            ],
            "HTTP 401: it did not accept the request's credentials",
        ),
        (
            &grpc,
            &["--protocol", "grpc"],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
                ("OTEL_EXPORTER_OTLP_HEADERS", key),
            ],
            "refused the handshake",
        ),
        (
            &grpc,
            &["--protocol", "grpc"],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", client_key),
                ("OTEL_EXPORTER_OTLP_HEADERS", no_key),
            ],
            "Unauthenticated",
        ),
    ];
    for (receiver, args, env, says) in cases {
        let mut args = args.to_vec();
        args.extend(["--timeout-s", "5"]);
        let (ok, err, took) = replay(&log, &receiver.endpoint, &args, &env);
        assert!(!ok, "{says}: replay succeeded: {err}");
        assert!(err.contains(says), "`{says}` not said: {err}");
        assert!(err.contains("traces: 0 delivered"), "{err}");
        assert!(!err.contains(API_KEY), "a header's value printed: {err}");
        assert!(took < Duration::from_secs(8), "{says}: {took:?}");
        assert_eq!(receiver.roots(), 0);
    }
    // certificates given for a plain-HTTP endpoint: a warning that the traces go in clear
    let plain = format!("http://127.0.0.1:{}", free_port());
    let (_, err, _) = replay(
        &log,
        &plain,
        &["--timeout-s", "2"],
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)],
    );
    assert!(
        err.contains("warning: OTEL_EXPORTER_OTLP_CERTIFICATE set, but the endpoint http://")
            && err.contains("go in clear"),
        "{err}"
    );
    let (_, err, _) = replay(&log, &plain, &["--timeout-s", "2"], &[]);
    assert!(!err.contains("go in clear"), "{err}");
    // a CA file that cannot be read, a certificate without its key, a key header of the
    // wrong form, no roots at all: said at once
    let no_roots_file = dir.join("no-roots.pem");
    let no_roots_dir = dir.join("no-roots");
    std::fs::write(&no_roots_file, "").unwrap();
    std::fs::create_dir_all(&no_roots_dir).unwrap();
    for (env, says) in [
        (
            vec![("OTEL_EXPORTER_OTLP_CERTIFICATE", missing.as_os_str())],
            "OTEL_EXPORTER_OTLP_CERTIFICATE = ",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert)],
            "no client key is",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_HEADERS", "api-key sesame-7f3a".as_ref())],
            "OTEL_EXPORTER_OTLP_HEADERS: item 1 is not key=value",
        ),
        (
            // no CA variable, and a system with no roots: rustls-native-certs reads these
            vec![
                ("SSL_CERT_FILE", no_roots_file.as_os_str()),
                ("SSL_CERT_DIR", no_roots_dir.as_os_str()),
            ],
            "no CA certificates found on this system",
        ),
    ] {
        let (ok, err, took) = replay(&log, &http.endpoint, &[], &env);
        assert!(!ok && err.contains(says), "{err}");
        assert!(!err.contains(API_KEY), "a header's value printed: {err}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
}

#[test]
fn the_live_exporter_delivers_over_tls_with_the_otel_variables() {
    let dir = tmp("live");
    let pki = Pki::new(&dir);
    for grpc in [false, true] {
        let receiver = if grpc {
            grpc_receiver(&pki)
        } else {
            https_receiver(&pki)
        };
        let mut cmd = proofline();
        cmd.args([
            "demo",
            "--speed",
            "100",
            "--jobs",
            "2",
            "--no-metrics",
            "--out",
        ])
        .arg(dir.join(format!("demo-{grpc}")))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.crt"))
        .env("OTEL_EXPORTER_OTLP_HEADERS", format!("x-api-key={API_KEY}"));
        if grpc {
            cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
                .env(
                    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                    pki.path("client.crt"),
                )
                .env("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key"));
        } else {
            cmd.env_remove("OTEL_EXPORTER_OTLP_PROTOCOL");
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(receiver.roots(), 2, "grpc {grpc}: {err}");
    }
}

#[test]
fn optional_client_certificates_tls13_only_and_a_rotated_certificate() {
    let dir = tmp("options");
    let pki = Pki::new(&dir);
    let log = two_gpu_log(&dir, 2);
    std::fs::copy(pki.path("server.crt"), dir.join("prover.crt")).unwrap();
    std::fs::copy(pki.path("server.key"), dir.join("prover.key")).unwrap();
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: prover.crt\n  key_file: prover.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n  min_version: TLS13\n",
    )
    .unwrap();
    let (_w, port) = watch(&log, Some(&web));
    let anonymous = Client {
        cert: None,
        auth: None,
        tls12_only: false,
    };
    // no certificate: served; one the client CA signed: served; another CA's: refused
    let (head, first) = https_get(port, &pki, "/metrics", anonymous).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = https_get(port, &pki, "/metrics", WITH_CERT).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let stranger = Client {
        cert: Some("other-client"),
        ..anonymous
    };
    let refused = https_get(port, &pki, "/metrics", stranger);
    assert!(
        refused.as_ref().is_err_and(|e| {
            let e = e.to_lowercase();
            e.contains("unknownca") || e.contains("badcertificate")
        }),
        "{refused:?}"
    );
    // TLS 1.2 is below min_version
    let old = https_get(
        port,
        &pki,
        "/metrics",
        Client {
            tls12_only: true,
            ..anonymous
        },
    );
    assert!(
        old.as_ref()
            .is_err_and(|e| e.to_lowercase().contains("protocolversion")),
        "{old:?}"
    );

    // the certificate is replaced on disk: new connections get the new one, no restart
    let der = |pem: &[u8]| {
        CertificateDer::pem_slice_iter(pem)
            .next()
            .unwrap()
            .unwrap()
            .to_vec()
    };
    assert_eq!(first, der(&pki.read("server.crt")));
    pki.reissue_server("prover");
    let new = der(&pki.read("prover.crt"));
    assert_ne!(new, first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (head, peer) = https_get(port, &pki, "/metrics", anonymous).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        if peer == new {
            break;
        }
        assert_eq!(peer, first, "neither the old certificate nor the new one");
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
