#!/usr/bin/env bash
# Instructions, not nanoseconds: what one span (or logged line) of each of cuzk's shapes costs
# the prover's thread, the Registry alone and with the TimelineLayer, counted by callgrind
# in `one_span` of `crates/proofline/examples/span_instructions.rs` (20 000 of each; the
# layer's worker thread is not counted). A count does not move with the machine's spells;
# the criterion bench's rows (`cargo bench -p proofline --bench layer`) spread by tens of
# nanoseconds from one run to the next. It says nothing of cache misses, locks' contention or
# atomic operations' cost, so a change it likes is then timed with the bench.
#
# Usage: scripts/layer-instructions.sh [BASELINE] [SHAPES]
#   BASELINE: a commit to count beside the working tree (its build runs this tree's example
#   and the bench's shapes, copied in: they use only the layer's public API); none: the
#   working tree alone
#   SHAPES: default "mapped gpu_worker gpu_worker_plain timeline_line timing_line"
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
base=${1:-}
shapes=${2:-mapped gpu_worker gpu_worker_plain timeline_line timing_line}
n=20000
example=crates/proofline/examples/span_instructions.rs
shapes_rs=crates/proofline/benches/common/shapes.rs
cargo build --release --locked -q -p proofline --example span_instructions
new_bin=$(pwd)/target/release/examples/span_instructions
old_bin=
if [ -n "$base" ]; then
  old_rev=$(git rev-parse --verify "$base^{commit}")
  old=/tmp/proofline-layer-ir-old
  old_target=/tmp/proofline-layer-ir-old-target
  git worktree prune
  [ -d "$old" ] || git worktree add -q --detach "$old" "$old_rev"
  (cd "$old" && git checkout -q --detach -f "$old_rev")
  mkdir -p "$old/$(dirname "$example")" "$old/$(dirname "$shapes_rs")"
  cp "$example" "$old/$example"
  cp "$shapes_rs" "$old/$shapes_rs"
  (cd "$old" && CARGO_TARGET_DIR=$old_target cargo build --release --locked -q -p proofline \
    --example span_instructions)
  old_bin=$old_target/release/examples/span_instructions
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() { # binary, shape, subscriber: instructions per span on the calling thread
  valgrind --tool=callgrind --separate-threads=yes --toggle-collect='*one_span*' \
    --callgrind-out-file="$out/cg.%p" "$1" "$2" "$3" "$n" >/dev/null 2>"$out/err" ||
    { cat "$out/err" >&2; exit 1; }
  local f
  f=$(ls "$out"/cg.*-01)
  callgrind_annotate "$f" 2>/dev/null | awk -v n="$n" '/PROGRAM TOTALS/ {
    gsub(",", "", $1); printf "%d", $1 / n }'
  rm -f "$out"/cg.*
}
printf '%-18s %10s %10s %12s' shape registry layer "layer's cost"
[ -n "$old_bin" ] && printf ' %12s %8s' "before ($base)" ratio
echo
for s in $shapes; do
  r=$(count "$new_bin" "$s" registry)
  l=$(count "$new_bin" "$s" layer)
  printf '%-18s %10d %10d %12d' "$s" "$r" "$l" $((l - r))
  if [ -n "$old_bin" ]; then
    ro=$(count "$old_bin" "$s" registry)
    lo=$(count "$old_bin" "$s" layer)
    printf ' %12d %8.3f' $((lo - ro)) "$(echo "($l - $r) / ($lo - $ro)" | bc -l)"
  fi
  echo
done
echo "(instructions per span on the prover's thread, $n spans, callgrind)"
