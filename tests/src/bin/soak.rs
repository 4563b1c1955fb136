//! A long-running prover, compressed: the threaded simulator at full speed with the layer,
//! the Prometheus endpoint (scraped every second) and the OTLP exporter (to a local
//! collector that answers 200), for `SECTORS` sectors. Prints the resident memory and the
//! live heap every `EVERY` sectors as `sectors,rss_kb,heap_kb,metrics_bytes` lines on stdout,
//! so that a flat line can be seen (scripts/soak.sh; figures in BENCHMARKS.md).
//!
//!     soak SECTORS EVERY

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use proofline::TimelineLayer;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes in use now (allocated and not yet freed), all threads.
fn live_heap() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}
use proofline_sim::SimConfig;
use proofline_sim::threaded::{self, Progress};
use tracing_subscriber::prelude::*;

/// Resident memory, from /proc.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn scrape(addr: std::net::SocketAddr) -> usize {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut body = Vec::new();
    let _ = s.read_to_end(&mut body);
    body.len()
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("usage: soak SECTORS EVERY"))
        .collect();
    let [sectors, every] = args[..] else {
        panic!("usage: soak SECTORS EVERY");
    };
    let metrics = proofline_prometheus::Metrics::new();
    let server = proofline_prometheus::serve(metrics.clone(), "127.0.0.1:0".parse().expect("addr"))
        .expect("serve /metrics");
    let otlp = proofline_otlp::OtlpConfig::default().endpoint(proofline_tests::collector(true));
    let (otlp_sink, mut otlp_handle) = proofline_otlp::start(otlp).expect("OTLP exporter");
    // SOAK_SINKS=prometheus|otlp|none: only those (to tell which part holds memory)
    let only = std::env::var("SOAK_SINKS").unwrap_or_default();
    let mut builder = TimelineLayer::builder()
        .instance("soak")
        .timeline_to_writer(std::io::sink());
    if only.is_empty() || only == "prometheus" {
        builder = builder.sink(proofline_prometheus::PrometheusSink::new(metrics));
    }
    if only.is_empty() || only == "otlp" {
        builder = builder.sink(otlp_sink);
    }
    let (layer, mut guard) = builder.build();
    let mut cfg = SimConfig::porep(64);
    cfg.gpus = 2;
    cfg.synth_workers = 32;
    // SOAK_SPLIT=1: cuzk's split path, a finalizer thread per proof (thread churn makes the
    // allocator's footprint drift, which hides the layer's own)
    if std::env::var_os("SOAK_SPLIT").is_none() {
        cfg.gpu_path = proofline_sim::GpuPath::Sync;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let (stop2, progress2) = (stop.clone(), progress.clone());
    let addr = server.local_addr();
    let sampler = std::thread::spawn(move || {
        let mut next = every;
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let done = progress2.snapshot().proved / 10;
            if done >= next {
                let bytes = scrape(addr);
                println!("{done},{},{},{bytes}", rss_kb(), live_heap() / 1024);
                next += every;
            }
            if done >= sectors {
                stop2.store(true, Ordering::Relaxed);
                return;
            }
        }
    });
    // SOAK_BARE=1: the simulator alone, with no subscriber at all (its own memory, the
    // baseline)
    let summary = if std::env::var_os("SOAK_BARE").is_some() {
        drop(layer);
        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            threaded::run(&cfg, 10_000.0, true, stop, progress)
        })
    } else {
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            threaded::run(&cfg, 10_000.0, true, stop, progress)
        })
    };
    sampler.join().expect("the sampler panicked");
    let report = guard.shutdown(Duration::from_secs(30));
    let _ = otlp_handle.shutdown(Duration::from_secs(10));
    let stats = guard.stats();
    let r = match report {
        Ok(r) => r,
        Err(proofline::ShutdownError::Sink { report, .. }) => *report,
        Err(e) => panic!("shutdown: {e}"),
    };
    eprintln!(
        "soak: {} partitions proved, {} jobs complete, layer: {} events, {} dropped; OTLP: {} traces exported, {} failed",
        summary.proved,
        r.summary.jobs_complete,
        stats.received,
        stats.dropped,
        otlp_handle.counters().snapshot().traces_exported,
        otlp_handle.counters().snapshot().traces_failed,
    );
}
