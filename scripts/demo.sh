#!/usr/bin/env bash
# The demo: simulate a cuzk-shaped prover (8 PoRep sectors, one GPU, two workers, a
# synthesis stall before sector 5), write its TIMELINE log, and analyze it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT_DIR:-out}
mkdir -p "$out"
cargo build --release --locked -q -p proofline-cli
./target/release/proofline generate --jobs 8 --stall 5:150000 --shuffle-ms 20 -o "$out/demo-timeline.log"
./target/release/proofline analyze "$out/demo-timeline.log"
echo
echo "log: $out/demo-timeline.log  (try: ./target/release/proofline analyze --format json $out/demo-timeline.log)"
