//! The fleet test, two levels as deploy/ runs them: 50 provers (`proofline watch` of
//! generated 4-GPU logs; one prover stopped in the middle of a sector), a site Prometheus that
//! scrapes them and records (deploy/prometheus/site.yml, rules.yml) and remote-writes to a
//! global Prometheus (global.yml, alerts.yml) that sends alerts to Alertmanager. The GPU-idle
//! alert reaches Alertmanager from the global level for the stalled prover and no other, every
//! fleet-dashboard query returns data from the global Prometheus, and every prover-dashboard
//! query from the site one.
//!
//! deploy/'s files are used as they are, except that the clock is compressed (1 s scrapes
//! and evaluations, the GPU-idle threshold scaled as marked in alerts.yml) and addresses are
//! local.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{
    Proc, cut_where_the_gpus_first_idle, free_port, http_get, prometheus, scaled_alerts, urlencode,
    wait_ready,
};

/// Provers in the fleet.
const PROVERS: usize = 50;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// A log whose prover stopped in the middle of its work: the first sector's GPU work done,
/// the next sector in flight, nothing more written.
fn stalled_log(dir: &Path) -> PathBuf {
    let full = dir.join("full.log");
    assert!(
        Command::new(env!("CARGO_BIN_EXE_proofline"))
            .args([
                "generate", "--jobs", "3", "--gpus", "4", "--stall", "1:600000", "-o"
            ])
            .arg(&full)
            .status()
            .unwrap()
            .success()
    );
    let text = std::fs::read_to_string(&full).unwrap();
    let lines = cut_where_the_gpus_first_idle(&text);
    let log = dir.join("stalled.log");
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    log
}

/// Every query of `dashboard` whose data source is `uid` has data on `prom` (within 40 s).
fn panels_have_data(prom: &str, dashboard: &str, uid: &str) {
    let out = Command::new("python3")
        .arg(deploy().join("test/check_dashboards.py"))
        .arg("--exprs")
        .output()
        .unwrap();
    assert!(out.status.success());
    let queries: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let queries: Vec<&serde_json::Value> = queries
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["dashboard"] == dashboard)
        .collect();
    assert!(queries.len() > 5, "{dashboard}: {} queries", queries.len());
    assert!(
        queries.iter().all(|q| q["datasource"] == uid),
        "{dashboard} reads another data source than {uid}"
    );
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut empty: Vec<String> = Vec::new();
    loop {
        empty.clear();
        for q in &queries {
            let expr = q["expr"].as_str().unwrap();
            let (status, _, body) = http_get(
                prom,
                &format!("/api/v1/query?query={}", urlencode(expr)),
                None,
            )
            .unwrap();
            assert_eq!(status, 200, "{expr}: {body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["data"]["result"].as_array().is_none_or(Vec::is_empty) {
                empty.push(format!("{dashboard} / {}: {expr}", q["panel"]));
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
}

/// The alertnames and instances Alertmanager holds.
fn alerts(am: &str) -> Vec<(String, String)> {
    let (_, _, body) =
        http_get(am, "/api/v2/alerts", None).unwrap_or((0, String::new(), "[]".into()));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or(serde_json::json!([]));
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    let l = &x["labels"];
                    (
                        l["alertname"].as_str().unwrap_or_default().to_owned(),
                        l["instance"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn fifty_provers_two_levels_the_idle_alert_comes_from_the_global_level_for_the_stalled_one() {
    let dir = std::env::temp_dir().join(format!("proofline-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("targets")).unwrap();

    // Alertmanager, clustering off, grouping fast
    let (_am, am_addr) = common::alertmanager(
        &dir,
        "route:\n  receiver: default\n  group_by: [alertname, instance]\n  group_wait: 1s\n  group_interval: 1s\nreceivers:\n  - name: default\n",
    );

    // the provers: 49 that finished their work, one stopped in the middle of a sector
    let done = dir.join("done.log");
    assert!(
        Command::new(env!("CARGO_BIN_EXE_proofline"))
            .args([
                "generate", "--jobs", "12", "--gpus", "4", "--stall", "6:120000", "-o"
            ])
            .arg(&done)
            .status()
            .unwrap()
            .success()
    );
    let stalled_log = stalled_log(&dir);
    let mut provers = Vec::new();
    let mut targets = Vec::new();
    for i in 0..PROVERS {
        let addr = format!("127.0.0.1:{}", free_port());
        let log = if i == 7 { &stalled_log } else { &done };
        provers.push(Proc(
            Command::new(env!("CARGO_BIN_EXE_proofline"))
                .args([
                    "watch",
                    "--from-start",
                    "--poll-ms",
                    "200",
                    "--reorder-window-ms",
                    "500",
                ])
                .args(["--metrics-addr", &addr, "--instance", &format!("prover{i}")])
                .arg(log)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ));
        targets.push(addr);
    }
    let stalled = targets[7].clone();
    for t in &targets {
        wait_ready(t, "/healthz", "proofline watch");
    }

    // the global Prometheus: remote-write receiver, deploy/'s alerts (scaled), Alertmanager
    let global_cfg = std::fs::read_to_string(deploy().join("prometheus/global.yml"))
        .unwrap()
        .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
        .replace("alertmanager:9093", &am_addr);
    std::fs::write(dir.join("alerts.yml"), scaled_alerts()).unwrap();
    let (_global, global) = prometheus(
        &dir,
        "global",
        &global_cfg,
        &["--web.enable-remote-write-receiver"],
    );

    // the site Prometheus: scrapes the provers, records, remote-writes to the global one
    std::fs::copy(deploy().join("prometheus/rules.yml"), dir.join("rules.yml")).unwrap();
    let list: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
    std::fs::write(
        dir.join("targets/provers.yml"),
        format!("- targets: [{}]\n", list.join(", ")),
    )
    .unwrap();
    let site_cfg = std::fs::read_to_string(deploy().join("prometheus/site.yml"))
        .unwrap()
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
        .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
        .replace("refresh_interval: 30s", "refresh_interval: 1s")
        .replace("prometheus-global:9090", &global)
        .replace(
            "    write_relabel_configs:",
            "    queue_config:\n      batch_send_deadline: 1s\n    write_relabel_configs:",
        );
    assert!(
        site_cfg.contains(&global),
        "site.yml no longer remote-writes to the global one"
    );
    let (_site, site) = prometheus(
        &dir,
        "site",
        &site_cfg,
        &["--enable-feature=exemplar-storage"],
    );

    // the GPU-idle alert reaches Alertmanager from the global level, for the stalled prover
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let idle: Vec<String> = alerts(&am_addr)
            .into_iter()
            .filter(|(name, _)| name == "ProoflineGpuIdleBetweenSectors")
            .map(|(_, i)| i)
            .collect();
        if !idle.is_empty() {
            assert!(
                idle.iter().all(|i| *i == stalled),
                "alert for {idle:?}, stalled prover is {stalled}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the GPU-idle alert never reached Alertmanager"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // the global Prometheus holds only what the site recorded and sent: a few series a
    // prover, no raw histogram
    let (_, _, body) = http_get(
        &global,
        &format!(
            "/api/v1/query?query={}",
            urlencode("count({__name__=~\"proofline_.+\"})")
        ),
        None,
    )
    .unwrap();
    assert!(
        body.contains("\"result\":[]"),
        "raw series reached the global level: {body}"
    );

    // every fleet panel has data from the global Prometheus, every prover panel from the site
    panels_have_data(&global, "fleet.json", "prometheus-global");
    panels_have_data(&site, "prover.json", "prometheus");

    // still no GPU-idle alert for any other prover
    for (name, instance) in alerts(&am_addr) {
        if name == "ProoflineGpuIdleBetweenSectors" {
            assert_eq!(instance, stalled);
        }
    }
    drop(provers);
}
