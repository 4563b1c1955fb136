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
        // (written while the span runs)
        buf.wait_for(",SYNTH_START,porep-1-7,partition=3\n");
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

/// cuzk's `gpu_worker` span: its GPU_PICKUP (at its creation) waits in its state as its
/// start does. A span that waits and runs is told while it does (the worker takes both from
/// the span table); one that is never entered still tells its pickup; a failed one its
/// pickup and start; one that ends before the worker looks sends all three in one entry,
/// each at its own offset and in order.
#[test]
fn a_gpu_workers_pickup_is_told_while_it_waits_and_goes_with_its_end() {
    let lines_of = |text: &str, job: &str| -> Vec<(EventKind, u64)> {
        text.lines()
            .filter_map(|l| parse_line(l).ok().flatten())
            .filter(|ev| ev.job_id == job)
            .map(|ev| (ev.kind, ev.offset_ms))
            .collect()
    };
    let gpu_worker = |job: &'static str| info_span!("gpu_worker", worker_id = 1u64, gpu = 0u64, job_id = %job, proof_kind = %"porep-c2", partition = ?Some(2u32));

    // polled every 5 ms: a span that waits, then runs, is told as it goes
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .poll_interval(Duration::from_millis(5))
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let span = gpu_worker("porep-2-1");
        buf.wait_for(",GPU_PICKUP,porep-2-1,worker=1,partition=2,gpu=0\n");
        assert!(!buf.text().contains("GPU_START"), "{}", buf.text());
        let running = span.enter();
        buf.wait_for(",GPU_START,porep-2-1,");
        assert!(!buf.text().contains("GPU_END"), "{}", buf.text());
        drop(running);
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let kinds: Vec<EventKind> = lines_of(&buf.text(), "porep-2-1")
        .iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(
        kinds,
        [EventKind::GpuPickup, EventKind::GpuStart, EventKind::GpuEnd]
    );

    // a worker that never looks: what the spans tell goes with their closes
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .poll_interval(Duration::from_secs(120))
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let span = gpu_worker("porep-2-2");
        thread::sleep(Duration::from_millis(40));
        span.in_scope(|| thread::sleep(Duration::from_millis(40)));
        drop(span);
        // made and closed, never entered: it was picked up, never started
        drop(gpu_worker("porep-2-3"));
        // failed inside: picked up and started, no end
        gpu_worker("porep-2-4").in_scope(|| tracing::error!("the GPU call failed"));
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let three = lines_of(&text, "porep-2-2");
    let kinds: Vec<EventKind> = three.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        [EventKind::GpuPickup, EventKind::GpuStart, EventKind::GpuEnd],
        "{text}"
    );
    let (pickup, start, end) = (three[0].1, three[1].1, three[2].1);
    assert!(
        start >= pickup + 35,
        "the pickup at the span's creation: {text}"
    );
    assert!(end >= start + 35, "{text}");
    assert!(
        text.contains(",GPU_PICKUP,porep-2-2,worker=1,partition=2,gpu=0\n"),
        "{text}"
    );
    let kinds = |job| -> Vec<EventKind> { lines_of(&text, job).iter().map(|e| e.0).collect() };
    assert_eq!(kinds("porep-2-3"), [EventKind::GpuPickup], "{text}");
    assert_eq!(
        kinds("porep-2-4"),
        [EventKind::GpuPickup, EventKind::GpuStart],
        "{text}"
    );
    let s = guard.stats();
    assert_eq!((s.received, s.written, s.dropped), (6, 6, 0), "{s:?}");
}

/// Creation events in mappings other than cuzk's: one that cannot ride with the start and
/// end (a GPU event before a synthesis start, whose line has no worker) goes alone, first;
/// one before a start that does not wait (two events at the first enter) goes before it; a
/// SYNTH_END at the creation keeps its GPU_QUEUE.
#[test]
fn creation_events_of_other_mappings_go_first_and_whole() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .clear_mappings()
        .map("odd", EventKind::GpuPickup, Edge::Created)
        .map("odd", EventKind::SynthStart, Edge::FirstEnter)
        .map("odd", EventKind::SynthEnd, Edge::Close)
        .map("two", EventKind::GpuPickup, Edge::Created)
        .map("two", EventKind::GpuQueue, Edge::FirstEnter)
        .map("two", EventKind::GpuStart, Edge::FirstEnter)
        .map("two", EventKind::GpuEnd, Edge::Close)
        .map("built", EventKind::SynthEnd, Edge::Created)
        .poll_interval(Duration::from_secs(120))
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        info_span!(
            "odd",
            job_id = "porep-3-1",
            partition = 1u32,
            worker = 2u32,
            gpu = 1u32
        )
        .in_scope(|| {});
        info_span!(
            "two",
            job_id = "porep-3-2",
            partition = 0u32,
            worker = 1u32,
            gpu = 0u32
        )
        .in_scope(|| {});
        drop(info_span!("built", job_id = "porep-3-3", partition = 4u32));
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let of = |job: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains(&format!(",{job},")))
            .map(offset_blanked)
            .collect()
    };
    assert_eq!(
        of("porep-3-1"),
        [
            "TIMELINE,T,GPU_PICKUP,porep-3-1,worker=2,partition=1,gpu=1",
            "TIMELINE,T,SYNTH_START,porep-3-1,partition=1",
            "TIMELINE,T,SYNTH_END,porep-3-1,partition=1,synth_ms=0",
            "TIMELINE,T,GPU_QUEUE,porep-3-1,partition=1",
        ],
        "{text}"
    );
    assert_eq!(
        of("porep-3-2"),
        [
            "TIMELINE,T,GPU_PICKUP,porep-3-2,worker=1,partition=0,gpu=0",
            "TIMELINE,T,GPU_QUEUE,porep-3-2,partition=0",
            "TIMELINE,T,GPU_START,porep-3-2,worker=1,partition=0,gpu=0",
            "TIMELINE,T,GPU_END,porep-3-2,worker=1,partition=0,gpu_ms=0,gpu=0",
        ],
        "{text}"
    );
    assert_eq!(
        of("porep-3-3"),
        [
            "TIMELINE,T,SYNTH_END,porep-3-3,partition=4",
            "TIMELINE,T,GPU_QUEUE,porep-3-3,partition=4",
        ],
        "{text}"
    );
    let s = guard.stats();
    assert_eq!((s.received, s.written, s.dropped), (10, 10, 0), "{s:?}");
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
