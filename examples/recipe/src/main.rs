//! A prover with proofline inside: the layer, /metrics, and OTLP traces when the standard
//! OTEL_EXPORTER_OTLP_ENDPOINT variable names a collector.

use std::error::Error;
use std::time::Duration;

use proofline::TimelineLayer;
use proofline_prometheus::{Metrics, PrometheusSink};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

fn main() -> Result<(), Box<dyn Error>> {
    // The exporters. /metrics stops when `server` is dropped: keep it for the prover's life.
    let metrics = Metrics::new();
    let addr = std::env::var("PROOFLINE_METRICS_ADDR")
        .unwrap_or_else(|_| proofline_prometheus::DEFAULT_ADDR.to_owned());
    let server = proofline_prometheus::serve(metrics.clone(), addr.parse()?)?;
    let mut builder = TimelineLayer::builder()
        .instance("prover-a") // names this prover in trace ids, for every sink below
        .sink(PrometheusSink::new(metrics));
    let mut otlp = None;
    if proofline_otlp::endpoint_from_env().is_some() {
        // its run, and its counters on /metrics, come from the layer
        let (sink, handle) = proofline_otlp::start(proofline_otlp::OtlpConfig::default())?;
        builder = builder.sink(sink);
        otlp = Some(handle); // keep it until the layer is shut down
    }
    let (timeline, mut guard) = builder.build();

    // The layer beside the prover's own filter and log output. Without RUST_LOG the filter
    // lets `info` through: the layer needs the prover's spans at `info`.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(timeline)
        .init();

    for sector in ["porep-1000-1", "porep-1000-2"] {
        prove(sector);
    }

    // Shutdown, in this order: the layer (it delivers what is queued and shuts its sinks
    // down), the OTLP exporter, then /metrics.
    let report = guard.shutdown(Duration::from_secs(5))?;
    if let Some(mut handle) = otlp {
        handle.shutdown(Duration::from_secs(5))?;
    }
    drop(server);
    print!("{}", proofline::core::text::render(&report));
    Ok(())
}

/// A sector proved the way cuzk does it: each partition synthesized in a span of its own,
/// then proved by a GPU worker in a `gpu_worker` span.
fn prove(sector: &str) {
    for partition in 0..10usize {
        tracing::info_span!("synthesize_partition", job_id = sector, partition)
            .in_scope(|| std::thread::sleep(Duration::from_millis(4)));
        tracing::info_span!("gpu_worker", worker_id = 0u32, gpu = 0u32, job_id = %sector,
            proof_kind = %"porep-c2", partition = ?Some(partition))
        .in_scope(|| std::thread::sleep(Duration::from_millis(2)));
    }
}
