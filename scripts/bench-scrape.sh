#!/usr/bin/env bash
# A bounded scrape load during a demo with 8 GPUs: 200 scrapes/s of /metrics for 10 s on
# loopback, while the engine takes every event. Usage: scripts/bench-scrape.sh [workdir]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cargo build --release --locked -q -p proofline-cli
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
./target/release/proofline demo --gpus 8 --mixed --jobs 200 --synth-workers 40 --speed 40 \
  --metrics-addr "127.0.0.1:$port" --instance load --out "$work" >"$work/demo.out" 2>"$work/demo.err" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
sleep 2
python3 scripts/scrape-load.py "http://127.0.0.1:$port/metrics" 200 10
wait $demo
trap - EXIT
grep -E '^Telemetry:' "$work/demo.out"
lines=$(grep -c '^TIMELINE' "$work/load-timeline.log")
events=$(python3 -c "import json; print(json.load(open('$work/load-report.json'))['events']['events'])")
echo "TIMELINE lines written: $lines; events the engine took: $events"
[ "$lines" = "$events" ] && echo "every event reached the engine"
