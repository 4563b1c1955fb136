#!/usr/bin/env bash
# The load of a fleet on its monitoring: N provers, a site Prometheus scraping them every 15 s
# and evaluating deploy/'s recording rules every 15 s, remote-writing to two global levels at
# once (a Prometheus evaluating the alerts, and VictoriaMetrics with vmalert evaluating the
# same alerts), as deploy/ runs them. After WARM seconds it measures for SPAN seconds and
# prints, for each N: series per prover at the site and the global level, samples ingested a
# second at each level, resident memory of each server, the rule groups' evaluation time, and
# the scrapes' duration.
#
# Provers: `proofline watch` processes of a generated 8-GPU, every-kind log each (the
# default), or, with PROVERS_IN_ONE_PROCESS=1, one process serving N real endpoints
# (tests/src/bin/provers.rs: an engine, sink and registry each, fed 10 lines a second), which
# is what makes a thousand fit on this machine.
# Usage: scripts/bench-fleet.sh [N...]   (default: 50 200; needs prometheus, victoria-metrics,
# vmalert, curl, python3)
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-50 200}")
warm=${WARM:-180}
span=${SPAN:-60}
one=${PROVERS_IN_ONE_PROCESS:-0}
cargo build --release --locked -q -p proofline-cli -p proofline-tests --bin proofline --bin provers
bin=$PWD/target/release/proofline
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# the sum of a metric's samples on a server's own /metrics
m() { curl -s "http://$1/metrics" | awk -v name="$2" '$1 == name || index($1, name "{") == 1 { s += $2 } END { printf "%.6f\n", s + 0 }'; }
# an instant query's first value
q() { curl -s "http://$1/api/v1/query" --data-urlencode "query=$2" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "nan")'; }
wait_up() { for _ in $(seq 100); do curl -sf "http://$1$2" >/dev/null && return; sleep 0.2; done; echo "$1 did not start" >&2; exit 1; }
"$bin" generate --jobs 200 --mixed --gpus 8 -o "$work/prover.log"
printf '| provers | series a prover (site) | recorded a prover (global) | samples/s site | samples/s global Prometheus | samples/s VictoriaMetrics | RSS site | RSS global Prometheus | RSS VictoriaMetrics | RSS provers | recording rules eval | alerts eval (Prometheus) | scrape duration p50 / p99 / max |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for n in ${counts[@]}; do
  run="$work/$n"; mkdir -p "$run/targets"
  if [ "$one" = 1 ]; then
    target/release/provers "$n" "$run/addrs" >/dev/null 2>&1 &
    ppids=($!); pids+=($!)
    for _ in $(seq 600); do [ -s "$run/addrs" ] && break; sleep 0.5; done
    mapfile -t addrs <"$run/addrs"
  else
    addrs=(); ppids=()
    for i in $(seq 1 "$n"); do
      p=$(port)
      "$bin" watch --from-start --metrics-addr "127.0.0.1:$p" --instance "prover$i" "$work/prover.log" >/dev/null 2>&1 &
      pids+=($!); ppids+=($!); addrs+=("127.0.0.1:$p")
    done
  fi
  (IFS=,; printf -- '- targets: [%s]\n' "$(printf '"%s",' "${addrs[@]}" | sed 's/,$//')") >"$run/targets/provers.yml"
  gp=$(port); sp=$(port); vp=$(port); ap=$(port)
  cp deploy/prometheus/rules.yml deploy/prometheus/alerts.yml "$run/"
  sed -e "s/alertmanager:9093/127.0.0.1:1/" deploy/prometheus/global.yml >"$run/global.yml"
  # the site as deploy/ has it, and a second remote_write to VictoriaMetrics
  python3 - "$run/site.yml" "$gp" "$vp" <<'PY'
import sys
path, gp, vp = sys.argv[1:]
text = open("deploy/prometheus/site.yml").read().replace("prometheus-global:9090", f"127.0.0.1:{gp}")
i = text.index("remote_write:\n") + len("remote_write:\n")
block = text[i:]
text += block.replace(f"127.0.0.1:{gp}", f"127.0.0.1:{vp}")
open(path, "w").write(text)
PY
  prometheus --config.file="$run/global.yml" --storage.tsdb.path="$run/g" --web.listen-address="127.0.0.1:$gp" \
    --web.enable-remote-write-receiver --log.level=error >/dev/null 2>&1 &
  pids+=($!)
  victoria-metrics -storageDataPath="$run/vm" -httpListenAddr="127.0.0.1:$vp" -loggerLevel=ERROR >/dev/null 2>&1 &
  pids+=($!)
  wait_up "127.0.0.1:$vp" /health
  vmalert -rule="$run/alerts.yml" -datasource.url="http://127.0.0.1:$vp" -remoteWrite.url="http://127.0.0.1:$vp" \
    -notifier.url=http://127.0.0.1:1 -evaluationInterval=15s -httpListenAddr="127.0.0.1:$ap" -loggerLevel=ERROR >/dev/null 2>&1 &
  pids+=($!)
  prometheus --config.file="$run/site.yml" --storage.tsdb.path="$run/s" --web.listen-address="127.0.0.1:$sp" \
    --enable-feature=exemplar-storage --log.level=error >/dev/null 2>&1 &
  pids+=($!)
  sleep "$warm"
  s0=$(m "127.0.0.1:$sp" prometheus_tsdb_head_samples_appended_total)
  g0=$(m "127.0.0.1:$gp" prometheus_tsdb_head_samples_appended_total)
  v0=$(m "127.0.0.1:$vp" vm_rows_inserted_total)
  sleep "$span"
  s1=$(m "127.0.0.1:$sp" prometheus_tsdb_head_samples_appended_total)
  g1=$(m "127.0.0.1:$gp" prometheus_tsdb_head_samples_appended_total)
  v1=$(m "127.0.0.1:$vp" vm_rows_inserted_total)
  site_series=$(m "127.0.0.1:$sp" prometheus_tsdb_head_series)
  global_series=$(m "127.0.0.1:$gp" prometheus_tsdb_head_series)
  up=$(q "127.0.0.1:$sp" 'sum(up)')
  rss_s=$(m "127.0.0.1:$sp" process_resident_memory_bytes)
  rss_g=$(m "127.0.0.1:$gp" process_resident_memory_bytes)
  rss_v=$(m "127.0.0.1:$vp" process_resident_memory_bytes)
  rss_p=$(ps -o rss= -p "$(IFS=,; echo "${ppids[*]}")" | awk '{ s += $1 } END { print s * 1024 }')
  rules=$(m "127.0.0.1:$sp" prometheus_rule_group_last_duration_seconds)
  alerts=$(m "127.0.0.1:$gp" prometheus_rule_group_last_duration_seconds)
  d50=$(q "127.0.0.1:$sp" 'quantile(0.5, scrape_duration_seconds)')
  d99=$(q "127.0.0.1:$sp" 'quantile(0.99, scrape_duration_seconds)')
  dmax=$(q "127.0.0.1:$sp" 'max(max_over_time(scrape_duration_seconds[1m]))')
  python3 - "$n" "$up" "$site_series" "$global_series" "$s0" "$s1" "$g0" "$g1" "$v0" "$v1" "$span" \
    "$rss_s" "$rss_g" "$rss_v" "$rss_p" "$rules" "$alerts" "$d50" "$d99" "$dmax" <<'PY'
import sys
a = sys.argv[1:]
n, up = int(a[0]), float(a[1])
ss, gs = float(a[2]), float(a[3])
s0, s1, g0, g1, v0, v1, span = map(float, a[4:11])
rs, rg, rv, rp, rules, alerts, d50, d99, dmax = map(float, a[11:20])
mib = lambda b: f"{b / 2**20:.0f} MiB"
if up != n:
    print(f"warning: {up:.0f} of {n} targets up", file=sys.stderr)
print(f"| {n} | {ss / n:.0f} | {gs / n:.1f} | {(s1 - s0) / span:,.0f} | {(g1 - g0) / span:,.0f} | {(v1 - v0) / span:,.0f} "
      f"| {mib(rs)} | {mib(rg)} | {mib(rv)} | {mib(rp)} | {rules * 1000:.1f} ms | {alerts * 1000:.1f} ms "
      f"| {d50 * 1000:.1f} / {d99 * 1000:.1f} / {dmax * 1000:.0f} ms |")
PY
  kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; pids=()
done
