//! What the exporter makes of a collector's answers, from a real OTLP/HTTP endpoint on
//! 127.0.0.1: a partial success counts its rejected spans as failed and names them; a 503
//! with `Retry-After` is tried again; a 400 is not.

use std::sync::atomic::Ordering;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use proofline_core::sink::UpdateSink;
use proofline_core::{Engine, RunInfo, parse_line};
use proofline_otlp::{FailureKind, OtlpConfig};
use proofline_tests::collector_with as collector;
use prost::Message;

/// One complete two-partition job through an engine into the OTLP sink; the handle's
/// counters and failures after shutdown.
fn export_one_job(
    endpoint: String,
) -> (
    proofline_core::sink::ExportTotals,
    Vec<proofline_otlp::ExportFailure>,
) {
    let (mut sink, mut handle) = proofline_otlp::start(
        OtlpConfig::default()
            .endpoint(endpoint)
            .timeout(Duration::from_secs(5)),
    )
    .unwrap();
    sink.start_run(&RunInfo::new("test", 0));
    let mut engine = Engine::default();
    for l in [
        "TIMELINE,0,SYNTH_START,j,partition=0",
        "TIMELINE,10,SYNTH_END,j,partition=0,synth_ms=10",
        "TIMELINE,10,GPU_START,j,worker=0,partition=0",
        "TIMELINE,20,GPU_END,j,worker=0,partition=0,gpu_ms=10",
    ] {
        engine.ingest(&parse_line(l).unwrap().unwrap(), &mut sink);
    }
    engine.finish(&mut sink);
    drop(sink);
    handle.shutdown(Duration::from_secs(10)).unwrap();
    (handle.counters().snapshot(), handle.failures())
}

#[test]
fn a_partial_success_counts_the_rejected_spans_as_failed_and_names_them() {
    let (url, _) = collector(|_, _| {
        let body = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess {
                rejected_spans: 2,
                error_message: "spans too old".into(),
            }),
        }
        .encode_to_vec();
        Some(("200 OK", body))
    });
    let (c, failures) = export_one_job(url);
    let spans = c.spans_exported + c.spans_failed;
    assert!(spans >= 3, "{c:?}");
    assert_eq!(c.spans_failed, 2, "{c:?}");
    assert_eq!(c.traces_exported, 1);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].kind, FailureKind::Rejected);
    assert_eq!(failures[0].spans, 2);
    assert!(
        failures[0].first.contains("rejected 2 spans")
            && failures[0].first.contains("spans too old")
    );
}

#[test]
fn a_503_is_tried_again_and_a_400_is_not() {
    let (url, posts) = collector(|n, _| {
        if n < 2 {
            Some(("503 Busy", Vec::new()))
        } else {
            Some(("200 OK", Vec::new()))
        }
    });
    let (c, failures) = export_one_job(url);
    assert_eq!((c.traces_exported, c.traces_failed), (1, 0), "{failures:?}");
    assert_eq!(posts.load(Ordering::SeqCst), 3);
    assert!(failures.is_empty());

    let (url, posts) = collector(|_, _| Some(("400 Bad Request", Vec::new())));
    let (c, failures) = export_one_job(url);
    assert_eq!((c.traces_exported, c.traces_failed), (0, 1));
    assert_eq!(posts.load(Ordering::SeqCst), 1, "a 400 is not retried");
    assert_eq!(failures[0].kind, FailureKind::Http(400));
    assert_eq!(failures[0].kind.to_string(), "HTTP 400");
}
