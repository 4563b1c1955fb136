//! Emits `N` mapped spans from four threads through a TimelineLayer whose per-thread queue
//! holds `CAPACITY` entries, shuts it down and prints its counters on stdout; whatever the
//! layer says on stderr is left there. For the tests of what a prover's stderr shows.
//!
//!     flood N CAPACITY

use std::time::Duration;

use proofline::TimelineLayer;
use tracing_subscriber::prelude::*;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("usage: flood N CAPACITY"))
        .collect();
    let [spans, capacity] = args[..] else {
        panic!("usage: flood N CAPACITY");
    };
    let (layer, mut guard) = TimelineLayer::builder()
        .no_timeline()
        .channel_capacity(capacity as usize)
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let d = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for i in 0..spans / 4 {
                        tracing::info_span!(
                            "synthesize_partition",
                            job_id = %format!("porep-1-{t}"),
                            partition = i
                        )
                        .in_scope(|| {});
                    }
                });
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a span thread panicked");
    }
    guard
        .shutdown(Duration::from_secs(30))
        .expect("the worker did not shut down");
    let s = guard.stats();
    println!("received={} dropped={}", s.received, s.dropped);
}
