//! `proofline replay`, `watch` and `demo` send traces to a real OTLP/HTTP endpoint on
//! 127.0.0.1 (a plain socket server here, decoding the protobuf body with
//! opentelemetry-proto).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

mod common;
use common::{Proc, free_port, fresh_dir, http_get, proofline};

/// A log of `jobs` PoRep jobs from `proofline generate`, in a directory of this test's.
fn generated_log(test: &str, jobs: u32) -> std::path::PathBuf {
    common::generated_log(&fresh_dir("replay", test), &["--jobs", &jobs.to_string()])
}

/// Accepts OTLP/HTTP posts to `/v1/traces`, answers 200, and hands every span over; its
/// base URL (the exporter adds the path).
fn receiver() -> (String, mpsc::Receiver<Span>) {
    let (tx, rx) = mpsc::channel();
    let (url, _) = proofline_tests::collector_with(move |_, body| {
        let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
        for s in req.resource_spans.into_iter().flat_map(|rs| rs.scope_spans) {
            for s in s.spans {
                let _ = tx.send(s);
            }
        }
        let resp = ExportTraceServiceResponse {
            partial_success: None,
        };
        Some(("200 OK", resp.encode_to_vec()))
    });
    (url.trim_end_matches("/v1/traces").to_string(), rx)
}

/// Runs `proofline replay` of `log` to `endpoint` (the OTEL variables unset); its stderr.
fn replay_to(endpoint: &str, log: &std::path::Path, args: &[&str]) -> String {
    let out = proofline()
        .args(["replay", "--endpoint", endpoint])
        .args(args)
        .arg(log)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{err}");
    err
}

#[test]
fn replay_sends_one_trace_per_job_at_the_epoch_given() {
    let log = generated_log("replay", 5);
    let (endpoint, rx) = receiver();
    let err = replay_to(
        &endpoint,
        &log,
        &["--epoch", "2026-11-30T01:31:00Z", "--instance", "old"],
    );
    assert!(err.contains("5 traces, all delivered (259 spans)"), "{err}");
    assert!(!err.contains("had no trace"), "{err}");
    let spans: Vec<Span> = rx.try_iter().collect();
    assert_eq!(
        spans.len(),
        259,
        "5 jobs x (1 root + 10 partitions x 5 spans) + 4 previous-sector spans"
    );
    let epoch_ns = 1_796_002_260_000u64 * 1_000_000;
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 5);
    // job 0 starts at offset 0: its root starts at the epoch
    let first = roots
        .iter()
        .find(|s| s.name == "porep-c2 porep-1000-0")
        .unwrap();
    assert_eq!(first.start_time_unix_nano, epoch_ns);
    // its trace id is the one the Prometheus exemplars of that run carry
    let want = proofline_core::ids::trace_id(
        &proofline_core::ids::run_key("old", 1_796_002_260_000),
        0,
        "porep-1000-0",
        0,
    );
    assert_eq!(first.trace_id, want.0.to_vec());
    // every later sector links to the one before it, from a child of its root (no root
    // carries a link: Jaeger would read it as a missing parent)
    assert!(roots.iter().all(|s| s.links.is_empty()));
    let links: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "previous sector" && s.links.len() == 1)
        .collect();
    assert_eq!(links.len(), 4);
    for l in links {
        let parent = roots
            .iter()
            .find(|r| r.span_id == l.parent_span_id)
            .unwrap();
        assert_eq!(l.trace_id, parent.trace_id);
    }
}

#[test]
fn replay_without_a_collector_or_with_a_bad_epoch_says_what_is_wrong() {
    let out = proofline()
        .args(["replay", "some.log"])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no collector: pass --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT")
    );
    let out = proofline()
        .args([
            "replay",
            "--endpoint",
            "http://127.0.0.1:9",
            "--epoch",
            "yesterday",
            "some.log",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--epoch `yesterday` is not an RFC 3339 time")
    );
    // an epoch whose nanoseconds wrap (2554) or overflow many stores (2262): refused, before
    // spans dated 1970 or 2400 are sent
    let out = proofline()
        .args(["replay", "--endpoint", "http://127.0.0.1:9"])
        .args(["--epoch", "2554-07-21T23:34:00Z", "some.log"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spans after 2200 cannot be sent"), "{err}");
}

/// Two jobs that overtake a third on their GPU: the link between them has no trace left to
/// carry it, and replay says so.
#[test]
fn replay_says_when_a_link_had_no_trace_to_carry_it() {
    let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/tests/data/overtaken.log");
    let (endpoint, rx) = receiver();
    let err = replay_to(&endpoint, &log, &["--partitions", "2"]);
    assert!(err.contains("3 traces, all delivered (28 spans)"), "{err}");
    assert!(
        err.contains("1 sector-to-sector links had no trace to carry them"),
        "{err}"
    );
    // the other link of the three (p -> q) goes forward, from a child of p's root
    let spans: Vec<Span> = rx.try_iter().collect();
    let linked: Vec<&Span> = spans.iter().filter(|s| !s.links.is_empty()).collect();
    assert_eq!(linked.len(), 1, "{linked:?}");
    assert_eq!(linked[0].name, "next sector");
    let p_root = spans
        .iter()
        .find(|s| s.span_id == linked[0].parent_span_id)
        .unwrap();
    assert!(p_root.name.ends_with('p'), "{}", p_root.name);
}

#[test]
fn the_demo_sends_traces_when_the_otel_variables_name_a_collector() {
    let dir = std::env::temp_dir().join(format!("proofline-demo-otlp-{}", std::process::id()));
    let (endpoint, rx) = receiver();
    let out = proofline()
        .args([
            "demo",
            "--speed",
            "100",
            "--jobs",
            "2",
            "--no-metrics",
            "--instance",
            "traced",
            "--out",
        ])
        .arg(&dir)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_SERVICE_NAME", "cuzk-demo")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans: Vec<Span> = rx.try_iter().collect();
    assert_eq!(
        spans.len(),
        2 * 51 + 1,
        "2 jobs x (1 root + 10 partitions x 5 spans), and the second's previous-sector span"
    );
    assert_eq!(
        spans.iter().filter(|s| s.parent_span_id.is_empty()).count(),
        2
    );
}

/// A span as the epoch does not change it: its name, its parent's name, its length, its
/// links.
fn shape(spans: &[Span]) -> Vec<(String, String, u64, usize)> {
    let name_of = |id: &[u8]| {
        spans
            .iter()
            .find(|s| s.span_id == id)
            .map_or(String::new(), |s| s.name.clone())
    };
    let mut v: Vec<_> = spans
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                name_of(&s.parent_span_id),
                s.end_time_unix_nano - s.start_time_unix_nano,
                s.links.len(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The sidecar sends the traces `replay` sends for the same log: same spans, same lengths,
/// same links (only the epoch differs: `watch` takes it from the clock when it starts).
#[test]
fn watch_sends_the_traces_replay_sends_for_the_same_log() {
    let log = generated_log("watch-otlp", 3);
    let (endpoint, rx) = receiver();
    let metrics = format!("127.0.0.1:{}", free_port());
    let watch = Proc(
        proofline()
            .args(["watch", "--from-start", "--poll-ms", "50", "--metrics-addr"])
            .arg(&metrics)
            .arg(&log)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut watch_spans = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // 3 jobs x (1 root + 10 partitions x 5 spans)
    while watch_spans.len() < 155 && Instant::now() < deadline {
        if let Ok(s) = rx.recv_timeout(Duration::from_millis(200)) {
            watch_spans.push(s);
        }
    }
    assert_eq!(watch_spans.len(), 155, "spans from watch");
    // and its /metrics counts what the collector accepted (updated once a second)
    let want = "proofline_otlp_spans_exported_total 155";
    let mut body = String::new();
    while !body.lines().any(|l| l == want) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        body = http_get(&metrics, "/metrics", None).map_or(String::new(), |r| r.2);
    }
    assert!(body.lines().any(|l| l == want), "{body}");
    drop(watch);

    let (endpoint, rx) = receiver();
    replay_to(&endpoint, &log, &[]);
    let replayed: Vec<Span> = rx.try_iter().collect();
    assert_eq!(replayed.len(), 155);
    assert_eq!(shape(&watch_spans), shape(&replayed));
    // and they are linked sector to sector, as the log's jobs ran
    let linked = watch_spans
        .iter()
        .filter(|s| s.name == "previous sector" && s.links.len() == 1)
        .count();
    assert_eq!(linked, 2);
}

/// A collector that answers every request with `status` (None: takes the connection and
/// never answers); the connections it holds stay open as long as the test.
fn bad_collector(status: Option<u16>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in l.incoming() {
            let Ok(mut stream) = stream else { continue };
            match status {
                None => held.push(stream),
                Some(code) => {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 65536];
                        // answer each request as its bytes arrive (bodies are small)
                        while stream.read(&mut buf).is_ok_and(|n| n > 0) {
                            let _ =
                                write!(stream, "HTTP/1.1 {code} Oops\r\ncontent-length: 0\r\n\r\n");
                        }
                    });
                }
            }
        }
    });
    format!("http://{addr}")
}

/// A collector that takes every request and answers it with an OTLP partial success:
/// `rejected` spans rejected, for a reason it names.
fn partial_collector(rejected: i64) -> String {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceResponse,
    };
    let body = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: rejected,
            error_message: "spans older than the retention".into(),
        }),
    }
    .encode_to_vec();
    proofline_tests::collector_with(move |_, _| Some(("200 OK", body.clone()))).0
}

#[test]
fn replay_says_which_spans_the_collector_rejected_and_fails() {
    let log = generated_log("replay-partial", 2);
    let (ok, err, _) = replay_timed(&partial_collector(3), &log, 20);
    assert!(!ok, "replay succeeded though spans were rejected: {err}");
    assert!(!err.contains("all delivered"), "{err}");
    assert!(
        err.contains("rejected 6 of") && err.contains("spans older than the retention"),
        "{err}"
    );
}

/// `proofline replay` of `log` to `endpoint` with `--timeout-s secs`: its status, stderr
/// and how long it took.
fn replay_timed(endpoint: &str, log: &std::path::Path, secs: u64) -> (bool, String, Duration) {
    let t = Instant::now();
    let out = proofline()
        .args([
            "replay",
            "--endpoint",
            endpoint,
            "--timeout-s",
            &secs.to_string(),
        ])
        .arg(log)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stderr).unwrap(),
        t.elapsed(),
    )
}

/// What replay's deadline may be overrun by: the block of lines in hand, a probe of the
/// failing collector (2 s at most), the summary. docs/operating.md states it.
const MARGIN: Duration = Duration::from_secs(3);

#[test]
fn replay_of_2000_jobs_ends_within_its_deadline_naming_why_nothing_was_delivered() {
    let log = generated_log("replay-deadline", 2000);
    let refused = format!("http://127.0.0.1:{}", free_port());
    let cases = [
        (refused, "connection refused"),
        // silent for all of the 4 s, which bound each export: slow or dead cannot be told
        (
            bad_collector(None),
            "had not answered an export when replay's deadline came",
        ),
        (bad_collector(Some(500)), "HTTP 500"),
    ];
    for (endpoint, cause) in cases {
        let (ok, err, took) = replay_timed(&endpoint, &log, 4);
        assert!(!ok, "{endpoint}: replay succeeded: {err}");
        assert!(
            took < Duration::from_secs(4) + MARGIN,
            "{endpoint}: took {took:?} with --timeout-s 4: {err}"
        );
        assert!(
            err.contains(cause),
            "{endpoint}: `{cause}` not named: {err}"
        );
        // the summary counts what was and was not delivered
        assert!(err.contains("traces: 0 delivered"), "{endpoint}: {err}");
        assert!(err.contains("not delivered"), "{endpoint}: {err}");
        // the time said is how long replay ran, not a limit it met ("within 0.0 s" read as
        // a timeout of 0 where a collector refused at once)
        assert!(err.contains(" (replay ran "), "{endpoint}: {err}");
        assert!(!err.contains("within 0.0 s"), "{endpoint}: {err}");
    }
}

#[test]
fn replay_refuses_endpoints_it_cannot_speak_to_at_once() {
    let log = generated_log("replay-scheme", 2);
    for (endpoint, says) in [
        ("ftp://127.0.0.1:4318", "unsupported scheme `ftp`"),
        ("unix:///run/otlp.sock", "unsupported scheme `unix`"),
        ("127.0.0.1:4318", "has no scheme"),
    ] {
        let (ok, err, took) = replay_timed(endpoint, &log, 30);
        assert!(!ok);
        assert!(err.contains(says), "{endpoint}: {err}");
        assert!(took < Duration::from_secs(5), "{endpoint}: {took:?}");
    }
}

/// A bad `OTEL_EXPORTER_OTLP_TIMEOUT` is refused at start, named (it was ignored); 0 too,
/// which would fail every export at once.
#[test]
fn a_bad_export_timeout_variable_is_named_at_start() {
    let log = generated_log("replay-timeout-var", 2);
    for (value, says) in [
        ("abc", "not a whole number"),
        ("0", "would time out at once"),
    ] {
        let out = proofline()
            .args([
                "replay",
                "--endpoint",
                "http://127.0.0.1:9",
                "--timeout-s",
                "5",
            ])
            .arg(&log)
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{value}: {err}");
        assert!(
            err.contains("OTEL_EXPORTER_OTLP_TIMEOUT") && err.contains(says),
            "{value}: {err}"
        );
    }
}

/// A `.gz` cut short (its writer died) without `--epoch`: the traces of what was read are
/// sent, and the cut is said (it was a bare "incomplete deflate stream" and nothing sent).
#[test]
fn replay_of_a_cut_gzip_sends_what_was_read() {
    use std::io::Write as _;
    let log = generated_log("replay-cut-gz", 20);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&std::fs::read(&log).unwrap()).unwrap();
    let bytes = gz.finish().unwrap();
    let cut = log.with_extension("log.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (_, err, _) = replay_timed(&bad_collector(Some(200)), &cut, 20);
    let delivered: u64 = err
        .split(" traces")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(delivered > 0, "nothing sent: {err}");
    assert!(err.contains("all delivered"), "{err}");
    assert!(
        err.contains("incomplete") || err.contains("ended early") || err.contains("cut"),
        "the cut is not said: {err}"
    );
}

/// A collector that takes each request and closes the connection without an answer is said
/// to close it, not to time out (it was "did not answer in time").
#[test]
fn a_collector_that_closes_mid_answer_is_not_called_a_time_out() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in l.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 65536];
            let _ = stream.read(&mut buf);
            // the status line only, then gone
            let _ = stream.write_all(b"HTTP/1.1 2");
            drop(stream);
        }
    });
    let log = generated_log("replay-closing", 2);
    let (ok, err, _) = replay_timed(&endpoint, &log, 10);
    assert!(!ok, "{err}");
    assert!(
        err.contains("closed the connection before answering"),
        "{err}"
    );
    assert!(!err.contains("in time"), "{err}");
}

/// Reading from a pipe that stays open past the deadline: replay does not say everything
/// was delivered, and fails (it said "0 jobs -> 0 traces, all delivered" and exited 0).
#[test]
fn a_replay_cut_by_its_deadline_does_not_claim_everything_was_delivered() {
    let log = generated_log("replay-slow-pipe", 5);
    let text = std::fs::read(&log).unwrap();
    let mut child = proofline()
        .args([
            "replay",
            "-",
            "--endpoint",
            &bad_collector(Some(200)),
            "--timeout-s",
            "2",
        ])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&text).unwrap();
    // the writer is slow: the pipe stays open past the deadline
    std::thread::sleep(Duration::from_secs(4));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("all delivered"), "{err}");
    assert!(err.contains("deadline"), "{err}");
}

/// `journalctl -f | proofline replay -`: a pipe whose writer stalls with its lines short of a
/// block, and stays open. The lines read are used (they waited for the block to fill), and
/// replay's deadline ends it (it waited for the silent pipe's next byte); reading stops a
/// quarter of the deadline early (5 s at most), so the last sector, made a trace only when
/// reading stops, is delivered too (it was left unsent): four traces, within the deadline.
#[test]
fn replay_of_a_stalled_pipe_uses_its_lines_and_keeps_its_deadline() {
    let log = generated_log("stalled-pipe", 4);
    let (endpoint, rx) = receiver();
    let t = Instant::now();
    let mut child = proofline()
        .args(["replay", "--endpoint", &endpoint, "--timeout-s", "4"])
        .args(["--epoch", "2026-11-30T01:31:00Z", "-"])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, &std::fs::read(&log).unwrap()).unwrap();
    // the writer stalls, its end of the pipe open
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(4) + MARGIN {
            let _ = child.kill();
            panic!("replay still waits for the silent pipe after its deadline");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = t.elapsed();
    drop(stdin);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "the deadline cut the reading: {err}");
    assert!(
        elapsed >= Duration::from_secs(3),
        "reading stops at 3 s: {elapsed:?}"
    );
    let roots = rx
        .try_iter()
        .filter(|s| s.parent_span_id.is_empty())
        .count();
    assert_eq!(
        roots, 4,
        "every sector of the stalled pipe was delivered: {err}"
    );
}

/// A healthy collector slower than replay's deadline (it answers after 5 s; --timeout-s 3,
/// which bounds each export): the error says the deadline came first and what to do, not
/// that the collector did not answer (this round's probe: it blamed the collector).
#[test]
fn a_collector_slower_than_the_deadline_is_not_blamed() {
    let log = generated_log("slow-collector", 2);
    let (url, _) = proofline_tests::collector_with(|_, _| {
        std::thread::sleep(Duration::from_secs(5));
        let resp = ExportTraceServiceResponse {
            partial_success: None,
        };
        Some(("200 OK", resp.encode_to_vec()))
    });
    let (ok, err, took) = replay_timed(url.trim_end_matches("/v1/traces"), &log, 3);
    assert!(!ok, "{err}");
    assert!(took < Duration::from_secs(3) + MARGIN, "{took:?}");
    // the error names the deadline (an export cut by it, or the queue left at it, as the
    // export's own timing falls), never the collector
    let error = err
        .lines()
        .find(|l| l.starts_with("proofline: error:"))
        .unwrap_or_default();
    assert!(error.contains("deadline"), "{err}");
    assert!(!err.contains("did not answer"), "{err}");
}
