#!/usr/bin/env bash
# Times `proofline analyze` against `grep -c '^TIMELINE'` on the same generated logs, in one
# run (taking turns, best of 7 each by default), and reports throughput, the ratio to grep,
# and peak memory (max RSS). The logs: a ~100 MB and a ~1 GB log of TIMELINE lines alone; a
# ~200 MB one shaped like cuzk's (4 GPUs, every proof kind, CUZK_TIMING lines, 50 ms of
# disorder), and the same with what a daemon's log has around them (~390 MB: tracing's own
# line beside each TIMELINE line, a tenth of the lines after a log prefix), as
# scripts/bench-ab.sh makes them.
#
# Beside the wall time it gives analyze's CPU time (user + system) in its fastest run, and
# what that CPU time says:
#   cores    how many of the two cores the run kept busy (CPU / wall);
#   floor    the ratio to grep if both cores were busy all along (CPU / 2 / grep's wall):
#            no better split of the work between analyze's two threads can go below it;
#   cpu@2.5  the CPU time a run at 2.5x grep's wall would have, at this run's use of the
#            cores (2.5 x grep's wall x cores): what analyze's CPU time must come down to.
#
# After the table it gives the ratio taken within each pair of runs (analyze's and grep's,
# one after the other, the one that goes first changing each pair): its median and range.
# The table's ratio is of each side's best run, which may come from different spells of the
# machine; the pairs' median is the steadier figure on a machine whose speed moves.
#
# Usage: [RUNS=N] scripts/bench-analyze.sh [workdir] [logs]   (needs bash, /usr/bin/time, bc)
#   logs: default "100mb 1gb cuzk daemon"; RUNS: runs of each command per log (default 7)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
logs=${2:-100mb 1gb cuzk daemon}
runs=${RUNS:-7}
mkdir -p "$work"
cargo build --release --locked -q -p proofline-cli
bin=./target/release/proofline

gen() { # file, generate's arguments
  local file=$1
  shift
  [ -s "$file" ] || { $bin generate "$@" -o "$file.part" && mv "$file.part" "$file"; }
}
for f in $logs; do
  case $f in
    100mb) gen "$work/100mb.log" --jobs 30000 --mixed --gpus 2 --synth-workers 20 --shuffle-ms 5 ;;
    1gb) gen "$work/1gb.log" --jobs 300000 --mixed --gpus 2 --synth-workers 20 --shuffle-ms 5 ;;
    cuzk) gen "$work/cuzk.log" --jobs 30000 --mixed --gpus 4 --cuzk-timing --shuffle-ms 50 ;;
    daemon) gen "$work/daemon.log" --jobs 30000 --mixed --gpus 4 --cuzk-timing --shuffle-ms 50 \
      --log-lines --prefixed-pct 10 ;;
    *) echo "unknown log: $f (100mb, 1gb, cuzk, daemon)" >&2; exit 2 ;;
  esac
done

# prints "wall cpu" of one run, in seconds; to a file, not /dev/null: GNU grep stops at the
# first match when its output is /dev/null
# (bash's own `time`, to the millisecond: /usr/bin/time's wall time has two decimals)
once() {
  local TIMEFORMAT='%3R %3U %3S'
  { time "$@" >"$work/out.txt" 2>/dev/null; } 2>"$work/time.txt"
  awk '{printf "%.3f %.3f\n", $1, $2 + $3}' "$work/time.txt"
}
rss() { /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1; }
calc() { echo "$1" | bc -l; }
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
pair_lines=()

printf '%-7s %7s %9s %9s %7s %9s %6s %7s %8s %11s\n' \
  log MB analyze_s grep_s ratio analyze_cpu cores floor cpu@2.5 analyze_MB/s
for f in $logs; do
  p="$work/$f.log"
  mb=$(calc "$(stat -L -c %s "$p") / 1048576")
  cat "$p" >/dev/null # warm the page cache for both
  # the two commands take turns, RUNS runs each, best of each: a slow spell of this shared
  # machine then falls on both rather than on one
  # (which of the two goes first changes each pair: going second is not always analyze's)
  a=999999 ac=0 g=999999 pairs=()
  for i in $(seq "$runs"); do
    [ $((i % 2)) = 0 ] && read -r wg _ < <(once grep -c '^TIMELINE' "$p")
    read -r w c < <(once "$bin" analyze "$p")
    [ $((i % 2)) = 1 ] && read -r wg _ < <(once grep -c '^TIMELINE' "$p")
    if [ "$(calc "$w < $a")" = 1 ]; then a=$w ac=$c; fi
    if [ "$(calc "$wg < $g")" = 1 ]; then g=$wg; fi
    pairs+=("$(calc "$w / $wg")")
  done
  cores=$(calc "$ac / $a")
  printf '%-7s %7.1f %9.3f %9.3f %7.2f %11.3f %6.2f %7.2f %8.3f %11.1f\n' "$f" "$mb" "$a" "$g" \
    "$(calc "$a / $g")" "$ac" "$cores" "$(calc "$ac / 2 / $g")" "$(calc "2.5 * $g * $cores")" \
    "$(calc "$mb / $a")"
  pair_lines+=("$(printf '%-7s %s over %d pairs' "$f" "$(ratio_summary "${pairs[@]}")" \
    "$runs")")
done
echo
echo "ratio to grep within each pair of runs: median (range)"
printf '%s\n' "${pair_lines[@]}"
echo
for f in $logs; do
  echo "peak RSS analyze $f: $(rss "$bin" analyze "$work/$f.log") KiB"
done
