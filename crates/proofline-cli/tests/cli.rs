//! The `proofline` binary, run as a user runs it.

use std::io::Write;
use std::process::{Command, Stdio};

fn proofline() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proofline"))
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("proofline-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn generate(args: &[&str], path: &std::path::Path) {
    let st = proofline()
        .arg("generate")
        .args(args)
        .arg("-o")
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn analyze_text_names_the_verdict_and_the_tables() {
    let log = tmp("five.log");
    generate(&["--jobs", "5"], &log);
    let out = proofline().arg("analyze").arg(&log).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Verdict: GPU-bound"), "{text}");
    for section in [
        "Sectors",
        "Transitions",
        "GPUs",
        "Stages per partition",
        "seconds per proof",
        "cold start",
    ] {
        assert!(text.contains(section), "missing {section}");
    }
    assert!(text.matches("porep-1000-").count() >= 5);
}

#[test]
fn gzip_stdin_and_plain_give_the_same_json() {
    let log = tmp("gz.log");
    generate(&["--jobs", "4", "--mixed", "--gpus", "2"], &log);
    let plain = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(plain.status.success());

    let gz = tmp("gz.log.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    enc.write_all(&std::fs::read(&log).unwrap()).unwrap();
    enc.finish().unwrap();
    let zipped = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&gz)
        .output()
        .unwrap();
    assert!(zipped.status.success());
    assert_eq!(plain.stdout, zipped.stdout);

    let mut child = proofline()
        .args(["analyze", "--format", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&log).unwrap())
        .unwrap();
    let piped = child.wait_with_output().unwrap();
    assert_eq!(plain.stdout, piped.stdout);

    let v: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["summary"]["jobs_complete"], 4);
    assert_eq!(v["gpus"].as_array().unwrap().len(), 2);
}

#[test]
fn csv_has_one_row_per_partition_with_every_stage() {
    let log = tmp("csv.log");
    generate(&["--jobs", "3"], &log);
    let out = proofline()
        .args(["analyze", "--format", "csv"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    for col in [
        "job_id",
        "partition",
        "worker",
        "gpu",
        "synthesis_ms",
        "queue_ms",
        "lock_wait_ms",
        "gpu_ms",
    ] {
        assert!(header.split(',').any(|c| c == col), "missing column {col}");
    }
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 30);
    assert!(rows.iter().all(|r| r.starts_with("porep-1000-")));
}

#[test]
fn malformed_lines_are_reported_by_number_and_strict_fails() {
    let log = tmp("bad.log");
    generate(&["--jobs", "2"], &log);
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.insert_str(0, "daemon starting\nTIMELINE,oops,GPU_START,j,worker=1\n");
    text.push_str("TIMELINE,999999,GPU_START,porep-1000-9,wor");
    std::fs::write(&log, text).unwrap();

    let out = proofline().arg("analyze").arg(&log).output().unwrap();
    assert!(out.status.success());
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("1 malformed"), "{report}");
    assert!(
        report.contains("line 2: offset `oops` is not an unsigned integer"),
        "{report}"
    );
    assert!(report.contains("last line cut short"));
    assert!(
        report.contains("jobs complete 2"),
        "the rest of the input is used"
    );

    let strict = proofline()
        .args(["analyze", "--strict"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(!strict.status.success());
    let err = String::from_utf8(strict.stderr).unwrap();
    assert!(err.contains("line 2") && err.contains("--strict"), "{err}");
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let out = proofline()
        .args(["analyze", "/nonexistent/cuzk.log"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("cannot open /nonexistent/cuzk.log"), "{err}");
}

#[test]
fn demo_runs_the_prover_and_reports_what_analyze_reports_on_its_log() {
    let out = tmp("demo");
    let run = proofline()
        .args([
            "demo",
            "--speed",
            "100",
            "--jobs",
            "3",
            "--instance",
            "t1",
            "--no-metrics",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8(run.stdout).unwrap();
    assert!(stdout.contains("Verdict:"), "{stdout}");
    assert!(stdout.contains("jobs complete 3"), "{stdout}");
    assert!(stdout.contains("t1-timeline.log"));
    assert!(
        stdout.contains("t1-timeline.html"),
        "the demo draws its chart: {stdout}"
    );
    let chart = std::fs::read_to_string(out.join("t1-timeline.html")).unwrap();
    assert_eq!(chart.matches("class=\"bar gpu\"").count(), 30);
    let stderr = String::from_utf8(run.stderr).unwrap();
    assert!(
        stderr.contains("sectors 3/3 done"),
        "progress on stderr: {stderr}"
    );

    let log = out.join("t1-timeline.log");
    let live: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("t1-report.json")).unwrap()).unwrap();
    let offline = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(offline.status.success());
    let offline: serde_json::Value = serde_json::from_slice(&offline.stdout).unwrap();
    for key in [
        "summary",
        "gpus",
        "jobs",
        "transitions",
        "stages",
        "verdict",
    ] {
        assert_eq!(
            live[key], offline[key],
            "{key} differs between the live engine and analyze"
        );
    }
    assert_eq!(offline["lines"]["timeline_lines"], 180);
}

#[test]
fn demo_with_a_stall_reads_synthesis_bound() {
    let out = tmp("demo-stall");
    let run = proofline()
        .args([
            "demo",
            "--speed",
            "100",
            "--jobs",
            "4",
            "--stall",
            "2:60000",
            "--instance",
            "t2",
            "--metrics-addr",
            "127.0.0.1:0",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8(run.stdout).unwrap();
    assert!(stdout.contains("Verdict: Synthesis-bound"), "{stdout}");
}

#[test]
fn bad_fault_flags_say_what_is_wrong() {
    let run = proofline()
        .args(["demo", "--stall", "two:1000"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8(run.stderr).unwrap();
    assert!(
        err.contains("--stall: `two` is not a valid number"),
        "{err}"
    );
}

/// Every numeric option has a valid range: outside it, a clear error naming the flag and the
/// range, before anything runs.
#[test]
fn numeric_options_out_of_range_are_refused_by_name() {
    for (args, flag, range) in [
        (&["demo", "--speed", "0"][..], "--speed", "0.01..=10000"),
        (&["demo", "--gpus", "0"][..], "--gpus", "1..=64"),
        (
            &["demo", "--workers-per-gpu", "0"][..],
            "--workers-per-gpu",
            "1..=64",
        ),
        (&["demo", "--jobs", "0"][..], "--jobs", "1..=1000000"),
        (
            &["analyze", "--partitions", "0", "x.log"][..],
            "--partitions",
            "1..=65536",
        ),
        (
            &["analyze", "--gpu-workers-per-device", "0", "x.log"][..],
            "--gpu-workers-per-device",
            "1..=1024",
        ),
        (
            &["analyze", "--job-timeout-s", "0", "x.log"][..],
            "--job-timeout-s",
            "1..=604800",
        ),
        (
            &["analyze", "--partitions-for", "porep-=0", "x.log"][..],
            "--partitions-for",
            "1..=65536",
        ),
        (
            &["watch", "--poll-ms", "0", "x.log"][..],
            "--poll-ms",
            "10..=60000",
        ),
    ] {
        let out = proofline().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(flag) && err.contains(range), "{args:?}: {err}");
    }
}
