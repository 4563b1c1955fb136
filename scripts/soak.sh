#!/usr/bin/env bash
# The layer's memory over a prover's life, compressed: the threaded simulator at 10,000x with
# the layer, /metrics (scraped every second) and the OTLP exporter (to a local collector),
# for SECTORS sectors; prints `sectors,rss_kb,heap_kb,metrics_bytes` every EVERY sectors.
# The live heap (a counting allocator) is what the layer keeps; RSS also holds what the
# allocator keeps for its threads. Usage: scripts/soak.sh [SECTORS] [EVERY]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p proofline-tests --bin soak
echo "# simulator alone (no subscriber), 10,000 sectors"
SOAK_BARE=1 ./target/release/soak 10000 2500
echo "# with the layer and both exporters"
./target/release/soak "${1:-100000}" "${2:-10000}"
