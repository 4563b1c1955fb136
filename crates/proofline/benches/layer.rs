//! Cost of one span's whole life (new, enter, exit, close) on the prover's thread, in one
//! run: the Registry, with TimelineLayer (a mapped and an unmapped span), with
//! tracing-opentelemetry (in-memory exporter, and a discarding one), with fmt (to a sink).
//!
//! The baseline is the Registry with a layer that does nothing, not the Registry alone: a
//! Registry frees a closed span only through the close guard that a `Layered` stack runs
//! (tokio-rs/tracing#2668), so the Registry alone keeps every span it ever made and measures
//! its slab growing (a mean several times its median, gigabytes after a run).
//!
//! Each subscriber is the only one alive while it is measured (callsite interest depends
//! on every live dispatcher). Run: `cargo bench -p proofline --bench layer`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData, SpanExporter};
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

#[macro_use]
#[path = "common/shapes.rs"]
mod shapes;

/// Spans are made in bursts of this many, timed; between bursts, untimed, the bench wakes
/// the layer's worker and waits until it has taken in what the burst emitted (`settle`). A
/// prover emits a few spans a second, so its worker always keeps up; without the wait, the
/// worker (which does several times a span's work per event) falls behind, the queue fills,
/// and the bench would time the cheaper drop path instead.
///
/// The worker's poll interval is long, so that it sleeps through every burst (as it sleeps
/// between a prover's spans) and drains between them. A second row has it poll every
/// 100 µs, draining while the burst is written: that row is slower, and by how much varies
/// from process to process (BENCHMARKS.md says what was found).
const BURST: u64 = 1024;

fn run(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, d: Dispatch, f: impl Fn(u32)) {
    run_settled(g, name, d, f, |_| {});
}

fn run_settled(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    d: Dispatch,
    f: impl Fn(u32),
    settle: impl Fn(u64),
) {
    tracing::callsite::rebuild_interest_cache();
    tracing::dispatcher::with_default(&d, || {
        let mut i = 0u32;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(BURST);
                    let t = Instant::now();
                    for _ in 0..n {
                        i = i.wrapping_add(1);
                        f(i);
                    }
                    timed += t.elapsed();
                    left -= n;
                    settle(n);
                }
                timed
            })
        });
    });
    drop(d);
    tracing::callsite::rebuild_interest_cache();
}

/// Pins the calling thread to one CPU (`taskset` on `/proc/thread-self`, so the bench needs
/// no `unsafe`); `false` where that cannot be done.
fn pin_this_thread(cpu: usize) -> bool {
    let Ok(me) = std::fs::read_link("/proc/thread-self") else {
        return false;
    };
    let Some(tid) = me.file_name().and_then(|t| t.to_str()).map(str::to_owned) else {
        return false;
    };
    std::process::Command::new("taskset")
        .args(["-pc", &cpu.to_string(), &tid])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Builds a layer whose worker runs on CPU 1 while the bench's thread stays on CPU 0 (a
/// thread starts with its creator's CPUs). Unpinned on a 2-CPU machine, the scheduler
/// sometimes ran both on one CPU for a whole run, and each burst's time then took in the
/// worker's (BENCHMARKS.md). What the prover's thread pays is
/// the figure with the worker elsewhere.
fn on_cpu_1<T>(build: impl FnOnce() -> T) -> T {
    // (not `available_parallelism`: once pinned, it counts only the pinned CPU)
    let pinned = pin_this_thread(1);
    let built = build();
    if pinned {
        pin_this_thread(0);
    } else {
        eprintln!("layer bench: could not pin threads; figures may include the worker's time");
    }
    built
}

/// A TimelineLayer for the bench whose worker polls every `poll`.
fn timeline(poll: Duration) -> (TimelineLayer, proofline::TimelineGuard) {
    on_cpu_1(|| {
        TimelineLayer::builder()
            .no_timeline()
            .poll_interval(poll)
            .build()
    })
}

/// Wakes the worker and waits until it has taken in `events_per_span` events for every span
/// made so far.
fn settle(guard: &proofline::TimelineGuard, events_per_span: u64) -> impl Fn(u64) + '_ {
    let sent = std::cell::Cell::new(0u64);
    move |spans: u64| {
        sent.set(sent.get() + spans * events_per_span);
        guard.wake();
        let taken = || {
            let s = guard.stats();
            s.received + s.dropped
        };
        while taken() < sent.get() {
            std::thread::yield_now();
        }
    }
}

fn fmt_sink<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
}

/// A layer that does nothing: the Registry as every subscriber uses it, and the floor of any
/// layer's cost.
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
    let registry = || Dispatch::new(tracing_subscriber::registry().with(Noop));
    run(&mut g, "registry/mapped", registry(), mapped!());
    run(&mut g, "registry/unmapped", registry(), unmapped!());
    run(&mut g, "registry/gpu_worker", registry(), gpu_worker!());
    run(
        &mut g,
        "registry/gpu_worker_plain",
        registry(),
        gpu_worker_plain!(),
    );
    run(
        &mut g,
        "registry/timeline_line",
        registry(),
        timeline_line!(),
    );
    run(&mut g, "registry/timing_line", registry(), timing_line!());
    {
        // the baseline again, beside a thread on the other CPU that does nothing but wake
        // every 100 µs (as the worker does in the draining row below)
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = on_cpu_1(|| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::park_timeout(Duration::from_micros(100));
                }
            })
        });
        run(
            &mut g,
            "registry_beside_waking_thread/mapped",
            registry(),
            mapped!(),
        );
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        ticker.join().expect("the waking thread panicked");
    }
    run(
        &mut g,
        "touch_layer/unmapped",
        Dispatch::new(tracing_subscriber::registry().with(Touch)),
        unmapped!(),
    );
    {
        let (layer, _guard) = on_cpu_1(|| TimelineLayer::builder().no_timeline().build());
        run(
            &mut g,
            "timeline_fresh/unmapped",
            Dispatch::new(tracing_subscriber::registry().with(layer)),
            unmapped!(),
        );
    }

    // a synthesis span emits SYNTH_START, SYNTH_END and GPU_QUEUE
    let (layer, guard) = timeline(Duration::from_secs(60));
    let d = Dispatch::new(tracing_subscriber::registry().with(layer));
    run_settled(
        &mut g,
        "timeline/mapped",
        d.clone(),
        mapped!(),
        settle(&guard, 3),
    );
    run(&mut g, "timeline/unmapped", d.clone(), unmapped!());
    // cuzk's own shapes (issue #31): its GPU span with every field, its TIMELINE and
    // CUZK_TIMING lines through tracing
    run_settled(
        &mut g,
        "timeline/gpu_worker",
        d.clone(),
        gpu_worker!(),
        settle(&guard, 3),
    );
    run_settled(
        &mut g,
        "timeline/gpu_worker_plain",
        d.clone(),
        gpu_worker_plain!(),
        settle(&guard, 3),
    );
    run_settled(
        &mut g,
        "timeline/timeline_line",
        d,
        timeline_line!(),
        settle(&guard, 1),
    );
    let s = guard.stats();
    eprintln!(
        "timeline layer: {} events received, {} dropped (queue full)",
        s.received, s.dropped
    );
    drop(guard);

    // the worker draining while the burst is written
    let (layer, guard) = timeline(Duration::from_micros(100));
    let d = Dispatch::new(tracing_subscriber::registry().with(layer));
    run_settled(
        &mut g,
        "timeline_worker_draining/mapped",
        d.clone(),
        mapped!(),
        settle(&guard, 3),
    );
    // a timing line is no TIMELINE event (nothing to settle on): the draining worker keeps
    // its queue from filling
    run(
        &mut g,
        "timeline_worker_draining/timing_line",
        d,
        timing_line!(),
    );
    drop(guard);

    // the same with a queue of one and no waiting: nearly every event takes the drop path
    let (layer, guard) = on_cpu_1(|| {
        TimelineLayer::builder()
            .no_timeline()
            .channel_capacity(1)
            .build()
    });
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
    let (layer, guard) = timeline(Duration::from_secs(60));
    let both = Dispatch::new(tracing_subscriber::registry().with(fmt_sink()).with(layer));
    run(&mut g, "fmt+timeline/unmapped", both, unmapped!());
    drop(guard);
    run(
        &mut g,
        "fmt/mapped",
        Dispatch::new(tracing_subscriber::registry().with(fmt_sink())),
        mapped!(),
    );

    // the comparison: the in-memory exporter, emptied every 4096 spans so that the
    // run's memory stays bounded (the emptying is part of what that exporter costs)
    let memory = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(memory.clone())
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    let d = Dispatch::new(tracing_subscriber::registry().with(otel));
    let span = mapped!();
    run(&mut g, "opentelemetry/mapped", d.clone(), |i| {
        span(i);
        if i % 4096 == 0 {
            memory.reset();
        }
    });
    let span = gpu_worker!();
    run(&mut g, "opentelemetry/gpu_worker", d, |i| {
        span(i);
        if i % 4096 == 0 {
            memory.reset();
        }
    });
    // and the cheapest exporter there is, one that drops what it gets
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(Discard)
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    let d = Dispatch::new(tracing_subscriber::registry().with(otel));
    run(&mut g, "opentelemetry_discard/mapped", d.clone(), mapped!());
    // cuzk's own GPU span with its fields: the 10x goal holds for it too (issue #31)
    run(&mut g, "opentelemetry_discard/gpu_worker", d, gpu_worker!());
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
