//! What short-lived threads leave behind in the layer: each of `THREADS` threads (in waves
//! of `WAVE` alive at once) opens and closes cuzk's synthesis and GPU spans, then exits; the
//! process's resident memory is read after a first wave, at the end, and at its peak, and
//! with `WAVE` threads alive and parked (what a live thread holds).
//!
//! Run: `cargo run --release -p proofline --example thread_churn [THREADS] [WAVE] [registry]
//! [lines]` (default 200000 and 50; `registry`: the Registry alone, no layer, for the
//! allocator's own drift; `lines`: each thread also logs a TIMELINE line and a `CUZK_TIMING:`
//! line through `tracing`, which gives it the layer's text ring too; BENCHMARKS.md has the
//! figures).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use tracing::info_span;
use tracing_subscriber::prelude::*;

/// A `/proc/self/status` value in KiB (`VmRSS`, `VmHWM`).
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Whether each thread also logs lines (the `lines` argument).
static LINES: AtomicBool = AtomicBool::new(false);

/// The spans one thread of the prover opens: a partition's synthesis and its GPU work (and,
/// with `lines`, the lines it logs through `tracing`).
fn work(i: u64) {
    let job = format!("porep-1000-{}", i / 10);
    let partition = (i % 10) as u32;
    info_span!("synthesize_partition", job_id = %job, partition).in_scope(|| {});
    info_span!("gpu_worker", worker_id = i % 4, gpu = (i % 4) / 2, job_id = %job,
        proof_kind = %"porep-c2", partition = ?Some(partition))
    .in_scope(|| {});
    if LINES.load(Ordering::Relaxed) {
        tracing::info!(target: "timeline", "TIMELINE,{i},SYNTH_START,{job},partition={partition}");
        tracing::info!(target: "timeline", "CUZK_TIMING: gpu_tid={} mutex_held_ms=900", i % 4);
    }
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let threads = args.next().and_then(Result::ok).unwrap_or(200_000);
    let wave = args.next().and_then(Result::ok).unwrap_or(50).max(1);
    let registry_alone = std::env::args().nth(3).as_deref() == Some("registry");
    LINES.store(std::env::args().any(|a| a == "lines"), Ordering::Relaxed);
    let mut guard = if registry_alone {
        tracing_subscriber::registry().init();
        None
    } else {
        let (layer, guard) = proofline::TimelineLayer::builder().no_timeline().build();
        tracing_subscriber::registry().with(layer).init();
        Some(guard)
    };

    let started = Instant::now();
    let mut after_first = 0;
    let mut done = 0;
    while done < threads {
        let n = wave.min(threads - done);
        let handles: Vec<_> = (done..done + n)
            .map(|i| std::thread::spawn(move || work(i)))
            .collect();
        for h in handles {
            h.join().expect("a prover thread panicked");
        }
        done += n;
        if after_first == 0 && done >= 1000.min(threads) {
            // the worker has adopted and dropped the first threads' rings by now
            std::thread::sleep(Duration::from_millis(50));
            after_first = status_kib("VmRSS");
        }
    }
    // let the worker drop the last rings
    std::thread::sleep(Duration::from_millis(100));
    let end = status_kib("VmRSS");

    // a wave kept alive: what each live thread holds
    let before = status_kib("VmRSS");
    let hold = Arc::new(Barrier::new(wave as usize + 1));
    let handles: Vec<_> = (0..wave)
        .map(|i| {
            let hold = hold.clone();
            std::thread::spawn(move || {
                work(threads + i);
                hold.wait(); // spans made, thread alive
                hold.wait(); // measured: exit
            })
        })
        .collect();
    hold.wait();
    std::thread::sleep(Duration::from_millis(50));
    let alive = status_kib("VmRSS");
    hold.wait();
    for h in handles {
        h.join().expect("a prover thread panicked");
    }
    let peak = status_kib("VmHWM");
    let (received, dropped) = guard.as_mut().map_or((0, 0), |guard| {
        guard
            .shutdown(Duration::from_secs(10))
            .expect("the worker shut down");
        let s = guard.stats();
        (s.received, s.dropped)
    });
    println!(
        "{}: {threads} threads in waves of {wave}, {:.1} s: resident {after_first} KiB after the \
         first 1000, {end} KiB at the end, peak {peak} KiB; {wave} threads alive hold {} KiB \
         more ({:.1} KiB each); events received {}, dropped {}",
        if registry_alone {
            "the Registry alone"
        } else {
            "with the TimelineLayer"
        },
        started.elapsed().as_secs_f64(),
        alive.saturating_sub(before),
        alive.saturating_sub(before) as f64 / wave as f64,
        received,
        dropped,
    );
}
