//! The fleet test: a real Prometheus and Alertmanager on 127.0.0.1 scrape four
//! `proofline demo` provers, one with a synthesis stall. The GPU-idle alert reaches
//! Alertmanager for that prover and no other, and every dashboard panel's query returns data.
//!
//! deploy/'s config and rules are used as they are, except that the clock is compressed: the
//! demos run 20x faster than cuzk, so the thresholds marked in alerts.yml are scaled.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Proc, free_port, http_get, scaled_alerts, urlencode};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn wait_ready(addr: &str, path: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(addr, path, None).is_none_or(|(s, ..)| s != 200) {
        assert!(
            Instant::now() < deadline,
            "{what} did not become ready on {addr}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_gpu_idle_alert_reaches_alertmanager_for_the_stalled_prover_only() {
    let dir = std::env::temp_dir().join(format!("proofline-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("targets")).unwrap();

    // Alertmanager, clustering off, grouping fast
    let am_port = free_port();
    let am_addr = format!("127.0.0.1:{am_port}");
    std::fs::write(
        dir.join("alertmanager.yml"),
        "route:\n  receiver: default\n  group_by: [alertname, instance]\n  group_wait: 1s\n  group_interval: 1s\nreceivers:\n  - name: default\n",
    )
    .unwrap();
    let _am = Proc(
        Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", dir.join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", dir.join("am").display()))
            .arg(format!("--web.listen-address={am_addr}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-alertmanager not found: install Debian's prometheus-alertmanager (scripts/test.sh does)"),
    );

    // four provers, the third one with a synthesis stall of 300 s (15 s at 20x) before job 2
    let mut demos = Vec::new();
    let mut targets = Vec::new();
    for i in 0..4 {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_proofline"));
        cmd.args([
            "demo",
            "--forever",
            "--speed",
            "20",
            "--jobs",
            "4",
            "--instance",
            &format!("prover{i}"),
        ])
        .args(["--metrics-addr", &addr, "--out"])
        .arg(dir.join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if i == 2 {
            cmd.args(["--stall", "2:300000"]);
        }
        demos.push(Proc(cmd.spawn().unwrap()));
        targets.push(addr);
    }
    let stalled = targets[2].clone();
    for t in &targets {
        wait_ready(t, "/healthz", "proofline demo");
    }

    // Prometheus with deploy/'s config, targets file and rules, on a compressed clock
    let config = std::fs::read_to_string(deploy().join("prometheus/prometheus.yml"))
        .unwrap()
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
        .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
        .replace("refresh_interval: 30s", "refresh_interval: 1s")
        .replace("alertmanager:9093", &am_addr);
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    std::fs::copy(deploy().join("prometheus/rules.yml"), dir.join("rules.yml")).unwrap();
    std::fs::write(dir.join("alerts.yml"), scaled_alerts()).unwrap();
    let list: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
    std::fs::write(
        dir.join("targets/provers.yml"),
        format!("- targets: [{}]\n", list.join(", ")),
    )
    .unwrap();
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let _prom = Proc(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .arg("--rules.alert.resend-delay=1s")
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "prometheus not found: install Debian's prometheus package (scripts/test.sh does)",
            ),
    );
    wait_ready(&prom_addr, "/-/ready", "prometheus");
    wait_ready(&am_addr, "/-/ready", "alertmanager");

    // the GPU-idle alert reaches Alertmanager, for the stalled prover
    let deadline = Instant::now() + Duration::from_secs(60);
    let idle_instances = loop {
        let (_, _, body) =
            http_get(&am_addr, "/api/v2/alerts", None).unwrap_or((0, String::new(), "[]".into()));
        let alerts: serde_json::Value =
            serde_json::from_str(&body).unwrap_or(serde_json::json!([]));
        let idle: Vec<String> = alerts
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|x| x["labels"]["alertname"] == "ProoflineGpuIdleBetweenSectors")
                    .map(|x| {
                        x["labels"]["instance"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !idle.is_empty() {
            break idle;
        }
        assert!(
            Instant::now() < deadline,
            "the GPU-idle alert never reached Alertmanager"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        idle_instances.iter().all(|i| *i == stalled),
        "alert for {idle_instances:?}, stalled prover is {stalled}"
    );

    // every dashboard panel's query returns data from this Prometheus
    let out = Command::new("python3")
        .arg(deploy().join("test/check_dashboards.py"))
        .arg("--exprs")
        .output()
        .unwrap();
    assert!(out.status.success());
    let queries: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let queries = queries.as_array().unwrap();
    assert!(queries.len() > 20);
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut empty: Vec<String> = Vec::new();
    loop {
        empty.clear();
        for q in queries {
            let expr = q["expr"].as_str().unwrap();
            let (status, _, body) = http_get(
                &prom_addr,
                &format!("/api/v1/query?query={}", urlencode(expr)),
                None,
            )
            .unwrap();
            assert_eq!(status, 200, "{expr}: {body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["data"]["result"].as_array().is_none_or(Vec::is_empty) {
                empty.push(format!("{} / {}: {expr}", q["dashboard"], q["panel"]));
            }
        }
        if empty.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        empty.is_empty(),
        "panels without data:\n{}",
        empty.join("\n")
    );

    // still no alert for any other prover
    let (_, _, body) = http_get(&am_addr, "/api/v2/alerts", None).unwrap();
    let alerts: serde_json::Value = serde_json::from_str(&body).unwrap();
    for a in alerts.as_array().unwrap() {
        if a["labels"]["alertname"] == "ProoflineGpuIdleBetweenSectors" {
            assert_eq!(a["labels"]["instance"], stalled.as_str(), "{a}");
        }
    }
    drop(demos);
}
