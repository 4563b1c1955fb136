//! `proofline chart` and `proofline export --format perfetto` on generated logs, and the HTML
//! chart in a real headless Chromium (Debian's `chromium`; scripts/test.sh installs it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{assert_not_blank, fresh_dir, proofline};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("pictures", name)
}

/// A log with a synthesis stall (an idle gap between sectors) on two GPUs.
fn log(dir: &Path) -> (PathBuf, serde_json::Value) {
    let log = dir.join("cuzk.log");
    let st = proofline()
        .args([
            "generate", "--jobs", "6", "--gpus", "2", "--stall", "3:150000", "-o",
        ])
        .arg(&log)
        .status()
        .unwrap();
    assert!(st.success());
    let out = proofline()
        .args(["analyze", "--format", "json"])
        .arg(&log)
        .output()
        .unwrap();
    (log, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn the_svg_has_a_bar_per_stage_of_every_partition_and_a_mark_per_idle_gap() {
    let dir = tmp("svg");
    let (log, report) = log(&dir);
    let svg = dir.join("timeline.svg");
    let st = proofline()
        .arg("chart")
        .arg(&log)
        .arg("-o")
        .arg(&svg)
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let mut classes: HashMap<String, usize> = HashMap::new();
    for n in doc.descendants().filter(|n| n.has_tag_name("rect")) {
        if let Some(c) = n.attribute("class") {
            *classes.entry(c.to_owned()).or_default() += 1;
        }
    }
    let partitions = report["summary"]["partitions_done"].as_u64().unwrap() as usize;
    assert_eq!(partitions, 60);
    for stage in ["synthesis", "queue", "lock_wait", "gpu"] {
        assert_eq!(
            classes.get(&format!("bar {stage}")).copied().unwrap_or(0),
            partitions,
            "{stage} bars: {classes:?}"
        );
    }
    let gaps: u64 = report["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["idle_total"]["count"].as_u64().unwrap())
        .sum();
    let cross: u64 = report["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["idle_cross_sector"]["count"].as_u64().unwrap())
        .sum();
    assert!(cross >= 1, "the stall makes a cross-sector gap");
    let marks: usize = classes
        .iter()
        .filter(|(c, _)| c.starts_with("gap "))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(marks as u64, gaps);
    assert_eq!(
        classes.get("gap cross_sector").copied().unwrap_or(0) as u64,
        cross
    );
    let transitions = report["transitions"].as_array().unwrap().len();
    assert_eq!(
        doc.descendants()
            .filter(|n| n.attribute("class") == Some("transition"))
            .count(),
        transitions
    );
    // the header says the verdict
    assert!(text.contains("Synthesis-bound"), "no verdict in the header");
    // every bar says what it is when hovered
    assert!(
        doc.descendants()
            .filter(|n| n.has_tag_name("rect")
                && n.attribute("class").is_some_and(|c| c.starts_with("bar")))
            .all(|n| n.children().any(|c| c.has_tag_name("title")))
    );
}

#[test]
fn the_perfetto_json_holds_the_right_events_and_passes_the_trace_event_schema() {
    let dir = tmp("perfetto");
    let (log, report) = log(&dir);
    let json = dir.join("trace.json");
    let st = proofline()
        .args(["export", "--format", "perfetto"])
        .arg(&log)
        .arg("-o")
        .arg(&json)
        .status()
        .unwrap();
    assert!(st.success());
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schema/trace_event.schema.json");
    let check = Command::new("python3")
        .args(["-c", "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))"])
        .arg(&json)
        .arg(&schema)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let count = |ph: &str, cat: &str| {
        ev.iter()
            .filter(|e| e["ph"] == ph && e["cat"] == cat)
            .count()
    };
    assert_eq!(count("X", "synthesis"), 60);
    assert_eq!(count("X", "gpu"), 60);
    assert_eq!(count("X", "queue"), 60);
    let gaps: u64 = report["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["idle_total"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(count("X", "idle") as u64, gaps);
    let counters: Vec<&str> = ev
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(counters.contains(&"queue depth") && counters.contains(&"GPU busy"));
    // a track per GPU worker and for synthesis, named
    let names: Vec<&str> = ev
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    for n in [
        "Synthesis",
        "GPU 0",
        "GPU 1",
        "worker 0",
        "worker 1",
        "worker 2",
        "worker 3",
    ] {
        assert!(names.contains(&n), "no track named {n}: {names:?}");
    }
    // slices on one track never partly overlap (they would not nest)
    let mut by_track: HashMap<(u64, u64), Vec<(u64, u64)>> = HashMap::new();
    for e in ev.iter().filter(|e| e["ph"] == "X") {
        let ts = e["ts"].as_u64().unwrap();
        by_track
            .entry((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
            .or_default()
            .push((ts, ts + e["dur"].as_u64().unwrap()));
    }
    for (track, mut s) in by_track {
        s.sort();
        for w in s.windows(2) {
            assert!(w[1].0 >= w[0].1, "overlapping slices on {track:?}: {w:?}");
        }
    }
    // the gpu slices sum to the serial GPU time
    let gpu_us: u64 = ev
        .iter()
        .filter(|e| e["cat"] == "gpu")
        .map(|e| e["dur"].as_u64().unwrap())
        .sum();
    let serial: u64 = report["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["serial_sum_ms"].as_u64().unwrap())
        .sum();
    assert_eq!(gpu_us, serial * 1000);
}

#[test]
fn chromium_renders_the_html_chart_without_console_errors() {
    let dir = tmp("chromium");
    let (log, _) = log(&dir);
    let html = dir.join("timeline.html");
    assert!(
        proofline()
            .arg("chart")
            .arg(&log)
            .arg("-o")
            .arg(&html)
            .status()
            .unwrap()
            .success()
    );
    shows_without_errors(&dir, &html, "proofline-chart-ready 240 bars");
}

/// `compare --format html`: the table and both timelines on one time scale, rendered by
/// Chromium with every bar of both runs and no console error; the shorter run's chart is
/// narrower by its share of the longer one's time.
#[test]
fn chromium_renders_the_compare_page_with_both_timelines() {
    let dir = tmp("compare");
    let a = dir.join("a.log");
    let b = dir.join("b.log");
    for (path, extra) in [(&a, "3700"), (&b, "1824")] {
        let st = proofline()
            .args(["generate", "--jobs", "4", "--kernel-ms", extra, "-o"])
            .arg(path)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let html = dir.join("compare.html");
    let out = proofline()
        .args(["compare", "--format", "html"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&html, &out.stdout).unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains("id=\"figures\"") && page.contains("seconds_per_proof"));
    // one time scale: each chart's width is its run's share of the longer run's
    let widths: Vec<f64> = page
        .match_indices("<svg")
        .map(|(i, _)| {
            let tag = &page[i..i + page[i..].find('>').unwrap()];
            let w = tag.split("width=\"").nth(1).unwrap();
            w[..w.find('"').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(widths.len(), 2, "{widths:?}");
    assert!(widths[1] < widths[0], "B ran faster: {widths:?}");
    // 4 stages x 40 partitions x 2 runs
    shows_without_errors(&dir, &html, "proofline-compare-ready 320 bars");
}

#[test]
fn the_partition_cap_bounds_what_is_drawn() {
    let dir = tmp("cap");
    let (log, _) = log(&dir);
    let svg = dir.join("capped.svg");
    let out = proofline()
        .args(["chart", "--max-partitions", "12"])
        .arg(&log)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the log has 60 partitions; 12 are drawn"),
        "{err}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(text.matches("class=\"bar gpu\"").count(), 12);
    // the page says what it shows, and that its figures are the whole log's
    assert!(
        text.contains("drawn: 12 of the log&apos;s 60 partitions")
            || text.contains("drawn: 12 of the log's 60 partitions"),
        "no window line in the chart"
    );
    // a window further on: its partitions start there
    let later = dir.join("later.svg");
    let out = proofline()
        .args(["chart", "--from-s", "60"])
        .arg(&log)
        .arg("-o")
        .arg(&later)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&later).unwrap();
    let drawn = text.matches("class=\"bar gpu\"").count();
    assert!(drawn > 0 && drawn < 60, "{drawn} GPU bars from 60 s on");
}

/// Opens `html` in a real headless Chromium: the page's script logs `ready` on its console,
/// no console error, and the screenshot is not blank.
fn shows_without_errors(dir: &Path, html: &Path, ready: &str) {
    let png = dir.join("shot.png");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,900",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium not found: install Debian's chromium (scripts/test.sh does)");
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        console.iter().any(|l| l.contains(ready)),
        "the page's script did not run:\n{log}"
    );
    let errors: Vec<&&str> = console
        .iter()
        .filter(|l| l.contains("Uncaught") || l.contains("Error"))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    assert_not_blank(&png);
}
