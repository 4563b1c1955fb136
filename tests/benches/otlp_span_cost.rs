//! The prover's cost of a span whose close completes a job (so a trace is built and
//! exported), with the OTLP collector up, down (nothing listens) and hanging (accepts, never
//! answers), in one run. Run: `cargo bench -p proofline-tests --bench otlp_span_cost`.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use proofline::TimelineLayer;
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// An OTLP/HTTP endpoint that answers 200 to every post (or never answers).
fn collector(answer: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    if !answer {
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                    let _ = w.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n");
                }
            });
        }
    });
    format!("http://{addr}/v1/traces")
}

fn bench(c: &mut Criterion) {
    let down = {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("http://127.0.0.1:{port}/v1/traces")
    };
    let mut g = c.benchmark_group("span_close_completing_a_job");
    for (name, endpoint) in [
        ("collector_up", collector(true)),
        ("collector_down", down),
        ("collector_hanging", collector(false)),
    ] {
        let mut cfg = proofline_otlp::OtlpConfig::new("bench@0", 0);
        cfg.endpoint = Some(endpoint);
        cfg.timeout = Some(Duration::from_secs(2));
        let (sink, mut handle) = proofline_otlp::start(cfg).unwrap();
        let counters = sink.counters();
        let (layer, mut guard) = TimelineLayer::builder().no_timeline().sink(sink).build();
        let d = Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&d, || {
            let mut i = 0u64;
            g.bench_function(name, |b| {
                b.iter(|| {
                    i += 1;
                    // a whole-proof job: GPU_START and GPU_END complete it
                    let id = format!("winpost-1000-{i:x}");
                    tracing::info_span!("gpu_prove", job_id = %id, worker = 0u32)
                        .in_scope(|| black_box(i));
                })
            });
        });
        drop(d);
        let _ = guard.shutdown(Duration::from_secs(5));
        let shut = handle.shutdown(Duration::from_secs(3));
        use std::sync::atomic::Ordering::Relaxed;
        eprintln!(
            "{name}: layer dropped {} events; OTLP: {} traces queued, {} dropped, {} spans exported, {} failed; shutdown {}",
            guard.stats().dropped,
            counters.traces_queued.load(Relaxed),
            counters.traces_dropped.load(Relaxed),
            counters.spans_exported.load(Relaxed),
            counters.spans_failed.load(Relaxed),
            if shut.is_ok() {
                "ok".to_owned()
            } else {
                "timed out (bounded)".to_owned()
            }
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
