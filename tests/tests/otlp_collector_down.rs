//! A collector down, hanging, or coming back: the prover and the engine go on, shutdown
//! keeps its bound, and the counts add up.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use proofline_core::EngineConfig;

mod common;
use common::*;

#[test]
fn a_collector_that_is_down_costs_nothing_but_its_counters() {
    // a port nobody listens on
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (mut sink, mut handle) =
        proofline_otlp::start(cfg(format!("http://127.0.0.1:{port}/v1/traces"))).unwrap();
    let t = Instant::now();
    replay(&many_jobs_log(10), EngineConfig::default(), &mut sink);
    let engine_time = t.elapsed();
    drop(sink);
    handle.shutdown(Duration::from_secs(20)).unwrap();
    let c = handle.counters();
    let (queued, dropped, exported, failed) = (
        c.snapshot().traces_queued,
        c.snapshot().traces_dropped,
        c.snapshot().spans_exported,
        c.snapshot().spans_failed,
    );
    assert_eq!(
        queued + dropped,
        10,
        "every job's trace is queued or dropped"
    );
    assert_eq!(exported, 0);
    // a trace is 51 spans, 52 with its `previous sector` link span (every job but the first)
    assert!(
        (queued * 51..=queued * 52).contains(&failed),
        "every queued span failed, and was counted: {failed} of {queued} traces"
    );
    assert!(
        engine_time < Duration::from_secs(5),
        "the engine was held up: {engine_time:?}"
    );
}

#[test]
fn a_hanging_collector_blocks_nothing_and_shutdown_keeps_its_bound() {
    let rx = HttpReceiver::start(Mode::Hang);
    let c = cfg(rx.endpoint())
        .queue_capacity(2)
        .timeout(Duration::from_secs(30));
    let (mut sink, mut handle) = proofline_otlp::start(c).unwrap();
    let t = Instant::now();
    replay(&many_jobs_log(12), EngineConfig::default(), &mut sink);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the engine waited for the collector"
    );
    drop(sink);
    let t = Instant::now();
    let err = handle
        .shutdown(Duration::from_secs(2))
        .expect_err("a hanging collector cannot drain the queue");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    // the queue's two, plus the one the exporter took if it woke before the rest came
    // (scheduling decides): the others dropped and counted
    assert_eq!(err.queued + err.dropped, 12);
    assert!((2..=3).contains(&err.queued), "{err}");
    assert_eq!(err.exported, 0);
    assert!(err.to_string().contains("not delivered"));
    // safe to call again
    assert_eq!(handle.shutdown(Duration::from_secs(1)).unwrap_err(), err);
}

#[test]
fn when_the_collector_comes_back_new_traces_arrive() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener); // down for now
    let (mut sink, mut handle) =
        proofline_otlp::start(cfg(format!("http://{addr}/v1/traces"))).unwrap();
    let log = many_jobs_log(4);
    replay(&log, EngineConfig::default(), &mut sink);
    let c = handle.counters();
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.snapshot().spans_failed < 4 * 51 {
        assert!(
            Instant::now() < deadline,
            "the exports to a down collector did not fail"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // the collector comes back on the same address
    let rx = HttpReceiver::start_on(TcpListener::bind(addr).unwrap(), Mode::Answer);
    let second = log.replace("porep-1000-", "porep-2000-");
    let mut sink2 = sink;
    replay(&second, EngineConfig::default(), &mut sink2);
    drop(sink2);
    handle.shutdown(Duration::from_secs(20)).unwrap();
    // 4 traces of 51 spans, the 3 after the first with their `previous sector` span
    let spans = rx.got.wait_for(4 * 51 + 3, 10);
    assert!(spans.iter().all(|s| {
        !matches!(attr(s, "job.id"), Some(Value::StringValue(j)) if j.starts_with("porep-1000-"))
    }));
    assert_eq!(c.snapshot().spans_exported, 4 * 51 + 3);
    assert_eq!(c.snapshot().spans_failed, 4 * 51 + 3);
}
