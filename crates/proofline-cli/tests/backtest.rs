//! Alerts backtested on old logs, the recipe of deploy/backtest/backtest_alerts.py with real
//! tools: `proofline export --format openmetrics`, promtool's blocks, VictoriaMetrics loaded
//! by vmctl, and vmalert replaying deploy/'s recording rules and alerts as they are (real
//! thresholds: the export runs on the log's own clock). The GPU-idle alert fires for each
//! GPU at the moment the log says (its idle stretch's start plus alerts.yml's threshold and
//! `for`, within one evaluation and the engine's reorder window), stops when the GPU has work
//! again; the silence alert fires at the silence's start plus its threshold and `for`
//! (scrapes during a silence see the prover's last line age, not the lines after it); and
//! neither fires on the same prover's log without the stall.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{fresh_dir, generated_log};

const EPOCH: &str = "2026-11-01T00:00:00Z";
const EPOCH_MS: u64 = 1_793_491_200_000;
const STEP_MS: u64 = 15_000;
/// `proofline export`'s default reorder window: its gauges trail the log by it, as `watch`'s do.
const REORDER_MS: u64 = 5_000;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// The backtest's firings of `log` (its JSON).
fn backtest(log: &Path, instance: &str) -> Vec<serde_json::Value> {
    let out = Command::new("python3")
        .arg(deploy().join("backtest/backtest_alerts.py"))
        .arg(log)
        .args(["--epoch", EPOCH, "--json", "--proofline"])
        .arg(env!("CARGO_BIN_EXE_proofline"))
        .args(["--", "--label", &format!("instance={instance}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["firings"].as_array().unwrap().clone()
}

/// An alert's threshold (seconds, as ms) and `for`, ms, read from alerts.yml by their
/// markers (`# threshold: NAME`, `# for: NAME`).
fn alert_ms(threshold_marker: &str, for_marker: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(deploy().join("prometheus/alerts.yml")).unwrap();
    let number = |marker: &str| -> String {
        let line = text.lines().find(|l| l.contains(marker)).unwrap();
        line.split_whitespace()
            .take_while(|w| *w != "#")
            .last()
            .unwrap()
            .to_owned()
    };
    let threshold: u64 = number(&format!("# threshold: {threshold_marker}"))
        .parse()
        .unwrap();
    let f = number(&format!("# for: {for_marker}"));
    let for_ms = match f.strip_suffix('m') {
        Some(m) => m.parse::<u64>().unwrap() * 60_000,
        None => f.strip_suffix('s').unwrap().parse::<u64>().unwrap() * 1000,
    };
    (threshold * 1000, for_ms)
}

/// Each GPU's longest idle stretch with the next start, from the log's own lines (worker /
/// 2 is the GPU, cuzk's layout, which `generate` writes).
fn longest_idle(log: &Path) -> Vec<(u32, u64, u64)> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut by_gpu: std::collections::BTreeMap<u32, Vec<(u64, bool)>> = Default::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 5 || f[0] != "TIMELINE" || !f[2].starts_with("GPU_") {
            continue;
        }
        let start = match f[2] {
            "GPU_START" => true,
            "GPU_END" => false,
            _ => continue,
        };
        let worker: u32 = f[4..]
            .iter()
            .find_map(|kv| kv.strip_prefix("worker="))
            .unwrap()
            .parse()
            .unwrap();
        by_gpu
            .entry(worker / 2)
            .or_default()
            .push((f[1].parse().unwrap(), start));
    }
    by_gpu
        .into_iter()
        .map(|(gpu, mut evs)| {
            evs.sort();
            // the busy union's holes: open intervals counted, a hole where none is open
            let (mut open, mut idle_since, mut best) = (0i32, None, (0, 0));
            for (t, start) in evs {
                if start {
                    if open == 0 {
                        if let Some(s) = idle_since.take() {
                            if t - s > best.1 - best.0 {
                                best = (s, t);
                            }
                        }
                    }
                    open += 1;
                } else {
                    open -= 1;
                    if open == 0 {
                        idle_since = Some(t);
                    }
                }
            }
            (gpu, best.0, best.1)
        })
        .collect()
}

/// The longest stretch without a line, from the log's own lines.
fn longest_silence(log: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(log).unwrap();
    let mut offsets: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("TIMELINE,"))
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    offsets.sort_unstable();
    offsets
        .windows(2)
        .map(|w| (w[0], w[1]))
        .max_by_key(|(a, b)| b - a)
        .unwrap()
}

#[test]
fn the_gpu_idle_and_silence_alerts_fire_on_an_old_log_when_the_stall_says_and_not_without_it() {
    let logs = ["--jobs", "8", "--gpus", "2"];
    let stalled_dir = fresh_dir("backtest", "stalled");
    let stalled = generated_log(
        &stalled_dir,
        &[&logs[..], &["--stall", "4:300000"]].concat(),
    );
    let (threshold, for_ms) = alert_ms("idle_seconds", "idle");
    let idle = longest_idle(&stalled);
    assert_eq!(idle.len(), 2);
    let firings = backtest(&stalled, "prover-7");
    for (gpu, from, to) in idle {
        assert!(to - from > 200_000, "GPU {gpu}: the stall is in the log");
        let f: Vec<&serde_json::Value> = firings
            .iter()
            .filter(|f| {
                f["alert"] == "ProoflineGpuIdleBetweenSectors"
                    && f["labels"]["gpu"] == gpu.to_string().as_str()
            })
            .collect();
        assert_eq!(f.len(), 1, "GPU {gpu}: {firings:#?}");
        assert_eq!(f[0]["instance"], "prover-7");
        let fired = f[0]["from_ms"].as_u64().unwrap() - EPOCH_MS;
        let due = from + threshold + for_ms;
        assert!(
            fired >= due && fired <= due + STEP_MS + REORDER_MS,
            "GPU {gpu}: idle from {from} ms, due to fire at {due} ms, fired at {fired} ms"
        );
        // the last evaluation it fired at is before the GPU had work again (as the live
        // gauge sees it, a reorder window late)
        let last = f[0]["to_ms"].as_u64().unwrap() - EPOCH_MS;
        assert!(
            last <= to + REORDER_MS && last + STEP_MS + REORDER_MS > to,
            "GPU {gpu}: busy again at {to} ms, the alert fired until {last} ms"
        );
    }

    // the prover printed nothing while the stalled partition hung, a job in flight: the
    // silence alert fires at the silence's start plus its threshold and `for` (the engine's
    // silence is the log's own: no reorder window), until the next line
    let (threshold, for_ms) = alert_ms("silent_seconds", "silent");
    let (from, to) = longest_silence(&stalled);
    assert!(
        to - from > threshold + for_ms,
        "the silence is long enough to alert"
    );
    let silent: Vec<&serde_json::Value> = firings
        .iter()
        .filter(|f| f["alert"] == "ProoflineProverSilent")
        .collect();
    assert_eq!(silent.len(), 1, "{firings:#?}");
    let fired = silent[0]["from_ms"].as_u64().unwrap() - EPOCH_MS;
    let due = from + threshold + for_ms;
    assert!(
        fired >= due && fired <= due + STEP_MS,
        "silent from {from} ms, due to fire at {due} ms, fired at {fired} ms"
    );
    let last = silent[0]["to_ms"].as_u64().unwrap() - EPOCH_MS;
    assert!(
        last < to && last + STEP_MS >= to,
        "lines again at {to} ms, the alert fired until {last} ms"
    );

    let fine_dir = fresh_dir("backtest", "fine");
    let fine = generated_log(&fine_dir, &logs);
    let quiet = backtest(&fine, "prover-8");
    assert!(
        quiet
            .iter()
            .all(|f| f["alert"] != "ProoflineGpuIdleBetweenSectors"
                && f["alert"] != "ProoflineProverSilent"),
        "{quiet:#?}"
    );
    let _ = std::fs::remove_dir_all(&stalled_dir);
    let _ = std::fs::remove_dir_all(&fine_dir);
}
