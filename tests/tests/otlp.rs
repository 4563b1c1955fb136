//! OTLP traces received by real receivers on 127.0.0.1: an HTTP endpoint decoding the
//! protobuf body, and opentelemetry-proto's generated gRPC server (tonic). Structure,
//! timestamps, attributes and links for a known log; the live layer and a replay send the
//! same traces; a collector down, hanging, or coming back blocks nothing and the counts add up.

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
use proofline_otlp::{OtlpConfig, Transport};
use prost::Message;

const EPOCH_MS: u64 = 1_796_002_260_000; // 2026-11-30T01:31:00Z

/// The known-answer log: four jobs of two partitions on one GPU (see known_answers.rs).
const LOG: &str = include_str!("data/four_jobs.log");

/// Spans a receiver got, with the service name of their resource.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    fn push(&self, req: ExportTraceServiceRequest) {
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

    fn spans(&self) -> Vec<Span> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }

    fn wait_for(&self, n: usize, secs: u64) -> Vec<Span> {
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
enum Mode {
    Answer,
    /// Accepts, reads, never answers.
    Hang,
}

/// An OTLP/HTTP receiver on 127.0.0.1 (its own tokio runtime on a thread).
struct HttpReceiver {
    addr: SocketAddr,
    got: Received,
    stop: Arc<AtomicBool>,
}

impl HttpReceiver {
    fn start(mode: Mode) -> HttpReceiver {
        Self::start_on(TcpListener::bind("127.0.0.1:0").unwrap(), mode)
    }

    fn start_on(listener: TcpListener, mode: Mode) -> HttpReceiver {
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

    fn endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }
}

impl Drop for HttpReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// opentelemetry-proto's generated gRPC TraceService, serving into `Received`.
struct GrpcService(Received);

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

fn grpc_receiver() -> (SocketAddr, Received) {
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
fn tokio_stream_from(
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

fn cfg(endpoint: String) -> OtlpConfig {
    let mut c = OtlpConfig::new("test@1796002260000", EPOCH_MS);
    c.endpoint = Some(endpoint);
    c.timeout = Some(Duration::from_secs(2));
    c
}

fn engine_cfg() -> EngineConfig {
    EngineConfig {
        expected_partitions: Some(2),
        ..EngineConfig::default()
    }
}

/// Runs `log` through an engine into `sink`.
fn replay(log: &str, ecfg: EngineConfig, sink: &mut impl UpdateSink) {
    let mut engine = Engine::new(ecfg);
    for line in log.lines() {
        if let Some(ev) = parse_line(line).unwrap() {
            engine.ingest(&ev, sink);
        }
    }
    engine.finish(sink);
}

fn attr(s: &Span, key: &str) -> Option<Value> {
    s.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.clone())
}

fn int(s: &Span, key: &str) -> Option<i64> {
    match attr(s, key)? {
        Value::IntValue(i) => Some(i),
        _ => None,
    }
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000 - EPOCH_MS
}

/// The root span of `job`'s trace.
fn root_of<'a>(spans: &'a [Span], job: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| {
            s.parent_span_id.is_empty()
                && matches!(attr(s, "job.id"), Some(Value::StringValue(j)) if j == job)
        })
        .unwrap_or_else(|| panic!("no root span for {job}"))
}

/// The child of `root` named `name` (the spans that carry sector-to-sector links).
fn child<'a>(spans: &'a [Span], root: &Span, name: &str) -> Option<&'a Span> {
    spans
        .iter()
        .find(|s| s.parent_span_id == root.span_id && s.name == name)
}

fn check_known_log(spans: &[Span]) {
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

#[test]
fn http_receiver_gets_one_trace_per_job_with_stages_attributes_and_links() {
    let rx = HttpReceiver::start(Mode::Answer);
    let (mut sink, mut handle) = proofline_otlp::start(cfg(rx.endpoint())).unwrap();
    replay(LOG, engine_cfg(), &mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    let spans = rx.got.wait_for(39, 10);
    check_known_log(&spans);
    let c = handle.counters();
    assert_eq!(c.spans_exported.load(Ordering::Relaxed), 39);
    assert_eq!(c.traces_dropped.load(Ordering::Relaxed), 0);
    // service.name defaults to cuzk
    assert!(
        rx.got
            .0
            .lock()
            .unwrap()
            .iter()
            .all(|(svc, _)| svc == "cuzk")
    );
}

#[test]
fn grpc_receiver_gets_the_same_traces() {
    let (addr, got) = grpc_receiver();
    let mut c = cfg(format!("http://{addr}"));
    c.transport = Transport::Grpc;
    let (mut sink, mut handle) = proofline_otlp::start(c).unwrap();
    replay(LOG, engine_cfg(), &mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    check_known_log(&got.wait_for(39, 10));
}

/// On one GPU, p's GPU work starts first but its second partition is synthesized late: q
/// and then r finish before it, so their traces go out before the transitions p -> q and
/// q -> r are known.
const OVERTAKEN_LOG: &str = include_str!("data/overtaken.log");

#[test]
fn a_job_that_finishes_first_is_linked_from_the_job_before_it() {
    let rx = HttpReceiver::start(Mode::Answer);
    let (mut sink, mut handle) = proofline_otlp::start(cfg(rx.endpoint())).unwrap();
    let mut ecfg = engine_cfg();
    // every job completes when its last partition ends, so q and r go out before p
    ecfg.completion_grace_ms = 0;
    replay(OVERTAKEN_LOG, ecfg, &mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    // 3 jobs x (1 root + 2 partitions x (1 + 3 stages)), and p's `next sector` span
    let spans = rx.got.wait_for(28, 10);
    assert_eq!(spans.len(), 28);
    let root = |job: &str| root_of(&spans, job).clone();
    let (p, q, r) = (root("p"), root("q"), root("r"));
    // q went out first, before p -> q was known: the link is in p's trace, pointing forward
    assert!(child(&spans, &q, "previous sector").is_none());
    assert_eq!(int(&q, "transition.gap_ms"), None);
    let next = child(&spans, &p, "next sector").expect("p's forward link");
    assert_eq!(next.links.len(), 1, "{:?}", next.links);
    let link = &next.links[0];
    assert_eq!(
        (link.trace_id.clone(), link.span_id.clone()),
        (q.trace_id.clone(), q.span_id.clone())
    );
    let link_attr = |key: &str| {
        link.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref()?.value.clone())
    };
    assert_eq!(
        link_attr("link.kind"),
        Some(Value::StringValue("next_sector".into()))
    );
    // q's first GPU_START (2000) - p's last GPU_END (5000)
    assert_eq!(link_attr("transition.gap_ms"), Some(Value::IntValue(-3000)));
    assert_eq!(
        link_attr("transition.overlap_ms"),
        Some(Value::IntValue(3000))
    );
    // q -> r: both were sent before it was known; counted, not lost silently
    assert!(child(&spans, &r, "previous sector").is_none());
    assert!(child(&spans, &q, "next sector").is_none());
    assert_eq!(handle.counters().links_unplaced.load(Ordering::Relaxed), 1);
}

/// What identifies a span, for comparing two exports.
fn key(s: &Span) -> (Vec<u8>, Vec<u8>, Vec<u8>, String, u64, u64, usize) {
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

#[test]
fn the_live_layer_and_a_replay_of_its_log_send_the_same_traces() {
    use proofline::TimelineLayer;

    let live_rx = HttpReceiver::start(Mode::Answer);
    let (otlp, mut handle) = proofline_otlp::start(cfg(live_rx.endpoint())).unwrap();
    let buf = proofline_tests::SharedBuf::default();
    let ecfg = EngineConfig {
        reorder_window_ms: 1000,
        completion_grace_ms: 1000,
        ..EngineConfig::default()
    };
    let (layer, mut guard) = TimelineLayer::builder()
        .engine_config(ecfg.clone())
        .timeline_to_writer(buf.clone())
        .sink(otlp)
        .build();
    run_three_sectors_with_a_stall(layer);
    guard.shutdown(Duration::from_secs(10)).unwrap();
    handle.shutdown(Duration::from_secs(10)).unwrap();
    let live = live_rx.got.spans();
    // 3 jobs x (1 + 10 x 5), and a `previous sector` span in the 2 after the first
    assert_eq!(live.len(), 155);

    let log = buf.text();
    let replay_rx = HttpReceiver::start(Mode::Answer);
    let (mut sink, mut h2) = proofline_otlp::start(cfg(replay_rx.endpoint())).unwrap();
    // the run the layer gave its sinks (what `replay --instance --epoch` is told)
    sink.start_run(guard.run());
    replay(&log, ecfg, &mut sink);
    drop(sink);
    h2.shutdown(Duration::from_secs(10)).unwrap();
    let replayed = replay_rx.got.wait_for(155, 10);
    let mut a: Vec<_> = live.iter().map(key).collect();
    let mut b: Vec<_> = replayed.iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

/// The threaded simulator, 3 PoRep sectors at 100x with synthesis stalling before the third
/// (so that the GPU idles between sectors), under `layer`.
fn run_three_sectors_with_a_stall(layer: proofline::TimelineLayer) {
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

fn many_jobs_log(n: usize) -> String {
    proofline_sim::instant::log_string(&proofline_sim::SimConfig::porep(n))
}

#[test]
fn a_collector_that_is_down_costs_nothing_but_its_counters() {
    // a port nobody listens on
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (mut sink, mut handle) =
        proofline_otlp::start(cfg(format!("http://127.0.0.1:{port}/v1/traces"))).unwrap();
    let t = Instant::now();
    replay(&many_jobs_log(10), EngineConfig::default(), &mut sink);
    let engine_time = t.elapsed();
    drop(sink);
    handle.shutdown(Duration::from_secs(20)).unwrap();
    let c = handle.counters();
    let (queued, dropped, exported, failed) = (
        c.traces_queued.load(Ordering::Relaxed),
        c.traces_dropped.load(Ordering::Relaxed),
        c.spans_exported.load(Ordering::Relaxed),
        c.spans_failed.load(Ordering::Relaxed),
    );
    assert_eq!(
        queued + dropped,
        10,
        "every job's trace is queued or dropped"
    );
    assert_eq!(exported, 0);
    // a trace is 51 spans, 52 with its `previous sector` link span (every job but the first)
    assert!(
        (queued * 51..=queued * 52).contains(&failed),
        "every queued span failed, and was counted: {failed} of {queued} traces"
    );
    assert!(
        engine_time < Duration::from_secs(5),
        "the engine was held up: {engine_time:?}"
    );
}

#[test]
fn a_hanging_collector_blocks_nothing_and_shutdown_keeps_its_bound() {
    let rx = HttpReceiver::start(Mode::Hang);
    let mut c = cfg(rx.endpoint());
    c.queue_capacity = 2;
    c.timeout = Some(Duration::from_secs(30));
    let (mut sink, mut handle) = proofline_otlp::start(c).unwrap();
    let t = Instant::now();
    replay(&many_jobs_log(12), EngineConfig::default(), &mut sink);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the engine waited for the collector"
    );
    drop(sink);
    let t = Instant::now();
    let err = handle
        .shutdown(Duration::from_secs(2))
        .expect_err("a hanging collector cannot drain the queue");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    // the queue's two, plus the one the exporter took if it woke before the rest came
    // (scheduling decides): the others dropped and counted
    assert_eq!(err.queued + err.dropped, 12);
    assert!((2..=3).contains(&err.queued), "{err}");
    assert_eq!(err.exported, 0);
    assert!(err.to_string().contains("not delivered"));
    // safe to call again
    assert_eq!(handle.shutdown(Duration::from_secs(1)).unwrap_err(), err);
}

#[test]
fn when_the_collector_comes_back_new_traces_arrive() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener); // down for now
    let (mut sink, mut handle) =
        proofline_otlp::start(cfg(format!("http://{addr}/v1/traces"))).unwrap();
    let log = many_jobs_log(4);
    replay(&log, EngineConfig::default(), &mut sink);
    let c = handle.counters();
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.spans_failed.load(Ordering::Relaxed) < 4 * 51 {
        assert!(
            Instant::now() < deadline,
            "the exports to a down collector did not fail"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // the collector comes back on the same address
    let rx = HttpReceiver::start_on(TcpListener::bind(addr).unwrap(), Mode::Answer);
    let second = log.replace("porep-1000-", "porep-2000-");
    let mut sink2 = sink;
    replay(&second, EngineConfig::default(), &mut sink2);
    drop(sink2);
    handle.shutdown(Duration::from_secs(20)).unwrap();
    // 4 traces of 51 spans, the 3 after the first with their `previous sector` span
    let spans = rx.got.wait_for(4 * 51 + 3, 10);
    assert!(spans.iter().all(|s| {
        !matches!(attr(s, "job.id"), Some(Value::StringValue(j)) if j.starts_with("porep-1000-"))
    }));
    assert_eq!(c.spans_exported.load(Ordering::Relaxed), 4 * 51 + 3);
    assert_eq!(c.spans_failed.load(Ordering::Relaxed), 4 * 51 + 3);
}

/// One instance, one key: given both sinks, the layer wires them to the same run, so every
/// exemplar on /metrics names a trace the collector received; and the OTLP counters reach
/// /metrics without being wired by hand.
#[test]
fn the_layer_gives_both_sinks_one_run_so_exemplars_name_received_traces() {
    use proofline::TimelineLayer;

    let rx = HttpReceiver::start(Mode::Answer);
    let mut c = cfg(rx.endpoint());
    c.run_key = String::new(); // whatever it says, the layer's run wins
    let (otlp, mut handle) = proofline_otlp::start(c).unwrap();
    let metrics = proofline_prometheus::Metrics::new();
    let (layer, mut guard) = TimelineLayer::builder()
        .instance("prover-7")
        .reorder_window(Duration::from_millis(1000))
        .no_timeline()
        .sink(otlp)
        .sink(proofline_prometheus::PrometheusSink::new(metrics.clone()))
        .build();
    assert!(guard.run().run_key.starts_with("prover-7@"));
    run_three_sectors_with_a_stall(layer);
    guard.shutdown(Duration::from_secs(10)).unwrap();
    handle.shutdown(Duration::from_secs(10)).unwrap();
    let received: std::collections::HashSet<String> = rx
        .got
        .spans()
        .iter()
        .map(|s| s.trace_id.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    assert_eq!(received.len(), 3, "a trace per sector");
    // the gpu stage spans say where their interval came from (cuzk's gpu_worker span)
    let spans = rx.got.spans();
    let gpu: Vec<_> = spans.iter().filter(|s| s.name == "gpu").collect();
    assert_eq!(gpu.len(), 30);
    assert!(gpu.iter().all(|s| matches!(
        attr(s, "proofline.gpu_interval_source"),
        Some(Value::StringValue(v)) if v.contains("`gpu_worker`")
    )));
    let text = metrics.render_openmetrics();
    let exemplars: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split("trace_id=\"").nth(1))
        .filter_map(|r| r.split('"').next())
        .collect();
    assert!(!exemplars.is_empty(), "{text}");
    for id in &exemplars {
        assert!(
            received.contains(*id),
            "exemplar {id} names no received trace"
        );
    }
    // the exporter's counters are published without with_export_counters
    assert!(
        text.contains("proofline_otlp_spans_exported_total 155"),
        "{}",
        text.lines()
            .filter(|l| l.contains("otlp"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The README's recipe is `examples/recipe`, a crate of its own: the README shows its files
/// verbatim, and it builds outside the workspace (so no feature another member enables can
/// hide one it lacks), runs, and sends a trace per sector to a real receiver.
#[test]
fn the_readme_recipe_is_a_fresh_crate_that_builds_runs_and_sends_its_traces() {
    use std::path::Path;
    use std::process::Command;

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let readme = read(&root.join("README.md"));
    let recipe = root.join("examples/recipe");
    let main = read(&recipe.join("src/main.rs"));
    assert!(
        readme.contains(&format!("```rust\n{main}```")),
        "the README's recipe is not examples/recipe/src/main.rs"
    );
    let toml = read(&recipe.join("Cargo.toml"));
    let deps =
        &toml[toml.find("\n[dependencies]").unwrap() + 1..toml.find("\n# This crate").unwrap()];
    assert!(
        readme.contains(&format!("```toml\n{}\n```", deps.trim_end())),
        "the README's dependencies are not examples/recipe/Cargo.toml's:\n{deps}"
    );

    let target = root.join("target/recipe");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = Command::new(cargo)
        .args(["build", "--locked", "--quiet", "--manifest-path"])
        .arg(recipe.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "the recipe does not build:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let rx = HttpReceiver::start(Mode::Answer);
    let run = Command::new(target.join("debug/proofline-recipe"))
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.endpoint())
        .env("PROOFLINE_METRICS_ADDR", "127.0.0.1:0")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("jobs complete 2"), "{stdout}");
    assert!(!stderr.contains("proofline:"), "no warning: {stderr}");
    // 2 sectors x (root + 10 partitions x (partition + 4 stages)), and the second's
    // `previous sector` span
    let spans = rx.got.wait_for(103, 10);
    assert_eq!(spans.len(), 103);
}
