//! The `/metrics` endpoint itself: format negotiation (OpenMetrics, the classic text) and
//! `/healthz`.

use std::path::PathBuf;
use std::process::Stdio;

mod common;
use common::{Proc, free_port, fresh_dir, http_get, proofline, stderr_lines, wait_line};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("watch", name)
}

#[test]
fn the_endpoint_negotiates_formats_and_answers_health() {
    let dir = tmp("negotiate");
    let log = dir.join("empty.log");
    std::fs::write(&log, "").unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = proofline()
        .args(["watch", "--metrics-addr", &addr])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    wait_line(&rx, "metrics on");
    let (s, ctype, body) = http_get(
        &addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0"),
    )
    .unwrap();
    assert_eq!(s, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(body.ends_with("# EOF\n"));
    let (s, ctype, body) = http_get(&addr, "/metrics", Some("text/plain")).unwrap();
    assert_eq!(s, 200);
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    assert!(
        !body.contains("# EOF") && body.contains("# TYPE proofline_events_dropped_total counter")
    );
    assert_eq!(http_get(&addr, "/healthz", None).unwrap().0, 200);
    assert_eq!(http_get(&addr, "/nope", None).unwrap().0, 404);
    // a second server on the same port is a clear error
    let second = proofline()
        .args(["watch", "--metrics-addr", &addr])
        .arg(&log)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8(second.stderr).unwrap();
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
}
