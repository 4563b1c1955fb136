#!/usr/bin/env bash
# Peak memory of `proofline analyze` and `proofline watch` on input that never ends a line
# (zeros): it must stay flat whatever the input's size. Usage: scripts/bench-no-newline.sh
# (needs /usr/bin/time; builds the release binary).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p proofline-cli
bin=./target/release/proofline
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-8s %-8s %14s\n' command input max_RSS_KB
for n in 64M 512M 2G; do
  rss=$(head -c "$n" /dev/zero | /usr/bin/time -f '%M' "$bin" analyze - 2>&1 >/dev/null | tail -1)
  printf '%-8s %-8s %14s\n' analyze "$n" "$rss"
done
for n in 64M 512M; do
  head -c "$n" /dev/zero >"$work/zeros.log"
  # watch never ends by itself: 10 s on the file, from its start
  rss=$(/usr/bin/time -f '%M' timeout -s INT 10 "$bin" watch --from-start \
    --metrics-addr 127.0.0.1:0 "$work/zeros.log" 2>&1 >/dev/null | tail -1 || true)
  printf '%-8s %-8s %14s\n' watch "$n" "$rss"
done
