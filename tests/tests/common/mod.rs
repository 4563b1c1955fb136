//! Set-up shared by the OTLP tests: the known-answer logs, real receivers on 127.0.0.1 (an
//! HTTP endpoint decoding the protobuf body, opentelemetry-proto's generated gRPC server on
//! tonic), and readers of what they received.
#![allow(dead_code)] // each test file uses a part

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use proofline_core::sink::UpdateSink;
use proofline_core::{Engine, EngineConfig, parse_line};
use proofline_otlp::OtlpConfig;
use prost::Message;

pub const EPOCH_MS: u64 = 1_796_002_260_000; // 2026-11-30T01:31:00Z

/// The known-answer log: four jobs of two partitions on one GPU (see known_answers.rs).
pub const LOG: &str = include_str!("../data/four_jobs.log");

/// Spans a receiver got, with the service name of their resource.
#[derive(Clone, Default)]
pub struct Received(pub Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    pub fn push(&self, req: ExportTraceServiceRequest) {
        let mut v = self.0.lock().unwrap();
        for rs in req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    v.push((service.clone(), s));
                }
            }
        }
    }

    pub fn spans(&self) -> Vec<Span> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }

    pub fn wait_for(&self, n: usize, secs: u64) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.0.lock().unwrap().len() < n {
            assert!(
                Instant::now() < deadline,
                "only {} of {n} spans arrived",
                self.0.lock().unwrap().len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.spans()
    }
}

/// How the HTTP receiver behaves.
#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    Answer,
    /// Accepts, reads, never answers.
    Hang,
}

/// An OTLP/HTTP receiver on 127.0.0.1 (its own tokio runtime on a thread).
pub struct HttpReceiver {
    pub addr: SocketAddr,
    pub got: Received,
    pub stop: Arc<AtomicBool>,
}

impl HttpReceiver {
    pub fn start(mode: Mode) -> HttpReceiver {
        Self::start_on(TcpListener::bind("127.0.0.1:0").unwrap(), mode)
    }

    pub fn start_on(listener: TcpListener, mode: Mode) -> HttpReceiver {
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let got = Received::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (g, st) = (got.clone(), stop.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(listener).unwrap();
                while !st.load(Ordering::Relaxed) {
                    let Ok(Ok((stream, _))) =
                        tokio::time::timeout(Duration::from_millis(100), l.accept()).await
                    else {
                        continue;
                    };
                    let g = g.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(
                            move |req: hyper::Request<hyper::body::Incoming>| {
                                let g = g.clone();
                                async move {
                                    assert_eq!(req.uri().path(), "/v1/traces");
                                    let ctype = req
                                        .headers()
                                        .get("content-type")
                                        .and_then(|v| v.to_str().ok())
                                        .unwrap_or("")
                                        .to_owned();
                                    assert_eq!(ctype, "application/x-protobuf");
                                    let body = req.into_body().collect().await.unwrap().to_bytes();
                                    g.push(
                                        ExportTraceServiceRequest::decode(body)
                                            .expect("an OTLP protobuf body"),
                                    );
                                    if mode == Mode::Hang {
                                        tokio::time::sleep(Duration::from_secs(3600)).await;
                                    }
                                    let resp = ExportTraceServiceResponse {
                                        partial_success: None,
                                    }
                                    .encode_to_vec();
                                    Ok::<_, std::convert::Infallible>(
                                        hyper::Response::builder()
                                            .header("content-type", "application/x-protobuf")
                                            .body(Full::new(Bytes::from(resp)))
                                            .unwrap(),
                                    )
                                }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        });
        HttpReceiver { addr, got, stop }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }
}

impl Drop for HttpReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// opentelemetry-proto's generated gRPC TraceService, serving into `Received`.
pub struct GrpcService(pub Received);

#[tonic::async_trait]
impl TraceService for GrpcService {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

pub fn grpc_receiver() -> (SocketAddr, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Received::default();
    let g = got.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(GrpcService(g)))
                .serve_with_incoming(tokio_stream_from(l))
                .await
                .unwrap();
        });
    });
    (addr, got)
}

/// A stream of accepted connections for tonic's `serve_with_incoming`.
pub fn tokio_stream_from(
    l: tokio::net::TcpListener,
) -> impl tokio_stream_like::Stream<Item = Result<tokio::net::TcpStream, std::io::Error>> {
    tokio_stream_like::Accept(l)
}

mod tokio_stream_like {
    pub use std::pin::Pin;
    pub use std::task::{Context, Poll};
    pub use tonic::codegen::tokio_stream::Stream;

    pub struct Accept(pub tokio::net::TcpListener);

    impl Stream for Accept {
        type Item = Result<tokio::net::TcpStream, std::io::Error>;
        fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            match self.0.poll_accept(cx) {
                Poll::Ready(Ok((s, _))) => Poll::Ready(Some(Ok(s))),
                Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
                Poll::Pending => Poll::Pending,
            }
        }
    }
}

pub fn cfg(endpoint: String) -> OtlpConfig {
    OtlpConfig::new("test@1796002260000", EPOCH_MS)
        .endpoint(endpoint)
        .timeout(Duration::from_secs(2))
}

pub fn engine_cfg() -> EngineConfig {
    EngineConfig::default().expected_partitions(Some(2))
}

/// Runs `log` through an engine into `sink`.
pub fn replay(log: &str, ecfg: EngineConfig, sink: &mut impl UpdateSink) {
    let mut engine = Engine::new(ecfg);
    for line in log.lines() {
        if let Some(ev) = parse_line(line).unwrap() {
            engine.ingest(&ev, sink);
        }
    }
    engine.finish(sink);
}

pub fn attr(s: &Span, key: &str) -> Option<Value> {
    s.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.clone())
}

pub fn int(s: &Span, key: &str) -> Option<i64> {
    match attr(s, key)? {
        Value::IntValue(i) => Some(i),
        _ => None,
    }
}

pub fn ms(ns: u64) -> u64 {
    ns / 1_000_000 - EPOCH_MS
}

/// The root span of `job`'s trace.
pub fn root_of<'a>(spans: &'a [Span], job: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| {
            s.parent_span_id.is_empty()
                && matches!(attr(s, "job.id"), Some(Value::StringValue(j)) if j == job)
        })
        .unwrap_or_else(|| panic!("no root span for {job}"))
}

/// The child of `root` named `name` (the spans that carry sector-to-sector links).
pub fn child<'a>(spans: &'a [Span], root: &Span, name: &str) -> Option<&'a Span> {
    spans
        .iter()
        .find(|s| s.parent_span_id == root.span_id && s.name == name)
}

pub fn check_known_log(spans: &[Span]) {
    // 4 jobs x (1 root + 2 partitions x (1 + 3 stages)) = 36 spans, and a `previous sector`
    // span in each of the 3 jobs after the first: this log has no GPU_PICKUP, so no
    // lock_wait stage
    assert_eq!(spans.len(), 39);
    assert!(!spans.iter().any(|s| s.name == "lock_wait"));
    let mut traces: BTreeMap<Vec<u8>, Vec<&Span>> = BTreeMap::new();
    for s in spans {
        traces.entry(s.trace_id.clone()).or_default().push(s);
    }
    assert_eq!(traces.len(), 4, "one trace per job");
    let root = |job: &str| root_of(spans, job);
    let (a, b) = (root("a"), root("b"));
    // no kind in the log: the root is named by its job id alone
    assert_eq!(a.name, "a");
    assert_eq!(
        (ms(a.start_time_unix_nano), ms(a.end_time_unix_nano)),
        (0, 3500)
    );
    assert_eq!(int(a, "wall_ms"), Some(3500));
    assert_eq!(int(a, "partitions.done"), Some(2));
    assert_eq!(int(a, "gpu.total_ms"), Some(4300));
    assert_eq!(int(a, "cold_start_ms"), Some(1000));
    // no root carries a link (in Jaeger a root's only reference pointing into another
    // trace reads as a missing parent: "Incomplete")
    assert!(
        spans
            .iter()
            .filter(|s| s.parent_span_id.is_empty())
            .all(|s| s.links.is_empty())
    );
    assert!(
        child(spans, a, "previous sector").is_none(),
        "the first job links to nothing"
    );
    // b: transition numbers on its root, and a child linking to a's root
    assert_eq!(int(b, "transition.gap_ms"), Some(-500));
    assert_eq!(int(b, "transition.handoff_ms"), Some(0));
    assert_eq!(int(b, "synthesis.lead_ms"), Some(1000));
    let bl = child(spans, b, "previous sector").expect("b's link to a");
    assert_eq!(bl.trace_id, b.trace_id);
    assert_eq!(int(bl, "transition.gap_ms"), Some(-500));
    assert_eq!(bl.links.len(), 1);
    assert_eq!(
        (bl.links[0].trace_id.clone(), bl.links[0].span_id.clone()),
        (a.trace_id.clone(), a.span_id.clone())
    );
    let c = root("c");
    assert_eq!(int(c, "transition.gap_ms"), Some(1000));
    let cl = child(spans, c, "previous sector").expect("c's link to b");
    assert_eq!(
        (cl.links[0].trace_id.clone(), cl.links[0].span_id.clone()),
        (b.trace_id.clone(), b.span_id.clone())
    );
    // a's partition 1 and its stages, with real times
    let trace_a = &traces[&a.trace_id];
    let p1 = trace_a.iter().find(|s| s.name == "partition 1").unwrap();
    assert_eq!(p1.parent_span_id, a.span_id);
    assert_eq!(
        (ms(p1.start_time_unix_nano), ms(p1.end_time_unix_nano)),
        (0, 3500)
    );
    let stage = |name: &str| {
        trace_a
            .iter()
            .find(|s| s.name == name && s.parent_span_id == p1.span_id)
            .unwrap()
    };
    assert_eq!(
        (
            ms(stage("synthesis").start_time_unix_nano),
            ms(stage("synthesis").end_time_unix_nano)
        ),
        (0, 1200)
    );
    assert_eq!(
        (
            ms(stage("queue").start_time_unix_nano),
            ms(stage("queue").end_time_unix_nano)
        ),
        (1200, 1200)
    );
    let gpu = stage("gpu");
    assert_eq!(
        (ms(gpu.start_time_unix_nano), ms(gpu.end_time_unix_nano)),
        (1200, 3500)
    );
    assert_eq!(int(gpu, "gpu.worker"), Some(1));
    assert_eq!(int(gpu, "gpu.id"), Some(0));
    assert_eq!(int(gpu, "gpu_ms.reported"), Some(2300));
    // the exemplar ids of the Prometheus exporter are these trace ids
    let want = proofline_core::ids::trace_id("test@1796002260000", 0, "a", 0);
    assert_eq!(a.trace_id, want.0.to_vec());
}

/// On one GPU, p's GPU work starts first but its second partition is synthesized late: q
/// and then r finish before it, so their traces go out before the transitions p -> q and
/// q -> r are known.
pub const OVERTAKEN_LOG: &str = include_str!("../data/overtaken.log");

/// What identifies a span, for comparing two exports.
pub fn key(s: &Span) -> (Vec<u8>, Vec<u8>, Vec<u8>, String, u64, u64, usize) {
    (
        s.trace_id.clone(),
        s.span_id.clone(),
        s.parent_span_id.clone(),
        s.name.clone(),
        s.start_time_unix_nano,
        s.end_time_unix_nano,
        s.links.len(),
    )
}

/// The threaded simulator, 3 PoRep sectors at 100x with synthesis stalling before the third
/// (so that the GPU idles between sectors), under `layer`.
pub fn run_three_sectors_with_a_stall(layer: proofline::TimelineLayer) {
    use tracing_subscriber::prelude::*;
    let mut sim = proofline_sim::SimConfig::porep(3);
    sim.faults.stall_before_job = Some((2, 40_000));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        proofline_sim::threaded::run(
            &sim,
            100.0,
            false,
            Arc::new(AtomicBool::new(false)),
            Default::default(),
        )
    });
}

pub fn many_jobs_log(n: usize) -> String {
    proofline_sim::instant::log_string(&proofline_sim::SimConfig::porep(n))
}
