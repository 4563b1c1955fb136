//! `proofline watch` and `proofline demo` scraped by a real Prometheus server (Debian's
//! `prometheus` package; scripts/test.sh installs it), queried through its HTTP API.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{
    Proc, analyze_json, cut_where_the_gpus_first_idle, free_port, fresh_dir, http_get, prometheus,
    proofline, query, scaled_alerts, stderr_lines, wait_completed, wait_line, wait_ready, watch,
};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("prom", name)
}

struct Prometheus {
    _proc: Proc,
    api: String,
}

impl Prometheus {
    fn start(dir: &Path, targets: &[String]) -> Prometheus {
        Prometheus::start_with_rules(dir, targets, None)
    }

    /// A Prometheus evaluating the alerting rules `rules` (the text of a rule file), if any,
    /// on deploy/'s recording rules (one Prometheus as both site and global).
    fn start_with_rules(dir: &Path, targets: &[String], rules: Option<&str>) -> Prometheus {
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let rule_files = match rules {
            Some(text) => {
                let path = dir.join("alerts.yml");
                std::fs::write(&path, text).unwrap();
                let recording =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/rules.yml");
                format!(
                    "rule_files: ['{}', '{}']\n",
                    recording.display(),
                    path.display()
                )
            }
            None => String::new(),
        };
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{rule_files}scrape_configs:\n  - job_name: proofline\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        );
        let (proc_, api) = prometheus(dir, "prometheus", &config, &[]);
        Prometheus { _proc: proc_, api }
    }

    /// An instant query's first value, if any.
    fn value(&self, expr: &str) -> Option<f64> {
        query(&self.api, expr)
    }

    /// Waits until `expr` has a value satisfying `ok`, returns it.
    fn wait_for(&self, expr: &str, secs: u64, ok: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = self.value(expr) {
                if ok(v) {
                    return v;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{expr}: no satisfying value within {secs} s (last {:?})",
                self.value(expr)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

#[test]
fn prometheus_scrapes_watch_and_gets_the_engines_numbers() {
    let dir = tmp("watch");
    let log = dir.join("cuzk.log");
    let st = proofline()
        .args(["generate", "--jobs", "6", "--gpus", "2", "-o"])
        .arg(&log)
        .status()
        .unwrap();
    assert!(st.success());
    let expected = analyze_json(&log);

    let (_watch, _, addr) = watch(&["--from-start", "--poll-ms", "50"], &log);
    let prom = Prometheus::start(&dir, &[addr]);

    let done = prom.wait_for("sum(proofline_proofs_completed_total)", 40, |v| v >= 6.0);
    assert_eq!(done, expected["summary"]["jobs_complete"].as_f64().unwrap());
    let spp = prom.wait_for("proofline_seconds_per_proof", 10, |v| v > 0.0);
    let want = expected["summary"]["seconds_per_proof"].as_f64().unwrap();
    assert!(
        (spp - want).abs() < want * 0.01,
        "seconds per proof: prometheus {spp}, analyze {want}"
    );
    for g in expected["gpus"].as_array().unwrap() {
        let gpu = g["gpu"].as_u64().unwrap();
        let busy = prom.wait_for(
            &format!("proofline_gpu_busy_seconds_total{{gpu=\"{gpu}\"}}"),
            10,
            |_| true,
        );
        let want = g["busy_ms"].as_f64().unwrap() / 1000.0;
        assert!(
            (busy - want).abs() < 0.01,
            "gpu {gpu} busy: prometheus {busy} s, analyze {want} s"
        );
    }
    let cross = prom
        .value("sum(proofline_gpu_idle_gap_seconds_count)")
        .unwrap_or(0.0);
    let want: f64 = expected["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["idle_total"]["count"].as_f64().unwrap())
        .sum();
    assert_eq!(cross, want);
}

#[test]
fn prometheus_scrapes_the_demo_and_its_numbers_match_analyze_of_its_log() {
    let dir = tmp("demo");
    let port = free_port();
    let prom = Prometheus::start(&dir, &[format!("127.0.0.1:{port}")]);
    let out = proofline()
        .args([
            "demo",
            "--speed",
            "50",
            "--jobs",
            "6",
            "--linger",
            "3",
            "--instance",
            "scraped",
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}"), "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = analyze_json(&dir.join("scraped-timeline.log"));

    let done = prom.wait_for(
        "last_over_time(proofline_proofs_completed_total[2m])",
        10,
        |v| v >= 6.0,
    );
    assert_eq!(done, 6.0);
    let spp = prom.wait_for("last_over_time(proofline_seconds_per_proof[2m])", 10, |v| {
        v > 0.0
    });
    let want = expected["summary"]["seconds_per_proof"].as_f64().unwrap();
    assert!(
        (spp - want).abs() < want * 0.05,
        "seconds per proof: prometheus {spp}, analyze {want}"
    );
    let busy = prom.wait_for(
        "last_over_time(proofline_gpu_busy_seconds_total{gpu=\"0\"}[2m])",
        10,
        |v| v > 0.0,
    );
    let want_busy = expected["gpus"][0]["busy_ms"].as_f64().unwrap() / 1000.0;
    assert!(
        (busy - want_busy).abs() < want_busy * 0.02,
        "busy: prometheus {busy} s, analyze {want_busy} s"
    );
    let ratio = prom.wait_for(
        "max_over_time(proofline_gpu_busy_ratio{gpu=\"0\"}[2m])",
        10,
        |v| v > 0.0,
    );
    assert!(ratio > 0.5 && ratio <= 1.0, "busy ratio {ratio}");
}

/// `watch`'s clock runs at wall speed while its log is quiet: the GPU idle gauge of a
/// finished log, scraped by a real Prometheus, grows as fast as time does (its value minus
/// its scrape time stays put), so the GPU-idle alert fires on time for a stopped prover.
#[test]
fn watch_idle_gauge_keeps_wall_speed_while_the_log_is_quiet() {
    let dir = tmp("idle");
    let log = dir.join("cuzk.log");
    let st = proofline()
        .args(["generate", "--jobs", "2", "-o"])
        .arg(&log)
        .status()
        .unwrap();
    assert!(st.success());
    let opts = [
        "--from-start",
        "--poll-ms",
        "100",
        "--reorder-window-ms",
        "500",
    ];
    let (_watch, _, addr) = watch(&opts, &log);
    let prom = Prometheus::start(&dir, &[addr]);
    let gauge = "proofline_gpu_idle_seconds{gpu=\"0\"}";
    prom.wait_for(gauge, 20, |v| v > 0.5);
    let drift = format!("{gauge} - timestamp({gauge})");
    let first = prom.wait_for(&drift, 10, |_| true);
    std::thread::sleep(Duration::from_secs(5));
    let later = prom.wait_for(&drift, 10, |_| true);
    assert!(
        (later - first).abs() <= 1.0,
        "over 5 s of wall time the idle gauge moved {} s off the clock",
        later - first
    );
}

/// The GPU-idle alert of deploy/, its threshold and `for` scaled down (3 s idle, for 1 s),
/// evaluated by a real Prometheus on `watch` of a log whose prover stopped mid-sector: it
/// fires within the threshold, its `for` and two scrape intervals (plus the reorder window
/// `watch` runs with) of the moment the GPU went idle.
#[test]
fn the_gpu_idle_alert_fires_on_time_for_a_stopped_prover_watched_as_a_sidecar() {
    let dir = tmp("alert");
    let full = dir.join("full.log");
    assert!(
        proofline()
            .args(["generate", "--jobs", "3", "--stall", "1:600000", "-o"])
            .arg(&full)
            .status()
            .unwrap()
            .success()
    );
    // the prover stops in the middle of the second sector, its GPUs idle (no interval open:
    // a prover that dies inside GPU work leaves its interval open until the job times out)
    let text = std::fs::read_to_string(&full).unwrap();
    let cut = cut_where_the_gpus_first_idle(&text);
    let offset = |l: &str| l.split(',').nth(1).unwrap().parse::<u64>().unwrap();
    let newest = cut.iter().map(|l| offset(l)).max().unwrap();
    let last_gpu_end = cut
        .iter()
        .filter(|l| l.contains(",GPU_END,"))
        .map(|l| offset(l))
        .max()
        .unwrap();
    let log = dir.join("cuzk.log");
    std::fs::write(&log, cut.join("\n") + "\n").unwrap();
    let scaled = scaled_alerts();

    let port = free_port();
    // Prometheus first: its start (seconds on a loaded machine) is not part of the delay
    // measured, which runs from the moment watch reads the log
    let prom = Prometheus::start_with_rules(&dir, &[format!("127.0.0.1:{port}")], Some(&scaled));
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "100",
            "--reorder-window-ms",
            "500",
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    wait_line(&rx, "metrics on http://127.0.0.1:");
    // the log is read at once: its GPU went idle (newest - last GPU_END) before that
    let idle_at = Instant::now()
        .checked_sub(Duration::from_millis(newest - last_gpu_end))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    let fired = loop {
        let (_, _, body) = http_get(&prom.api, "/api/v1/alerts", None).unwrap();
        if body.contains("ProoflineGpuIdleBetweenSectors") && body.contains("\"firing\"") {
            break Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "the alert never fired: {body}; idle {:?}, in flight {:?}, queue {:?}, rules {:?}",
            prom.value("proofline_gpu_idle_seconds"),
            prom.value("proofline_jobs_in_flight"),
            prom.value("proofline_gpu_queue_depth"),
            http_get(&prom.api, "/api/v1/rules", None).map(|r| r.2)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // threshold 3 s + for 1 s + two scrapes (2 s) + the recording rule's evaluation (1 s) +
    // the alert's (1 s) + reorder window 0.5 s
    let late = fired.duration_since(idle_at).as_secs_f64();
    assert!(
        late <= 3.0 + 1.0 + 2.0 + 1.0 + 1.0 + 0.5 + 0.5,
        "fired {late:.1} s after the GPU went idle"
    );
}

/// The series budget (docs/metrics.md) for one prover: 8 GPUs and every proof kind at most this many.
const SERIES_BUDGET: usize = 300;

/// An 8-GPU prover proving every kind, watched: its /metrics holds 5 G + 14 K + 169 series
/// (docs/metrics.md's arithmetic), within the budget, and both of its formats parse with the
/// Prometheus project's own Python parsers (the strict OpenMetrics one rejects a histogram
/// with a negative observation) and pass `promtool check metrics`.
#[test]
fn an_eight_gpu_prover_stays_within_the_series_budget_and_every_parser_takes_its_metrics() {
    let dir = tmp("budget");
    let log = dir.join("mixed.log");
    assert!(
        proofline()
            .args(["generate", "--jobs", "200", "--mixed", "--gpus", "8", "-o"])
            .arg(&log)
            .status()
            .unwrap()
            .success()
    );
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = proofline()
        .args(["watch", "--from-start", "--metrics-addr", &addr])
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _watch = Proc(child);
    wait_ready(&addr, "/healthz", "proofline watch");
    wait_completed(&addr, 200.0);
    let (_, _, classic) = http_get(&addr, "/metrics", None).unwrap();
    let (_, _, om) = http_get(
        &addr,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    )
    .unwrap();
    let samples: Vec<&str> = classic.lines().filter(|l| !l.starts_with('#')).collect();
    let distinct = |metric: &str, label: &str| -> usize {
        let mut v: Vec<&str> = samples
            .iter()
            .filter(|l| l.starts_with(metric))
            .filter_map(|l| l.split(&format!("{label}=\"")).nth(1)?.split('"').next())
            .collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    let gpus = distinct("proofline_gpu_busy_seconds_total{", "gpu");
    let kinds = distinct("proofline_proofs_completed_total{", "proof_kind");
    assert_eq!((gpus, kinds), (8, 4));
    assert_eq!(
        samples.len(),
        6 * gpus + 14 * kinds + 172,
        "docs/metrics.md's series arithmetic no longer holds"
    );
    assert!(
        samples.len() <= SERIES_BUDGET,
        "{} series for an 8-GPU prover: over the budget of {SERIES_BUDGET}",
        samples.len()
    );
    // no histogram has a negative sum or bucket (OpenMetrics: they are counters)
    for l in &samples {
        let v: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(
            v >= 0.0 || !l.contains("_sum") && !l.contains("_bucket"),
            "{l}"
        );
    }
    // the Prometheus project's Python parsers, classic and OpenMetrics, exemplars included
    std::fs::write(dir.join("m.prom"), &classic).unwrap();
    std::fs::write(dir.join("m.om"), &om).unwrap();
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/test/parse_exposition.py"))
        .arg(dir.join("m.prom"))
        .arg(dir.join("m.om"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "a Prometheus parser rejected /metrics:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: Vec<usize> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(counts[0], samples.len());
    assert_eq!(counts[1], samples.len());
    assert!(counts[2] > 0, "no exemplar parsed");
    // and promtool
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(classic.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `watch` of a log with cuzk's CUZK_TIMING lines exports the kernel seconds, the lock held,
/// the calls and the CPU's MSM time that `analyze` reports for it, through a real Prometheus.
#[test]
fn watch_exports_the_kernel_seconds_analyze_reports() {
    let dir = tmp("kernel");
    let log = dir.join("cuzk.log");
    assert!(
        proofline()
            .args([
                "generate",
                "--jobs",
                "6",
                "--cuzk-timing",
                "--cpu-in-lock-ms",
                "2000",
                "-o"
            ])
            .arg(&log)
            .status()
            .unwrap()
            .success()
    );
    let expected = analyze_json(&log);
    let k = &expected["kernel"];
    let (_watch, _, addr) = watch(&["--from-start", "--poll-ms", "50"], &log);
    let prom = Prometheus::start(&dir, &[addr]);
    let calls = k["calls"].as_f64().unwrap();
    assert!(calls > 0.0);
    let got = prom.wait_for("proofline_gpu_calls_total", 40, |v| v >= calls);
    assert_eq!(got, calls);
    for (metric, field) in [
        ("proofline_gpu_kernel_seconds_total", "kernel_ms"),
        ("proofline_gpu_lock_held_seconds_total", "lock_held_ms"),
    ] {
        let v = prom.wait_for(metric, 10, |_| true);
        let want = k[field].as_f64().unwrap() / 1000.0;
        assert!(
            (v - want).abs() < 1e-6,
            "{metric}: prometheus {v}, analyze {want}"
        );
    }
    let prep = prom.wait_for("proofline_prep_msm_seconds_total", 10, |_| true);
    let want = k["prep_msm"]["total_ms"].as_f64().unwrap() / 1000.0;
    assert!(
        (prep - want).abs() < 1e-6,
        "prep_msm: prometheus {prep}, analyze {want}"
    );
}
