#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every check CI runs.
# Works on a fresh Debian machine with a Rust toolchain (run as root for apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
