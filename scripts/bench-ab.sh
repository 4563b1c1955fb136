#!/usr/bin/env bash
# An interleaved A/B of two revisions: the layer's span cost (criterion, short runs) and
# `proofline analyze` on a ~100 MB generated log (wall time), each taking turns, ROUNDS times.
# Usage: scripts/bench-ab.sh OLD_REV [ROUNDS]   (the new side is the working tree)
# Prints one line per run; the spread of each side is what to compare, not one figure.
set -euo pipefail
cd "$(dirname "$0")/.."
old_rev=$1
rounds=${2:-5}
old=/tmp/proofline-ab-old
new_target=$(pwd)/target
[ -d "$old" ] || git worktree add -q "$old" "$old_rev"
(cd "$old" && git checkout -q "$old_rev" && CARGO_TARGET_DIR=/tmp/proofline-ab-old-target \
  cargo build --release --locked -q -p proofline-cli && CARGO_TARGET_DIR=/tmp/proofline-ab-old-target \
  cargo bench --locked -q -p proofline --bench layer --no-run 2>/dev/null)
cargo build --release --locked -q -p proofline-cli
cargo bench --locked -q -p proofline --bench layer --no-run 2>/dev/null
bench_bin() { ls -t "$1"/release/deps/layer-* | grep -v '\.d$' | head -1; }
old_bench=$(bench_bin /tmp/proofline-ab-old-target)
new_bench=$(bench_bin "$new_target")
log=/tmp/proofline-ab.log
[ -s "$log" ] || "$new_target/release/proofline" generate --jobs 30000 --mixed --gpus 2 --synth-workers 20 --shuffle-ms 5 -o "$log"
cat "$log" >/dev/null
filter='span_lifecycle/timeline/(mapped|unmapped)$|span_lifecycle/registry/(mapped|unmapped)$'
layer() { # bench binary, label
  "$1" --bench "$filter" --warm-up-time 1 --measurement-time 3 --noplot 2>/dev/null |
    awk -v side="$2" '/^span_lifecycle/ {name=$1} /time:/ {print side, name, $(NF-3), $(NF-2)}'
}
analyze() { # binary, label
  local s e
  s=$(date +%s.%N); "$1" analyze "$log" >/dev/null; e=$(date +%s.%N)
  echo "$2 analyze_100mb_s $(echo "$e - $s" | bc -l | cut -c1-6)"
}
for i in $(seq "$rounds"); do
  layer "$old_bench" old; layer "$new_bench" new
  analyze /tmp/proofline-ab-old-target/release/proofline old
  analyze "$new_target/release/proofline" new
done
