//! The prover's cost of a span whose close completes a job (so a trace is built and
//! exported), with the OTLP collector up, down (nothing listens) and hanging (accepts, never
//! answers), in one run. Run: `cargo bench -p proofline-tests --bench otlp_span_cost`.

use std::hint::black_box;
use std::net::TcpListener;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use proofline::TimelineLayer;
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

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
        ("collector_up", proofline_tests::collector(true)),
        ("collector_down", down),
        ("collector_hanging", proofline_tests::collector(false)),
    ] {
        let cfg = proofline_otlp::OtlpConfig::new("bench@0", 0)
            .endpoint(endpoint)
            .timeout(Duration::from_secs(2));
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
        eprintln!(
            "{name}: layer dropped {} events; OTLP: {} traces queued, {} dropped, {} spans exported, {} failed; shutdown {}",
            guard.stats().dropped,
            counters.snapshot().traces_queued,
            counters.snapshot().traces_dropped,
            counters.snapshot().spans_exported,
            counters.snapshot().spans_failed,
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
