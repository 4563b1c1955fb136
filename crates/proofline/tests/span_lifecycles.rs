//! Spans in every life cuzk gives them: entered on many threads, closed elsewhere, never
//! entered, panicking, long, short, failed.

use std::thread;
use std::time::Duration;

use proofline::{Edge, EventKind, TimelineLayer};
use proofline_core::parse_line;
use tracing::{Instrument as _, info_span};
use tracing_subscriber::prelude::*;

mod common;
use common::*;

/// A layer's builder for a prover whose GPU work has a span of its own, `gpu_prove` (cuzk's
/// has none on its default path).
fn gpu_prove_mapped() -> proofline::Builder {
    TimelineLayer::builder()
        .map("gpu_prove", EventKind::GpuStart, Edge::FirstEnter)
        .map("gpu_prove", EventKind::GpuEnd, Edge::Close)
}

#[test]
fn spans_entered_on_many_threads_closed_elsewhere_never_entered_or_panicking() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = gpu_prove_mapped().timeline_to_writer(buf.clone()).build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        // entered many times, on several threads (as an async span is): one SYNTH_START
        let span = info_span!(
            "synthesize_partition",
            job_id = "porep-7-1",
            partition = 0u32
        );
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = span.clone();
                let d = dispatch.clone();
                thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        s.in_scope(|| thread::sleep(Duration::from_millis(5)))
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        // ... and closed on another thread
        let d = dispatch.clone();
        thread::spawn(move || tracing::dispatcher::with_default(&d, || drop(span)))
            .join()
            .unwrap();

        // created and never entered: it never ran, so nothing is emitted
        drop(info_span!(
            "synthesize_partition",
            job_id = "porep-7-1",
            partition = 1u32
        ));

        // closed while its thread panics: the start is emitted, the end is not
        let d = dispatch.clone();
        let r = thread::spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                let _e = info_span!(
                    "gpu_prove",
                    job_id = "porep-7-1",
                    worker = 3u32,
                    partition = 0u32
                )
                .entered();
                panic!("GPU worker panics");
            })
        })
        .join();
        assert!(r.is_err());

        // an async span entered at each poll
        let fut = async {
            for _ in 0..3 {
                std::future::ready(()).await;
            }
        }
        .instrument(info_span!(
            "synthesize_partition",
            job_id = "porep-7-2",
            partition = 0u32
        ));
        futures_lite_block_on(fut);

        // the layer keeps working after the panic
        info_span!(
            "synthesize_partition",
            job_id = "porep-7-3",
            partition = 0u32
        )
        .in_scope(|| {});
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let lines: Vec<&str> = text.lines().collect();
    let count = |job: &str, kind: &str| {
        lines
            .iter()
            .filter(|l| l.contains(&format!(",{kind},{job},")))
            .count()
    };
    assert_eq!(count("porep-7-1", "SYNTH_START"), 1, "{text}");
    assert_eq!(count("porep-7-1", "SYNTH_END"), 1);
    assert!(
        !text.contains("porep-7-1,partition=1"),
        "a never-entered span emits nothing"
    );
    assert_eq!(count("porep-7-1", "GPU_START"), 1);
    assert_eq!(
        count("porep-7-1", "GPU_END"),
        0,
        "no end for a span closed by a panic"
    );
    assert_eq!(guard.stats().aborted, 1);
    assert_eq!(count("porep-7-2", "SYNTH_START"), 1);
    assert_eq!(count("porep-7-2", "SYNTH_END"), 1);
    assert_eq!(count("porep-7-3", "SYNTH_END"), 1);
    let end = lines
        .iter()
        .find(|l| l.contains(",SYNTH_END,porep-7-1,"))
        .unwrap();
    let ms: u64 = end.rsplit("synth_ms=").next().unwrap().parse().unwrap();
    assert!(ms >= 5, "synth_ms covers first enter to close: {end}");
}

/// A long span's start is written while it runs (the worker takes it from the span table);
/// a span that ends at once sends its start and end together, still in order.
#[test]
fn a_start_is_written_while_its_span_runs_and_a_short_span_keeps_its_order() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = gpu_prove_mapped()
        .poll_interval(Duration::from_millis(5))
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let span = info_span!("synthesize_partition", job_id = "porep-1-7", partition = 3);
        let _running = span.enter();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !buf.text().contains(",SYNTH_START,porep-1-7,partition=3\n") {
            assert!(
                std::time::Instant::now() < deadline,
                "SYNTH_START not written while the span runs: {:?}",
                buf.text()
            );
            thread::sleep(Duration::from_millis(2));
        }
        assert!(!buf.text().contains("SYNTH_END"), "{}", buf.text());
    });
    tracing::dispatcher::with_default(&dispatch, || {
        info_span!("gpu_prove", job_id = "porep-1-8", partition = 0, worker = 1).in_scope(|| {});
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let kinds: Vec<(EventKind, &str)> = text
        .lines()
        .map(|l| {
            let ev = parse_line(l).unwrap().unwrap();
            (ev.kind, ev.job_id)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::SynthStart, "porep-1-7"),
            (EventKind::SynthEnd, "porep-1-7"),
            (EventKind::GpuQueue, "porep-1-7"),
            (EventKind::GpuStart, "porep-1-8"),
            (EventKind::GpuEnd, "porep-1-8"),
        ],
        "{text}"
    );
    assert!(
        text.contains(",GPU_START,porep-1-8,worker=1,partition=0\n"),
        "{text}"
    );
    let s = guard.stats();
    assert_eq!((s.received, s.written, s.dropped), (5, 5, 0));
}

/// A synthesis span that records an error (later, or when it is made), or has an ERROR event
/// inside it or inside a span within it, failed: no SYNTH_END and no GPU_QUEUE (cuzk prints
/// neither), counted.
#[test]
fn a_synthesis_span_that_records_an_error_emits_no_end() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let s = info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 0u32,
            error = tracing::field::Empty
        );
        s.in_scope(|| {});
        s.record("error", "out of memory");
        drop(s);
        info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 1u32
        )
        .in_scope(|| tracing::error!("constraint system unsatisfied"));
        info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 2u32
        )
        .in_scope(|| tracing::warn!("slow"));
        // failed from the start: `error` given when the span is made
        info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 3u32,
            error = "no memory for the witness"
        )
        .in_scope(|| {});
        // an ERROR event in a span of the prover's own inside the mapped one
        info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 4u32
        )
        .in_scope(|| {
            info_span!("sha256_layer", layer = 3u32).in_scope(|| tracing::error!("bad parent node"))
        });
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let kinds: Vec<(EventKind, Option<u32>)> = text
        .lines()
        .map(|l| {
            let ev = parse_line(l).unwrap().unwrap();
            (ev.kind, ev.partition)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::SynthStart, Some(0)),
            (EventKind::SynthStart, Some(1)),
            (EventKind::SynthStart, Some(2)),
            (EventKind::SynthEnd, Some(2)),
            (EventKind::GpuQueue, Some(2)),
            (EventKind::SynthStart, Some(3)),
            (EventKind::SynthStart, Some(4)),
        ],
        "{text}"
    );
    assert_eq!(guard.stats().failed, 4);
}
