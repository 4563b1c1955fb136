//! `proofline watch` and `proofline demo` scraped by a real Prometheus server (Debian's
//! `prometheus` package; scripts/test.sh installs it), queried through its HTTP API.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{
    Proc, analyze_json, cut_where_the_gpus_first_idle, free_port, fresh_dir, http_get, prometheus,
    proofline, query, scaled_alerts, stderr_lines, wait_completed, wait_line, wait_ready,
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

    let port = free_port();
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "50",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
        ])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    wait_line(&rx, "metrics on http://127.0.0.1:");
    let prom = Prometheus::start(&dir, &[format!("127.0.0.1:{port}")]);

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

#[test]
fn watch_follows_rotation_and_truncation_and_numbers_bad_lines() {
    let dir = tmp("rotate");
    let log = dir.join("cuzk.log");
    let sample = dir.join("sample.log");
    assert!(
        proofline()
            .args(["generate", "--jobs", "2", "-o"])
            .arg(&sample)
            .status()
            .unwrap()
            .success()
    );
    let text = std::fs::read_to_string(&sample).unwrap();
    std::fs::write(&log, "daemon starting\n").unwrap();

    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = proofline()
        .args([
            "watch",
            "--poll-ms",
            "50",
            "--reorder-window-ms",
            "0",
            "--metrics-addr",
            &addr,
        ])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    wait_line(&rx, "metrics on");

    // appended lines, one of them malformed (line 3 of the file)
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    writeln!(f, "some log line\nTIMELINE,x,GPU_START,j,worker=1").unwrap();
    f.write_all(text.as_bytes()).unwrap();
    drop(f);
    let bad = wait_line(&rx, "not an unsigned integer");
    assert!(bad.contains("cuzk.log:3:"), "{bad}");
    wait_completed(&addr, 2.0);

    // rotation: the log is moved away and a new one started (the daemon restarted: offsets from 0)
    std::fs::rename(&log, dir.join("cuzk.log.1")).unwrap();
    std::fs::write(&log, text.replace("porep-1000-", "porep-2000-")).unwrap();
    wait_line(&rx, "was rotated");
    wait_completed(&addr, 4.0);

    // truncation in place
    std::fs::write(&log, "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&log, text.replace("porep-1000-", "porep-3000-")).unwrap();
    wait_line(&rx, "was truncated");
    wait_completed(&addr, 6.0);

    let (_, _, body) = http_get(&addr, "/metrics", None).unwrap();
    assert!(body.contains("proofline_malformed_lines_total 1"), "{body}");
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
    let port = free_port();
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "100",
            "--reorder-window-ms",
            "500",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
        ])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    wait_line(&rx, "metrics on http://127.0.0.1:");
    let prom = Prometheus::start(&dir, &[format!("127.0.0.1:{port}")]);
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

/// 5,000 malformed lines: `watch` names ten of them on stderr, sums the rest up once its
/// 10 s window ends, and `/metrics` counts every one.
#[test]
fn watch_names_a_few_malformed_lines_and_counts_them_all() {
    let dir = tmp("bad");
    let log = dir.join("cuzk.log");
    let mut text = String::new();
    for i in 0..5000 {
        text.push_str(&format!("TIMELINE,{i},GPU_START,porep-1-1,partition=0\n"));
    }
    std::fs::write(&log, text).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "50",
            "--metrics-addr",
            &addr,
        ])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    let mut named = 0;
    let summary = loop {
        let l = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("no summary of the malformed lines");
        if l.contains("more malformed lines") {
            break l;
        }
        named += usize::from(l.contains("cuzk.log:") && l.contains("without `worker=`"));
    };
    assert_eq!(named, 10, "ten named in the window");
    assert!(summary.contains("4990 more malformed lines"), "{summary}");
    let (_, _, body) = http_get(&addr, "/metrics", None).unwrap();
    assert!(
        body.contains("proofline_malformed_lines_total 5000"),
        "{}",
        body.lines()
            .filter(|l| l.contains("malformed"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let after = std::iter::from_fn(|| rx.try_recv().ok()).count();
    assert_eq!(after, 0, "nothing after the summary while the log is quiet");
}

/// `watch` follows files like `tail -F` at its best: a truncation followed by a regrowth past
/// the old size between two polls is seen (the first bytes differ), and lines a writer
/// appends to the rotated file after `watch` moved on are still read.
#[test]
fn watch_sees_a_truncate_and_regrow_and_reads_a_rotated_file_a_while() {
    let dir = tmp("regrow");
    let log = dir.join("cuzk.log");
    let generated = |jobs: &str, name: &str| {
        let p = dir.join(name);
        assert!(
            proofline()
                .args(["generate", "--jobs", jobs, "-o"])
                .arg(&p)
                .status()
                .unwrap()
                .success()
        );
        std::fs::read_to_string(p).unwrap()
    };
    let two = generated("2", "two.log");
    let four = generated("4", "four.log");
    std::fs::write(&log, format!("daemon started\n{two}")).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "1000",
            "--reorder-window-ms",
            "0",
        ])
        .args(["--metrics-addr", &addr])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    wait_line(&rx, "metrics on");
    wait_completed(&addr, 2.0);
    // truncated and written anew, longer than before, within one poll
    std::fs::write(
        &log,
        format!(
            "daemon restarted\n{}",
            four.replace("porep-1000-", "porep-3000-")
        ),
    )
    .unwrap();
    wait_line(&rx, "was truncated");
    wait_completed(&addr, 6.0);
    // rotated; the old writer appends two more sectors to the rotated file afterwards
    let old = dir.join("cuzk.log.1");
    std::fs::rename(&log, &old).unwrap();
    std::fs::write(&log, "daemon started again\n").unwrap();
    wait_line(&rx, "was rotated");
    let mut f = std::fs::OpenOptions::new().append(true).open(&old).unwrap();
    f.write_all(two.replace("porep-1000-", "porep-4000-").as_bytes())
        .unwrap();
    drop(f);
    wait_completed(&addr, 8.0);
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

/// The README's series budget for one prover: 8 GPUs and every proof kind at most this many.
const SERIES_BUDGET: usize = 300;

/// An 8-GPU prover proving every kind, watched: its /metrics holds 5 G + 14 K + 167 series
/// (the README's arithmetic), within the budget, and both of its formats parse with the
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
        5 * gpus + 14 * kinds + 167,
        "the README's series arithmetic no longer holds"
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
    let port = free_port();
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "50",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
        ])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    wait_line(&rx, "metrics on http://127.0.0.1:");
    let prom = Prometheus::start(&dir, &[format!("127.0.0.1:{port}")]);
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
