//! A prover that gives the layer nothing it can use, for the tests of what its stderr shows:
//! `filtered` creates cuzk's spans under a filter that lets only `error` through (what an
//! EnvFilter without RUST_LOG does); `no-gpu-start` logs GPU_PICKUPs and never a GPU_START;
//! `mixed` has the default span mappings and also logs its own TIMELINE lines.
//! Runs for `MS` milliseconds with a silence warning after 300 ms, then prints the layer's
//! warning count on stdout.
//!
//!     silent filtered|no-gpu-start|mixed MS

use std::time::Duration;

use proofline::TimelineLayer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, ms] = &args[..] else {
        panic!("usage: silent filtered|no-gpu-start MS");
    };
    let ms: u64 = ms.parse().expect("MS");
    let (layer, mut guard) = TimelineLayer::builder()
        .no_timeline()
        .silence_warning_after(Duration::from_millis(300))
        .build();
    let level = if mode == "filtered" {
        LevelFilter::ERROR
    } else {
        LevelFilter::INFO
    };
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(level).with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let deadline = std::time::Instant::now() + Duration::from_millis(ms);
        let mut n = 0u32;
        while std::time::Instant::now() < deadline {
            if mode == "mixed" {
                tracing::info_span!("synthesize_partition", job_id = "porep-1-1", partition = n)
                    .in_scope(|| {
                        tracing::info!(target: "timeline", "TIMELINE,{},SYNTH_START,porep-1-1,partition={}", n * 20, n);
                        std::thread::sleep(Duration::from_millis(20));
                    });
            } else if mode == "filtered" {
                tracing::info_span!("synthesize_partition", job_id = "porep-1-1", partition = n)
                    .in_scope(|| std::thread::sleep(Duration::from_millis(20)));
            } else {
                tracing::info!(target: "timeline", "TIMELINE,{},GPU_PICKUP,job-1,worker=0,partition={}", n * 20, n % 10);
                std::thread::sleep(Duration::from_millis(20));
            }
            n += 1;
        }
    });
    let _ = guard.shutdown(Duration::from_secs(10));
    println!("warnings={}", guard.stats().warnings);
}
