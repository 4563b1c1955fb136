//! The journal as an input, on real journal files: Debian's systemd-journal-remote writes
//! them from journald's export format, journalctl reads them (scripts/test.sh installs
//! both). The journal holds a cuzk.service that crashed 4 s after its first start,
//! restarted, crashed again 150 s later, restarted and ran to the end, a `tracing` line
//! on stdout beside each TIMELINE line, and a second prover unit's lines among them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::{fresh_dir, proofline, ran};

const T0_US: u64 = 1_764_558_000_000_000; // 2025-12-01T03:00:00Z
use common::journal::Entry;

fn generate(dir: &Path, name: &str, args: &[&str]) -> String {
    let p = dir.join(name);
    assert!(
        proofline()
            .arg("generate")
            .args(args)
            .arg("-o")
            .arg(&p)
            .status()
            .unwrap()
            .success()
    );
    std::fs::read_to_string(p).unwrap()
}

fn offset(line: &str) -> u64 {
    line.split(',').nth(1).unwrap().parse().unwrap()
}

/// The entries of each process's lines (runs of `log` cut at the offsets given, one after
/// the other with 10 s between them, systemd's RestartSec, and `other`'s as another unit),
/// and each run's log.
fn entries(log: &str, other: &str) -> (Vec<Entry>, Vec<String>) {
    let mut out = Vec::new();
    let mut per_run = Vec::new();
    let mut base = 0u64;
    for (pid, cut) in [(101, Some(4_000u64)), (202, Some(150_000)), (303, None)] {
        let mut run = String::new();
        let mut last = 0;
        for l in log.lines() {
            let o = offset(l);
            if cut.is_some_and(|c| o > c) {
                break;
            }
            last = o;
            run.push_str(l);
            run.push('\n');
            out.push((base + o * 1000, pid, "cuzk.service", l.to_owned()));
            out.push((
                base + o * 1000 + 1,
                pid,
                "cuzk.service",
                "INFO cuzk_core::engine: partition proved".to_owned(),
            ));
        }
        per_run.push(run);
        base += (last + 10_000) * 1000;
    }
    for l in other.lines() {
        out.push((
            offset(l) * 1000 + 500,
            999,
            "prover2.service",
            l.replace("porep-1000-", "porep-2000-"),
        ));
    }
    out.sort_by_key(|e| e.0);
    (out, per_run)
}

/// Writes a journal file of the entries with systemd-journal-remote.
fn journal(dir: &Path, entries: &[Entry]) -> PathBuf {
    let path = dir.join("system.journal");
    let mut child = Command::new("/lib/systemd/systemd-journal-remote")
        .arg("-o")
        .arg(&path)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "systemd-journal-remote (Debian's systemd-journal-remote; scripts/test.sh installs it)",
        );
    let mut stdin = child.stdin.take().unwrap();
    common::journal::write_export(&mut stdin, T0_US, entries);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn json(args: &[&str], path: &Path) -> (serde_json::Value, String) {
    let o = proofline()
        .args(["analyze", "--format", "json"])
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        serde_json::from_slice(&o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_journal_tells_runs_apart_by_process_and_keeps_to_its_unit() {
    let dir = fresh_dir("journal", "runs");
    let log = generate(&dir, "cuzk.log", &["--jobs", "6"]);
    let other = generate(&dir, "other.log", &["--jobs", "3", "--seed", "9"]);
    let (mut entries, per_run) = entries(&log, &other);
    // what journalctl --unit also gives: systemd's own word on the unit (PID 1, in
    // init.scope, with UNIT=), which is no process of the prover's and no line of it
    let second = entries.iter().find(|e| e.1 == 202).unwrap().0;
    entries.push((
        second - 5,
        1,
        "init.scope",
        "Started cuzk.service - cuzk proving daemon.\nUNIT=cuzk.service".to_owned(),
    ));
    entries.sort_by_key(|e| e.0);
    let file = journal(&dir, &entries);

    let (r, err) = json(&["--journal-unit", "cuzk.service", "--journal-file"], &file);
    assert_eq!(r["events"]["runs"], 3, "{}", r["events"]);
    assert_eq!(r["events"]["duplicates"], 0, "{}", r["events"]);
    assert_eq!(r["events"]["conflicts"], 0, "{}", r["events"]);
    // the other unit's jobs are not read
    let jobs = r["jobs"].as_array().unwrap();
    assert!(
        jobs.iter()
            .all(|j| j["job_id"].as_str().unwrap().starts_with("porep-1000-"))
    );
    // each run's figures are those of its lines read alone
    let (mut complete, mut parts) = (0, 0);
    for (i, run) in per_run.iter().enumerate() {
        let p = dir.join(format!("run{i}.log"));
        std::fs::write(&p, run).unwrap();
        let (alone, _) = json(&[], &p);
        complete += alone["summary"]["jobs_complete"].as_u64().unwrap();
        parts += alone["summary"]["partitions_done"].as_u64().unwrap();
    }
    assert!(complete >= 8, "{complete}");
    assert_eq!(r["summary"]["jobs_complete"].as_u64().unwrap(), complete);
    assert_eq!(r["summary"]["partitions_done"].as_u64().unwrap(), parts);
    // the stdout lines are lines, not TIMELINE lines, and disturb nothing
    assert_eq!(
        r["lines"]["lines"].as_u64().unwrap(),
        2 * r["lines"]["timeline_lines"].as_u64().unwrap()
    );
    // which processes, and when on the wall clock
    assert!(
        err.contains("3 processes (each a run): pid 101 from 2025-12-01T03:00:00.000Z, pid 202 from 2025-12-01T03:00:10.000Z, pid 303"),
        "{err}"
    );

    // --since: from the second process on
    let (r, err) = json(
        &[
            "--journal-unit",
            "cuzk.service",
            "--since",
            "2025-12-01 03:00:05 UTC",
            "--journal-file",
        ],
        &file,
    );
    assert_eq!(r["events"]["runs"], 2, "{err}");
    // the other unit, alone
    let (r, _) = json(
        &["--journal-unit", "prover2.service", "--journal-file"],
        &file,
    );
    assert_eq!(r["events"]["runs"], 1);
    assert_eq!(r["summary"]["jobs_complete"], 3);
}

#[test]
fn journal_mistakes_are_said_plainly() {
    let dir = fresh_dir("journal", "mistakes");
    // a unit with no entries
    let log = generate(&dir, "cuzk.log", &["--jobs", "2"]);
    let (entries, _) = entries(&log, "");
    let file = journal(&dir, &entries);
    let o = proofline()
        .args([
            "analyze",
            "--journal-unit",
            "nothing.service",
            "--journal-file",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the journal of nothing.service in") && err.contains("holds no entry"),
        "{err}"
    );
    // a file and the journal at once
    let o = proofline()
        .args(["analyze", "x.log", "--journal-unit", "cuzk.service"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // no journal file there: journalctl's own words
    let o = proofline()
        .args(["analyze", "--journal-file"])
        .arg(dir.join("missing.journal"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("journalctl failed") || err.contains("holds no entry"),
        "{err}"
    );
    // watch makes its state directory, not the parents of a mistyped one; a file is no
    // state directory
    std::fs::write(dir.join("a-file"), "").unwrap();
    // (a link left pointing nowhere, as a removed StateDirectory= leaves one)
    let dangling = dir.join("dangling");
    let _ = std::fs::remove_file(&dangling);
    std::os::unix::fs::symlink(dir.join("gone"), &dangling).unwrap();
    for (state, said) in [
        (
            dir.join("no-such-dir").join("state"),
            "its parent directory does not exist",
        ),
        (dir.join("a-file"), "is not a directory"),
        (dangling, "is a symbolic link to"),
    ] {
        let watch = ["watch", "--metrics-addr", "127.0.0.1:0", "--journal-file"];
        let err = ran(
            proofline()
                .args(watch)
                .arg(&file)
                .arg("--state-dir")
                .arg(&state),
            1,
        )
        .stderr;
        assert!(err.contains(said), "{err}");
    }
    assert!(!dir.join("no-such-dir").exists(), "a parent was made");
}

/// `compare` takes a journal as either side: `journal:UNIT@FILE`. The unit against itself
/// is the same on every figure.
#[test]
fn compare_reads_a_journal_side() {
    let dir = fresh_dir("journal", "compare");
    let log = generate(&dir, "cuzk.log", &["--jobs", "6"]);
    let other = generate(&dir, "other.log", &["--jobs", "3", "--seed", "9"]);
    let (entries, _) = entries(&log, &other);
    let file = journal(&dir, &entries);
    let side = format!("journal:cuzk.service@{}", file.display());
    let o = proofline()
        .args(["compare", "--format", "json", "--fail-if", "changed:any"])
        .arg(&side)
        .arg(&side)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(c["jobs"][0].as_u64().unwrap() >= 8, "{c}");
    assert!(
        c["figures"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["change"] == "same" || f["change"] == "not_called"),
        "{c}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("3 processes (each a run)"), "{err}");
}

/// `proofline watch` of the live journal's unit with a state directory: its process, stderr
/// lines and /metrics address.
fn watch_journal(
    j: &common::journal::LiveJournal,
    state: &Path,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    String,
) {
    let mut child = proofline()
        .args(["watch", "--from-start", "--poll-ms", "100"])
        .args([
            "--reorder-window-ms",
            "500",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--journal-unit", "cuzk.service", "--journal-file"])
        .arg(&j.path)
        .arg("--state-dir")
        .arg(state)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = common::stderr_lines(&mut child);
    let line = common::wait_line(&rx, "metrics on http://");
    let addr = line
        .split("metrics on http://")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .unwrap()
        .to_owned();
    (child, rx, addr)
}

/// Waits until watch's state says it delivered the entry written at `t_us` (from the live
/// journal's start), then until its completions stop moving; its completions. Meanwhile
/// another unit writes now and then, as a host's other services do: systemd-journal-remote
/// did not always signal its last writes to a `journalctl --follow` (journald does, and a
/// busy host's next write would anyway).
fn caught_up(state: &Path, j: &mut common::journal::LiveJournal, t_us: u64, addr: &str) -> f64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut beat = 0;
    loop {
        beat += 1;
        j.write(&[(t_us + beat, 999, "heartbeat.service", "tick".into())]);
        let s: serde_json::Value = std::fs::read(state.join("journal.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if s["realtime_us"].as_u64() == Some(j.t0_us + t_us) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "watch's state: {s}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // the reorder window and the completion grace, on watch's clock
    let mut last = common::completed(addr);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let now = common::completed(addr);
        if now == last {
            return now;
        }
        last = now;
    }
}

/// `watch --journal-unit` follows the journal as it is written, each new process a new run;
/// stopped (SIGTERM) with a sector in flight and started again with its `--state-dir`, it goes
/// on from its cursor: the completions the two count add up to the journal's, none lost
/// (the sector that straddles the stop is complete) and none counted twice.
#[test]
fn watch_follows_the_journal_and_resumes_from_its_cursor() {
    let dir = fresh_dir("journal", "follow");
    let state = dir.join("state");
    let log = generate(
        &dir,
        "cuzk.log",
        &["--jobs", "6", "--synth-ms", "2000", "--kernel-ms", "300"],
    );
    let other = generate(&dir, "other.log", &["--jobs", "2", "--seed", "9"]);
    // two processes: the first dies 4 s in; the second runs to the end
    let mut all: Vec<Entry> = Vec::new();
    let mut base = 0;
    for (pid, cut) in [(101u32, Some(4_000u64)), (202, None)] {
        let mut last = 0;
        for l in log.lines() {
            let o = offset(l);
            if cut.is_some_and(|c| o > c) {
                break;
            }
            last = o;
            all.push((base + o * 1000, pid, "cuzk.service", l.to_owned()));
            all.push((
                base + o * 1000 + 1,
                pid,
                "cuzk.service",
                "INFO cuzk: proved".into(),
            ));
        }
        base += (last + 1_000) * 1000;
    }
    for l in other.lines().take(40) {
        all.push((offset(l) * 1000 + 500, 999, "prover2.service", l.to_owned()));
    }
    // systemd's own word between the two processes (PID 1, UNIT=cuzk.service): no process
    // of the prover's, no restart (it flipped watch's process back and forth)
    all.push((
        4_990_000,
        1,
        "init.scope",
        "Started cuzk.service.\nUNIT=cuzk.service".into(),
    ));
    all.sort_by_key(|e| e.0);
    // the stop: 8 s into the second process, its sectors in flight
    let cut_us = 5_000_000 + 8_000_000;
    let (before, after): (Vec<Entry>, Vec<Entry>) =
        all.iter().cloned().partition(|e| e.0 <= cut_us);
    let last_cuzk = |es: &[Entry]| {
        es.iter()
            .filter(|e| e.2 == "cuzk.service")
            .map(|e| e.0)
            .max()
            .unwrap()
    };

    let mut j = common::journal::LiveJournal::start(&dir);
    // the journal exists before watch starts (journalctl cannot open a file that does not)
    j.write(&before[..1]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !Command::new("journalctl")
        .arg("--file")
        .arg(&j.path)
        .args(["-q", "-n", "1"])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the journal was not written"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (mut w1, rx1, addr1) = watch_journal(&j, &state);
    j.write(&before[1..]);
    let first = caught_up(&state, &mut j, last_cuzk(&before), &addr1);
    common::wait_line(&rx1, "pid 202 from");
    let (_, _, metrics) = common::http_get(&addr1, "/metrics", None).unwrap();
    assert!(metrics.contains("proofline_runs_total 2"), "{metrics}");
    let kill = Command::new("kill")
        .args(["-TERM", &w1.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(w1.wait().unwrap().success());

    j.write(&after);
    let (mut w2, rx2, addr2) = watch_journal(&j, &state);
    let said = common::wait_line(&rx2, "resumed after the last entry");
    let second = caught_up(&state, &mut j, last_cuzk(&after), &addr2);
    let _ = w2.kill();

    // the whole journal, analyzed
    drop(j);
    let (r, _) = json(
        &["--journal-unit", "cuzk.service", "--journal-file"],
        &dir.join("live.journal"),
    );
    let total = r["summary"]["jobs_complete"].as_f64().unwrap();
    assert!(first > 0.0 && second > 0.0, "{first} + {second} ({said})");
    assert_eq!(
        first + second,
        total,
        "the two watches counted {first} + {second}; the journal holds {total} ({said})"
    );
}

/// `replay`, `chart` and `export` read the journal too. Replay places each process's spans
/// at its entries' wall-clock times, with no `--epoch`: the root span of each process's first
/// sector starts when the journal says its first line was written.
#[test]
fn replay_chart_and_export_read_the_journal() {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use prost::Message;
    let dir = fresh_dir("journal", "replay");
    let log = generate(&dir, "cuzk.log", &["--jobs", "6"]);
    let other = generate(&dir, "other.log", &["--jobs", "3", "--seed", "9"]);
    let (entries, _) = entries(&log, &other);
    let file = journal(&dir, &entries);
    let roots = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = roots.clone();
    let (url, _) = proofline_tests::collector_with(move |_, body| {
        let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                for s in ss.spans.into_iter().filter(|s| s.parent_span_id.is_empty()) {
                    seen.lock().unwrap().push((s.name, s.start_time_unix_nano));
                }
            }
        }
        let resp = ExportTraceServiceResponse {
            partial_success: None,
        };
        Some(("200 OK", resp.encode_to_vec()))
    });
    let o = proofline()
        .args(["replay", "--endpoint", url.trim_end_matches("/v1/traces")])
        .args(["--journal-unit", "cuzk.service", "--journal-file"])
        .arg(&file)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("all delivered"), "{err}");
    // each process's first entry (its first sector's first SYNTH_START, at offset 0)
    let mut firsts: Vec<u64> = Vec::new();
    for pid in [101, 202, 303] {
        let t = entries.iter().find(|e| e.1 == pid).unwrap().0;
        firsts.push((T0_US + t) * 1000);
    }
    let mut starts: Vec<u64> = roots
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _)| name.ends_with(" porep-1000-0"))
        .map(|(_, t)| *t)
        .collect();
    starts.sort_unstable();
    assert_eq!(
        starts, firsts,
        "roots of porep-1000-0, one per process ({err})"
    );

    let svg = dir.join("journal.svg");
    let o = proofline()
        .args(["chart", "--journal-unit", "cuzk.service", "--journal-file"])
        .arg(&file)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let json = dir.join("journal.json");
    let o = proofline()
        .args(["export", "--journal-unit", "cuzk.service", "--journal-file"])
        .arg(&file)
        .arg("-o")
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(!v["traceEvents"].as_array().unwrap().is_empty());
}
