//! The traces real receivers get: one per job, its stages, attributes and links, over HTTP
//! and gRPC; a job that finishes first linked from the one before it; the live layer and a
//! replay of its log send the same traces.

use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use proofline_core::EngineConfig;
use proofline_core::sink::UpdateSink;
use proofline_otlp::Transport;

mod common;
use common::*;

#[test]
fn http_receiver_gets_one_trace_per_job_with_stages_attributes_and_links() {
    let rx = HttpReceiver::start(Mode::Answer);
    let (mut sink, mut handle) = proofline_otlp::start(cfg(rx.endpoint())).unwrap();
    replay(LOG, engine_cfg(), &mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    let spans = rx.got.wait_for(39, 10);
    check_known_log(&spans);
    let c = handle.counters();
    assert_eq!(c.snapshot().spans_exported, 39);
    assert_eq!(c.snapshot().traces_dropped, 0);
    // service.name defaults to cuzk
    assert!(
        rx.got
            .0
            .lock()
            .unwrap()
            .iter()
            .all(|(svc, _)| svc == "cuzk")
    );
}

#[test]
fn grpc_receiver_gets_the_same_traces() {
    let (addr, got) = grpc_receiver();
    let c = cfg(format!("http://{addr}")).transport(Transport::Grpc);
    let (mut sink, mut handle) = proofline_otlp::start(c).unwrap();
    replay(LOG, engine_cfg(), &mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    check_known_log(&got.wait_for(39, 10));
}

#[test]
fn a_job_that_finishes_first_is_linked_from_the_job_before_it() {
    let rx = HttpReceiver::start(Mode::Answer);
    let (mut sink, mut handle) = proofline_otlp::start(cfg(rx.endpoint())).unwrap();
    // every job completes when its last partition ends, so q and r go out before p
    let ecfg = engine_cfg().completion_grace_ms(0);
    replay(OVERTAKEN_LOG, ecfg, &mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    // 3 jobs x (1 root + 2 partitions x (1 + 3 stages)), and p's `next sector` span
    let spans = rx.got.wait_for(28, 10);
    assert_eq!(spans.len(), 28);
    let root = |job: &str| root_of(&spans, job).clone();
    let (p, q, r) = (root("p"), root("q"), root("r"));
    // q went out first, before p -> q was known: the link is in p's trace, pointing forward
    assert!(child(&spans, &q, "previous sector").is_none());
    assert_eq!(int(&q, "transition.gap_ms"), None);
    let next = child(&spans, &p, "next sector").expect("p's forward link");
    assert_eq!(next.links.len(), 1, "{:?}", next.links);
    let link = &next.links[0];
    assert_eq!(
        (link.trace_id.clone(), link.span_id.clone()),
        (q.trace_id.clone(), q.span_id.clone())
    );
    let link_attr = |key: &str| {
        link.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref()?.value.clone())
    };
    assert_eq!(
        link_attr("link.kind"),
        Some(Value::StringValue("next_sector".into()))
    );
    // q's first GPU_START (2000) - p's last GPU_END (5000)
    assert_eq!(link_attr("transition.gap_ms"), Some(Value::IntValue(-3000)));
    assert_eq!(
        link_attr("transition.overlap_ms"),
        Some(Value::IntValue(3000))
    );
    // q -> r: both were sent before it was known; counted, not lost silently
    assert!(child(&spans, &r, "previous sector").is_none());
    assert!(child(&spans, &q, "next sector").is_none());
    assert_eq!(handle.counters().snapshot().links_unplaced, 1);
}

#[test]
fn the_live_layer_and_a_replay_of_its_log_send_the_same_traces() {
    use proofline::TimelineLayer;

    let live_rx = HttpReceiver::start(Mode::Answer);
    let (otlp, mut handle) = proofline_otlp::start(cfg(live_rx.endpoint())).unwrap();
    let buf = proofline_tests::SharedBuf::default();
    let ecfg = EngineConfig::default()
        .reorder_window_ms(1000)
        .completion_grace_ms(1000);
    let (layer, mut guard) = TimelineLayer::builder()
        .engine_config(ecfg.clone())
        .timeline_to_writer(buf.clone())
        .sink(otlp)
        .build();
    run_three_sectors_with_a_stall(layer);
    guard.shutdown(Duration::from_secs(10)).unwrap();
    handle.shutdown(Duration::from_secs(10)).unwrap();
    let live = live_rx.got.spans();
    // 3 jobs x (1 + 10 x 5), and a `previous sector` span in the 2 after the first
    assert_eq!(live.len(), 155);

    let log = buf.text();
    let replay_rx = HttpReceiver::start(Mode::Answer);
    let (mut sink, mut h2) = proofline_otlp::start(cfg(replay_rx.endpoint())).unwrap();
    // the run the layer gave its sinks (what `replay --instance --epoch` is told)
    sink.start_run(guard.run());
    replay(&log, ecfg, &mut sink);
    drop(sink);
    h2.shutdown(Duration::from_secs(10)).unwrap();
    let replayed = replay_rx.got.wait_for(155, 10);
    let mut a: Vec<_> = live.iter().map(key).collect();
    let mut b: Vec<_> = replayed.iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

/// Job `b` runs on two GPUs after job `a` on both: 50 ms after it on GPU 0, 3 s after it on
/// GPU 1 (a stall there only).
const TWO_GPU_LOG: &str = "\
TIMELINE,0,SYNTH_START,a,partition=0
TIMELINE,0,SYNTH_START,a,partition=1
TIMELINE,90,SYNTH_END,a,partition=0,synth_ms=90
TIMELINE,90,SYNTH_END,a,partition=1,synth_ms=90
TIMELINE,100,GPU_START,a,worker=0,partition=0,gpu=0
TIMELINE,100,GPU_START,a,worker=2,partition=1,gpu=1
TIMELINE,150,SYNTH_START,b,partition=0
TIMELINE,150,SYNTH_START,b,partition=1
TIMELINE,200,GPU_END,a,worker=0,partition=0,gpu_ms=100,gpu=0
TIMELINE,200,GPU_END,a,worker=2,partition=1,gpu_ms=100,gpu=1
TIMELINE,240,SYNTH_END,b,partition=0,synth_ms=90
TIMELINE,250,GPU_START,b,worker=0,partition=0,gpu=0
TIMELINE,350,GPU_END,b,worker=0,partition=0,gpu_ms=100,gpu=0
TIMELINE,3100,SYNTH_END,b,partition=1,synth_ms=2950
TIMELINE,3200,GPU_START,b,worker=2,partition=1,gpu=1
TIMELINE,3300,GPU_END,b,worker=2,partition=1,gpu_ms=100,gpu=1
";

#[test]
fn a_job_on_two_gpus_carries_each_gpus_transition_into_it() {
    let rx = HttpReceiver::start(Mode::Answer);
    let (mut sink, mut handle) = proofline_otlp::start(cfg(rx.endpoint())).unwrap();
    replay(TWO_GPU_LOG, engine_cfg(), &mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    let spans = rx.got.spans();
    let b = root_of(&spans, "b").clone();
    // the first GPU's numbers as before, and the widest gap with its GPU
    assert_eq!(int(&b, "transition.gpu"), Some(0));
    assert_eq!(int(&b, "transition.gap_ms"), Some(50));
    assert_eq!(int(&b, "transition.gpus"), Some(2));
    assert_eq!(int(&b, "transition.max_gap_ms"), Some(3000));
    assert_eq!(int(&b, "transition.max_gap_gpu"), Some(1));
    // a link per GPU, each with its own numbers: the stall on GPU 1 is in the trace
    let prev = child(&spans, &b, "previous sector").expect("b's link to a");
    let by_gpu: Vec<(i64, i64)> = prev
        .links
        .iter()
        .map(|l| {
            let get = |key: &str| {
                l.attributes.iter().find(|a| a.key == key).and_then(|a| {
                    match a.value.as_ref()?.value.as_ref()? {
                        Value::IntValue(i) => Some(*i),
                        _ => None,
                    }
                })
            };
            (get("gpu").unwrap(), get("transition.gap_ms").unwrap())
        })
        .collect();
    assert_eq!(by_gpu, vec![(0, 50), (1, 3000)]);
    // the span covers both transitions
    let a = root_of(&spans, "a");
    assert_eq!(prev.links[0].trace_id, a.trace_id);
    assert_eq!(
        (prev.end_time_unix_nano - prev.start_time_unix_nano) / 1_000_000,
        3000,
        "from a's last GPU_END (200) to b's last first GPU_START (3200)"
    );
}

/// A prover's own words in span names (`OtlpConfig::nouns`): `previous batch`, `segment N`
/// where cuzk's are `previous sector`, `partition N`; the same spans, ids and attributes.
#[test]
fn span_names_take_the_prover_s_nouns_and_nothing_else_changes() {
    let run = |c: proofline_otlp::OtlpConfig| {
        let rx = HttpReceiver::start(Mode::Answer);
        let (mut sink, mut handle) = proofline_otlp::start(c.endpoint(rx.endpoint())).unwrap();
        replay(LOG, engine_cfg(), &mut sink);
        drop(sink);
        handle.shutdown(Duration::from_secs(10)).unwrap();
        let mut spans = rx.got.wait_for(39, 10);
        spans.sort_by(|a, b| a.span_id.cmp(&b.span_id));
        spans
    };
    let cuzk = run(cfg(String::new()));
    let batch = run(cfg(String::new()).nouns(proofline_core::Nouns::new("batch", "segment")));
    assert_eq!(cuzk.len(), batch.len());
    let renamed = |n: &str| {
        n.replace("previous sector", "previous batch")
            .replace("next sector", "next batch")
            .replace("partition ", "segment ")
    };
    let mut changed = 0;
    for (c, b) in cuzk.iter().zip(&batch) {
        assert_eq!(c.span_id, b.span_id);
        assert_eq!(c.attributes, b.attributes);
        assert_eq!(renamed(&c.name), b.name);
        changed += usize::from(c.name != b.name);
    }
    assert!(batch.iter().any(|s| s.name == "previous batch"));
    assert!(batch.iter().any(|s| s.name == "segment 1"));
    assert!(changed > 8, "{changed} names changed");
}
