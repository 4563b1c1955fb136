//! How a prover adds proofline next to its fmt layer and EnvFilter.
//!
//! Run: `cargo run -p proofline-examples --example prover` (TIMELINE lines go to stderr, the
//! final report to stdout).

use std::time::Duration;

use tracing::info_span;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

fn main() {
    // 1. Build the layer; keep the guard alive for the life of the program.
    let (timeline, mut guard) = proofline::TimelineLayer::builder()
        .gpu_workers_per_device(2) // cuzk's default
        .build(); // TIMELINE lines to stderr, as cuzk prints them

    // 2. Add it beside the prover's own layers.
    tracing_subscriber::registry()
        .with(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(timeline)
        .init();

    // 3. The prover's spans, named as cuzk names them.
    for partition in 0..10u32 {
        info_span!("synthesize_partition", job_id = "porep-1000-42", partition)
            .in_scope(|| std::thread::sleep(Duration::from_millis(20)));
        let worker = info_span!("gpu_worker", worker_id = partition % 2, gpu = 0, job_id = "porep-1000-42",
            proof_kind = "porep-c2", partition = ?Some(partition));
        worker.in_scope(|| {
            info_span!("gpu_prove", partition = ?Some(partition))
                .in_scope(|| std::thread::sleep(Duration::from_millis(5)))
        });
    }

    // 4. At exit: deliver what is queued, bounded in time, and read the final report.
    match guard.shutdown(Duration::from_secs(5)) {
        Ok(report) => print!("{}", proofline::core::text::render(&report)),
        Err(e) => eprintln!("{e}"),
    }
}
