#!/usr/bin/env bash
# Two command lines timed in turn, N pairs (A first in odd pairs, B first in even ones),
# after one untimed run of each. It prints each side's median and fastest wall time and
# median CPU time (user + system), and B/A: the median of the ratios taken within each pair,
# and their range. A slow spell of the machine then falls on both sides of a pair rather
# than on one side. Run it A against A first: the ratio's spread is how small a change it
# can tell from nothing on this machine today.
#
# Usage: scripts/ab-commands.sh "COMMAND A" "COMMAND B" [PAIRS]   (default 21; bash, bc)
#   e.g. scripts/ab-commands.sh "/tmp/old analyze big.log" "target/release/proofline analyze big.log" 41
set -euo pipefail
a=$1 b=$2 pairs=${3:-21}
once() { # "wall cpu" of one run, in seconds; output to a file (GNU grep stops early on /dev/null)
  local TIMEFORMAT='%3R %3U %3S' out
  out=$(mktemp)
  { time bash -c "$1" >"$out" 2>/dev/null; } 2>&1 | awk '{print $1, $2 + $3}'
  rm -f "$out"
}
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
lo() { printf '%s\n' "$@" | sort -g | head -1; }
hi() { printf '%s\n' "$@" | sort -g | tail -1; }
wa=() wb=() ca=() cb=() r=()
runa() { read -r w c < <(once "$a"); wa+=("$w"); ca+=("$c"); }
runb() { read -r w c < <(once "$b"); wb+=("$w"); cb+=("$c"); }
runa; runb; wa=() wb=() ca=() cb=() # one untimed run of each: binaries and input in the cache
for i in $(seq "$pairs"); do
  # the side that goes first changes each pair: going second is not always the same side's
  if [ $((i % 2)) = 1 ]; then runa; runb; else runb; runa; fi
  r+=("$(echo "${wb[-1]} / ${wa[-1]}" | bc -l)")
done
printf 'A  wall median %.3f s  fastest %.3f s  cpu median %.3f s\n' "$(med "${wa[@]}")" "$(lo "${wa[@]}")" "$(med "${ca[@]}")"
printf 'B  wall median %.3f s  fastest %.3f s  cpu median %.3f s\n' "$(med "${wb[@]}")" "$(lo "${wb[@]}")" "$(med "${cb[@]}")"
printf 'B/A  %.3f (%.3f..%.3f) over %d pairs\n' "$(med "${r[@]}")" "$(lo "${r[@]}")" "$(hi "${r[@]}")" "$pairs"
