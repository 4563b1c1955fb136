//! One shape of span (or logged line) made `N` times on one thread, each in its own
//! `one_span` call, for counting the instructions it costs the prover's thread under
//! callgrind (`scripts/layer-instructions.sh` runs it): a count does not move with the
//! machine's spells, where the criterion bench's rows spread by tens of nanoseconds.
//!
//! Run: `cargo run --release -p proofline --example span_instructions -- SHAPE SUBSCRIBER [N]`
//! SHAPE: `mapped` (cuzk's synthesis span), `gpu_worker` (cuzk's GPU span, every field as
//! cuzk records it), `gpu_worker_plain` (the same values recorded plainly), `timeline_line`
//! (cuzk's TIMELINE line logged through `tracing`), `timing_line` (a `CUZK_TIMING:` line so
//! logged), `unmapped` (a span the layer does not map). The shapes are the layer bench's
//! (`benches/common/shapes.rs`). SUBSCRIBER: `layer` (the Registry with the TimelineLayer) or `registry` (the
//! Registry with a layer that does nothing, the bench's baseline). N: default 20000.
//!
//! Every 1024 spans the worker is woken and waited for, as in the bench: it keeps up, as it
//! does in a prover, so the spans take the path they take there, not the full queue's.

use std::time::Duration;

use tracing_subscriber::prelude::*;

struct Noop;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Noop {}

#[macro_use]
#[path = "../benches/common/shapes.rs"]
mod shapes;

/// One span (or logged line) of the shape, as the layer's bench makes it.
#[inline(never)]
fn one_span(shape: &str, i: u32) {
    match shape {
        "mapped" => (mapped!())(i),
        "gpu_worker" => (gpu_worker!())(i),
        "gpu_worker_plain" => (gpu_worker_plain!())(i),
        "timeline_line" => (timeline_line!())(i),
        "timing_line" => (timing_line!())(i),
        "unmapped" => (unmapped!())(i),
        other => panic!("unknown shape {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shape = args.first().map_or("gpu_worker", String::as_str).to_owned();
    let with_layer = args.get(1).map_or("layer", String::as_str) == "layer";
    let n: u32 = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    // events a span of the shape sends (what the worker is waited for)
    let per_span = match shape.as_str() {
        "mapped" | "gpu_worker" | "gpu_worker_plain" => 3,
        "timeline_line" => 1,
        _ => 0,
    };
    let (dispatch, guard) = if with_layer {
        let (layer, guard) = proofline::TimelineLayer::builder()
            .no_timeline()
            .poll_interval(Duration::from_secs(60))
            .build();
        (
            tracing::Dispatch::new(tracing_subscriber::registry().with(layer)),
            Some(guard),
        )
    } else {
        (
            tracing::Dispatch::new(tracing_subscriber::registry().with(Noop)),
            None,
        )
    };
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..n {
            one_span(&shape, i);
            if (i + 1) % 1024 == 0 {
                if let Some(g) = &guard {
                    // wait for the worker: the next spans find an empty ring, as a prover's do
                    let want = u64::from(i + 1) * per_span;
                    g.wake();
                    if per_span == 0 {
                        // (a timing line is no event: a pause lets the worker take them)
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    // (bounded: a layer whose counts differ, an older one, is not waited for
                    // forever)
                    let deadline = std::time::Instant::now() + Duration::from_secs(5);
                    while {
                        let s = g.stats();
                        s.received + s.dropped < want && std::time::Instant::now() < deadline
                    } {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            }
        }
    });
    if let Some(g) = guard {
        let s = g.stats();
        // (the counters every version of the layer has: the script builds older ones too)
        eprintln!("{} events received, {} dropped", s.received, s.dropped);
    }
}
