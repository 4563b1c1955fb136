//! Each way a GPU stops proving, measured end to end on a compressed clock: provers played in
//! real time (their TIMELINE lines written as their offsets come due) and followed by
//! `proofline watch`, one Prometheus that scrapes them every second and evaluates deploy/'s
//! rules.yml and alerts.yml every second (the thresholds scaled, as marked in alerts.yml), and
//! an Alertmanager whose webhook is this test. For each failure: the time from the failure to
//! the notification, against its floor (the alert's threshold and `for`); the expected alert
//! and no other kind, and nothing at all for a healthy prover.
//!
//! One level here (the fleet test runs two): the global level adds one remote-write batch and
//! one more evaluation. `cargo test -p proofline-cli --features e2e --test failures --
//! --nocapture` prints the table docs/operating.md carries.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{free_port, fresh_dir, prometheus, proofline, scaled_alerts, wait_ready};

/// The compressed clock: scrape and evaluation intervals, s.
const INTERVAL_S: f64 = 1.0;
/// The GPU-idle threshold and its `for` (scaled_alerts: 30 s and 1 m in deploy/).
const IDLE_S: f64 = 3.0 + 1.0;
/// The silence threshold and its `for` (120 s and 1 m in deploy/).
const SILENT_S: f64 = 6.0 + 3.0;
/// `watch --stuck-min-s` (60 s by default); the stuck alert has no `for`. A call is stuck
/// past the larger of this and 4x the longest its GPU closed ([`stuck_floor`]).
const STUCK_MIN_S: f64 = 3.0;
/// The metrics-gone `for` (2 m in deploy/).
const GONE_S: f64 = 3.0;

const IDLE: &str = "ProoflineGpuIdleBetweenSectors";
const SILENT: &str = "ProoflineProverSilent";
const STUCK: &str = "ProoflineGpuCallStuck";
const GONE: &str = "ProoflineMetricsGone";
const LOOP: &str = "ProoflineCrashLoop";

/// deploy/'s alerts with every threshold this test meets on the compressed clock.
fn compressed_alerts() -> String {
    let mut s = scaled_alerts();
    for (from, to) in [
        (
            "instance:proofline_last_event_age_seconds:max > 120 # threshold: silent_seconds",
            "instance:proofline_last_event_age_seconds:max > 6 # threshold: silent_seconds",
        ),
        ("for: 1m # for: silent", "for: 3s # for: silent"),
        ("for: 2m # for: gone", "for: 3s # for: gone"),
    ] {
        assert!(s.contains(from), "alerts.yml lost `{from}`");
        s = s.replace(from, to);
    }
    s
}

/// A log's lines with their offsets.
fn timed(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .map(|l| (l.split(',').nth(1).unwrap().parse().unwrap(), l.to_owned()))
        .collect()
}

/// `proofline generate` with the compressed timings (a sector in ~3 s) and `extra`.
fn generate(dir: &Path, name: &str, extra: &[&str]) -> Vec<(u64, String)> {
    let out = dir.join(format!("{name}.generated"));
    let st = proofline()
        .args([
            "generate",
            "--jobs",
            "6",
            "--synth-ms",
            "2000",
            "--kernel-ms",
            "300",
        ])
        .args(extra)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    timed(&std::fs::read_to_string(out).unwrap())
}

/// Where the GPU falls idle the longest with lines still to come: the offset of the
/// GPU_END that closed its last open interval before the longest gap.
fn longest_idle_start(lines: &[(u64, String)]) -> u64 {
    let mut open = 0i32;
    let (mut idle_since, mut best) = (None, (0u64, 0u64));
    for (t, l) in lines {
        if l.contains(",GPU_START,") {
            if let Some(since) = idle_since.take() {
                if t - since > best.1 {
                    best = (since, t - since);
                }
            }
            open += 1;
        } else if l.contains(",GPU_END,") {
            open -= 1;
            if open == 0 {
                idle_since = Some(*t);
            }
        }
    }
    best.0
}

/// When a GPU call that started at line `at` is stuck: the larger of `--stuck-min-s` and 4x
/// the longest interval (GPU_START to GPU_END of one partition) closed before it, s.
fn stuck_floor(lines: &[(u64, String)], at: usize) -> f64 {
    let mut open: HashMap<(String, String), u64> = HashMap::new();
    let mut longest = 0;
    for (t, l) in &lines[..at] {
        let f: Vec<&str> = l.split(',').collect();
        let part = f.iter().find(|x| x.starts_with("partition=")).unwrap();
        let key = (f[3].to_owned(), part.to_string());
        if f[2] == "GPU_START" {
            open.insert(key, *t);
        } else if f[2] == "GPU_END" {
            if let Some(s) = open.remove(&key) {
                longest = longest.max(t - s);
            }
        }
    }
    STUCK_MIN_S.max(4.0 * longest as f64 / 1000.0)
}

/// Appends `lines` to `log` as their offsets come due after `start` (+ `shift_ms`).
fn play(log: &Path, lines: &[(u64, String)], start: Instant, shift_ms: u64) {
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    for (t, l) in lines {
        let due = start + Duration::from_millis(t + shift_ms);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        f.write_all(format!("{l}\n").as_bytes()).unwrap();
    }
}

/// The lines at or before `ms`.
fn until(lines: &[(u64, String)], ms: u64) -> Vec<(u64, String)> {
    lines.iter().filter(|(t, _)| *t <= ms).cloned().collect()
}

/// Binds `addr` (a killed sidecar's) and drops every connection to it, for the rest of the
/// test: a scrape of it fails as one of a dead process does.
fn hold_dead(addr: &str) {
    let l = std::net::TcpListener::bind(addr)
        .unwrap_or_else(|e| panic!("{addr}, freed by the kill, was taken at once: {e}"));
    std::thread::spawn(move || {
        for c in l.incoming() {
            drop(c);
        }
    });
}

/// Each scrape target's health and last error as Prometheus at `api` reports them.
fn targets_health(api: &str) -> Vec<String> {
    let Some((_, _, body)) = common::http_get(api, "/api/v1/targets", None) else {
        return vec!["(Prometheus did not answer /api/v1/targets)".into()];
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["activeTargets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{} {} {}",
                t["labels"]["instance"], t["health"], t["lastError"]
            )
        })
        .collect()
}

/// A prover: its log, its watch, and when its failure happened.
struct Prover {
    name: &'static str,
    log: PathBuf,
    addr: String,
    watch: Arc<Mutex<Option<Child>>>,
    failed_at: Arc<Mutex<Option<Instant>>>,
}

impl Drop for Prover {
    fn drop(&mut self) {
        if let Some(mut c) = self.watch.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn prover(dir: &Path, name: &'static str) -> Prover {
    let log = dir.join(format!("{name}.log"));
    std::fs::write(&log, "").unwrap();
    watched(name, log.clone(), &[log.as_os_str()])
}

/// A prover whose lines go to a journal (its unit cuzk.service), followed by watch.
fn journal_prover(name: &'static str, journal: &Path) -> Prover {
    let args = [
        "--journal-unit".as_ref(),
        "cuzk.service".as_ref(),
        "--journal-file".as_ref(),
        journal.as_os_str(),
    ];
    watched(name, journal.to_owned(), &args)
}

/// `proofline watch` on the compressed clock, reading `source`.
fn watched(name: &'static str, log: PathBuf, source: &[&std::ffi::OsStr]) -> Prover {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = proofline()
        .args(["watch", "--from-start", "--poll-ms", "200"])
        .args(["--reorder-window-ms", "500", "--stuck-min-s", "3"])
        .args(["--metrics-addr", &addr, "--instance", name])
        .args(source)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Prover {
        name,
        log,
        addr,
        watch: Arc::new(Mutex::new(Some(child))),
        failed_at: Arc::new(Mutex::new(None)),
    }
}

/// Notifications the webhook received: the first of each (alert, instance), when.
type Arrivals = Arc<Mutex<HashMap<(String, String), Instant>>>;

/// An Alertmanager webhook receiver; its URL and what it received.
fn webhook() -> (String, Arrivals) {
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    // the OTLP test collector answers any POST to its path: here Alertmanager's JSON
    let (url, _) = proofline_tests::collector_with(move |_, body| {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let now = Instant::now();
        let mut seen = seen.lock().unwrap();
        for a in v["alerts"].as_array().into_iter().flatten() {
            if a["status"] != "firing" {
                continue;
            }
            let l = &a["labels"];
            let key = (
                l["alertname"].as_str().unwrap_or_default().to_owned(),
                l["instance"].as_str().unwrap_or_default().to_owned(),
            );
            seen.entry(key).or_insert(now);
        }
        Some(("200 OK", Vec::new()))
    });
    (url, arrivals)
}

#[test]
fn each_failure_reaches_alertmanager_within_its_floor_and_a_few_intervals() {
    let dir = fresh_dir("failures", "clock");
    let (hook, arrivals) = webhook();
    let (_am, am_addr) = common::alertmanager(
        &dir,
        &format!(
            "route:\n  receiver: hook\n  group_by: [alertname, instance]\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: {hook}\n        send_resolved: false\n"
        ),
    );

    let normal = generate(&dir, "normal", &[]);
    let stalled = generate(&dir, "stalled", &["--stall", "3:600000"]);
    let never = generate(&dir, "never", &["--never-finish", "2:3"]);
    // a prover under systemd: its lines go to the journal, written as they come
    let mut journal = common::journal::LiveJournal::start(&dir);
    journal.write_now(1, "cuzk.service", "cuzk starting");
    journal.wait_readable();
    let provers = [
        journal_prover("journal-unit-stopped", &journal.path),
        prover(&dir, "healthy"),
        prover(&dir, "synthesis-stalls"),
        prover(&dir, "dies-in-gpu-work"),
        prover(&dir, "gpu-call-never-returns"),
        prover(&dir, "log-deleted"),
        prover(&dir, "sidecar-killed"),
        prover(&dir, "restart-loop"),
    ];
    for p in &provers {
        wait_ready(&p.addr, "/healthz", "proofline watch");
    }

    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/rules.yml"),
        dir.join("rules.yml"),
    )
    .unwrap();
    std::fs::write(dir.join("alerts.yml"), compressed_alerts()).unwrap();
    let targets: Vec<String> = provers.iter().map(|p| format!("\"{}\"", p.addr)).collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yml, alerts.yml]\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"{am_addr}\"]\nscrape_configs:\n  - job_name: proofline\n    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    );
    let (_prom, prom_api) = prometheus(&dir, "prometheus", &config, &[]);

    // each prover plays its log from `start`, and fails as its name says
    let start = Instant::now() + Duration::from_secs(2);
    let mut players = Vec::new();
    let journal = std::sync::Mutex::new(Some(journal));
    for p in &provers {
        let mut journal = (p.name == "journal-unit-stopped")
            .then(|| journal.lock().unwrap().take())
            .flatten();
        let (log, watch, failed_at) = (p.log.clone(), p.watch.clone(), p.failed_at.clone());
        let addr = p.addr.clone();
        let fail = move || *failed_at.lock().unwrap() = Some(Instant::now());
        let (normal, stalled, never) = (normal.clone(), stalled.clone(), never.clone());
        let name = p.name;
        players.push(std::thread::spawn(move || match name {
            "healthy" => play(&log, &normal, start, 0),
            // the unit stops (systemctl stop, or the prover dies) mid-sector: its entries end;
            // the host's other services go on writing to the journal
            "journal-unit-stopped" => {
                let j = journal.as_mut().unwrap();
                for (t, l) in until(&normal, 9000) {
                    let due = start + Duration::from_millis(t);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    j.write_now(4242, "cuzk.service", &l);
                }
                fail();
                for _ in 0..60 {
                    std::thread::sleep(Duration::from_millis(500));
                    j.write_now(77, "sshd.service", "session opened");
                }
            }
            // a partition's synthesis hangs; the GPU runs dry with the sector in flight
            "synthesis-stalls" => {
                let idle = longest_idle_start(&stalled);
                play(&log, &until(&stalled, idle), start, 0);
                fail();
            }
            // killed with GPU calls open, the last line cut short
            "dies-in-gpu-work" => {
                let cut = normal
                    .iter()
                    .position(|(t, l)| *t >= 8000 && l.contains(",GPU_START,"))
                    .unwrap();
                play(&log, &normal[..=cut], start, 0);
                let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
                f.write_all(b"TIMELINE,8").unwrap();
                fail();
            }
            // one call never returns; the other worker's lines go on
            "gpu-call-never-returns" => {
                let at = never
                    .iter()
                    .position(|(_, l)| {
                        l.contains(",GPU_START,porep-1000-2,") && l.ends_with(",partition=3")
                    })
                    .unwrap();
                play(&log, &never[..=at], start, 0);
                fail();
                play(&log, &never[at + 1..], start, 0);
            }
            "log-deleted" => {
                play(&log, &until(&normal, 9000), start, 0);
                std::fs::remove_file(&log).unwrap();
                fail();
            }
            "sidecar-killed" => {
                play(&log, &until(&normal, 8000), start, 0);
                if let Some(mut c) = watch.lock().unwrap().take() {
                    c.kill().unwrap();
                    c.wait().unwrap();
                }
                // the freed port is in the ephemeral range: on a host whose other jobs share
                // the loopback, another server could take it and answer the scrapes (a CI
                // run once waited 112 s for this alert). Held here, it refuses nothing but
                // answers nothing either: each scrape ends in EOF, as from a dead sidecar.
                hold_dead(&addr);
                fail();
                let rest: Vec<_> = normal.iter().filter(|(t, _)| *t > 8000).cloned().collect();
                play(&log, &rest, start, 0);
            }
            // three restarts 4 s apart, each doing the same work again (1 ms later, as a
            // restarted process never prints its lines to the millisecond), the last one to
            // the end; the failure is the third restart
            "restart-loop" => {
                play(&log, &until(&normal, 4000), start, 0);
                for restart in 1..=3u64 {
                    let run: Vec<(u64, String)> = normal
                        .iter()
                        .map(|(t, l)| {
                            let rest = l.splitn(3, ',').nth(2).unwrap();
                            (*t, format!("TIMELINE,{},{rest}", t + restart))
                        })
                        .collect();
                    let shift = restart * 4500;
                    if restart < 3 {
                        play(&log, &until(&run, 4000), start, shift);
                    } else {
                        play(&log, &run[..3], start, shift);
                        fail();
                        play(&log, &run[3..], start, shift);
                    }
                }
            }
            _ => unreachable!(),
        }));
    }

    let never_at = never
        .iter()
        .position(|(_, l)| l.contains(",GPU_START,porep-1000-2,") && l.ends_with(",partition=3"))
        .unwrap();
    let stuck_s = stuck_floor(&never, never_at);
    // what each failure should raise first, and what else it may raise
    let expected: [(&str, &str, f64, &[&str]); 7] = [
        (
            "journal-unit-stopped",
            SILENT,
            SILENT_S,
            &[SILENT, STUCK, IDLE],
        ),
        ("synthesis-stalls", IDLE, IDLE_S, &[IDLE, SILENT]),
        ("dies-in-gpu-work", SILENT, SILENT_S, &[SILENT, STUCK, IDLE]),
        (
            "gpu-call-never-returns",
            STUCK,
            stuck_s,
            &[STUCK, IDLE, SILENT],
        ),
        ("log-deleted", SILENT, SILENT_S, &[SILENT, STUCK, IDLE]),
        ("sidecar-killed", GONE, GONE_S, &[GONE]),
        ("restart-loop", LOOP, 0.0, &[LOOP]),
    ];
    let addr = |name: &str| {
        provers
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .addr
            .clone()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let seen = arrivals.lock().unwrap().clone();
        if expected
            .iter()
            .all(|(name, alert, ..)| seen.contains_key(&(alert.to_string(), addr(name))))
        {
            break;
        }
        if Instant::now() >= deadline {
            let missing: Vec<_> = expected
                .iter()
                .filter(|(name, alert, ..)| !seen.contains_key(&(alert.to_string(), addr(name))))
                .map(|(name, alert, ..)| format!("{name} ({}): {alert}", addr(name)))
                .collect();
            panic!(
                "not every failure was notified: missing {missing:?}; received {:?}; \
                 Prometheus's targets: {:?}",
                seen.keys().collect::<Vec<_>>(),
                targets_health(&prom_api)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // a few more intervals for anything that should not come
    std::thread::sleep(Duration::from_secs(3));
    let seen = arrivals.lock().unwrap().clone();

    println!("| failure | alert | floor (s) | measured (s) | measured - floor (s) |");
    println!("|---|---|---|---|---|");
    let mut late = Vec::new();
    for (name, alert, floor, allowed) in expected {
        let failed = provers
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .failed_at
            .lock()
            .unwrap()
            .expect("the failure happened");
        let me = addr(name);
        let mut mine: Vec<(&String, Instant)> = seen
            .iter()
            .filter(|((_, i), _)| *i == me)
            .map(|((a, _), t)| (a, *t))
            .collect();
        mine.sort_by_key(|(_, t)| *t);
        for (a, t) in &mine {
            assert!(allowed.contains(&a.as_str()), "{name}: {a} is not expected");
            // nothing before the failure (a crash loop read at its second restart was)
            assert!(*t >= failed, "{name}: {a} came before the failure");
            let took = (*t - failed).as_secs_f64();
            if *a == alert {
                println!(
                    "| {name} | {a} | {floor:.0} | {took:.1} | {:.1} |",
                    took - floor
                );
            } else {
                println!("| {name} | {a} | - | {took:.1} | - |");
            }
        }
        let took = (seen[&(alert.to_string(), me)] - failed).as_secs_f64();
        // at least the floor, less half an interval (a gauge's own tick can meet a threshold
        // early); at most the floor + a scrape, two evaluations (the recording rule, then the
        // alert), the watch's poll and reorder window and Alertmanager's dispatch: ~4 s,
        // with room for a loaded machine
        assert!(
            took >= floor - 0.5,
            "{name}: {alert} after {took:.1} s, below its floor {floor} s"
        );
        if took > floor + 4.0 * INTERVAL_S + 4.0 {
            late.push(format!(
                "{name}: {alert} after {took:.1} s (floor {floor} s)"
            ));
        }
    }
    assert!(late.is_empty(), "late: {late:?}");
    let healthy = addr("healthy");
    let noise: Vec<_> = seen.keys().filter(|(_, i)| *i == healthy).collect();
    assert!(noise.is_empty(), "the healthy prover alerted: {noise:?}");
    for p in players {
        p.join().unwrap();
    }
}
