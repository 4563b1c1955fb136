#!/usr/bin/env bash
# Times `proofline analyze` against a straightforward Python analyzer of the same log, in one
# run (taking turns, best of 5 each), and prints the ratio. The Python is what an engineer
# writes by hand for the question proofline answers: each TIMELINE line split at its commas,
# its key=value pairs in a dict, GPU intervals paired by job, partition and worker and merged
# per GPU, synthesis lead per partition, gaps between jobs. It does less than analyze (no
# reorder window, no runs, no verdict, one GPU where the log names none), so the ratio is a
# floor on what analyze saves, not a flattering one.
#
# Usage: scripts/bench-python.sh [workdir] [logs]   (needs python3; logs as made by
#   scripts/bench-analyze.sh in the same workdir, default "100mb cuzk")
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
logs=${2:-100mb cuzk}
for f in $logs; do
  [ -s "$work/$f.log" ] || { echo "no $work/$f.log: run scripts/bench-analyze.sh $work \"$f\" first" >&2; exit 2; }
done
cargo build --release --locked -q -p proofline-cli
bin=./target/release/proofline
py="$work/by_hand.py"
cat >"$py" <<'PY'
import sys
from collections import defaultdict

open_gpu, intervals, synth_end = {}, defaultdict(list), {}
leads, first, last, events = [], {}, {}, 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        at = line.find("TIMELINE,")
        if at < 0:
            continue
        parts = line[at:].rstrip("\r\n").split(",")
        if len(parts) < 4:
            continue
        try:
            ms = int(parts[1])
        except ValueError:
            continue
        ev, job = parts[2], parts[3]
        kv = dict(p.partition("=")[::2] for p in parts[4:])
        events += 1
        part = kv.get("partition", "")
        first.setdefault(job, ms)
        last[job] = max(ms, last.get(job, ms))
        if ev == "SYNTH_END":
            synth_end[(job, part)] = ms
        elif ev == "GPU_START":
            open_gpu[(job, part, kv.get("worker"))] = ms
            if (job, part) in synth_end:
                leads.append(ms - synth_end[(job, part)])
        elif ev == "GPU_END":
            start = open_gpu.pop((job, part, kv.get("worker")), None)
            if start is not None:
                intervals[kv.get("gpu", "0")].append((start, ms))
busy = 0
for ivs in intervals.values():
    ivs.sort()
    lo, hi = ivs[0]
    for s, e in ivs[1:]:
        if s > hi:
            busy, lo, hi = busy + hi - lo, s, e
        else:
            hi = max(hi, e)
    busy += hi - lo
ends = sorted((last[j], first[j]) for j in last)
gaps = [max(0, b[1] - a[0]) for a, b in zip(ends, ends[1:])]
leads.sort()
print(events, len(last), busy, leads[len(leads) // 2] if leads else None,
      sum(gaps) / len(gaps) if gaps else None)
PY

once() {
  local TIMEFORMAT='%3R'
  { time "$@" >"$work/out.txt" 2>/dev/null; } 2>&1
}
calc() { echo "$1" | bc -l; }

printf '%-7s %10s %9s %7s\n' log python_s analyze_s ratio
for f in $logs; do
  p="$work/$f.log"
  cat "$p" >/dev/null
  a=999999 y=999999
  for _ in 1 2 3 4 5; do
    w=$(once "$bin" analyze "$p")
    if [ "$(calc "$w < $a")" = 1 ]; then a=$w; fi
    w=$(once python3 "$py" "$p")
    if [ "$(calc "$w < $y")" = 1 ]; then y=$w; fi
  done
  printf '%-7s %10.3f %9.3f %7.1f\n' "$f" "$y" "$a" "$(calc "$y / $a")"
done
