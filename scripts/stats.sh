# Sourced by the benchmark scripts: the median, lowest and highest of numbers given as
# arguments, and a ratio's summary as they print it. (bash; awk)

# The median (of an even count, the mean of the two middle values).
median() {
  printf '%s\n' "$@" | sort -g |
    awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
lowest() { printf '%s\n' "$@" | sort -g | head -1; }
highest() { printf '%s\n' "$@" | sort -g | tail -1; }
# "MEDIAN (LOWEST..HIGHEST)" of ratios, to three decimals.
ratio_summary() {
  printf '%.3f (%.3f..%.3f)' "$(median "$@")" "$(lowest "$@")" "$(highest "$@")"
}
