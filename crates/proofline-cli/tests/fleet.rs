//! The fleet test, two levels as deploy/ runs them: 50 provers (`proofline watch` of
//! generated 4-GPU logs; one prover stopped in the middle of a sector), a site Prometheus that
//! scrapes them and records (deploy/prometheus/site.yml, rules.yml) and remote-writes to the
//! global level, which evaluates alerts.yml and sends alerts to Alertmanager. The global level
//! is run twice, as deploy/ offers it: a Prometheus (global.yml, compose.yaml), and
//! VictoriaMetrics with vmalert (compose.victoriametrics.yaml, whose vmalert flags are the
//! ones run here). On each, the GPU-idle alert reaches Alertmanager from the global level for
//! the stalled prover and no other, no raw series arrives there, every fleet-dashboard query
//! returns data from it and every prover-dashboard query from the site; exemplars (trace ids)
//! are on the site Prometheus, where the prover dashboard reads them, and go no further.
//!
//! deploy/'s files are used as they are, except that the clock is compressed (1 s scrapes
//! and evaluations, the GPU-idle threshold scaled as marked in alerts.yml) and addresses are
//! local.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{
    Proc, cut_where_the_gpus_first_idle, free_port, generated_log, http_get, prometheus,
    scaled_alerts, urlencode, wait_ready,
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
            // a NaN (0/0) is no data to a reader: Grafana draws nothing, and
            // VictoriaMetrics drops it where Prometheus keeps it
            let numbers = v["data"]["result"].as_array().is_some_and(|r| {
                r.iter()
                    .any(|s| s["value"][1].as_str().is_some_and(|x| x != "NaN"))
            });
            if !numbers {
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

/// Tells the live log's writer to stop when dropped, a failed test's too.
struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What runs the global level.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Global {
    Prometheus,
    VictoriaMetrics,
}

/// One fleet at a time: 50 provers and three servers fill this machine's two cores.
static ONE_FLEET: Mutex<()> = Mutex::new(());

#[test]
fn fifty_provers_two_levels_the_idle_alert_comes_from_a_global_prometheus_for_the_stalled_one() {
    let _one = ONE_FLEET.lock().unwrap_or_else(|e| e.into_inner());
    fleet(Global::Prometheus);
}

#[test]
fn fifty_provers_two_levels_the_idle_alert_comes_from_global_victoriametrics_for_the_stalled_one() {
    let _one = ONE_FLEET.lock().unwrap_or_else(|e| e.into_inner());
    fleet(Global::VictoriaMetrics);
}

/// The flags of a service's `command` in a compose file of deploy/.
fn compose_command(file: &str, service: &str) -> Vec<String> {
    let text = std::fs::read_to_string(deploy().join(file)).unwrap();
    let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    v["services"][service]["command"]
        .as_array()
        .unwrap_or_else(|| panic!("{file}: {service} has no command"))
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect()
}

/// VictoriaMetrics and vmalert as compose.victoriametrics.yaml runs them, on local addresses
/// and the compressed clock; their processes and VictoriaMetrics' address.
fn victoriametrics_global(dir: &Path, am_addr: &str) -> (Vec<Proc>, String) {
    let vm = format!("127.0.0.1:{}", free_port());
    let mut args: Vec<String> =
        compose_command("compose.victoriametrics.yaml", "prometheus-global")
            .into_iter()
            .map(|f| {
                if f.starts_with("-httpListenAddr=") {
                    format!("-httpListenAddr={vm}")
                } else if f.starts_with("-storageDataPath=") {
                    format!("-storageDataPath={}", dir.join("vm").display())
                } else {
                    f
                }
            })
            .collect();
    // the compressed clock: a query sees samples of the last second (the default hides the
    // last 30 s, which on deploy/'s clock is two evaluations' delay)
    args.extend([
        "-search.latencyOffset=0s".into(),
        "-loggerLevel=ERROR".into(),
    ]);
    let store = Proc(
        Command::new("victoria-metrics")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("victoria-metrics not found: install Debian's victoria-metrics (scripts/test.sh does)"),
    );
    wait_ready(&vm, "/health", "victoria-metrics");
    let ruler = format!("127.0.0.1:{}", free_port());
    let flags = compose_command("compose.victoriametrics.yaml", "vmalert");
    assert!(
        flags
            .iter()
            .any(|f| f == "-notifier.url=http://alertmanager:9093")
            && flags
                .iter()
                .any(|f| f == "-rule=/etc/prometheus/alerts.yml"),
        "{flags:?}"
    );
    let flags: Vec<String> = flags
        .into_iter()
        .map(|f| {
            f.replace("http://prometheus-global:9090", &format!("http://{vm}"))
                .replace("http://alertmanager:9093", &format!("http://{am_addr}"))
                .replace(
                    "/etc/prometheus/alerts.yml",
                    &dir.join("alerts.yml").display().to_string(),
                )
                .replace("-evaluationInterval=15s", "-evaluationInterval=1s")
        })
        .chain([
            format!("-httpListenAddr={ruler}"),
            "-loggerLevel=ERROR".into(),
        ])
        .collect();
    let vmalert = Proc(
        Command::new("vmalert")
            .args(&flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("vmalert not found: install Debian's victoria-metrics (scripts/test.sh does)"),
    );
    wait_ready(&ruler, "/health", "vmalert");
    (vec![store, vmalert], vm)
}

/// Exemplars' trace ids on the Prometheus at `addr`, for every proofline histogram.
fn exemplar_trace_ids(addr: &str) -> Vec<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (status, _, body) = http_get(
        addr,
        &format!(
            "/api/v1/query_exemplars?query={}&start={}&end={}",
            urlencode("{__name__=~\"proofline.+_bucket\"}"),
            now - 3600,
            now + 60
        ),
        None,
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["exemplars"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| Some(e["labels"]["trace_id"].as_str()?.to_owned()))
        .collect()
}

fn fleet(level: Global) {
    let dir =
        std::env::temp_dir().join(format!("proofline-fleet-{level:?}-{}", std::process::id()));
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
    // one prover's log is written while the fleet runs (a 2-GPU prover with CUZK_TIMING
    // lines, sector transitions with gaps and overlaps, synthesis ahead and behind), so that
    // every rate over it has something to measure; it ends with the test
    let live_log = dir.join("live.log");
    std::fs::create_dir_all(dir.join("live-source")).unwrap();
    let source = generated_log(
        &dir.join("live-source"),
        &["--jobs", "60", "--gpus", "2", "--cuzk-timing"],
    );
    // its first half (the warm-up: transitions with gaps and synthesis behind only) is there
    // when the watch starts, the second half comes while the fleet runs
    let text = std::fs::read_to_string(&source).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let half = lines.len() / 2;
    std::fs::write(&live_log, lines[..half].join("\n") + "\n").unwrap();
    let rest: Vec<String> = lines[half..].iter().map(|l| (*l).to_owned()).collect();
    let stop = StopOnDrop(std::sync::Arc::new(std::sync::atomic::AtomicBool::new(
        false,
    )));
    let writer = {
        let (path, stop) = (live_log.clone(), stop.0.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
            // about 5 s of the prover's time a second (the 60-job log's second half), for up to 3 minutes
            for chunk in rest.chunks(rest.len().div_ceil(480)) {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(375));
                f.write_all((chunk.join("\n") + "\n").as_bytes()).unwrap();
            }
        })
    };
    let mut provers = Vec::new();
    let mut targets = Vec::new();
    for i in 0..PROVERS {
        let addr = format!("127.0.0.1:{}", free_port());
        let log = match i {
            7 => &stalled_log,
            3 => &live_log,
            _ => &done,
        };
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
    // the live prover's real idle gaps (up to 12 s of its time, written at about 5 s of it
    // a second) can outlast the scaled threshold (3 s): an alert for it would be true, so it
    // is neither required nor refused
    let live = targets[3].clone();
    for t in &targets {
        wait_ready(t, "/healthz", "proofline watch");
    }

    // the global level: a remote-write receiver, deploy/'s alerts (scaled), Alertmanager
    std::fs::write(dir.join("alerts.yml"), scaled_alerts()).unwrap();
    let (_global, global) = match level {
        Global::Prometheus => {
            let global_cfg = std::fs::read_to_string(deploy().join("prometheus/global.yml"))
                .unwrap()
                .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
                .replace("alertmanager:9093", &am_addr);
            // exemplar storage on, so that exemplars sent on would be kept (and seen)
            let (p, addr) = prometheus(
                &dir,
                "global",
                &global_cfg,
                &[
                    "--web.enable-remote-write-receiver",
                    "--enable-feature=exemplar-storage",
                ],
            );
            (vec![p], addr)
        }
        Global::VictoriaMetrics => victoriametrics_global(&dir, &am_addr),
    };

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
    // (some 30-60 s here; the two fleet tests run at once, 100 provers and five servers on
    // two cores: 90 s ran out once in a slow spell, so the wait is 180 s, which only a
    // failing run waits through)
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let idle: Vec<String> = alerts(&am_addr)
            .into_iter()
            .filter(|(name, i)| name == "ProoflineGpuIdleBetweenSectors" && *i != live)
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

    // every fleet panel has data from the global level, every prover panel from the site
    panels_have_data(&global, "fleet.json", "prometheus-global");
    panels_have_data(&site, "prover.json", "prometheus");

    // exemplars stay at the site, where the prover dashboard opens traces from them: the
    // recorded series sent on carry none (nor does VictoriaMetrics 1.79 store any)
    let at_site = exemplar_trace_ids(&site);
    assert!(
        at_site.iter().any(|t| t.len() == 32),
        "no trace-id exemplar at the site: {at_site:?}"
    );
    if level == Global::Prometheus {
        assert_eq!(exemplar_trace_ids(&global), Vec::<String>::new());
    }

    // still no GPU-idle alert for any other prover
    for (name, instance) in alerts(&am_addr) {
        if name == "ProoflineGpuIdleBetweenSectors" && instance != live {
            assert_eq!(instance, stalled);
        }
    }
    drop(stop);
    writer.join().unwrap();
    drop(provers);
}
