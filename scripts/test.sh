#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every check CI runs.
# Works on a fresh Debian machine with a Rust toolchain (run as root for apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."

# Real components the tests start on 127.0.0.1: Prometheus and promtool (Debian packages).
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      prometheus prometheus-alertmanager >/dev/null
  else
    echo "scripts/test.sh: install Debian's prometheus package (promtool, prometheus) first" >&2
    exit 1
  fi
fi

# A real headless browser opens the HTML chart.
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "scripts/test.sh: install Debian's chromium first" >&2
    exit 1
  fi
fi

# Python's jsonschema validates the Grafana dashboards against Grafana's schema.
python3 -c 'import jsonschema' 2>/dev/null || python3 -m pip install -q jsonschema
# the Prometheus project's Python parsers, for the exposition test
python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q prometheus_client

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --lib --locked -q
cargo test --workspace --locked
