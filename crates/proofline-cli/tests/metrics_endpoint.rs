//! The `/metrics` endpoint itself: format negotiation (OpenMetrics, the classic text) and
//! `/healthz`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

mod common;
use common::{fresh_dir, http_get, proofline, watch};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("watch", name)
}

#[test]
fn the_endpoint_negotiates_formats_and_answers_health() {
    let dir = tmp("negotiate");
    let log = dir.join("empty.log");
    std::fs::write(&log, "").unwrap();
    let (_watch, _, addr) = watch(&[], &log);
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

/// `watch --nouns batch,segment`: the HELP texts in the prover's words, the metric names and
/// label values cuzk's (what dashboards and alerts read).
#[test]
fn watch_writes_help_texts_in_the_provers_own_words() {
    let dir = tmp("nouns");
    let log = dir.join("empty.log");
    std::fs::write(&log, "").unwrap();
    let (_watch, _, addr) = watch(&["--nouns", "batch,segment"], &log);
    let (s, _, body) = http_get(&addr, "/metrics", Some("text/plain")).unwrap();
    assert_eq!(s, 200);
    assert!(
        body.contains("# HELP proofline_sector_transition_gap_seconds Batch transitions where the GPU waited: first GPU_START of batch N+1"),
        "{body}"
    );
    assert!(
        body.contains(
            "# HELP proofline_gpu_queue_depth Segments synthesized and not yet picked up"
        ),
        "{body}"
    );
    let helps: Vec<&str> = body.lines().filter(|l| l.starts_with("# HELP ")).collect();
    for h in &helps {
        // cuzk's words, alone (the label value `cross_sector` stays)
        let text = h.splitn(4, ' ').nth(3).unwrap().to_ascii_lowercase();
        let words = text.split(|c: char| !c.is_alphanumeric() && c != '_');
        for w in words {
            assert!(
                !["sector", "sectors", "partition", "partitions"].contains(&w),
                "{h}"
            );
        }
    }
}

/// `watch --buckets job=...`: a prover of another size gets its own job-time buckets, the
/// other histograms keep cuzk's; a bad list is refused with the histogram named.
#[test]
fn watch_takes_buckets_of_the_provers_own_size() {
    let dir = tmp("buckets");
    let log = dir.join("four.log");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/tests/data/four_jobs.log"
        ),
        &log,
    )
    .unwrap();
    let (_watch, _, addr) = watch(
        &[
            "--from-start",
            "--poll-ms",
            "20",
            "--buckets",
            "job=1,2.5,4",
        ],
        &log,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (_, _, body) = http_get(&addr, "/metrics", Some("text/plain")).unwrap();
        if body.contains("proofline_sector_seconds_bucket") {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no job completed: {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let les: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("proofline_sector_seconds_bucket{"))
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(&les[..4], ["1.0", "2.5", "4.0", "+Inf"], "{body}");
    assert!(body.contains("proofline_gpu_idle_gap_seconds_bucket{le=\"300.0\""));
    for (arg, want) in [
        ("job=2,1", "buckets of `job`: bounds not increasing"),
        ("jobs=1,2", "`jobs` is no histogram"),
        ("stage=1,x", "`x` in --buckets stage"),
    ] {
        let out = proofline()
            .args(["watch", "--metrics-addr", "127.0.0.1:0", "--buckets", arg])
            .arg(&log)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{arg}: {err}");
    }
}

/// At the connection cap with every connection inside a request, a new connection is
/// answered 503 with Retry-After (Prometheus reads a failed scrape and tries at the next
/// interval), and the requests under way are not cut: they were reset before.
#[test]
fn over_the_cap_a_new_connection_is_told_to_come_back_and_none_is_cut() {
    use std::io::Read;
    use std::net::TcpStream;
    let dir = tmp("cap");
    let log = dir.join("cuzk.log");
    std::fs::write(&log, "").unwrap();
    let (_watch, _, addr) = watch(&["--metrics-max-connections", "2"], &log);
    // two scrapers inside their requests (headers under way)
    let mut slow: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut third = TcpStream::connect(&addr).unwrap();
    third
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answer = String::new();
    let _ = third.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    for s in &mut slow {
        s.write_all(b"Host: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = String::new();
        let _ = s.read_to_string(&mut got);
        assert!(
            got.starts_with("HTTP/1.1 200"),
            "a request under way was cut: {got:?}"
        );
    }
}
