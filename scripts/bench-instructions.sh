#!/usr/bin/env bash
# Instructions, not seconds: `proofline analyze` of two generated logs under callgrind, the
# instruction count of both threads together and of each, for the working tree and a baseline
# commit (TOP: the functions of both threads together). Valgrind runs one thread at a time:
# the engine's thread, which is handed a block unparsed whenever it finds none ready, then
# parses nearly every block itself, so the split between the threads is not a real run's
# (a baseline older than that hand-over parses on thread 2); the sum is what to compare. A
# count does not move with the machine's spells (the same build on the same log gives the same
# count to within 0.2 %, the waits on the channel varying), so a change of 1 % shows, where
# interleaved wall times on this shared 2-core machine spread by +-25 %. It says
# nothing of cache misses or mispredicted branches: a change that saves instructions is
# then timed with `scripts/bench-ab.sh` (a change that moved work between the threads, or
# traded instructions for memory traffic, can read better here than it runs).
#
# Usage: scripts/bench-instructions.sh [BASELINE] [TOP]
#   BASELINE: a commit (default HEAD: the working tree's uncommitted change)
#   TOP: also list the TOP functions by their own instructions (default 0)
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
# resolved here, in this tree (a relative one such as HEAD would be read in the baseline's
# worktree otherwise, and stay at what it was when that was made)
old_rev=$(git rev-parse --verify "${1:-HEAD}^{commit}")
top=${2:-0}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
old=/tmp/proofline-ir-old
old_target=/tmp/proofline-ir-old-target
new_target=$(pwd)/target
git worktree prune
[ -d "$old" ] || git worktree add -q --detach "$old" "$old_rev"
(cd "$old" && git checkout -q --detach "$old_rev" && CARGO_TARGET_DIR=$old_target \
  cargo build --release --locked -q -p proofline-cli)
cargo build --release --locked -q -p proofline-cli
# small logs (callgrind runs some 50 times slower): the bench logs' shapes, a fifth and a
# tenth of their jobs; each written aside and moved into place (a cut one is not reused)
plain=/tmp/proofline-ir.log
cuzk=/tmp/proofline-ir-cuzk.log
gen="$new_target/release/proofline generate"
[ -s "$plain" ] || { $gen --jobs 6000 --mixed --gpus 2 --synth-workers 20 --shuffle-ms 5 \
  -o "$plain.part" && mv "$plain.part" "$plain"; }
[ -s "$cuzk" ] || { $gen --jobs 3000 --mixed --gpus 4 --cuzk-timing --shuffle-ms 50 \
  -o "$cuzk.part" && mv "$cuzk.part" "$cuzk"; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() { # side, binary, log name, log
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/$1.$3.%p" \
    "$2" analyze "$4" >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
}
count old "$old_target/release/proofline" plain "$plain"
count new "$new_target/release/proofline" plain "$plain"
count old "$old_target/release/proofline" cuzk "$cuzk"
count new "$new_target/release/proofline" cuzk "$cuzk"
echo "instructions (thread 1: main, the engine's; 2: proofline-read), baseline ${1:-HEAD} ($old_rev)"
python3 - "$out" "$top" <<'EOF'
import collections, glob, os, re, subprocess, sys
out, top = sys.argv[1], int(sys.argv[2])

def profile(path):
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=no", path],
                          capture_output=True, text=True, check=True).stdout
    total, funcs = 0, collections.Counter()
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in m.group(2):
            total = n
            continue
        name = re.sub(r"\s+\[.*\]$", "", m.group(2))
        name = re.sub(r"\s*\(\d[\d,]*x\)$", "", name.split(":", 1)[-1])
        funcs[name] += n
    return total, funcs

runs = {}
for path in glob.glob(os.path.join(out, "*.*.*")):
    side, log, rest = os.path.basename(path).split(".", 2)
    if "-" not in rest:
        continue  # the file of the whole process (empty with --separate-threads)
    runs[(log, side, int(rest.split("-")[1]))] = profile(path)
def both(log, side):
    total, funcs = 0, collections.Counter()
    for (l, s, _), (n, f) in runs.items():
        if (l, s) == (log, side):
            total += n
            funcs.update(f)
    return total, funcs

for log in ("plain", "cuzk"):
    old, new = both(log, "old"), both(log, "new")
    if old[0] and new[0]:
        print(f"{log:6} both threads: old {old[0]:>14,}  new {new[0]:>14,}  new/old {new[0] / old[0]:.4f}")
        if top:
            for name, n in new[1].most_common(top):
                o = old[1].get(name, 0)
                print(f"    {n:>13,} ({o:>13,} before)  {name[:110]}")
    for thread in sorted({t for (l, _, t) in runs if l == log}):
        old, new = runs.get((log, "old", thread)), runs.get((log, "new", thread))
        if not old or not new:
            continue
        print(f"{log:6} thread {thread}: old {old[0]:>14,}  new {new[0]:>14,}  new/old {new[0] / old[0]:.4f}")
EOF
