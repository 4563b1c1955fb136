#!/usr/bin/env bash
# An interleaved A/B of the working tree against a pinned baseline commit: the layer's span
# cost (criterion, short runs) and `proofline analyze` (wall time of the whole command) on four
# generated logs, a ~100 MB TIMELINE-only one, a ~200 MB one shaped like cuzk's (4 GPUs,
# every proof kind, CUZK_TIMING lines, 50 ms of disorder), the same with what a daemon's
# log has around them (~390 MB: tracing's own line beside each TIMELINE line, a tenth of the
# lines after a log prefix), and the first with a key cuzk does not write after every line
# (another prover's lines, which the parser's fast path for cuzk's form turns down: a change
# that made them cost more went unseen on the three others), each side taking turns, ROUNDS
# times, the side that goes first changing each round (after an untimed run of each). It
# ends with, per figure, each side's median and the new/old ratio: its median and its spread
# (min..max over the rounds, each ratio taken within one round, so that a slow spell of the
# machine hits both sides of it).
#
# Usage: scripts/bench-ab.sh [BASELINE] [ROUNDS]
#   BASELINE: a commit (default: the pinned one below, the last before the engine was split
#   into rooms, where the analyze regression of issue #31 was measured from)
#   ROUNDS: default 7
# Run it for each change that touches a hot path (the layer's callbacks, the reader, the
# engine) and record the summary in the commit message or BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PINNED=0d746de
old_rev=${1:-$PINNED}
rounds=${2:-7}
old=/tmp/proofline-ab-old
old_target=/tmp/proofline-ab-old-target
new_target=$(pwd)/target
[ -d "$old" ] || git worktree add -q --detach "$old" "$old_rev"
(cd "$old" && git checkout -q --detach "$old_rev" && CARGO_TARGET_DIR=$old_target \
  cargo build --release --locked -q -p proofline-cli && CARGO_TARGET_DIR=$old_target \
  cargo bench --locked -q -p proofline --bench layer --no-run 2>/dev/null)
cargo build --release --locked -q -p proofline-cli
cargo bench --locked -q -p proofline --bench layer --no-run 2>/dev/null
bench_bin() { ls -t "$1"/release/deps/layer-* | grep -v '\.d$' | head -1; }
old_bench=$(bench_bin "$old_target")
new_bench=$(bench_bin "$new_target")
plain=/tmp/proofline-ab.log
cuzk=/tmp/proofline-ab-cuzk.log
daemon=/tmp/proofline-ab-daemon.log
foreign=/tmp/proofline-ab-foreign.log
gen="$new_target/release/proofline generate"
[ -s "$plain" ] || $gen --jobs 30000 --mixed --gpus 2 --synth-workers 20 --shuffle-ms 5 -o "$plain"
[ -s "$cuzk" ] || $gen --jobs 30000 --mixed --gpus 4 --cuzk-timing --shuffle-ms 50 -o "$cuzk"
[ -s "$daemon" ] || { $gen --jobs 30000 --mixed --gpus 4 --cuzk-timing --shuffle-ms 50 \
  --log-lines --prefixed-pct 10 -o "$daemon.part" && mv "$daemon.part" "$daemon"; }
[ -s "$foreign" ] || { sed 's/$/,stage=x/' "$plain" >"$foreign.part" && mv "$foreign.part" "$foreign"; }
cat "$plain" "$cuzk" "$daemon" "$foreign" >/dev/null
out=/tmp/proofline-ab.txt
: >"$out"
# the mapped span, an unmapped one, and cuzk's own shapes (its GPU span with every field, its
# TIMELINE and CUZK_TIMING lines logged through tracing: rows a baseline older than the
# eleventh session lacks, shown for the new side alone), each with the Registry alone
filter='span_lifecycle/(timeline|registry)/(mapped|unmapped|gpu_worker|timeline_line)$'
filter+='|span_lifecycle/(registry|timeline_worker_draining)/timing_line$'
layer() { # round, bench binary, side
  "$2" --bench "$filter" --warm-up-time 1 --measurement-time 3 --noplot 2>/dev/null |
    awk -v round="$1" -v side="$3" '/^span_lifecycle/ {name=$1} /time:/ {
      v=$(NF-3); u=$(NF-2); if (u=="µs"||u=="us") v*=1000; print round, side, name"_ns", v }'
}
analyze() { # round, binary, side, log, name
  local s e
  s=$(date +%s.%N); "$2" analyze --format json "$4" >/dev/null; e=$(date +%s.%N)
  echo "$1 $3 $5 $(echo "$e - $s" | bc -l)"
}
# Each pair of analyze runs follows an untimed run of both sides on its log: in a fixed order
# without it, the first analyze after the criterion benches read 0.1 s (50 %) slower on the
# 100 MB log, always the old side's, which made the new look 0.93x when it was 1.3x.
one_round() { # round, first side, second side
  local side
  for side in "$2" "$3"; do
    if [ "$side" = old ]; then layer "$1" "$old_bench" old; else layer "$1" "$new_bench" new; fi
  done
  local file name bin
  for file in "$plain" "$cuzk" "$daemon" "$foreign"; do
    name=analyze_100mb_s
    [ "$file" = "$cuzk" ] && name=analyze_cuzk_200mb_s
    [ "$file" = "$daemon" ] && name=analyze_daemon_390mb_s
    [ "$file" = "$foreign" ] && name=analyze_foreign_118mb_s
    "$old_target/release/proofline" analyze --format json "$file" >/dev/null
    "$new_target/release/proofline" analyze --format json "$file" >/dev/null
    for side in "$2" "$3"; do
      bin=$old_target/release/proofline
      [ "$side" = new ] && bin=$new_target/release/proofline
      analyze "$1" "$bin" "$side" "$file" "$name"
    done
  done
}
for i in $(seq "$rounds"); do
  # the sides take turns going first, round by round
  if [ $((i % 2)) = 1 ]; then one_round "$i" old new; else one_round "$i" new old; fi | tee -a "$out"
done
echo "baseline $old_rev, $rounds rounds (new/old: median, min..max of the per-round ratios)"
python3 - "$out" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, side, name, v = line.split()
    runs.setdefault(name, {}).setdefault(int(r), {})[side] = float(v)
for name, by_round in sorted(runs.items()):
    pairs = [(d["old"], d["new"]) for d in by_round.values() if "old" in d and "new" in d]
    if not pairs:
        continue
    old = statistics.median(o for o, _ in pairs)
    new = statistics.median(n for _, n in pairs)
    ratios = [n / o for o, n in pairs if o > 0]
    print(f"{name:45} old {old:10.4g}  new {new:10.4g}  new/old {statistics.median(ratios):.3f} ({min(ratios):.3f}..{max(ratios):.3f})")
# the layer's cost over the Registry alone, round by round, against issue #31's goal
layer = {"mapped": "span_lifecycle/timeline/mapped_ns",
         "gpu_worker": "span_lifecycle/timeline/gpu_worker_ns",
         "timeline_line": "span_lifecycle/timeline/timeline_line_ns",
         "timing_line": "span_lifecycle/timeline_worker_draining/timing_line_ns"}
for shape, row in layer.items():
    base = runs.get(f"span_lifecycle/registry/{shape}_ns", {})
    out = []
    for side in ("old", "new"):
        costs = [by[side] - base[r][side] for r, by in runs.get(row, {}).items()
                 if side in by and side in base.get(r, {})]
        if costs:
            out.append(f"{side} {statistics.median(costs):6.1f} ns ({min(costs):.1f}..{max(costs):.1f})")
    if out:
        print(f"the layer's cost over the Registry, {shape:14} {'  '.join(out)}  (goal: <= 150 ns)")
EOF
