//! Silence never: what a prover's stderr shows when the layer gets nothing it can use, read
//! from a real process.

use std::process::Command;

/// Runs the `silent` binary; its stderr and its warning count.
fn silent(mode: &str, ms: u64) -> (String, u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_silent"))
        .args([mode, &ms.to_string()])
        .output()
        .expect("run silent");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "silent failed: {stdout}\n{stderr}");
    let n = stdout
        .trim()
        .strip_prefix("warnings=")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {stdout:?}"));
    (stderr, n)
}

#[test]
fn spans_hidden_by_a_filter_are_named_once() {
    let (stderr, n) = silent("filtered", 1500);
    assert_eq!(n, 1, "{stderr}");
    assert_eq!(stderr.matches("proofline:").count(), 1, "{stderr}");
    assert!(
        stderr.contains("a filter is likely hiding them"),
        "{stderr}"
    );
    assert!(stderr.contains("EnvFilter::new(\"info\")"), "{stderr}");
}

#[test]
fn pickups_without_gpu_start_name_the_two_fixes() {
    let (stderr, n) = silent("no-gpu-start", 1500);
    assert_eq!(n, 1, "{stderr}");
    assert!(stderr.contains("no GPU_START"), "{stderr}");
    assert!(stderr.contains("Builder::map"), "{stderr}");
    assert!(stderr.contains("Adopting proofline in cuzk"), "{stderr}");
}

#[test]
fn a_prover_whose_events_arrive_hears_nothing() {
    // the same pickups, short of the delay: no warning
    let (stderr, n) = silent("no-gpu-start", 100);
    assert_eq!(n, 0, "{stderr}");
    assert!(!stderr.contains("proofline:"), "{stderr}");
}

#[test]
fn events_from_both_sources_are_named_once() {
    let (stderr, n) = silent("mixed", 400);
    assert_eq!(n, 1, "{stderr}");
    assert_eq!(
        stderr.matches("both from the prover's own lines").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains(".cuzk_timeline_events()"), "{stderr}");
}
