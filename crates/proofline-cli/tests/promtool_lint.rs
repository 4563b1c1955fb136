//! The exposition text, linted by a real `promtool check metrics` (e2e tier): the golden
//! files of `proofline-prometheus`, which its quick tests hold equal to what `/metrics`
//! renders, alone and joined with cuzk's own `/metrics` text.

use std::io::Write;
use std::process::{Command, Stdio};

fn golden(name: &str) -> String {
    let path = format!(
        "{}/../proofline-prometheus/tests/golden/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool not found: install Debian's prometheus package (scripts/test.sh does)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_classic_text_passes_promtool_with_no_lint_finding() {
    let (ok, out) = promtool_check(&golden("known_answers.prom"));
    assert!(ok, "promtool check metrics failed:\n{out}");
    assert!(out.trim().is_empty(), "promtool lint findings:\n{out}");
}

#[test]
fn cuzk_getmetrics_text_joined_with_proofline_passes_promtool() {
    let joined = format!(
        "{}{}",
        golden("cuzk_getmetrics.prom"),
        golden("known_answers.prom")
    );
    let (ok, out) = promtool_check(&joined);
    assert!(ok, "promtool check metrics failed:\n{out}");
}
