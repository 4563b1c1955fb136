#!/usr/bin/env bash
# Two command lines timed in turn, N pairs (A first in odd pairs, B first in even ones),
# after one untimed run of each. It prints each side's median and fastest wall time and
# median CPU time (user + system), and B/A: the median of the ratios taken within each pair,
# and their range. A slow spell of the machine then falls on both sides of a pair rather
# than on one side. Run it A against A first: the ratio's spread is how small a change it
# can tell from nothing on this machine today.
#
# Usage: scripts/ab-commands.sh "COMMAND A" "COMMAND B" [PAIRS]   (default 21; bash 4.3+, bc)
#   e.g. scripts/ab-commands.sh "OLD/proofline analyze LOG" \
#          "target/release/proofline analyze LOG" 41
# A command that exits with a status other than 0 stops it, with the command's last lines of
# standard error: a failing command is not timed.
set -euo pipefail
usage='usage: scripts/ab-commands.sh "COMMAND A" "COMMAND B" [PAIRS]'
a=${1:?$usage} b=${2:?$usage} pairs=${3:-21}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
once() { # one run of $1: its wall and CPU time (user + system), in seconds, in w and c
  # (its output to a file, not /dev/null: GNU grep stops at the first match on /dev/null)
  local TIMEFORMAT='%3R %3U %3S' status=0
  { time bash -c "$1" >"$tmp/out" 2>"$tmp/err"; } 2>"$tmp/time" || status=$?
  if [ "$status" != 0 ]; then
    echo "ab-commands: exit status $status from: $1" >&2
    tail -5 "$tmp/err" >&2
    exit 1
  fi
  read -r w c < <(awk '{print $1, $2 + $3}' "$tmp/time")
}
# shellcheck source=scripts/stats.sh
. "$(dirname "$0")/stats.sh"
runa() { once "$a"; wa+=("$w"); ca+=("$c"); }
runb() { once "$b"; wb+=("$w"); cb+=("$c"); }
wa=() wb=() ca=() cb=() r=()
runa; runb; wa=() wb=() ca=() cb=() # one untimed run of each: binaries and input in the cache
for i in $(seq "$pairs"); do
  # the side that goes first changes each pair: going second is not always the same side's
  if [ $((i % 2)) = 1 ]; then runa; runb; else runb; runa; fi
  r+=("$(echo "${wb[-1]} / ${wa[-1]}" | bc -l)")
done
printf 'A  wall median %.3f s  fastest %.3f s  cpu median %.3f s\n' \
  "$(median "${wa[@]}")" "$(lowest "${wa[@]}")" "$(median "${ca[@]}")"
printf 'B  wall median %.3f s  fastest %.3f s  cpu median %.3f s\n' \
  "$(median "${wb[@]}")" "$(lowest "${wb[@]}")" "$(median "${cb[@]}")"
echo "B/A  $(ratio_summary "${r[@]}") over $pairs pairs"
