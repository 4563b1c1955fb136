//! A small cuzk with the layer inside: what the layer writes, analyzed offline, gives the
//! live report; every span's events come out.

use std::time::Duration;

use proofline::{EventKind, TimelineLayer};
use proofline_core::reader::LineFeeder;
use proofline_core::sink::NoUpdates;
use proofline_core::{Engine, parse_line};
use tracing::info_span;
use tracing_subscriber::prelude::*;

mod common;
use common::*;

#[test]
fn one_engine_two_doors_live_report_equals_analyze_of_the_written_log() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .engine_config(engine_cfg())
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    run_cuzk_shaped(&dispatch, 6, 10, 8);
    let live = guard.shutdown(Duration::from_secs(10)).unwrap();
    let stats = guard.stats();
    assert_eq!(stats.dropped, 0);

    let text = buf.text();
    let mut per_kind = [0u64; 6];
    for line in text.lines() {
        let ev = parse_line(line)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .expect("only TIMELINE lines");
        per_kind[ev.kind.index()] += 1;
        if matches!(
            ev.kind,
            EventKind::GpuStart | EventKind::GpuEnd | EventKind::GpuPickup
        ) {
            assert_eq!(ev.gpu, Some(ev.worker.unwrap() / 2), "{line}");
        }
    }
    assert_eq!(
        per_kind, [60; 6],
        "every partition yields its six events: {stats:?}"
    );
    assert_eq!(stats.written, 360);

    let mut engine = Engine::new(engine_cfg());
    let mut feeder = LineFeeder::new();
    feeder
        .feed_all(&mut text.as_bytes(), &mut engine, &mut NoUpdates, |_| {})
        .unwrap();
    engine.finish(&mut NoUpdates);
    let offline = engine.report();
    assert_eq!(live.summary.jobs_complete, 6);
    assert_eq!(live.gpus.len(), 2);
    assert_eq!(live.gpus, offline.gpus);
    assert_eq!(live.summary, offline.summary);
    assert_eq!(live.transitions, offline.transitions);
    assert_eq!(live.jobs, offline.jobs);
    assert_eq!(live.stages, offline.stages);
    assert_eq!(live.verdict, offline.verdict);
}

#[test]
fn n_spans_in_n_sets_of_events_out() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .timeline_to_writer(buf.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..1000u32 {
            info_span!("synthesize_partition", job_id = "porep-1-1", partition = i).in_scope(|| {});
        }
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    assert_eq!(text.lines().count(), 3000);
    for (kind, n) in [
        ("SYNTH_START", 1000),
        ("SYNTH_END", 1000),
        ("GPU_QUEUE", 1000),
    ] {
        assert_eq!(
            text.lines()
                .filter(|l| l.split(',').nth(2) == Some(kind))
                .count(),
            n,
            "{kind}"
        );
    }
    assert_eq!(guard.stats().received, 3000);
}

/// Two layers in one subscriber (each with its own engine) each learn every job's proof kind:
/// what one layer's entries carried is not taken as carried by the other's.
#[test]
fn two_layers_on_one_thread_each_learn_the_proof_kind() {
    // (a worker that barely looks at the span table, once as it starts: every event goes
    // with its span's close, on the prover's thread)
    let layer = || {
        TimelineLayer::builder()
            .engine_config(engine_cfg())
            .poll_interval(Duration::from_secs(120))
            .no_timeline()
            .build()
    };
    let ((a, mut guard_a), (b, mut guard_b)) = (layer(), layer());
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(a).with(b));
    tracing::dispatcher::with_default(&dispatch, || {
        // a job id that says no kind of itself
        for p in 0..3u32 {
            info_span!("gpu_worker", worker_id = 0u32, gpu = 0u32, job_id = %"batch-7",
                proof_kind = %"snap-prove", partition = ?Some(p))
            .in_scope(|| {});
        }
    });
    for guard in [&mut guard_a, &mut guard_b] {
        let report = guard.shutdown(Duration::from_secs(10)).unwrap();
        let kinds: Vec<_> = report.jobs.iter().map(|j| j.proof_kind.clone()).collect();
        assert_eq!(kinds, [Some("snap-prove".into())], "{:?}", report.jobs);
    }
}
