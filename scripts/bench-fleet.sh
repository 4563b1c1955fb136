#!/usr/bin/env bash
# The load of a fleet on its Prometheus servers: N provers (`proofline watch` of a generated
# 8-GPU, every-kind log each), a site Prometheus scraping them every 15 s and evaluating
# deploy/'s recording rules every 15 s, remote-writing to a global one that evaluates the
# alerts. After WARM seconds it prints, for each N: series at the site and at the global
# level, the site's resident memory, and the rule groups' last evaluation time.
# Usage: scripts/bench-fleet.sh [N...]   (default: 50 200; needs prometheus, curl, python3)
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-50 200}")
warm=${WARM:-120}
cargo build --release --locked -q -p proofline-cli
bin=$PWD/target/release/proofline
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# the sum of a metric's samples on a Prometheus server's own /metrics (it does not scrape
# itself here)
m() { curl -s "http://$1/metrics" | awk -v name="$2" '$1 == name || index($1, name "{") == 1 { s += $2 } END { print s + 0 }'; }
"$bin" generate --jobs 200 --mixed --gpus 8 -o "$work/prover.log"
printf '| provers | series (site) | per prover | series (global) | per prover | site RSS | recording rules eval | alerts eval (global) |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for n in ${counts[@]}; do
  run="$work/$n"; mkdir -p "$run/targets"
  targets=()
  for i in $(seq 1 "$n"); do
    p=$(port)
    "$bin" watch --from-start --metrics-addr "127.0.0.1:$p" --instance "prover$i" "$work/prover.log" >/dev/null 2>&1 &
    pids+=($!); targets+=("\"127.0.0.1:$p\"")
  done
  (IFS=,; echo "- targets: [${targets[*]}]") >"$run/targets/provers.yml"
  gp=$(port); sp=$(port)
  cp deploy/prometheus/rules.yml deploy/prometheus/alerts.yml "$run/"
  sed -e "s/alertmanager:9093/127.0.0.1:1/" deploy/prometheus/global.yml >"$run/global.yml"
  sed -e "s/prometheus-global:9090/127.0.0.1:$gp/" deploy/prometheus/site.yml >"$run/site.yml"
  prometheus --config.file="$run/global.yml" --storage.tsdb.path="$run/g" --web.listen-address="127.0.0.1:$gp" \
    --web.enable-remote-write-receiver --log.level=error >/dev/null 2>&1 &
  gpid=$!; pids+=($gpid)
  prometheus --config.file="$run/site.yml" --storage.tsdb.path="$run/s" --web.listen-address="127.0.0.1:$sp" \
    --enable-feature=exemplar-storage --log.level=error >/dev/null 2>&1 &
  spid=$!; pids+=($spid)
  sleep "$warm"
  site_series=$(m "127.0.0.1:$sp" prometheus_tsdb_head_series)
  global_series=$(m "127.0.0.1:$gp" prometheus_tsdb_head_series)
  rss=$(m "127.0.0.1:$sp" process_resident_memory_bytes)
  rules=$(m "127.0.0.1:$sp" prometheus_rule_group_last_duration_seconds)
  alerts=$(m "127.0.0.1:$gp" prometheus_rule_group_last_duration_seconds)
  python3 - "$n" "$site_series" "$global_series" "$rss" "$rules" "$alerts" <<'PY'
import sys
n, s, g, rss, rules, alerts = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
print(f"| {n} | {s:.0f} | {s/n:.0f} | {g:.0f} | {g/n:.1f} | {rss/2**20:.0f} MiB | {rules*1000:.1f} ms | {alerts*1000:.1f} ms |")
PY
  kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; pids=()
done
