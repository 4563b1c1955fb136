//! SIGTERM, SIGINT and SIGHUP, as systemd, an operator and a closed terminal send them: `demo`, `replay` and `watch`
//! stop their work, deliver what they hold within a bound, say so, and exit with a status
//! that says how they ended; a second signal ends them at once.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{fresh_dir, generated_log, proofline, stderr_lines, wait_line};

fn kill(child: &Child, signal: &str) {
    let st = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// Waits `limit` at most for `child` to exit; its status code and how long it took.
fn exit_within(child: &mut Child, limit: Duration) -> (Option<i32>, Duration) {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return (st.code(), t.elapsed());
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("still running {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A demo of 500 jobs at 200x.
fn demo(dir: &std::path::Path) -> Child {
    demo_with(dir, &["--jobs", "500", "--speed", "200"])
}

/// A demo with `args`, its stderr piped, writing to `dir`.
fn demo_with(dir: &std::path::Path, args: &[&str]) -> Child {
    proofline()
        .args(["demo", "--no-metrics"])
        .args(args)
        .arg("--out")
        .arg(dir)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn demo_stopped_by_sigterm_writes_its_report_and_says_so() {
    let dir = fresh_dir("signals", "demo");
    let mut child = demo(&dir);
    let rx = stderr_lines(&mut child);
    wait_line(&rx, "TIMELINE log:");
    std::thread::sleep(Duration::from_secs(3));
    kill(&child, "-TERM");
    let (code, took) = exit_within(&mut child, Duration::from_secs(15));
    assert_eq!(code, Some(143), "the status says SIGTERM ended it");
    let said: Vec<String> = rx.try_iter().collect();
    assert!(
        said.iter().any(|l| l.contains("stopped by SIGTERM")),
        "{said:?} ({took:?})"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("demo-report.json")).unwrap()).unwrap();
    let done = report["summary"]["jobs_complete"].as_u64().unwrap();
    assert!((1..500).contains(&done), "{done} jobs complete");
    assert!(dir.join("demo-timeline.html").is_file());
}

/// A stop that comes while the simulated prover sleeps (inside a ten-minute stall, or GPU
/// work at a slow speed) ends it within its bound: it took the rest of the sleep (61 s for
/// `--stall 0:600000 --speed 10`), past systemd's stop timeout. What was in flight stays
/// unfinished in the report, not finished early.
#[test]
fn a_stop_inside_a_long_sleep_ends_the_demo_within_its_bound() {
    for (name, faults) in [
        ("stall", &["--speed", "10", "--stall", "0:600000"][..]),
        ("slow", &["--speed", "0.01"][..]),
    ] {
        let dir = fresh_dir("signals", &format!("demo-{name}"));
        let mut child = demo_with(&dir, &[&["--jobs", "3"][..], faults].concat());
        let rx = stderr_lines(&mut child);
        wait_line(&rx, "TIMELINE log:");
        std::thread::sleep(Duration::from_secs(1));
        kill(&child, "-TERM");
        let (code, took) = exit_within(&mut child, Duration::from_secs(20));
        assert_eq!(code, Some(143), "{name}");
        assert!(took < Duration::from_secs(8), "{name}: {took:?}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("demo-report.json")).unwrap()).unwrap();
        let summary = &report["summary"];
        assert_eq!(summary["jobs_complete"], 0, "{name}: {summary}");
        // no partition stopped inside its synthesis reads as synthesized
        let log = std::fs::read_to_string(dir.join("demo-timeline.log")).unwrap();
        assert!(log.contains(",SYNTH_START,"), "{name}: {log}");
        assert!(!log.contains(",SYNTH_END,"), "{name}: {log}");
        if name == "stall" {
            // the stall holds the dispatcher: only the stalled partition ever started (the
            // workers waiting for it started theirs at the stop)
            assert_eq!(log.matches(",SYNTH_START,").count(), 1, "{log}");
        }
        assert!(
            summary["jobs_incomplete"].as_u64().unwrap() >= 1,
            "{name}: the job in flight stays unfinished: {summary}"
        );
    }
}

#[test]
fn a_second_signal_ends_the_demo_at_once() {
    let dir = fresh_dir("signals", "demo-twice");
    let mut child = demo(&dir);
    let rx = stderr_lines(&mut child);
    wait_line(&rx, "TIMELINE log:");
    std::thread::sleep(Duration::from_secs(1));
    kill(&child, "-INT");
    kill(&child, "-INT");
    let (code, took) = exit_within(&mut child, Duration::from_secs(3));
    assert_eq!(code, Some(130), "{took:?}");
}

#[test]
fn replay_stopped_by_sigint_says_what_was_not_delivered_within_its_bound() {
    // a collector that takes connections and never answers
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    let dir = fresh_dir("signals", "replay");
    let log = generated_log(&dir, &["--jobs", "200"]);
    let mut child = proofline()
        .args(["replay", "--endpoint", &endpoint, "--timeout-s", "120"])
        .arg(&log)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    kill(&child, "-INT");
    // 5 s of delivery at most, a probe of the collector (2 s), the summary
    let (code, took) = exit_within(&mut child, Duration::from_secs(10));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(code, Some(130), "{err}");
    assert!(took < Duration::from_secs(9), "{took:?}: {err}");
    assert!(err.contains("not delivered"), "{err}");
    assert!(err.contains("stopped by SIGINT"), "{err}");
}

/// SIGTERM (systemd's stop) and SIGHUP (a closed terminal; it ended watch at once, its queue
/// lost): watch delivers what it holds and exits 0.
#[test]
fn watch_stopped_by_sigterm_or_sighup_exits_0_within_its_bound() {
    for (signal, name) in [("-TERM", "SIGTERM"), ("-HUP", "SIGHUP")] {
        let dir = fresh_dir("signals", &format!("watch{signal}"));
        let log = generated_log(&dir, &["--jobs", "2"]);
        let mut child = proofline()
            .args(["watch", "--from-start", "--metrics-addr", "127.0.0.1:0"])
            .arg(&log)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let rx = stderr_lines(&mut child);
        wait_line(&rx, "metrics on");
        kill(&child, signal);
        let (code, _) = exit_within(&mut child, Duration::from_secs(8));
        assert_eq!(code, Some(0), "{name}");
        wait_line(&rx, &format!("{name}: delivering what is queued"));
    }
}

/// A log that never ends (a link to /dev/zero; a hole of a GiB left by copytruncate is the
/// realistic one) is read a bounded amount per poll: watch still stops on SIGTERM (it read
/// forever, deaf to signals).
#[test]
fn watch_of_an_endless_file_still_stops_on_sigterm() {
    let dir = fresh_dir("signals", "endless");
    let log = dir.join("cuzk.log");
    std::os::unix::fs::symlink("/dev/zero", &log).unwrap();
    let mut child = proofline()
        .args(["watch", "--from-start", "--metrics-addr", "127.0.0.1:0"])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    wait_line(&rx, "metrics on");
    std::thread::sleep(Duration::from_millis(500));
    kill(&child, "-TERM");
    let (code, _) = exit_within(&mut child, Duration::from_secs(8));
    assert_eq!(code, Some(0));
}
