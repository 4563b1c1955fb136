//! cuzk's `CUZK_TIMING:` lines beside TIMELINE: kernel time, the GPU lock, the CPU on the
//! critical path, and a verdict a lock held by CPU work cannot fool. Logs from `proofline
//! generate --cuzk-timing`, checked against sums taken from the log's own lines.

use std::path::{Path, PathBuf};

mod common;
use common::{analyze_json as analyze, proofline};

fn generate(name: &str, args: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("proofline-kernel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join(name);
    assert!(
        proofline()
            .arg("generate")
            .args(args)
            .arg("-o")
            .arg(&log)
            .status()
            .unwrap()
            .success()
    );
    log
}

/// The sum of `key` over the log's CUZK_TIMING lines, and how many lines have it.
fn sum(log: &Path, key: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(log).unwrap();
    let mut total = (0, 0);
    for line in text.lines().filter(|l| l.contains("CUZK_TIMING:")) {
        for pair in line.split_whitespace() {
            if let Some(v) = pair.strip_prefix(&format!("{key}=")) {
                total.0 += v.parse::<u64>().unwrap();
                total.1 += 1;
            }
        }
    }
    total
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The figures every report with kernel lines must get right, from the log's own lines.
fn check_totals(log: &Path, k: &serde_json::Value) {
    let kernel =
        sum(log, "ntt_msm_h_ms").0 + sum(log, "batch_add_ms").0 + sum(log, "tail_msm_ms").0;
    assert_eq!(k["kernel_ms"], kernel);
    let (held, calls) = sum(log, "mutex_held_ms");
    assert_eq!(k["lock_held_ms"], held);
    assert_eq!(k["calls"], calls);
    assert_eq!(k["gpu_threads"], sum(log, "gpu_total_ms").1);
    assert_eq!(k["lock_held_not_kernel_ms"], held.saturating_sub(kernel));
    let lines = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("CUZK_TIMING:"))
        .count();
    assert_eq!(k["timing_lines"], lines as u64);
}

#[test]
fn kernels_that_fill_the_lock_read_gpu_bound_with_every_figure_checked() {
    let log = generate("fill.log", &["--jobs", "12", "--cuzk-timing"]);
    let r = analyze(&log);
    let k = &r["kernel"];
    check_totals(&log, k);
    assert_eq!(
        r["verdict"]["bound"], "gpu_bound",
        "{}",
        r["verdict"]["sentence"]
    );
    // kernels fill the busy time: the lock holds nothing else, and GPU intervals hold
    // little but the lock (prep before it, finalize after it, overlapped by the other worker)
    assert!(f(&k["kernel_fill"]) > 0.95, "{k}");
    assert_eq!(k["lock_held_not_kernel_ms"], 0);
    // one GPU: every line is its own, per-call kernel time paired for each call
    assert_eq!(k["attributed"], true);
    assert_eq!(k["gpus"].as_array().unwrap().len(), 1);
    assert_eq!(k["kernel_per_call"]["count"], k["calls"]);
    assert_eq!(k["calls_interleaved"], 0);
    let p50 = f(&k["kernel_per_call"]["p50_ms"]);
    assert!(
        (3_300.0..4_100.0).contains(&p50),
        "kernel p50 {p50} ms (3.7 s ± 10 %)"
    );
    assert!(
        r["verdict"]["sentence"]
            .as_str()
            .unwrap()
            .contains("kernels")
    );
}

#[test]
fn a_lock_held_by_cpu_work_is_named_not_taken_for_gpu_bound() {
    // 3 s of CPU work inside the lock per call on top of 3.7 s of kernels, four synthesis
    // workers: the pipeline is ~90 % busy, the kernels ~half of that
    let log = generate(
        "held.log",
        &[
            "--jobs",
            "12",
            "--cuzk-timing",
            "--cpu-in-lock-ms",
            "3000",
            "--synth-workers",
            "4",
        ],
    );
    let r = analyze(&log);
    let k = &r["kernel"];
    check_totals(&log, k);
    let v = &r["verdict"];
    let sentence = v["sentence"].as_str().unwrap();
    assert_eq!(v["bound"], "lock_held_by_cpu", "{sentence}");
    let busy = f(&v["busy_ratio"]);
    assert!(busy >= 0.85, "busy {busy}");
    let fill = f(&k["kernel_fill"]);
    let util = f(&k["kernel_utilisation"]);
    assert!(
        (0.45..0.65).contains(&fill),
        "fill {fill}: 3.7 / (3.7 + 3) = 0.55"
    );
    assert!((util - fill * f(&k["busy_ratio"])).abs() < 1e-9);
    // the numbers that decided it are in the sentence, and the CPU on the critical path
    assert!(
        sentence.starts_with("GPU lock held by CPU work"),
        "{sentence}"
    );
    assert!(
        sentence.contains(&format!("kernels {:.1}%", util * 100.0)),
        "{sentence}"
    );
    assert!(sentence.contains("prep_msm p50"), "{sentence}");
    // the CPU work inside the lock is what the barrier waited
    let barrier = sum(&log, "barrier_wait_ms").0;
    assert_eq!(k["lock_held_not_kernel_ms"], barrier);
    assert!(f(&k["barrier_wait"]["p50_ms"]) > 2_500.0);
    // the text says it too
    let text = proofline().arg("analyze").arg(&log).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Verdict: GPU lock held by CPU work"),
        "{text}"
    );
    assert!(text.contains("of CPU work inside the lock"), "{text}");
}

#[test]
fn with_several_gpus_busy_the_lines_are_not_guessed_onto_one() {
    let log = generate("two.log", &["--jobs", "12", "--gpus", "2", "--cuzk-timing"]);
    let r = analyze(&log);
    let k = &r["kernel"];
    check_totals(&log, k);
    assert_eq!(k["attributed"], false);
    assert!(
        k["gpus"].as_array().unwrap().is_empty(),
        "per-GPU figures from a guess"
    );
    let how = k["attribution"].as_str().unwrap();
    assert!(how.starts_with("run-level figures only"), "{how}");
    // run-level figures stand: kernel time over both GPUs' elapsed time
    let elapsed: u64 = r["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["elapsed_ms"].as_u64().unwrap())
        .sum();
    let util = f(&k["kernel_utilisation"]);
    assert!((util - k["kernel_ms"].as_u64().unwrap() as f64 / elapsed as f64).abs() < 1e-9);
    let text = proofline().arg("analyze").arg(&log).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("attribution: run-level figures only"));
}

#[test]
fn without_timing_lines_the_report_says_kernel_time_was_not_observed() {
    let log = generate("plain.log", &["--jobs", "6"]);
    let r = analyze(&log);
    assert!(
        r.get("kernel").is_none(),
        "a kernel section without CUZK_TIMING lines"
    );
    assert!(
        r["verdict"]["sentence"]
            .as_str()
            .unwrap()
            .contains("kernel time not observed")
            || r["verdict"]["bound"] != "gpu_bound"
    );
    let text = proofline().arg("analyze").arg(&log).output().unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("Kernel time: not observed (no CUZK_TIMING lines)")
    );
}

#[test]
fn timing_lines_behind_log_prefixes_with_notes_and_unknown_keys_are_read() {
    let log = generate("prefixed.log", &["--jobs", "3", "--cuzk-timing"]);
    let text = std::fs::read_to_string(&log).unwrap();
    let mut out = String::from("CUZK_TIMING: set pool release threshold to MAX on gpu 0\n");
    for l in text.lines() {
        if l.starts_with("CUZK_TIMING:") {
            out.push_str("2026-11-30T01:02:03.456Z WARN cuzk_daemon: ");
        }
        out.push_str(l);
        out.push('\n');
    }
    out.push_str("CUZK_TIMING: d_a_cache allocated 1536 MiB on gpu 0\n");
    out.push_str("CUZK_TIMING: async_dealloc_ms=4 new_phase_ms=9\n");
    let prefixed = log.with_file_name("prefixed2.log");
    std::fs::write(&prefixed, out).unwrap();
    let a = analyze(&log);
    let b = analyze(&prefixed);
    assert_eq!(a["kernel"]["kernel_ms"], b["kernel"]["kernel_ms"]);
    assert_eq!(b["kernel"]["other_lines"], 2);
    assert_eq!(
        b["kernel"]["unknown_keys"],
        serde_json::json!(["new_phase_ms"])
    );
    assert_eq!(b["lines"]["malformed"], 0);
}

#[test]
fn each_partition_gets_its_calls_kernel_time_only_where_the_call_is_its_own() {
    // one worker per GPU: one interval open at a time, every call is its partition's
    let one = generate(
        "one-worker.log",
        &["--jobs", "4", "--cuzk-timing", "--workers-per-gpu", "1"],
    );
    let csv = proofline()
        .args(["analyze", "--format", "csv"])
        .arg(&one)
        .output()
        .unwrap();
    let text = String::from_utf8(csv.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "kernel_ms").unwrap();
    let kernels: Vec<Option<u64>> = lines
        .map(|l| l.split(',').nth(col).unwrap().parse().ok())
        .collect();
    assert_eq!(kernels.len(), 40);
    assert!(kernels.iter().all(Option::is_some), "{kernels:?}");
    let r = analyze(&one);
    assert_eq!(
        kernels.iter().flatten().sum::<u64>(),
        r["kernel"]["kernel_ms"].as_u64().unwrap()
    );
    let svg = one.with_extension("svg");
    assert!(
        proofline()
            .arg("chart")
            .arg(&one)
            .arg("-o")
            .arg(&svg)
            .status()
            .unwrap()
            .success()
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(drawn.matches("class=\"kernel\"").count(), 40);
    // two workers per GPU (cuzk's default): their intervals overlap, so a call is given to
    // a partition only when its interval alone was open; the others get no mark
    let two = generate("two-workers.log", &["--jobs", "4", "--cuzk-timing"]);
    let svg2 = two.with_extension("svg");
    assert!(
        proofline()
            .arg("chart")
            .arg(&two)
            .arg("-o")
            .arg(&svg2)
            .status()
            .unwrap()
            .success()
    );
    let drawn = std::fs::read_to_string(&svg2).unwrap();
    assert!(drawn.matches("class=\"kernel\"").count() < 40);
    assert_eq!(drawn.matches("class=\"bar gpu\"").count(), 40);
}

#[test]
fn timing_lines_that_cover_part_of_the_run_or_notes_alone_do_not_decide_the_verdict() {
    // a GPU-bound log whose timing lines start half way (a cuzk upgraded mid-run)
    let log = generate("half.log", &["--jobs", "12", "--cuzk-timing"]);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let half = lines.len() / 2;
    let cut: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| *i >= half || !l.starts_with("CUZK_TIMING:"))
        .map(|(_, l)| *l)
        .collect();
    let half_log = log.with_file_name("half-covered.log");
    std::fs::write(&half_log, cut.join("\n") + "\n").unwrap();
    let r = analyze(&half_log);
    let k = &r["kernel"];
    let coverage = f(&k["coverage"]);
    assert!((0.3..0.7).contains(&coverage), "coverage {coverage}");
    // the fill over the whole run is about half, yet this is no lock held by CPU work
    assert!(f(&k["kernel_fill"]) < 0.75);
    assert_eq!(
        r["verdict"]["bound"], "gpu_bound",
        "{}",
        r["verdict"]["sentence"]
    );
    assert!(r["verdict"]["kernel_fill"].is_null());
    // notes alone: no kernel time, no kernel evidence
    let notes = log.with_file_name("notes.log");
    let mut only_notes: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with("CUZK_TIMING:"))
        .copied()
        .collect();
    only_notes.insert(0, "CUZK_TIMING: d_a_cache allocated 1536 MiB on gpu 0");
    std::fs::write(&notes, only_notes.join("\n") + "\n").unwrap();
    let r = analyze(&notes);
    assert_eq!(r["kernel"]["other_lines"], 1);
    assert_eq!(r["kernel"]["kernel_ms"], 0);
    assert_eq!(
        r["verdict"]["bound"], "gpu_bound",
        "{}",
        r["verdict"]["sentence"]
    );
}

/// A timing line with a value over an hour (corrupt, or made up: `mutex_held_ms=37423742` set
/// a GPU floor of hours per proof by itself, u64::MAX a kernel time of u64::MAX) is ignored
/// whole, counted and named: every figure is the clean log's; `--strict` fails on it.
#[test]
fn a_timing_line_with_a_value_over_an_hour_is_ignored_counted_and_named() {
    let log = generate("absurd.log", &["--jobs", "2", "--cuzk-timing"]);
    let clean = analyze(&log);
    let mut text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().count() + 1;
    text.push_str("CUZK_TIMING: gpu_tid=0 mutex_held_ms=37423742 mutex_wait_ms=1\n");
    for _ in 0..3 {
        text.push_str("CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=18446744073709551615 batch_add_ms=9\n");
        text.push_str("CUZK_TIMING: mutex_held_ms=18446744073709551615 total_start_fn_ms=1\n");
    }
    let absurd = log.with_file_name("absurd2.log");
    std::fs::write(&absurd, text).unwrap();
    let r = analyze(&absurd);
    let (k, c) = (&r["kernel"], &clean["kernel"]);
    assert_eq!(k["absurd_lines"], 7, "{k}");
    assert_eq!(
        r["lines"]["first_absurd_timing"], first,
        "named by its number"
    );
    assert_eq!(
        k["absurd_example"],
        "mutex_held_ms=37423742 (over an hour for one GPU call) in a line of gpu_tid 0"
    );
    for key in [
        "kernel_ms",
        "lock_held_ms",
        "calls",
        "gpu_threads",
        "lock_wait",
    ] {
        assert_eq!(k[key], c[key], "{key}");
    }
    assert_eq!(k["timing_lines"], f(&c["timing_lines"]) as u64 + 7);
    assert_eq!(r["floors"], clean["floors"]);
    assert_eq!(r["verdict"], clean["verdict"]);
    assert_eq!(c["absurd_lines"], 0);

    let o = proofline().arg("analyze").arg(&absurd).output().unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("note: 7 timing line(s) ignored, each with a value over an hour"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "first at line {first}: mutex_held_ms=37423742 (over an hour"
        )),
        "{out}"
    );
    let o = proofline()
        .args(["analyze", "--strict"])
        .arg(&absurd)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "7 CUZK_TIMING line(s) ignored for a value over an hour, first at line {first}: mutex_held_ms=37423742"
        )),
        "{err}"
    );
}

/// A few `CUZK_TIMING:` lines with one bad value each: their other keys are kept, each is
/// named and counted as malformed, a partial GPU thread does not count in coverage, and the
/// verdict stays the clean log's (dropping whole lines made the lock look held by CPU work).
#[test]
fn a_bad_value_in_a_timing_line_loses_only_that_value() {
    let log = generate("clean.log", &["--jobs", "12", "--cuzk-timing"]);
    let text = std::fs::read_to_string(&log).unwrap();
    let mut spoiled = 0;
    let bad: String = text
        .lines()
        .map(|l| {
            if spoiled < 6 && l.contains("tail_msm_ms=") {
                spoiled += 1;
                let (head, rest) = l.split_once("tail_msm_ms=").unwrap();
                let value_end = rest.find(' ').unwrap_or(rest.len());
                format!("{head}tail_msm_ms=4O1{}\n", &rest[value_end..])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_eq!(spoiled, 6);
    let bad_log = log.with_file_name("spoiled.log");
    std::fs::write(&bad_log, bad).unwrap();
    let (clean, spoilt) = (analyze(&log), analyze(&bad_log));
    assert_eq!(spoilt["verdict"]["bound"], clean["verdict"]["bound"]);
    assert_eq!(spoilt["lines"]["malformed"], 6, "{}", spoilt["lines"]);
    let examples = spoilt["lines"]["malformed_examples"].to_string();
    assert!(examples.contains("tail_msm_ms=4O1"), "{examples}");
    // the six lines' gpu_total_ms are kept (their threads' other figures), their threads are
    // not whole: coverage falls by six threads
    let (k, kc) = (&spoilt["kernel"], &clean["kernel"]);
    assert_eq!(k["timing_lines"], kc["timing_lines"]);
    assert_eq!(k["calls"], kc["calls"]);
    assert_eq!(
        k["gpu_threads"].as_u64().unwrap() + 6,
        kc["gpu_threads"].as_u64().unwrap()
    );
}

/// A daemon's log around the same lines (tracing's own line beside each TIMELINE line, a
/// third of the lines after a log prefix, as `generate --log-lines --prefixed-pct` writes,
/// the benchmarks' cuzk-shaped log) changes no figure of the report but its line count, and
/// the GPU mapping's source (cuzk's start-up lines, which the daemon's log has).
#[test]
fn a_daemons_log_around_the_lines_changes_no_figure() {
    let args = [
        "--jobs",
        "12",
        "--mixed",
        "--gpus",
        "2",
        "--cuzk-timing",
        "--shuffle-ms",
        "20",
    ];
    let bare = generate("bare.log", &args);
    let mut around = args.to_vec();
    around.extend(["--log-lines", "--prefixed-pct", "30"]);
    let daemon = generate("daemon.log", &around);
    let (bare_text, daemon_text) = (
        std::fs::read_to_string(&bare).unwrap(),
        std::fs::read_to_string(&daemon).unwrap(),
    );
    // the decoration is there: one ordinary line per TIMELINE line, about 30 % prefixed
    let timeline = bare_text
        .lines()
        .filter(|l| l.starts_with("TIMELINE,"))
        .count();
    // (and cuzk's start-up lines first: one, then one per GPU worker)
    let start_up = daemon_text
        .lines()
        .take_while(|l| l.contains("GPU worker"))
        .count();
    assert_eq!(start_up, 1 + 4);
    let ordinary = daemon_text
        .lines()
        .filter(|l| !l.contains("TIMELINE,") && !l.contains("CUZK_TIMING:"))
        .count();
    assert_eq!(ordinary, timeline + start_up);
    let prefixed = daemon_text
        .lines()
        .filter(|l| {
            (l.contains("TIMELINE,") && !l.starts_with("TIMELINE,"))
                || (l.contains("CUZK_TIMING:") && !l.starts_with("CUZK_TIMING:"))
        })
        .count();
    let share = prefixed as f64 / bare_text.lines().count() as f64;
    assert!((0.25..0.35).contains(&share), "{share}");
    // every line the analyzer reads is the same, after its prefix
    let stripped: Vec<_> = daemon_text
        .lines()
        .filter_map(|l| {
            ["TIMELINE,", "CUZK_TIMING:"]
                .iter()
                .find_map(|m| l.find(m).map(|at| &l[at..]))
        })
        .collect();
    assert_eq!(stripped, bare_text.lines().collect::<Vec<_>>());
    let (mut a, mut b) = (analyze(&bare), analyze(&daemon));
    assert_eq!(a["lines"]["lines"], bare_text.lines().count() as u64);
    assert_eq!(b["lines"]["lines"], daemon_text.lines().count() as u64);
    a["lines"]["lines"] = 0.into();
    b["lines"]["lines"] = 0.into();
    // the same mapping of workers to GPUs (cuzk's default), said to come from the start-up
    // lines where the daemon's log has them
    assert_eq!(a["gpus"], b["gpus"]);
    assert!(
        b["gpu_mapping"]
            .as_str()
            .unwrap()
            .contains("start-up lines"),
        "{}",
        b["gpu_mapping"]
    );
    a["gpu_mapping"] = b["gpu_mapping"].clone();
    assert_eq!(a, b);
}
