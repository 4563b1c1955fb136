#!/usr/bin/env bash
# How often `proofline compare` calls a change between two runs of one configuration: pairs
# of generated logs that differ only in their seed, over seven configurations; prints every
# figure called (there should be none, or about 1 % of the pairs at the default --alpha).
#
# Usage: scripts/compare-noise.sh [FIRST_SEED] [PAIRS]   (defaults 30, 10 pairs a configuration)
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-30}
pairs=${2:-10}
cargo build --release --locked -q -p proofline-cli
p=target/release/proofline
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
calls=0
total=0
for cfg in "--synth-workers 10" "--synth-workers 4" "--synth-workers 12 --gpus 2" \
  "--synth-workers 2" "--synth-workers 7" "--mixed" "--synth-workers 10 --workers-per-gpu 1"; do
  for ((i = 0; i < pairs; i++)); do
    a=$((first + 2 * i)) b=$((first + 2 * i + 1))
    # shellcheck disable=SC2086
    $p generate --jobs 20 --cuzk-timing --seed "$a" $cfg -o "$dir/a.log"
    # shellcheck disable=SC2086
    $p generate --jobs 20 --cuzk-timing --seed "$b" $cfg -o "$dir/b.log"
    called=$($p compare --format json "$dir/a.log" "$dir/b.log" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print(" ".join("%s:%s:%+.1f%%" % (f["name"], f["change"], f["delta_ratio"] * 100)
               for f in c["figures"] if f["change"] in ("better", "worse")))')
    total=$((total + 1))
    if [ -n "$called" ]; then
      calls=$((calls + 1))
      echo "$cfg, seeds $a/$b: $called"
    fi
  done
done
echo "$calls of $total pairs had a figure called"
