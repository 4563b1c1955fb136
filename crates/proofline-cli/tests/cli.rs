//! The `proofline` binary, run as a user runs it.

use std::io::Write;
use std::process::Stdio;

mod common;
use common::{proofline, ran};

/// `proofline compare --format json ARGS A B`, which must exit 0, parsed.
fn compare_json(args: &[&str], a: &std::path::Path, b: &std::path::Path) -> serde_json::Value {
    let o = ran(
        proofline()
            .args(["compare", "--format", "json"])
            .args(args)
            .arg(a)
            .arg(b),
        0,
    );
    serde_json::from_str(&o.stdout).unwrap()
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

    // rows past --max-rows are in no format's rows (it said "see --format json or csv",
    // whose JSON is cut too); with none kept, the section still says how many were left out
    for (rows, sectors, transitions) in [
        (
            "2",
            "  ... and 3 row(s) not kept (the report's row limit, --max-rows)",
            "  ... and 2 row(s) not kept",
        ),
        (
            "0",
            "  ... 5 row(s) not kept (the report's row limit, --max-rows)",
            "  ... 4 row(s) not kept",
        ),
    ] {
        let out = proofline()
            .args(["analyze", "--max-rows", rows])
            .arg(&log)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let after = |heading: &str| text.split(heading).nth(1).unwrap_or_default().to_owned();
        assert!(
            after("Sectors (complete").contains(sectors),
            "--max-rows {rows}: {text}"
        );
        assert!(
            after("Transitions (").contains(transitions),
            "--max-rows {rows}: {text}"
        );
    }
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

/// Malformed lines are counted by number and the rest used; `--strict` fails on any line
/// not used: a malformed one, a cut last line, an event rejected as impossible.
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

    // the cut last line alone fails --strict too (it exited 0), and is said beside JSON
    let mut text = std::fs::read_to_string(&log).unwrap();
    text = text.replace("TIMELINE,oops,GPU_START,j,worker=1\n", "");
    std::fs::write(&log, &text).unwrap();
    let json = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(json.status.success());
    let err = String::from_utf8(json.stderr).unwrap();
    assert!(err.contains("no newline: cut short, not used"), "{err}");
    let strict = proofline()
        .args(["analyze", "--strict"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(!strict.status.success());
    let err = String::from_utf8(strict.stderr).unwrap();
    let n = text.lines().count();
    assert!(
        err.contains(&format!("the last line (line {n})")) && err.contains("--strict"),
        "{err}"
    );

    // an event rejected as impossible is a line not used: --strict fails on it (it exited
    // 0 with every event rejected), and JSON's warning names it
    let absurd = tmp("absurd.log");
    std::fs::write(
        &absurd,
        "TIMELINE,0,SYNTH_START,j,partition=70000\nTIMELINE,5,SYNTH_END,j,partition=70000,synth_ms=5\n",
    )
    .unwrap();
    let strict = proofline()
        .args(["analyze", "--strict"])
        .arg(&absurd)
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(1));
    let err = String::from_utf8(strict.stderr).unwrap();
    assert!(
        err.contains("2 TIMELINE event(s) rejected as impossible, e.g. j: partition 70000 is absurd, event ignored")
            && err.contains("--strict"),
        "{err}"
    );
    let json = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&absurd)
        .output()
        .unwrap();
    assert!(json.status.success());
    let err = String::from_utf8(json.stderr).unwrap();
    assert!(
        err.contains("warning: 2 TIMELINE event(s) rejected"),
        "{err}"
    );

    // a conflicting record and a stray line are lines not used too (both exited 0 under
    // --strict); the text report counts them with the rest in one heading
    for (name, extra, says) in [
        (
            "conflict.log",
            "TIMELINE,27590,SYNTH_END,porep-1000-0,partition=8,synth_ms=1\n",
            "1 conflicting TIMELINE record(s), not used, e.g. porep-1000-0 partition 8: second SYNTH_END",
        ),
        (
            "stray.log",
            "TIMELINE,5,GPU_START,porep-1000-9,worker=1\n",
            "1 stray TIMELINE line(s) far behind the newest, not used (--reorder-window-ms is 5000 ms)",
        ),
    ] {
        let log = tmp(name);
        generate(&["--jobs", "2"], &log);
        let text = std::fs::read_to_string(&log).unwrap();
        // after the 31st line, where the run is well under way
        let at = text.match_indices('\n').nth(30).unwrap().0 + 1;
        std::fs::write(&log, format!("{}{extra}{}", &text[..at], &text[at..])).unwrap();
        let strict = proofline()
            .args(["analyze", "--strict"])
            .arg(&log)
            .output()
            .unwrap();
        let err = String::from_utf8(strict.stderr).unwrap();
        assert_eq!(strict.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(says) && err.contains("--strict"),
            "{name}: {err}"
        );
        let report = String::from_utf8(strict.stdout).unwrap();
        assert!(
            report.contains("Events not used, or in doubt (1 in all; the first 1):"),
            "{name}: {report}"
        );
    }
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

/// `--since` and `--until` choose a journal's entries: given with a log file, which has no
/// times to choose by, they are an error naming the journal's flags (the whole file was
/// read, the window silently dropped); a value may start with `-`, as the help's `-2h` does
/// (it was taken for a flag), but not `--`.
#[test]
fn a_time_window_needs_the_journal_and_may_start_with_a_minus() {
    let log = tmp("window.log");
    generate(&["--jobs", "2"], &log);
    for cmd in ["analyze", "chart", "export", "whatif", "replay"] {
        for flag in ["--since=-2h", "--until=-1h"] {
            let mut c = proofline();
            c.args([cmd, flag]);
            if cmd == "replay" {
                c.args(["--endpoint", "http://127.0.0.1:9"]);
            }
            let out = c.arg(&log).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{cmd} {flag}: {err}");
            assert!(
                err.contains("--since and --until choose a journal's entries (--journal-unit, --journal-file or --journal-dir): ")
                    && err.contains("window.log is a log file"),
                "{cmd} {flag}: {err}"
            );
        }
    }
    // taken as the window's value: what fails is reading a journal that is not there
    let out = ran(
        proofline().args([
            "analyze",
            "--journal-file",
            "/nonexistent/system.journal",
            "--since",
            "-2h",
        ]),
        1,
    );
    let err = &out.stderr;
    assert!(!err.contains("unexpected argument"), "{err}");
    // but a flag where the time goes is a usage error, not a time
    let out = ran(
        proofline().args([
            "analyze",
            "--since",
            "--strict",
            "--journal-unit",
            "cuzk.service",
        ]),
        2,
    );
    let err = &out.stderr;
    assert!(err.contains("`--strict` is a flag, not a time"), "{err}");
}

#[test]
fn demo_runs_the_prover_and_reports_what_analyze_reports_on_its_log() {
    let out = tmp("demo");
    let run = ran(
        proofline()
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
            .arg(&out),
        0,
    );
    let stdout = run.stdout;
    assert!(stdout.contains("Verdict:"), "{stdout}");
    assert!(stdout.contains("jobs complete 3"), "{stdout}");
    assert!(stdout.contains("t1-timeline.log"));
    assert!(
        stdout.contains("t1-timeline.html"),
        "the demo draws its chart: {stdout}"
    );
    let chart = std::fs::read_to_string(out.join("t1-timeline.html")).unwrap();
    assert_eq!(chart.matches("class=\"bar gpu\"").count(), 30);
    let stderr = run.stderr;
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
    let run = ran(
        proofline()
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
            .arg(&out),
        0,
    );
    let stdout = run.stdout;
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
    // a fault of no job, GPU or worker of the run, or one that cannot happen, is refused
    // (each was accepted and changed nothing)
    let out = tmp("no-such-fault.log");
    for (args, said) in [
        (
            &["--stall", "8:1000"][..],
            "--stall: job 8 is not one of the run's 8 jobs (0..=7)",
        ),
        (
            &["--stall", "1:0"],
            "--stall: 0 ms is out of range 1..=86400000",
        ),
        (
            &["--slow-gpu", "1:2"],
            "--slow-gpu: GPU 1 is not one of the run's 1 GPUs (0..=0)",
        ),
        (
            &["--slow-gpu", "0:0"],
            "--slow-gpu: a factor of 0 is out of range",
        ),
        (
            &["--slow-gpu", "0:inf"],
            "--slow-gpu: a factor of inf is out of range",
        ),
        (
            &["--slow-gpu", "0:NaN"],
            "--slow-gpu: a factor of NaN is out of range",
        ),
        (
            &["--slow-gpu", "0:1e308"],
            "--slow-gpu: a factor of 1e308 is out of range",
        ),
        // (a value that starts with a hyphen is the flag's, not another flag)
        (
            &["--stall", "-1:100"],
            "--stall: `-1` is not a valid number",
        ),
        (
            &["--never-finish", "0:10"],
            "--never-finish: job 0 (porep-c2) has 10 partition(s) (0..=9), not 10",
        ),
        (
            &["--panic-worker", "2:0"],
            "--panic-worker: worker 2 is not one of the run's 2 GPU workers (0..=1)",
        ),
        (
            &["--panic-worker", "0:80"],
            "--panic-worker: call 80 is past the run's 80 GPU calls (0..=79)",
        ),
        // a call of the run that this worker does not make (the other makes about half)
        (
            &["--panic-worker", "0:79"],
            "GPU call(s) in this run (numbered from 0), so its call 79 never comes",
        ),
    ] {
        let err = ran(
            proofline().arg("generate").args(args).arg("-o").arg(&out),
            1,
        )
        .stderr;
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: a log was written");
    }
    let ok = [
        "generate",
        "--slow-gpu",
        "0:2.5",
        "--never-finish",
        "7:9",
        "-o",
    ];
    ran(proofline().args(ok).arg(&out), 0);
    // `demo --forever` goes on past --jobs: a fault may name a job or call past them
    let mut child = proofline()
        .args([
            "demo",
            "--forever",
            "--jobs",
            "2",
            "--speed",
            "1000",
            "--no-metrics",
        ])
        .args([
            "--stall",
            "5:1000",
            "--never-finish",
            "3:9",
            "--panic-worker",
            "0:50",
        ])
        .arg("--out")
        .arg(tmp("forever"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = common::stderr_lines(&mut child);
    let _demo = common::Proc(child);
    common::wait_line(&rx, "TIMELINE log:");
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
        // an export of nothing is refused, as chart refuses it
        (
            &["export", "--max-partitions", "0", "x.log"][..],
            "--max-partitions",
            "1..",
        ),
        // a chart a browser can open (a million took 2.1 GB and wrote 260 MB)
        (
            &["chart", "--max-partitions", "1000000", "x.log"][..],
            "--max-partitions",
            "1..=50000",
        ),
    ] {
        let out = proofline().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(flag) && err.contains(range), "{args:?}: {err}");
    }
}

#[test]
fn outputs_refuse_the_input_and_unknown_extensions_and_appear_only_when_complete() {
    let dir = tmp("outputs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cuzk.log");
    generate(&["--jobs", "3"], &log);
    let before = std::fs::read(&log).unwrap();
    // the input as output, by its name and by another name of it
    let link = dir.join("same.json");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    for (cmd, out) in [("export", &log), ("export", &link), ("chart", &log)] {
        let o = proofline()
            .args([cmd])
            .arg(&log)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{cmd} -o {}: {err}", out.display());
        assert!(
            err.contains("is the input") || err.contains("format follows"),
            "{cmd}: {err}"
        );
    }
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "the input was changed"
    );
    // formats follow the extension, or the command names what it writes
    for (cmd, name, says) in [
        ("chart", "x.png", ".svg (SVG), .html"),
        ("export", "x.svg", ".json (Chrome trace-event JSON)"),
    ] {
        let o = proofline()
            .args([cmd])
            .arg(&log)
            .arg("-o")
            .arg(dir.join(name))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(says),
            "{cmd} -o {name}: {err}"
        );
        assert!(!dir.join(name).exists(), "{name} was written");
    }
    // no half file and no temporary left behind by a run that wrote one
    let ok = proofline()
        .args(["export"])
        .arg(&log)
        .arg("-o")
        .arg(dir.join("t.json"))
        .output()
        .unwrap();
    assert!(ok.status.success());
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A gzip log cut short is reported as far as it was read, with the error; zeros after the
/// last member end the input as they end gzip's; other bytes there are an error.
#[test]
fn a_truncated_gzip_is_reported_as_far_as_it_was_read_with_the_error() {
    let dir = tmp("truncated");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cuzk.log");
    generate(&["--jobs", "40"], &log);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&std::fs::read(&log).unwrap()).unwrap();
    let gz = gz.finish().unwrap();
    let cut = dir.join("cut.log.gz");
    std::fs::write(&cut, &gz[..gz.len() * 2 / 3]).unwrap();
    let o = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&cut)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a cut log passed as whole");
    assert!(err.contains("the input ended early"), "{err}");
    let r: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("a report of what was read");
    let done = r["summary"]["jobs_complete"].as_u64().unwrap();
    assert!(
        done > 5 && done < 40,
        "{done} jobs complete in two thirds of a 40-job log"
    );
    assert!(r["lines"]["read_error"].is_string());
    let text = proofline().arg("analyze").arg(&cut).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("Input ended early"));

    // two members, then zero bytes (a tape's, or a preallocating writer's): read as gzip
    // -d reads them, whole and no error (it failed with "invalid gzip header"); other bytes
    // after the data are an error, after every line was read
    let whole = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&log)
        .output()
        .unwrap();
    let whole: serde_json::Value = serde_json::from_slice(&whole.stdout).unwrap();
    let text = std::fs::read(&log).unwrap();
    let half = text.len() / 2
        + text[text.len() / 2..]
            .iter()
            .position(|&b| b == b'\n')
            .unwrap()
        + 1;
    let mut two = Vec::new();
    for part in [&text[..half], &text[half..]] {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(part).unwrap();
        two.extend(gz.finish().unwrap());
    }
    let padded = dir.join("padded.log.gz");
    let mut bytes = two.clone();
    bytes.extend([0u8; 4096]);
    std::fs::write(&padded, &bytes).unwrap();
    let o = ran(
        proofline()
            .args(["analyze", "--format", "json"])
            .arg(&padded),
        0,
    );
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(r["summary"], whole["summary"]);
    assert_eq!(r["lines"]["lines"], whole["lines"]["lines"]);
    let junk = dir.join("junk.log.gz");
    let mut bytes = two;
    bytes.extend(b"\0\0not gzip\n");
    std::fs::write(&junk, &bytes).unwrap();
    let o = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&junk)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("neither a gzip member nor zeros"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        r["summary"]["jobs_complete"],
        whole["summary"]["jobs_complete"]
    );
}

#[test]
fn an_empty_log_says_so_and_its_csv_has_a_header() {
    let dir = tmp("empty");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("empty.log");
    std::fs::write(&log, "").unwrap();
    let text = proofline().arg("analyze").arg(&log).output().unwrap();
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).contains("Input: empty (no lines)"));
    assert!(String::from_utf8_lossy(&text.stderr).contains("is empty"));
    let csv = proofline()
        .args(["analyze", "--format", "csv"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout).lines().next(),
        Some(
            "job_id,run,proof_kind,partition,worker,gpu,synth_start_ms,synth_end_ms,queue_start_ms,pickup_ms,gpu_start_ms,gpu_end_ms,synthesis_ms,queue_ms,lock_wait_ms,gpu_ms,synth_reported_ms,gpu_reported_ms,kernel_ms"
        )
    );
}

#[test]
fn a_closed_pipe_ends_quietly_and_os_errors_are_said_once() {
    let dir = tmp("pipe");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cuzk.log");
    generate(&["--jobs", "200"], &log);
    generate(&["--jobs", "3000", "--mixed"], &dir.join("big.log"));
    for args in [
        vec!["analyze", "--format", "csv"],
        vec!["analyze", "--format", "json", "big.log"],
        vec!["export"],
        vec!["generate", "--jobs", "2000"],
    ] {
        let mut cmd = proofline();
        cmd.current_dir(&dir).args(&args);
        if args[0] != "generate" && args.last() != Some(&"big.log") {
            cmd.arg(&log);
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // read a little, then close the pipe like `| head -1`
        let mut out = child.stdout.take().unwrap();
        let mut b = [0u8; 16];
        let _ = std::io::Read::read(&mut out, &mut b);
        drop(out);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("Broken pipe") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        // the status of a process SIGPIPE ended, as Unix tools end
        assert!(
            matches!(o.status.code(), Some(141) | Some(0)),
            "{args:?}: {:?}",
            o.status
        );
    }
    let o = proofline()
        .args(["analyze", "/nonexistent/x.log"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

/// `analyze DIR` is an error said before any report; `generate -o` that cannot write (here
/// a file-size limit) leaves no truncated log; `--metrics-addr` takes a host name and says
/// what it expects when it cannot resolve one.
#[test]
fn small_operator_mistakes_are_said_plainly() {
    let dir = tmp("mistakes");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = ran(proofline().arg("analyze").arg(&dir), 1);
    let err = &o.stderr;
    assert!(o.stdout.is_empty(), "a report was printed");
    assert!(err.contains("is a directory"), "{err}");

    // writes past 64 KiB fail (EFBIG; SIGXFSZ ignored, as a shell's trap does)
    let out = dir.join("cut.log");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; exec prlimit --fsize=65536 {} generate --jobs 200 -o {}",
            env!("CARGO_BIN_EXE_proofline"),
            out.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("(removed)"), "{err}");
    assert!(!out.exists(), "a cut log was left behind");

    let o = proofline()
        .args(["watch", "--metrics-addr", "no-such-host.invalid:9464"])
        .arg(dir.join("x.log"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("expected IP:PORT"),
        "{err}"
    );
    std::fs::write(dir.join("x.log"), "").unwrap();
    let mut child = proofline()
        .args(["watch", "--metrics-addr", "localhost:0"])
        .arg(dir.join("x.log"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = common::stderr_lines(&mut child);
    let _watch = common::Proc(child);
    let line = common::wait_line(&rx, "metrics on");
    assert!(line.contains("http://127.0.0.1:"), "{line}");

    // a prefix given twice is an error (the last value won, unsaid); two prefixes are not
    let log = dir.join("two.log");
    generate(&["--jobs", "2"], &log);
    for (flag, a, b) in [
        ("--partitions-for", "porep-=3", "porep-=5"),
        ("--proof-kind-for", "batch-=a", "batch-=b"),
    ] {
        // (refused before anything is written: CSV's header included)
        let csv = ["analyze", "--format", "csv", flag, a, flag, b];
        let r = ran(proofline().args(csv).arg(&log), 1);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        let err = r.stderr;
        let prefix = a.split('=').next().unwrap();
        assert!(
            err.contains(&format!("{flag} {prefix}=... is given twice")),
            "{err}"
        );
    }
    let two = [
        "--partitions-for",
        "porep-=10",
        "--partitions-for",
        "porep-1=10",
    ];
    ran(proofline().arg("analyze").args(two).arg(&log), 0);
}

/// A Docker json-file log (`docker logs` writes each line as a JSON object) holds no TIMELINE
/// line as such: analyze says what the file is and how to take the lines out, and fails (it
/// read 0 TIMELINE lines and exited 0).
#[test]
fn a_docker_json_log_is_named_with_the_way_out() {
    let dir = tmp("docker");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("container.log");
    std::fs::write(
        &log,
        "{\"log\":\"TIMELINE,1,SYNTH_START,porep-1-1,partition=0\\n\",\"stream\":\"stderr\",\"time\":\"2026-12-01T00:00:00.1Z\"}\n",
    )
    .unwrap();
    let o = ran(proofline().arg("analyze").arg(&log), 1);
    let err = &o.stderr;
    assert!(
        err.contains("Docker json-file log") && err.contains("jq -j .log"),
        "{err}"
    );
}

/// A log compressed other than with gzip read as a few lines of bytes with no TIMELINE line
/// and exited 0, `--strict` too: analyze names the format and the way out, and fails. A
/// file of other lines (no TIMELINE line, no format to name) is reported with a warning.
#[test]
fn a_log_compressed_other_than_with_gzip_is_named_with_the_way_out() {
    let dir = tmp("packed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // each format's magic number, then bytes as a compressor writes them
    for (name, magic, cmd) in [
        ("zstd", &[0x28u8, 0xb5, 0x2f, 0xfd][..], "zstd -dc"),
        ("xz", &[0xfd, b'7', b'z', b'X', b'Z', 0][..], "xz -dc"),
        ("bzip2", &b"BZh91AY&SY"[..], "bzip2 -dc"),
    ] {
        let log = dir.join(format!("cuzk.log.{name}"));
        let mut bytes = magic.to_vec();
        bytes.extend((0..2000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
        std::fs::write(&log, &bytes).unwrap();
        let o = ran(proofline().args(["analyze", "--strict"]).arg(&log), 1);
        let err = &o.stderr;
        assert!(
            err.contains(&format!("it is {name}-compressed"))
                && err.contains(&format!("{cmd} {}", log.display())),
            "{err}"
        );
    }
    // watch names it too (it follows plain text)
    let zst = dir.join("cuzk.log.zstd");
    let mut child = proofline()
        .args(["watch", "--metrics-addr", "127.0.0.1:0"])
        .arg(&zst)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = common::stderr_lines(&mut child);
    let _watch = common::Proc(child);
    let line = common::wait_line(&rx, "is compressed");
    assert!(
        line.contains("(zstd, xz, bzip2, lz4 or zip): watch follows plain text"),
        "{line}"
    );

    let other = dir.join("other.log");
    std::fs::write(&other, "starting up\nlistening on :8080\n").unwrap();
    let o = proofline().arg("analyze").arg(&other).output().unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds no TIMELINE line in its 2 line(s): is it the prover's log?"),
        "{err}"
    );
}

/// `export` to OpenMetrics at a fixed epoch (its output file to follow).
const OPENMETRICS_EXPORT: [&str; 5] = [
    "export",
    "--format",
    "openmetrics",
    "--epoch",
    "2026-12-01T00:00:00Z",
];

/// A line over the length limit is named by its number, in the report and beside JSON; a
/// log whose only lines are over it is not said to hold no TIMELINE line, as if it were
/// another program's (the skipped lines may be TIMELINE lines).
#[test]
fn a_line_over_the_limit_is_named_by_its_number() {
    let log = tmp("over-long.log");
    generate(&["--jobs", "2"], &log);
    let mut text = std::fs::read_to_string(&log).unwrap();
    let long = format!(
        "TIMELINE,1,SYNTH_START,j,partition=0,{}\n",
        "x".repeat(2 << 20)
    );
    // the fourth line
    let third = text.match_indices('\n').nth(2).unwrap().0;
    text.insert_str(third + 1, &long);
    std::fs::write(&log, &text).unwrap();
    let report = ran(proofline().arg("analyze").arg(&log), 0).stdout;
    assert!(
        report.contains("1 longer than 1 MiB (skipped, first at line 4)"),
        "{report}"
    );
    let json = ran(
        proofline().args(["analyze", "--format", "json"]).arg(&log),
        0,
    );
    assert!(
        json.stderr
            .contains("1 line(s) over 1048576 bytes, skipped, first at line 4"),
        "{}",
        json.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["lines"]["first_oversized"], 4);

    std::fs::write(&log, &long).unwrap();
    let err = ran(proofline().arg("analyze").arg(&log), 0).stderr;
    assert!(
        err.contains("has no TIMELINE line proofline could read: 1 of its 1 line(s) are over 1048576 bytes and were skipped unread, first at line 1"),
        "{err}"
    );
    assert!(!err.contains("is it the prover's log?"), "{err}");
    // said once, by every command that writes another form (the warning of what was not
    // used said it a second time), and still a failure for --strict
    let (perfetto, om) = (tmp("over-limit.json"), tmp("over-limit.om"));
    let (perfetto, om) = (perfetto.to_str().unwrap(), om.to_str().unwrap());
    for args in [
        &["analyze", "--format", "json"][..],
        &["analyze", "--format", "csv"],
        &["export", "--format", "perfetto", "-o", perfetto],
        &[&OPENMETRICS_EXPORT[..], &["-o", om]].concat(),
    ] {
        let err = ran(proofline().args(args).arg(&log), 0).stderr;
        assert_eq!(err.matches("1048576 bytes").count(), 1, "{args:?}: {err}");
    }
    let strict = ran(proofline().args(["analyze", "--strict"]).arg(&log), 1).stderr;
    assert!(
        strict.contains("1 line(s) over 1048576 bytes, skipped, first at line 1 (--strict)"),
        "{strict}"
    );
}

/// `export`, in both formats, says what it did not use as `analyze` says it: a line over the
/// limit, a malformed TIMELINE line and a malformed `CUZK_TIMING:` one, a `CUZK_TIMING:`
/// value over an hour (the Perfetto export
/// said nothing, the OpenMetrics one only of malformed lines).
#[test]
fn export_says_what_it_did_not_use_as_analyze_does() {
    let log = tmp("not-used.log");
    generate(&["--jobs", "3"], &log);
    let mut text = std::fs::read_to_string(&log).unwrap();
    let third = text.match_indices('\n').nth(2).unwrap().0;
    text.insert_str(
        third + 1,
        &format!(
            "TIMELINE,1,SYNTH_START,j,partition=0,{}\nTIMELINE,x,GPU_END,j,worker=0\nCUZK_TIMING: gpu_tid=0 mutex_held_ms=37423742 mutex_wait_ms=1\nCUZK_TIMING: gpu_tid=0 mutex_wait_ms=3us\n",
            "x".repeat(3 << 19)
        ),
    );
    // and a stray line at the end (the OpenMetrics export, which did not finish the
    // engine, did not count it)
    text.push_str("TIMELINE,0,SYNTH_START,zz-1,partition=0\n");
    std::fs::write(&log, &text).unwrap();
    let said = |err: &str| {
        err.lines()
            .find_map(|l| l.strip_prefix("proofline: warning: "))
            .filter(|w| w.contains("malformed"))
            .unwrap_or_else(|| panic!("no warning of what was not used: {err}"))
            .to_owned()
    };
    let analyze = ran(
        proofline().args(["analyze", "--format", "json"]).arg(&log),
        0,
    );
    let want = said(&analyze.stderr);
    for part in [
        // (a malformed CUZK_TIMING line is no TIMELINE line: each kind counted)
        "2 malformed line(s) (1 TIMELINE, 1 CUZK_TIMING), first at line 5",
        "1 line(s) over 1048576 bytes, skipped, first at line 4",
        "1 CUZK_TIMING line(s) ignored for a value over an hour, first at line 6",
        "1 stray TIMELINE line(s) far behind the newest",
    ] {
        assert!(want.contains(part), "{part}: {want}");
    }
    let perfetto = ran(
        proofline()
            .args(["export", "--format", "perfetto", "-o"])
            .arg(tmp("not-used.json"))
            .arg(&log),
        0,
    );
    assert_eq!(said(&perfetto.stderr), want);
    let openmetrics = ran(
        proofline()
            .args(OPENMETRICS_EXPORT)
            .arg("-o")
            .arg(tmp("not-used.om"))
            .arg(&log),
        0,
    );
    assert_eq!(said(&openmetrics.stderr), want);
}

/// A partition count set below the prover's (`--partitions-for porep-=3` on PoRep's 10)
/// completed jobs early and read their later lines as conflicts and new attempts, with no
/// hint: the events past the count are counted, the first named with the rule it broke.
#[test]
fn a_partition_count_set_too_low_is_said() {
    let log = tmp("count-too-low.log");
    generate(&["--jobs", "3"], &log);
    let read = |args: &[&str]| {
        let r = ran(
            proofline()
                .args(["analyze", "--format", "json"])
                .args(args)
                .arg(&log),
            0,
        );
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        (v["events"].clone(), r.stderr)
    };
    for args in [&[][..], &["--partitions-for", "porep-=10"]] {
        let (e, err) = read(args);
        assert_eq!(e["partitions_past_count"], 0, "{args:?}: {e}");
        assert!(!err.contains("past the count"), "{args:?}: {err}");
        assert_eq!(
            e["rules_matching_no_job"],
            serde_json::json!([]),
            "{args:?}"
        );
        assert!(!err.contains("matched no job"), "{args:?}: {err}");
    }
    // a misspelt prefix is said, where it changed nothing
    let (e, err) = read(&["--partitions-for", "PoRep-=3"]);
    assert_eq!(e["partitions_past_count"], 0, "{e}");
    assert_eq!(
        e["rules_matching_no_job"],
        serde_json::json!(["--partitions-for PoRep-=3"])
    );
    assert!(
        err.contains("warning: --partitions-for PoRep-=3 matched no job"),
        "{err}"
    );
    let (e, err) = read(&["--partitions-for", "porep-=3"]);
    assert!(e["partitions_past_count"].as_u64().unwrap() > 0, "{e}");
    let example = e["partition_past_count_example"].as_str().unwrap();
    assert!(
        example.contains("partition(s) of the rule for ids starting `porep-` (--partitions-for)"),
        "{example}"
    );
    assert!(err.contains("set too low?"), "{err}");
    let report = ran(
        proofline()
            .args(["analyze", "--partitions-for", "porep-=3"])
            .arg(&log),
        0,
    )
    .stdout;
    assert!(
        report.contains("Warning: ") && report.contains(example),
        "{report}"
    );
    // and export, in both formats, which holds the doubled jobs too
    for (format, out) in [
        (&["perfetto"][..], "count-too-low.json"),
        (
            &["openmetrics", "--epoch", "2026-12-01T00:00:00Z"],
            "count-too-low.om",
        ),
    ] {
        let err = ran(
            proofline()
                .args(["export", "--partitions-for", "porep-=3", "--format"])
                .args(format)
                .arg("-o")
                .arg(tmp(out))
                .arg(&log),
            0,
        )
        .stderr;
        assert!(
            err.contains(example) && err.contains("set too low?"),
            "{err}"
        );
    }
    // and compare, of each side, with the first such event and a rule that matched none
    for (rule, says) in [
        ("porep-=3", format!("(the first: {example})")),
        (
            "PoRep-=3",
            "--partitions-for PoRep-=3 matched no job".to_owned(),
        ),
    ] {
        let err = ran(
            proofline()
                .args(["compare", "--partitions-for", rule])
                .arg(&log)
                .arg(&log),
            0,
        )
        .stderr;
        for side in ["A", "B"] {
            assert!(
                err.lines()
                    .any(|l| l.contains(&format!("warning: {side} (")) && l.contains(&says)),
                "{rule}: {err}"
            );
        }
    }
}

/// A generated log of GPUs with other than cuzk's default of 2 workers each starts with
/// cuzk's start-up lines, so that `analyze` places the workers as the run did: with 3
/// workers on one GPU it read 2 GPUs. The default log stays TIMELINE lines alone; the
/// daemon-shaped one (`--log-lines`) has them always, as cuzk's daemon log does.
#[test]
fn a_generated_log_says_how_many_workers_each_gpu_has() {
    let gpus = |args: &[&str]| {
        let log = tmp(&format!("workers{}.log", args.join("")));
        generate(args, &log);
        let text = std::fs::read_to_string(&log).unwrap();
        let v: serde_json::Value = serde_json::from_str(
            &ran(
                proofline().args(["analyze", "--format", "json"]).arg(&log),
                0,
            )
            .stdout,
        )
        .unwrap();
        (v["gpus"].as_array().unwrap().len(), text)
    };
    let (n, text) = gpus(&["--jobs", "3", "--workers-per-gpu", "3"]);
    assert_eq!(n, 1, "{}", &text[..400]);
    assert!(
        text.contains("gpu_workers_per_device=3"),
        "{}",
        &text[..400]
    );
    let (n, text) = gpus(&["--jobs", "3", "--gpus", "2", "--workers-per-gpu", "1"]);
    assert_eq!(n, 2, "{}", &text[..400]);
    let (n, text) = gpus(&["--jobs", "3"]);
    assert_eq!(n, 1);
    assert!(text.starts_with("TIMELINE,"), "{}", &text[..200]);
    let (_, text) = gpus(&["--jobs", "3", "--log-lines"]);
    assert!(
        text.lines().next().unwrap().ends_with(
            "initializing GPU workers num_gpus=1 gpu_workers_per_device=2 total_workers=2"
        ),
        "{}",
        &text[..400]
    );
}

/// Lines shuffled further than the reorder window read as restarts: the report says that
/// they fell back less than halfway to offset 0, where a restarted prover starts again, and
/// what reads them as one run (it read as 73 restarts with a confident verdict, without a
/// word). Two logs one after the other, a real restart, are not said to be so.
#[test]
fn restarts_that_may_be_disorder_are_said() {
    let log = tmp("shuffled.log");
    generate(&["--jobs", "40", "--shuffle-ms", "20000"], &log);
    let events = |args: &[&str], log: &std::path::Path| {
        let r = ran(
            proofline()
                .args(["analyze", "--format", "json"])
                .args(args)
                .arg(log),
            0,
        );
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        (v["events"].clone(), r.stderr)
    };
    let (e, err) = events(&[], &log);
    let runs = e["runs"].as_u64().unwrap();
    assert!(runs > 2, "{e}");
    assert_eq!(e["shallow_restarts"].as_u64(), Some(runs - 1), "{e}");
    let said = format!(
        "{0} of the {0} restart(s) fell back less than halfway to offset 0",
        runs - 1
    );
    assert!(err.contains(&said), "{err}");
    assert!(err.contains("a wider --reorder-window-ms reads them as one run"));
    let report = ran(proofline().arg("analyze").arg(&log), 0).stdout;
    assert!(report.contains(&format!("Warning: {said}")), "{report}");
    assert!(
        report.contains(&format!(
            "{runs} runs (daemon restarts, or lines far out of order)"
        )),
        "{report}"
    );
    // its stray lines say the same way out
    assert!(
        report.contains("stray line(s) out of the window and alone")
            && report.contains(
                "read so, and their jobs as stuck or incomplete: a wider window uses them"
            ),
        "{report}"
    );
    // the way out it names
    let (e, err) = events(&["--reorder-window-ms", "25000"], &log);
    assert_eq!(
        (e["runs"].as_u64(), e["shallow_restarts"].as_u64()),
        (Some(1), Some(0))
    );
    assert!(!err.contains("halfway"), "{err}");

    // a real restart: a second log after the first, its offsets from 0 again
    let (a, b) = (tmp("run-a.log"), tmp("run-b.log"));
    generate(&["--jobs", "3"], &a);
    generate(&["--jobs", "3", "--seed", "2"], &b);
    let both = tmp("two-runs.log");
    let mut text = std::fs::read(&a).unwrap();
    text.extend(std::fs::read(&b).unwrap());
    std::fs::write(&both, text).unwrap();
    let (e, err) = events(&[], &both);
    assert_eq!(
        (e["runs"].as_u64(), e["shallow_restarts"].as_u64()),
        (Some(2), Some(0))
    );
    assert!(!err.contains("halfway"), "{err}");

    // compare says which side is in doubt (it compared them without a word)
    let err = ran(proofline().arg("compare").arg(&a).arg(&log), 0).stderr;
    assert!(
        err.contains(&format!("warning: B ({}): ", log.display()))
            && err.contains(&format!(
                "{} restart(s) that fell back less than halfway to offset 0",
                runs - 1
            ))
            && err.contains("may be misread"),
        "{err}"
    );
    assert!(!err.contains("warning: A ("), "{err}");
    let err = ran(proofline().arg("compare").arg(&a).arg(&b), 0).stderr;
    assert!(!err.contains("may be misread"), "{err}");
}

/// A job timeout below what the log shows normal is said (it turned 8 sectors into 73
/// evicted jobs without a word); the JSON counts the events that came after evictions.
#[test]
fn a_job_timeout_shorter_than_the_logs_silences_is_warned_about() {
    let dir = tmp("job-timeout");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cuzk.log");
    generate(&["--jobs", "8"], &log);
    let text = |extra: &[&str]| {
        let o = proofline()
            .arg("analyze")
            .args(extra)
            .arg(&log)
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap()
    };
    assert!(text(&["--job-timeout-s", "1"]).contains("after they were evicted for silence"));
    assert!(!text(&[]).contains("after they were evicted"));
    let json = common::analyze_json(&log);
    assert_eq!(json["events"]["after_eviction"], 0);
}

/// Floors in the report, on logs of known configurations: one GPU and ten synthesis workers
/// read at the GPU floor (as cuzk's own pw=10 run, where two sectors' synthesis in parallel
/// could not help); two synthesis workers at the synthesis floor, near cuzk's published
/// ~152 s/proof for two workers; two GPUs move the floor to synthesis.
#[test]
fn floors_name_the_resource_that_bounds_the_pipeline() {
    let dir = tmp("floors");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // cuzk's tuning table: ~152 s/proof with two synthesis workers
    let published = |args: &[&str]| args.ends_with(&["--synth-workers", "2"]).then_some(152.0);
    for (args, at, spp) in [
        (&["--jobs", "8"][..], "gpu", 36.7),
        (
            &["--jobs", "8", "--synth-workers", "2"][..],
            "synthesis",
            150.4,
        ),
        (&["--jobs", "8", "--gpus", "2"][..], "synthesis", 29.5),
    ] {
        let log = dir.join(format!("{}.log", args.join("_")));
        generate(args, &log);
        let r = common::analyze_json(&log);
        let f = &r["floors"];
        assert_eq!(f["at_floor"], at, "{args:?}: {f}");
        let measured = f["measured_s_per_proof"].as_f64().unwrap();
        assert!((measured - spp).abs() / spp < 0.05, "{args:?}: {measured}");
        if let Some(p) = published(args) {
            assert!(
                (measured - p).abs() / p < 0.05,
                "{args:?}: {measured}, cuzk's {p}"
            );
        }
        let floor = f[if at == "gpu" {
            "gpu_s_per_proof"
        } else {
            "synthesis_s_per_proof"
        }]
        .as_f64()
        .unwrap();
        assert!(
            measured <= floor * 1.03,
            "{args:?}: {measured} above {floor}"
        );
    }
}

/// What comes from the log cannot drive the terminal: a job id holding escape sequences (a
/// window title, a clear screen) or a bidirectional override is printed escaped.
#[test]
fn the_text_report_escapes_what_would_drive_a_terminal() {
    let dir = tmp("escapes");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("evil.log");
    let id = "porep-\u{1b}]0;pwned\u{7}\u{1b}[2J-\u{202e}1";
    std::fs::write(
        &log,
        format!(
            "TIMELINE,0,SYNTH_START,{id},partition=0\nTIMELINE,10,SYNTH_END,{id},partition=0,synth_ms=10\n"
        ),
    )
    .unwrap();
    let o = proofline().arg("analyze").arg(&log).output().unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'));
    assert!(out.contains("porep-\\u{1b}]0;pwned\\u{7}"), "{out}");
}

/// `whatif` on a GPU-bound log: the replay beside the measured figure, a sweep over
/// synthesis workers in text and JSON, the JSON's documented fields; and a log it cannot
/// learn from says why.
#[test]
fn whatif_predicts_and_sweeps_from_a_log() {
    let dir = common::fresh_dir("cli", "whatif");
    let log = common::generated_log(&dir, &["--jobs", "12", "--cuzk-timing"]);
    let o = ran(
        proofline()
            .args(["whatif", "--synthesis-workers", "20", "--format", "json"])
            .arg(&log),
        0,
    );
    let a: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let measured = a["baseline"]["measured"]["seconds_per_proof"]
        .as_f64()
        .unwrap();
    let replayed = a["baseline"]["replayed"]["seconds_per_proof"]
        .as_f64()
        .unwrap();
    let predicted = a["predicted"]["seconds_per_proof"].as_f64().unwrap();
    assert!((replayed / measured - 1.0).abs() < 0.03, "{a}");
    // GPU-bound: twice the synthesis workers change nothing
    assert!((predicted / replayed - 1.0).abs() < 0.01, "{a}");
    assert_eq!(a["predicted"]["verdict"], "gpu_bound");
    assert!(a["predicted"]["gpu_busy_ratio"].as_f64().unwrap() > 0.95);
    assert_eq!(a["predicted"]["pipeline"]["synthesis_workers"], 20);
    assert_eq!(a["log_pipeline"]["synthesis_workers"], 10);
    assert_eq!(a["basis"]["gpu_lock"], "lock_held");
    assert_eq!(a["changes"][0], "synthesis workers 10 -> 20");

    let o = ran(
        proofline()
            .args(["whatif", "--sweep", "synthesis-workers=2..6:2"])
            .arg(&log),
        0,
    );
    let text = o.stdout;
    for needle in [
        "measured (the log)",
        "replayed (the model)",
        "synthesis_bound",
        "assumes:",
    ] {
        assert!(text.contains(needle), "{needle}:\n{text}");
    }
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| ["  2 ", "  4 ", "  6 "].iter().any(|p| l.starts_with(p)))
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    // the bars shorten as workers are added: 2 workers is the longest, the full width
    let bar = |l: &str| l.chars().filter(|&c| c == '#').count();
    assert_eq!(bar(rows[0]), 30, "{text}");
    assert!(
        bar(rows[1]) < bar(rows[0]) && bar(rows[2]) < bar(rows[1]),
        "{text}"
    );

    // `whatif ARGS LOG` fails: its stderr
    let refused = |args: &[&str], log: &std::path::Path| {
        let o = proofline()
            .arg("whatif")
            .args(args)
            .arg(log)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // one job is no steady state; a bad sweep names what it takes
    let sub = dir.join("one");
    std::fs::create_dir_all(&sub).unwrap();
    let one = common::generated_log(&sub, &["--jobs", "1"]);
    let err = refused(&[], &one);
    assert!(
        err.contains("1 complete job(s)") && err.contains("at least two"),
        "{err}"
    );
    let err = refused(&["--sweep", "cores=1..4"], &log);
    assert!(
        err.contains("`cores` is no parameter") && err.contains("synthesis-workers"),
        "{err}"
    );
    // a sweep of a setting its own flag sets too: refused (the flag headed the answer while
    // the rows swept over it)
    for (sweep, flag) in [("gpus=1..4", "--gpus"), ("gpu-speed=1,2", "--gpu-speed")] {
        let err = refused(&["--sweep", sweep, flag, "3"], &log);
        let name = &flag[2..];
        assert!(
            err.contains(&format!(
                "--sweep {name}=... varies {name} row by row, and {flag} sets it too"
            )),
            "{err}"
        );
    }
    // more GPU workers than the engine follows: refused, not predicted short
    let err = refused(&["--gpus", "1024", "--gpu-workers-per-device", "5"], &log);
    assert!(
        err.contains("5120 workers: a prediction follows at most 4096"),
        "{err}"
    );
}

/// `compare`: a log against itself as a JSON report is `same` everywhere and exits 0; a
/// log with kernels 8 % slower is worse, names the kernel first, and `--fail-if
/// worse:seconds_per_proof` turns that into exit status 3 with the reason on stderr;
/// markdown is a table for a pull request; a condition with nothing to check (B empty) is an
/// error; a bad condition names the figures it knows.
#[test]
fn compare_calls_a_regression_and_fails_ci_on_it() {
    let dir = common::fresh_dir("cli", "compare");
    let a = dir.join("a.log");
    let b = dir.join("b.log");
    generate(&["--jobs", "16", "--cuzk-timing", "--seed", "1"], &a);
    generate(
        &[
            "--jobs",
            "16",
            "--cuzk-timing",
            "--seed",
            "2",
            "--kernel-ms",
            "3996",
        ],
        &b,
    );
    // a kept baseline: the JSON report of A
    let base = dir.join("a.json");
    let o = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&a)
        .output()
        .unwrap();
    std::fs::write(&base, &o.stdout).unwrap();

    let c = compare_json(&["--fail-if", "changed:any"], &base, &a);
    for f in c["figures"].as_array().unwrap() {
        assert!(f["change"] == "same" || f["change"] == "not_called", "{f}");
        assert!(f.get("band").is_some() && f.get("delta").is_some(), "{f}");
    }

    let o = proofline()
        .args([
            "compare",
            "--format",
            "json",
            "--fail-if",
            "worse:seconds_per_proof",
        ])
        .arg(&base)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--fail-if worse:seconds_per_proof: seconds_per_proof worse (+"),
        "{err}"
    );
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let figs = c["figures"].as_array().unwrap();
    assert_eq!(figs[0]["name"], "seconds_per_proof");
    assert_eq!(figs[0]["change"], "worse");
    assert_eq!(figs[1]["name"], "kernel_per_call_ms");
    let d = figs[1]["delta_ratio"].as_f64().unwrap();
    assert!((0.05..0.11).contains(&d), "{d}");
    // better is not worse: this condition does not hold
    let o = ran(
        proofline()
            .args(["compare", "--format", "markdown", "--fail-if", "better:any"])
            .arg(&a)
            .arg(&b),
        0,
    );
    let md = o.stdout;
    assert!(
        md.contains("| figure | A | B | delta | band | call |"),
        "{md}"
    );
    assert!(
        md.contains("| seconds_per_proof (s) |") && md.contains("**worse**"),
        "{md}"
    );

    // a gate that could not look is no pass: B empty (or unreadable, read as no jobs) has
    // no figure to call, and the condition is an error, not a success
    let empty = dir.join("empty.log");
    std::fs::write(&empty, "").unwrap();
    for cond in ["worse:any", "worse:seconds_per_proof"] {
        let o = proofline()
            .args(["compare", "--fail-if", cond])
            .arg(&a)
            .arg(&empty)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "{cond}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--fail-if {cond}: nothing to check"))
                && err.contains("has 0 complete job(s)"),
            "{err}"
        );
    }

    // nor is `any` where B finished no proof, or too few for a band: its seconds per proof,
    // the headline, was not called, while figures it still had were (it exited 0)
    for (name, lines) in [("cut.log", 60), ("short.log", 400)] {
        let cut = dir.join(name);
        let text = std::fs::read_to_string(&a).unwrap();
        let head: String = text.lines().take(lines).map(|l| format!("{l}\n")).collect();
        std::fs::write(&cut, head).unwrap();
        let o = ran(
            proofline()
                .args(["compare", "--fail-if", "worse:any"])
                .arg(&a)
                .arg(&cut),
            1,
        );
        let err = &o.stderr;
        assert!(
            err.contains("--fail-if worse:any: seconds_per_proof, the figure any run is judged by first, was not called"),
            "{name}: {err}"
        );
    }
    // and a figure on one side only is no bar to `any`: B's build prints no CUZK_TIMING
    // lines, so it has no kernel figures, and nothing else changed
    let plain = dir.join("plain.log");
    generate(&["--jobs", "16", "--seed", "1"], &plain);
    let c = compare_json(&["--fail-if", "worse:any"], &a, &plain);
    let kernel = c["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "kernel_per_call_ms")
        .unwrap();
    assert!(kernel["a"].is_number() && kernel["b"].is_null(), "{kernel}");

    let o = proofline()
        .args(["compare", "--fail-if", "worse:speed"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("`speed` in `worse:speed` is no figure") && err.contains("kernel_per_call_ms"),
        "{err}"
    );
    // JSON that is no report is said to be so
    let bogus = dir.join("bogus.json");
    std::fs::write(&bogus, "{\"hello\": 1}\n").unwrap();
    let o = proofline()
        .arg("compare")
        .arg(&bogus)
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds JSON that is no report"), "{err}");
    // a report of another schema version is refused, not read as this one
    let mut newer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&base).unwrap()).unwrap();
    newer["schema_version"] = 99.into();
    // (a newer schema may lack a field this one needs: the version is what is named)
    newer.as_object_mut().unwrap().remove("summary");
    let newer_path = dir.join("newer.json");
    std::fs::write(&newer_path, serde_json::to_vec(&newer).unwrap()).unwrap();
    let o = proofline()
        .arg("compare")
        .arg(&newer_path)
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is a report of schema version 99; this proofline reads version 1")
            && err.contains("a newer proofline"),
        "{err}"
    );
}

/// A figure that changes sign (cuzk's Phase 8 to 9: the synthesis lead goes from +42 s to
/// -10 s, the hand-off from -0.4 s to +12 s) is compared by its difference, not as a
/// percentage of A, which read "-123.4 %" and "+3083.2 %"; a figure of one sign keeps its
/// percentage.
#[test]
fn compare_gives_a_change_of_sign_as_a_difference() {
    let (a, b) = (tmp("sign-a.log"), tmp("sign-b.log"));
    generate(
        &["--jobs", "20", "--cuzk-timing", "--kernel-ms", "3746"],
        &a,
    );
    generate(
        &[
            "--jobs",
            "20",
            "--cuzk-timing",
            "--kernel-ms",
            "1824",
            "--seed",
            "2",
        ],
        &b,
    );
    let c = compare_json(&[], &a, &b);
    let fig = |name: &str| {
        c["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    let lead = fig("synthesis_lead_ms");
    assert!(
        lead["a"].as_f64().unwrap() > 0.0 && lead["b"].as_f64().unwrap() < 0.0,
        "{lead}"
    );
    assert!(
        lead["delta_ratio"].is_null() && lead["band_ratio"].is_null(),
        "{lead}"
    );
    assert!(lead["delta"].as_f64().unwrap() < 0.0, "{lead}");
    let handoff = fig("handoff_ms");
    assert!(handoff["a"].as_f64().unwrap() < 0.0, "{handoff}");
    assert!(handoff["delta_ratio"].is_null(), "{handoff}");
    let spp = fig("seconds_per_proof");
    let r = spp["delta_ratio"].as_f64().unwrap();
    assert!((r - (spp["b"].as_f64().unwrap() / spp["a"].as_f64().unwrap() - 1.0)).abs() < 1e-9);

    let o = ran(proofline().arg("compare").arg(&a).arg(&b), 0);
    let text = o.stdout.as_str();
    let row = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row: {text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // figure (unit), A, B, delta (value and unit), band (value and unit), call
    let lead = row("synthesis_lead_ms");
    let want = format!(
        "{:.0}",
        c["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == "synthesis_lead_ms")
            .unwrap()["delta"]
            .as_f64()
            .unwrap()
    );
    assert_eq!(&lead[4..6], [want, "ms".to_owned()], "{lead:?}");
    assert!(lead[6].starts_with('±') && lead[7] == "ms", "{lead:?}");
    assert!(
        !text.contains("-123.4 %") && !text.contains("+3083.2 %"),
        "{text}"
    );
    let spp = row("seconds_per_proof (s)");
    assert!(spp[5] == "%" && spp[4].starts_with('-'), "{spp:?}");
}

/// cuzk's start-up lines say how its GPU workers map to GPUs (here one worker per GPU on two
/// GPUs, against the default of two per GPU, which would read one GPU): analyze uses them and
/// says so; a --gpu-workers-per-device given wins, and the disagreement is warned about.
#[test]
fn cuzk_start_up_lines_map_workers_to_gpus() {
    let log = tmp("startup.log");
    generate(
        &["--jobs", "4", "--gpus", "2", "--workers-per-gpu", "1"],
        &log,
    );
    // the TIMELINE lines alone (generate writes cuzk's start-up lines for this run)
    let timeline: String = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("TIMELINE,"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, &timeline).unwrap();
    let startup = "2026-12-01T03:00:00.1Z  INFO cuzk_core::engine: initializing GPU workers num_gpus=2 gpu_workers_per_device=1 total_workers=2 gpus=[0, 1]\n\
        2026-12-01T03:00:00.2Z  INFO cuzk_core::engine: pipeline GPU worker started worker_id=0 gpu=0 sub_id=0\n\
        2026-12-01T03:00:00.2Z  INFO cuzk_core::engine: pipeline GPU worker started worker_id=1 gpu=1 sub_id=0\n";
    let with = tmp("startup-with.log");
    std::fs::write(&with, format!("{startup}{timeline}")).unwrap();
    let gpus = |args: &[&str], path: &std::path::Path| {
        let r = common::analyze_json_with(args, path);
        (r["gpus"].as_array().unwrap().len(), r)
    };
    let (n, r) = gpus(&[], &log);
    assert_eq!(
        n, 1,
        "without start-up lines, the default pairs the two workers"
    );
    assert!(
        r["gpu_mapping"].as_str().unwrap().contains("default"),
        "{}",
        r["gpu_mapping"]
    );
    let (n, r) = gpus(&[], &with);
    assert_eq!(n, 2, "{}", r["gpu_mapping"]);
    assert!(
        r["gpu_mapping"]
            .as_str()
            .unwrap()
            .contains("start-up lines")
    );
    let (n, r) = gpus(&["--gpu-workers-per-device", "2"], &with);
    assert_eq!(n, 1, "the flag wins");
    let said = r["gpu_mapping_disagreements"].as_array().unwrap();
    assert!(
        !said.is_empty() && said[0].as_str().unwrap().contains("start-up lines say 1"),
        "{said:?}"
    );
    let text = proofline()
        .args(["analyze", "--gpu-workers-per-device", "2"])
        .arg(&with)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("Warning: cuzk's start-up lines"));
}

#[test]
fn a_provers_own_kinds_replace_unknown() {
    let log = tmp("kinds.log");
    std::fs::write(
        &log,
        ["batch-1", "porep-1-2", "x-1"]
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let (t, kind) = (i * 100, if *j == "x-1" { ",kind=named" } else { "" });
                format!(
                    "TIMELINE,{t},SYNTH_START,{j},partition=0{kind}\n\
                     TIMELINE,{},SYNTH_END,{j},partition=0,synth_ms=10\n\
                     TIMELINE,{},GPU_START,{j},worker=0,partition=0\n\
                     TIMELINE,{},GPU_END,{j},worker=0,partition=0,gpu_ms=10\n",
                    t + 10,
                    t + 10,
                    t + 20
                )
            })
            .collect::<String>(),
    )
    .unwrap();
    let kinds = |extra: &[&str]| {
        let mut args = vec!["--partitions-for", "porep-=1"];
        args.extend_from_slice(extra);
        let v = common::analyze_json_with(&args, &log);
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["job_id"].as_str().unwrap().to_owned(),
                    j["proof_kind"].clone(),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect::<Vec<_>>()
    };
    let null = serde_json::Value::Null;
    let s = |k: &str| serde_json::Value::String(k.into());
    assert_eq!(
        kinds(&[]),
        [
            ("batch-1".into(), null.clone()),
            ("porep-1-2".into(), s("porep-c2")),
            ("x-1".into(), s("named")),
        ]
    );
    // a prefix names the kind; the longest wins; the empty prefix is everyone's; a line's
    // kind= wins over all
    assert_eq!(
        kinds(&[
            "--proof-kind-for",
            "batch-=batch",
            "--proof-kind-for",
            "=other",
            "--proof-kind-for",
            "porep-1-=mine"
        ]),
        [
            ("batch-1".into(), s("batch")),
            ("porep-1-2".into(), s("mine")),
            ("x-1".into(), s("named")),
        ]
    );
    let out = proofline()
        .args(["analyze", "--proof-kind-for", "batch-=a b", "x.log"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("`a b` is not a proof kind"),
        "{err}"
    );
}

/// `export --format openmetrics`: one header per family, every sample timestamped on the
/// scrape grid, each series' points in time order, `# EOF` last; during a stall the idle
/// gauge grows by exactly one step a scrape (the scrapes run on the log's clock); and its
/// flags are checked by name.
#[test]
fn the_openmetrics_export_is_history_on_the_log_s_clock() {
    let log = tmp("om.log");
    generate(&["--jobs", "6", "--gpus", "2", "--stall", "3:300000"], &log);
    // `export --format openmetrics --epoch ... ARGS LOG`: its text
    let export = |args: &[&str]| {
        let out = ran(
            proofline()
                .args(["export", "--format", "openmetrics"])
                .args(["--epoch", "2026-11-01T00:00:00Z"])
                .args(args)
                .arg(&log),
            0,
        );
        out.stdout
    };
    let text = export(&["--step-s", "10", "--label", "instance=p7"]);
    assert!(text.ends_with("\n# EOF\n"));
    // the same log, the same file (series in a fixed order)
    let again = export(&["--step-s", "10", "--label", "instance=p7"]);
    assert!(again == text, "two exports of one log differ");
    // the live sidecar's buckets (`watch --buckets`), so that history and live series share
    // their `le` bounds; the other histograms keep cuzk's
    let sized = export(&["--buckets", "job=100,200,400"]);
    let les = |text: &str, family: &str| -> std::collections::BTreeSet<String> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{family}_bucket{{")))
            .filter_map(|l| Some(l.split("le=\"").nth(1)?.split('"').next()?.to_owned()))
            .collect()
    };
    assert_eq!(
        les(&sized, "proofline_sector_seconds"),
        ["+Inf", "100.0", "200.0", "400.0"].map(String::from).into(),
    );
    assert_eq!(
        les(&sized, "proofline_gpu_idle_gap_seconds"),
        les(&text, "proofline_gpu_idle_gap_seconds")
    );
    assert_ne!(
        les(&sized, "proofline_sector_seconds"),
        les(&text, "proofline_sector_seconds")
    );
    let mut types = std::collections::HashSet::new();
    let mut last: std::collections::HashMap<String, f64> = Default::default();
    let mut idle: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    for line in text.lines().filter(|l| *l != "# EOF") {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            assert!(types.insert(t.to_owned()), "{t} twice");
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let mut parts = line.rsplitn(3, ' ');
        let ts: f64 = parts.next().unwrap().parse().unwrap();
        let value: f64 = parts.next().unwrap().parse().unwrap();
        let series = parts.next().unwrap();
        assert!(series.contains("instance=\"p7\"") && series.contains("job=\"proofline\""));
        let offset_ms = (ts * 1000.0).round() as u64 - 1_793_491_200_000;
        assert_eq!(offset_ms % 10_000, 0, "{line}");
        if let Some(prev) = last.insert(series.to_owned(), ts) {
            assert!(ts > prev, "{line}: after {prev}");
        }
        if series.starts_with("proofline_gpu_idle_seconds{") {
            idle.entry(offset_ms).or_default().push(value);
        }
    }
    // the last scrape comes after the log's last line
    let last_line: u64 = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.split(',').nth(1).unwrap().parse::<u64>().unwrap())
        .max()
        .unwrap();
    // ... once the engine took everything (the reorder window and a job's completion grace,
    // 5 s each by default), as a live watch would show it: every job complete
    let last_scrape = *idle.keys().last().unwrap();
    assert!(
        last_scrape > last_line + 10_000 && last_scrape <= last_line + 20_000,
        "last line {last_line} ms, last scrape {last_scrape} ms"
    );
    let completed: f64 = text
        .lines()
        .filter(|l| l.starts_with("proofline_proofs_completed_total{"))
        .filter(|l| {
            l.ends_with(&format!(
                " {}.000",
                (1_793_491_200_000 + last_scrape) / 1000
            ))
        })
        .map(|l| l.rsplit(' ').nth(1).unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(completed, 6.0, "every job complete at the last scrape");
    let steps: Vec<f64> = idle
        .values()
        .zip(idle.values().skip(1))
        .filter(|(a, b)| a[0] > 30.0 && b[0] > a[0])
        .map(|(a, b)| b[0] - a[0])
        .collect();
    assert!(steps.len() > 20, "{idle:?}");
    assert!(steps.iter().all(|d| (d - 10.0).abs() < 1e-6), "{steps:?}");

    for (args, says) in [
        (&["export", "--format", "openmetrics"][..], "needs --epoch"),
        (
            &[
                "export",
                "--format",
                "openmetrics",
                "--epoch",
                "2026-11-01T00:00:00Z",
                "--label",
                "__x=1",
            ][..],
            "reserved",
        ),
        (
            &["export", "--epoch", "2026-11-01T00:00:00Z"][..],
            "--epoch is for --format openmetrics",
        ),
        (
            &[
                "export",
                "--format",
                "openmetrics",
                "--epoch",
                "2026-11-01T00:00:00Z",
                "--label",
                "a=1",
                "--label",
                "a=2",
            ][..],
            "--label a=... is given twice",
        ),
        (
            &[
                "export",
                "--format",
                "openmetrics",
                "--epoch",
                "2026-11-01T00:00:00Z",
                "--label",
                "le=5",
            ][..],
            "a histogram's or summary's own label",
        ),
        (
            &[
                "export",
                "--format",
                "openmetrics",
                "--epoch",
                "2026-11-01T00:00:00Z",
                "--step-s",
                "1",
                "--scrape-until",
                "2126-11-01T00:00:00Z",
            ][..],
            "over the 5000000 an export takes",
        ),
        (
            &["export", "--format", "openmetrics", "--epoch", "yesterday"][..],
            "--epoch `yesterday` is not an RFC 3339 time",
        ),
        // (a multi-byte character in the offset panicked; a 30th of February was the 2nd of
        // March)
        (
            &[
                "export",
                "--format",
                "openmetrics",
                "--epoch",
                "2026-01-01T00:00:00+0\u{e9}00",
            ][..],
            "is not an RFC 3339 time such as 2026-11-30T01:31:00Z (the 'offset hour'",
        ),
        (
            &[
                "export",
                "--format",
                "openmetrics",
                "--epoch",
                "2026-02-30T00:00:00Z",
            ][..],
            "--epoch `2026-02-30T00:00:00Z` is no such time (day must be in the range 1..=28",
        ),
    ] {
        let out = proofline().args(args).arg(&log).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
