//! Cost of one span's whole life (new, enter, exit, close) on the prover's thread, in one
//! run: the Registry alone, with TimelineLayer (a mapped and an unmapped span), with
//! tracing-opentelemetry (simple processor, discarding exporter), with fmt (to a sink).
//!
//! Each subscriber is the only one alive while it is measured (callsite interest depends
//! on every live dispatcher). Run: `cargo bench -p proofline --bench layer`.

use std::hint::black_box;

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use proofline::TimelineLayer;
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

/// A span TimelineLayer maps (cuzk's synthesis span). A macro, so that every
/// configuration measures its own callsite: a callsite's cached interest depends on the
/// dispatchers alive when it was registered.
macro_rules! mapped {
    () => {
        |i: u32| {
            tracing::info_span!(
                "synthesize_partition",
                job_id = "porep-1000-42",
                partition = i % 10
            )
            .in_scope(|| black_box(i));
        }
    };
}

/// A span it does not map.
macro_rules! unmapped {
    () => {
        |i: u32| {
            tracing::info_span!("deserialize_c1", bytes = i).in_scope(|| black_box(i));
        }
    };
}

fn run(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, d: Dispatch, f: impl Fn(u32)) {
    tracing::callsite::rebuild_interest_cache();
    tracing::dispatcher::with_default(&d, || {
        let mut i = 0u32;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                f(i)
            })
        });
    });
    drop(d);
    tracing::callsite::rebuild_interest_cache();
}

fn fmt_sink<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
}

/// A layer that does nothing: the floor of any layer's cost.
struct Noop;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Noop {}

/// A layer that looks at every callback (new, enter, close) and returns at once: what a
/// layer pays just to be called.
struct Touch;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Touch {
    fn on_new_span(
        &self,
        a: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        black_box(a.metadata());
    }
    fn on_enter(&self, id: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        black_box(id);
    }
    fn on_close(&self, id: tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        black_box(id);
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("span_lifecycle");
    let registry = || Dispatch::new(tracing_subscriber::registry());
    run(&mut g, "registry/mapped", registry(), mapped!());
    run(&mut g, "registry/unmapped", registry(), unmapped!());
    run(
        &mut g,
        "noop_layer/unmapped",
        Dispatch::new(tracing_subscriber::registry().with(Noop)),
        unmapped!(),
    );
    run(
        &mut g,
        "touch_layer/unmapped",
        Dispatch::new(tracing_subscriber::registry().with(Touch)),
        unmapped!(),
    );
    {
        let (layer, _guard) = TimelineLayer::builder().no_timeline().build();
        run(
            &mut g,
            "timeline_fresh/unmapped",
            Dispatch::new(tracing_subscriber::registry().with(layer)),
            unmapped!(),
        );
    }

    let (layer, guard) = TimelineLayer::builder().no_timeline().build();
    let timeline = Dispatch::new(tracing_subscriber::registry().with(layer));
    run(&mut g, "timeline/mapped", timeline.clone(), mapped!());
    run(&mut g, "timeline/unmapped", timeline, unmapped!());
    let s = guard.stats();
    eprintln!(
        "timeline layer: {} events received, {} dropped (queue full)",
        s.received, s.dropped
    );
    drop(guard);

    // the same with a queue of one: nearly every event takes the drop path, so this is the
    // layer's own cost without the cross-core hand-over
    let (layer, guard) = TimelineLayer::builder()
        .no_timeline()
        .channel_capacity(1)
        .build();
    let full = Dispatch::new(tracing_subscriber::registry().with(layer));
    run(&mut g, "timeline_queue_full/mapped", full, mapped!());
    drop(guard);

    // beside a layer that wants every span, as in a real prover
    run(
        &mut g,
        "fmt/unmapped",
        Dispatch::new(tracing_subscriber::registry().with(fmt_sink())),
        unmapped!(),
    );
    let (layer, guard) = TimelineLayer::builder().no_timeline().build();
    let both = Dispatch::new(tracing_subscriber::registry().with(fmt_sink()).with(layer));
    run(&mut g, "fmt+timeline/unmapped", both, unmapped!());
    drop(guard);
    run(
        &mut g,
        "fmt/mapped",
        Dispatch::new(tracing_subscriber::registry().with(fmt_sink())),
        mapped!(),
    );

    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(Discard)
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    run(
        &mut g,
        "opentelemetry/mapped",
        Dispatch::new(tracing_subscriber::registry().with(otel)),
        mapped!(),
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
