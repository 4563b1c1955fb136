//! What a prover's stderr shows when telemetry is dropped: one warning, however many events
//! are dropped, printed by the layer's worker; nothing when everything fits. A real process,
//! so that the real stderr is read.

use std::process::Command;

const WARNING: &str = "proofline: telemetry queue full or closed; dropping TIMELINE events";

/// Runs the flood binary; its stderr and its counters (received, dropped).
fn flood(spans: u64, capacity: u64) -> (String, u64, u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_flood"))
        .args([spans.to_string(), capacity.to_string()])
        .output()
        .expect("run flood");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "flood failed: {stdout}\n{stderr}");
    let count = |key: &str| -> u64 {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {stdout:?}"))
    };
    (stderr, count("received="), count("dropped="))
}

#[test]
fn many_drops_one_warning() {
    // a queue of one entry per thread, 20 000 spans: thousands of events dropped
    let (stderr, received, dropped) = flood(20_000, 1);
    assert!(dropped > 1000, "received {received}, dropped {dropped}");
    assert_eq!(received + dropped, 20_000 * 3);
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");
}

#[test]
fn nothing_dropped_nothing_said() {
    let (stderr, received, dropped) = flood(400, 4096);
    assert_eq!((received, dropped), (400 * 3, 0));
    assert!(!stderr.contains("proofline"), "{stderr}");
}
