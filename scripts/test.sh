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

# VictoriaMetrics (victoria-metrics, vmctl, vmalert): the global level of the fleet test's
# second run, and the alerts' backtest (deploy/backtest/).
if ! command -v victoria-metrics >/dev/null || ! command -v vmalert >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends victoria-metrics >/dev/null
  else
    echo "scripts/test.sh: install Debian's victoria-metrics first" >&2
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

# Real journal files for the journal input's tests: journalctl reads them, Debian's
# systemd-journal-remote writes them from journald's export format (no journald needed).
if ! command -v journalctl >/dev/null || [ ! -x /lib/systemd/systemd-journal-remote ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      systemd systemd-journal-remote >/dev/null
  else
    echo "scripts/test.sh: install Debian's systemd and systemd-journal-remote first" >&2
    exit 1
  fi
fi

# otlp-embedded (the Jaeger test's collector and UI) compiles its protobufs with protoc.
if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null
  else
    echo "scripts/test.sh: install Debian's protobuf-compiler (protoc) first" >&2
    exit 1
  fi
fi

# cargo-deb, the ecosystem's tool, builds the Debian package a test installs (dpkg -i into a
# private root).
if ! cargo deb --version >/dev/null 2>&1; then
  cargo install cargo-deb --locked --version 3.8.0 --quiet
fi

# Python's jsonschema validates the Grafana dashboards against Grafana's schema.
python3 -c 'import jsonschema' 2>/dev/null || python3 -m pip install -q jsonschema
# The Compose Specification's JSON schema, as Debian packages it (docker-compose's
# compose_spec.json), for the check of deploy/compose.yaml: extracted, not installed.
schema_dir=target/compose-spec
if [ ! -f "$schema_dir/compose_spec.json" ]; then
  mkdir -p "$schema_dir/deb"
  (cd "$schema_dir/deb" && { apt-get download -qq docker-compose 2>/dev/null ||
    { apt-get update -qq && apt-get download -qq docker-compose; }; } &&
    dpkg-deb -x docker-compose_*.deb x &&
    cp x/usr/lib/python3/dist-packages/compose/config/compose_spec.json ..)
  rm -rf "$schema_dir/deb"
fi
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install -q pyyaml
# the Prometheus project's Python parsers, for the exposition test
python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q prometheus_client

cargo fmt --all -- --check
# the e2e feature adds the tests that start programs from outside cargo (see
# crates/proofline-cli/Cargo.toml); without it, `cargo test --workspace` is the quick tier
cargo clippy --workspace --all-targets --locked --features proofline-cli/e2e -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --lib --locked -q
# every library crate packages as crates.io would take it and builds from its package alone
# (what a prover's team depending on a release gets; the binary and the test crates aside)
# (cargo takes a registry crate as never changing: the copies built from an earlier run's
# packages of the same version, in the target directory and in CARGO_HOME's sources of its
# temporary registry, would be used instead of today's; each run packages from scratch, in a
# target directory of its own)
rm -rf target/package target/package-check "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/proofline*-0.*
cargo package --locked -q --target-dir target/package-check -p proofline-core -p proofline -p proofline-prometheus \
  -p proofline-otlp -p proofline-sim
# the public API against the last accepted one (scripts/semver-baseline), with the
# ecosystem's tool: a breaking change without a version bump fails here
if ! cargo semver-checks --version 2>/dev/null | grep -q ' 0.51.0'; then
  cargo install cargo-semver-checks --locked --version 0.51.0 --quiet
fi
baseline=$(grep -v '^#' scripts/semver-baseline)
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
  # a shallow clone: fetch the history the baseline is in, if the origin can be reached
  git fetch -q --unshallow 2>/dev/null || true
fi
if git cat-file -e "$baseline^{commit}" 2>/dev/null; then
  cargo semver-checks --baseline-rev "$baseline" \
    -p proofline-core -p proofline -p proofline-prometheus -p proofline-otlp -p proofline-sim
else
  echo "scripts/test.sh: the API baseline $baseline is not in this clone: the semver check is SKIPPED" >&2
fi
cargo test --workspace --locked --features proofline-cli/e2e
