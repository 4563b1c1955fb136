//! Which spans and events become which TIMELINE events: `timeline` events, fields from
//! ancestors, custom names and edges, the prover's own lines logged through `tracing`.

use std::thread;
use std::time::Duration;

use proofline::{EventKind, TimelineLayer};
use tracing::info_span;
use tracing_subscriber::prelude::*;

mod common;
use common::*;

#[test]
fn timeline_events_and_ancestor_fields() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .gpu_queue_on_synth_end(false)
        // the worker looks at the span table at its passes with little to do, rare at this
        // interval: whether one sees the gpu_worker span open depends on when it runs
        .poll_interval(Duration::from_secs(120))
        .timeline_to_writer(buf.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        // cuzk's timeline_event() changed from eprintln! to tracing::info!
        tracing::info!(target: "timeline", event = "GPU_QUEUE", job_id = %"porep-9-1", detail = "partition=4");
        tracing::info!(target: "timeline", event = "SYNTH_END", job_id = "winpost-9-ab", synth_ms = 895u64);
        tracing::info!(target: "timeline", event = "GPU_QUEUE", job_id = "winpost-9-ab", detail = "monolithic");
        // not the timeline target: ignored
        tracing::info!(event = "GPU_QUEUE", job_id = "porep-9-1", partition = 5u32);
        // job id and worker from the ancestor gpu_worker span, as in cuzk's sync path
        let w = info_span!("gpu_worker", worker_id = 3u64, gpu = 1i32, job_id = %"porep-9-1", partition = ?Some(4u32));
        w.in_scope(|| {
            // a timeline event inside the span takes the job id and partition from it
            tracing::info!(target: "timeline", event = "GPU_QUEUE");
            info_span!("gpu_prove", circuit_id = "c", partition = ?Some(4u32)).in_scope(|| {})
        });
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let offset = |raw: &str| -> u64 {
        raw.split(',')
            .nth(1)
            .and_then(|o| o.parse().ok())
            .expect(raw)
    };
    let pickup = "TIMELINE,T,GPU_PICKUP,porep-9-1,worker=3,partition=4,gpu=1";
    let start = "TIMELINE,T,GPU_START,porep-9-1,worker=3,partition=4,gpu=1";
    // the span's pickup and start wait in its state and go with its end, or at a look at the
    // span table (a pass of the worker while the span was open, which the 120 s interval
    // makes rare but not impossible: the first pass may come at any time): wherever they are
    // among the events logged, at their own offsets either way
    let (mut edges, mut logged) = (Vec::new(), Vec::new());
    for raw in text.lines() {
        let line = offset_blanked(raw);
        if line == pickup || line == start {
            edges.push((line, offset(raw)));
        } else {
            logged.push((line, offset(raw)));
        }
    }
    let (end, end_at) = logged.pop().unwrap_or_default();
    assert!(
        end.starts_with("TIMELINE,T,GPU_END,porep-9-1,worker=3,partition=4,gpu_ms="),
        "the end is last: {text}"
    );
    assert!(end.ends_with(",gpu=1"), "{text}");
    // the events logged go through one thread's queue: in the order logged
    let names: Vec<&str> = logged.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        names,
        [
            "TIMELINE,T,GPU_QUEUE,porep-9-1,partition=4",
            "TIMELINE,T,SYNTH_END,winpost-9-ab,synth_ms=895",
            "TIMELINE,T,GPU_QUEUE,winpost-9-ab,monolithic",
            // inside the span: job id and partition from it
            "TIMELINE,T,GPU_QUEUE,porep-9-1,partition=4",
        ],
        "{text}"
    );
    let names: Vec<&str> = edges.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(names, [pickup, start], "{text}");
    // offsets: the pickup at the span's creation, before the event inside it, then the start
    let inner_at = logged[3].1;
    assert!(
        edges[0].1 <= inner_at && inner_at <= edges[1].1 && edges[1].1 <= end_at,
        "{text}"
    );
}

#[test]
fn custom_span_names_and_edges() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .clear_mappings()
        .map(
            "build_circuit",
            EventKind::SynthStart,
            proofline::Edge::Created,
        )
        .map("build_circuit", EventKind::SynthEnd, proofline::Edge::Close)
        .timeline_to_writer(buf.clone())
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        info_span!("build_circuit", job_id = "snap-1-1", partition = 15u32).in_scope(|| {});
        info_span!(
            "synthesize_partition",
            job_id = "snap-1-1",
            partition = 14u32
        )
        .in_scope(|| {});
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains(",SYNTH_START,snap-1-1,partition=15\n"));
    assert!(
        !text.contains("partition=14"),
        "default mappings were cleared"
    );
}

/// TIMELINE lines logged through `tracing` (read on the worker's thread) are events received,
/// written out while the prover runs, through a buffered writer, not only at shutdown.
#[test]
fn logged_timeline_lines_are_received_and_written_out_live() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .cuzk_timeline_events()
        .timeline_to_writer(std::io::BufWriter::new(buf.clone()))
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        // (the malformed line first: the worker has counted it when the others are out)
        tracing::info!(target: "timeline", "TIMELINE,oops,GPU_END,x,worker=0");
        for p in 0..3 {
            tracing::info!(target: "timeline", "TIMELINE,{},SYNTH_START,porep-1-1,partition={}", 10 * p, p);
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while buf.text().lines().count() < 3 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        buf.text(),
        "TIMELINE,0,SYNTH_START,porep-1-1,partition=0\nTIMELINE,10,SYNTH_START,porep-1-1,partition=1\nTIMELINE,20,SYNTH_START,porep-1-1,partition=2\n",
        "written out before shutdown"
    );
    let s = guard.stats();
    assert_eq!((s.received, s.malformed), (3, 1), "{s:?}");
    guard.shutdown(Duration::from_secs(10)).unwrap();
}

/// TIMELINE lines logged through `tracing` keep the prover's own offsets, and the engine's
/// clock follows them even when the layer started long before the prover's epoch.
#[test]
fn logged_timeline_lines_keep_their_offsets_and_the_clock_follows_them() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .cuzk_timeline_events()
        .tick(Duration::from_millis(20))
        .engine_config(engine_cfg())
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    // the prover's epoch comes 1.5 s after the layer's: its offsets are 1.5 s behind
    thread::sleep(Duration::from_millis(1500));
    let epoch = std::time::Instant::now();
    let mut sent = Vec::new();
    tracing::dispatcher::with_default(&dispatch, || {
        for (event, detail) in [
            ("SYNTH_START", "kind=winning-post"),
            ("SYNTH_END", "synth_ms=40"),
            ("GPU_QUEUE", "monolithic"),
            ("GPU_PICKUP", "worker=0"),
            ("GPU_START", "worker=0"),
            ("GPU_END", "worker=0,gpu_ms=40"),
        ] {
            thread::sleep(Duration::from_millis(40));
            let ms = epoch.elapsed().as_millis();
            let line = format!("TIMELINE,{ms},{event},winpost-1-ab,{detail}");
            // what cuzk's timeline_event() becomes: its eprintln! turned into a log event
            tracing::info!(target: "timeline", "TIMELINE,{},{},{},{}", ms, event, "winpost-1-ab", detail);
            sent.push(line);
        }
        tracing::info!(target: "timeline", "TIMELINE,oops,GPU_END,x,worker=0");
    });
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    assert_eq!(text.lines().collect::<Vec<_>>(), sent, "{text}");
    assert_eq!(
        report.events.late, 0,
        "the engine's clock ran in the prover's time"
    );
    assert_eq!(report.summary.jobs_complete, 1);
    assert_eq!(guard.stats().malformed, 1);
    // a whole-proof job's lines of the prover's own carry no partition: nothing to warn of
    // (the misnamed-partition warning is the span mappings')
    assert_eq!(guard.stats().warnings, 0);
}
