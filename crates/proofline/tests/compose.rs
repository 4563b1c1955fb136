//! The layer in a realistic subscriber: fmt, EnvFilter, a per-layer filter and
//! tracing-opentelemetry side by side.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use proofline::TimelineLayer;
use tracing::info_span;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, filter_fn};
use tracing_subscriber::prelude::*;

mod common;
use common::SharedBuf;

#[test]
fn composes_with_fmt_env_filter_per_layer_filters_and_opentelemetry() {
    let timeline = SharedBuf::default();
    let fmt_out = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .timeline_to_writer(timeline.clone())
        .build();

    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("compose-test"));

    let fmt_writer = fmt_out.clone();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(move || fmt_writer.clone())
        .with_ansi(false)
        // a per-layer filter on fmt: it sees only warnings
        .with_filter(LevelFilter::WARN);
    let subscriber = tracing_subscriber::registry()
        .with(EnvFilter::new("info"))
        .with(fmt)
        .with(otel)
        // a per-layer filter on top of the layer's own: drop job "porep-1-skip"
        .with(layer.with_filter(filter_fn(|m| m.name() != "debug_only")));

    tracing::subscriber::with_default(subscriber, || {
        let outer = info_span!("prove_porep_c2_partitioned", job_id = "porep-1-1");
        outer.in_scope(|| {
            // the job id comes from the ancestor
            info_span!("synthesize_partition", partition = 0u32).in_scope(|| {
                tracing::warn!("slow synthesis");
            });
        });
        // below the EnvFilter's level: no subscriber layer sees it
        tracing::debug_span!(
            "synthesize_partition",
            job_id = "porep-1-2",
            partition = 0u32
        )
        .in_scope(|| {});
    });
    let report = guard.shutdown(Duration::from_secs(5)).unwrap();
    let _ = provider.force_flush();

    let text = timeline.text();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.contains(",SYNTH_START,porep-1-1,partition=0\n"),
        "{text}"
    );
    assert!(
        !text.contains("porep-1-2"),
        "the EnvFilter applies to the layer too"
    );
    assert_eq!(report.events.events, 3);

    let fmt_text = fmt_out.text();
    assert!(fmt_text.contains("slow synthesis"), "{fmt_text}");
    assert!(
        !fmt_text.contains("TIMELINE"),
        "TIMELINE lines go to their own output"
    );

    let spans = exporter.get_finished_spans().unwrap();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert!(
        names.contains(&"synthesize_partition") && names.contains(&"prove_porep_c2_partitioned"),
        "{names:?}"
    );
}
