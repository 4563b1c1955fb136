#!/usr/bin/env bash
# Peak memory (max RSS) of analyze, chart, export and watch against the log's size: generated
# logs of 1k, 10k and 20k PoRep jobs, and a log of 1 million jobs that start and never
# finish. Flat, or a stated small slope, is the target (BENCHMARKS.md).
# Usage: scripts/bench-memory.sh [WATCH_SECONDS]   (needs /usr/bin/time; builds release)
set -euo pipefail
cd "$(dirname "$0")/.."
watch_s=${1:-20}
cargo build --release --locked -q -p proofline-cli
bin=./target/release/proofline
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in 1000 10000 20000; do
  "$bin" generate --jobs "$n" --gpus 2 -o "$work/$n.log"
done
awk 'BEGIN { for (j = 0; j < 1000000; j++) printf "TIMELINE,%d,SYNTH_START,stuck-%d,partition=0\n", j, j }' >"$work/open.log"
rss() { /usr/bin/time -o "$work/t" -f '%M' "$@" >/dev/null 2>&1 || true; tail -1 "$work/t"; }
printf '| %-8s | %-22s | %10s | %12s |\n' command log size max_RSS_MB
printf '|%s|%s|%s|%s|\n' ---------- ------------------------ ------------ --------------
for log in 1000 10000 20000 open; do
  f="$work/$log.log"
  size=$(du -m "$f" | cut -f1)
  name=$([ "$log" = open ] && echo "1M open jobs" || echo "$log jobs")
  row() { printf '| %-8s | %-22s | %7s MB | %12s |\n' "$1" "$name" "$size" "$(($2 / 1024))"; }
  row analyze "$(rss "$bin" analyze "$f")"
  if [ "$log" != open ]; then
    row chart "$(rss "$bin" chart "$f" -o "$work/c.html")"
    row export "$(rss "$bin" export "$f" -o "$work/e.json")"
    # watch never ends by itself: WATCH_SECONDS on the whole file, from its start
    row watch "$(rss timeout -s INT "$watch_s" "$bin" watch --from-start --metrics-addr 127.0.0.1:0 "$f")"
  fi
done
