#!/usr/bin/env python3
"""Would these alerts have fired on this old log, and when?

Backtests deploy/prometheus/rules.yml and alerts.yml (or yours) on a TIMELINE log:

  1. `proofline export --format openmetrics LOG --epoch T` writes the series the prover's
     /metrics would have shown at each scrape while the log was written, with timestamps;
  2. `promtool tsdb create-blocks-from openmetrics` turns them into TSDB blocks;
  3. a VictoriaMetrics started for the run, private to it (never a fleet's: the replay writes
     raw and recorded series and ALERTS, which would mix with a fleet's own), loads them with
     `vmctl`;
  4. `vmalert -replay` evaluates the recording rules over that history, then the alerts over
     what they recorded, and writes the `ALERTS` series;
  5. each alert's firing stretches are read back from `ALERTS{alertstate="firing"}` and
     printed, one per line, tab-separated: alert, instance, its other labels, from, to
     (RFC 3339; `to` is the last evaluation it was firing at).

Needs proofline, promtool (Debian: prometheus), victoria-metrics, vmctl and vmalert (Debian:
victoria-metrics) on PATH, or named by --proofline and the PROMTOOL/VICTORIA_METRICS/VMCTL/
VMALERT variables. Standard library only.

  deploy/backtest/backtest_alerts.py cuzk.log --epoch 2026-11-30T01:31:00Z
  journalctl -u cuzk -o cat --since ... > cuzk.log   # the journal: as a file first

Every export option after `--` goes to `proofline export` (--label, --scrape-until, engine
options such as --reorder-window-ms); --step-s is this script's own (the export's scrape
interval and vmalert's evaluation interval are the same).
"""

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PROMETHEUS_DIR = os.path.join(HERE, "..", "prometheus")


def tool(env, name):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        sys.exit(f"backtest_alerts: {name} is not on PATH (set {env}); see the module's help")
    return path


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url, params=None, timeout=30):
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def run(cmd, what, **kw):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    except FileNotFoundError:
        sys.exit(f"backtest_alerts: {cmd[0]} not found (for {what}); see the module's help")
    if p.returncode != 0:
        sys.exit(f"backtest_alerts: {what} failed ({p.returncode}):\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return p


def rfc3339(ms):
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ("" if ms % 1000 == 0 else f".{ms % 1000:03d}") + "Z"


def history_range(om_path):
    """The first and last timestamps (ms) of an OpenMetrics export."""
    lo, hi = None, None
    # bytes, split at newlines only (a label value may hold a carriage return)
    with open(om_path, "rb") as f:
        for line in f:
            if line.startswith(b"#"):
                continue
            ts = line.rstrip(b"\n").rsplit(b" ", 1)[-1]
            ms = round(float(ts) * 1000)
            lo = ms if lo is None else min(lo, ms)
            hi = ms if hi is None else max(hi, ms)
    return lo, hi


def main():
    ap = argparse.ArgumentParser(
        usage="%(prog)s LOG --epoch RFC3339 [options] [-- proofline export options]",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    ap.add_argument("log", help="the TIMELINE log (plain or gzip)")
    ap.add_argument("--epoch", required=True, help="wall-clock time of the log's offset 0 (RFC 3339)")
    ap.add_argument("--step-s", type=int, default=15,
                    help="scrape and evaluation interval, seconds (default 15: deploy/'s)")
    ap.add_argument("--rules", default=os.path.join(PROMETHEUS_DIR, "rules.yml"))
    ap.add_argument("--alerts", default=os.path.join(PROMETHEUS_DIR, "alerts.yml"))
    ap.add_argument("--proofline", default=shutil.which("proofline") or "proofline")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep the export, the blocks and the storage here (emptied first)")
    ap.add_argument("--json", action="store_true", help="print the firings as JSON")
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    a = ap.parse_args(argv)
    a.export_args = extra
    if any(x == "--step-s" or x.startswith("--step-s=") for x in extra):
        ap.error("--step-s is this script's own option (before --): the export and vmalert share it")
    if a.step_s > 60:
        print(f"backtest_alerts: warning: --step-s {a.step_s}: the rules' rate windows are 1 m and 10 m"
              " and the alerts' `for` a minute or more; a step over 60 s leaves them too few samples"
              " (an alert may not fire where it would live)", file=sys.stderr)

    promtool = tool("PROMTOOL", "promtool")
    vmctl = tool("VMCTL", "vmctl")
    vmalert = tool("VMALERT", "vmalert")
    work = a.keep or tempfile.mkdtemp(prefix="proofline-backtest-")
    os.makedirs(work, exist_ok=True)
    for old in ("history.om", "blocks", "vm"):
        path = os.path.join(work, old)
        if os.path.realpath(a.log) == os.path.realpath(path) or os.path.realpath(a.log).startswith(
                os.path.realpath(path) + os.sep):
            sys.exit(f"backtest_alerts: {a.log} is inside --keep {work}'s {old}, which is emptied first:"
                     " keep elsewhere")
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    procs = []
    try:
        om = os.path.join(work, "history.om")
        run([a.proofline, "export", "--format", "openmetrics", a.log, "--epoch", a.epoch,
             "--step-s", str(a.step_s), "-o", om, *a.export_args], "proofline export")
        lo, hi = history_range(om)
        if lo is None:
            sys.exit("backtest_alerts: the export holds no samples (no TIMELINE event in the log?)")
        blocks = os.path.join(work, "blocks")
        run([promtool, "tsdb", "create-blocks-from", "openmetrics", om, blocks], "promtool")

        port = free_port()
        vm = f"http://127.0.0.1:{port}"
        procs.append(subprocess.Popen(
            [tool("VICTORIA_METRICS", "victoria-metrics"),
             f"-storageDataPath={os.path.join(work, 'vm')}",
             f"-httpListenAddr=127.0.0.1:{port}", "-retentionPeriod=100y",
             "-loggerLevel=ERROR"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for _ in range(100):
            try:
                get(vm + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("backtest_alerts: VictoriaMetrics did not start")
        # vmctl draws progress bars on a terminal and fails without one: script(1) gives it one
        run(["script", "-qec", shlex.join([vmctl, "prometheus", f"--prom-snapshot={blocks}",
                                           f"--vm-addr={vm}", "-s", "--vm-disable-progress-bar"]),
             "/dev/null"], "vmctl", stdin=subprocess.DEVNULL)
        get(vm + "/internal/force_flush")
        # VictoriaMetrics drops samples outside its retention or too far ahead of its clock
        # (an --epoch in the future): say so, rather than report that nothing fired
        kept = json.loads(get(vm + "/api/v1/query", {
            "query": 'count({__name__=~"proofline_.+"})', "time": hi / 1000}))
        if not kept["data"]["result"]:
            sys.exit(f"backtest_alerts: VictoriaMetrics kept none of the history ({rfc3339(lo)} .."
                     f" {rfc3339(hi)}): it drops samples ahead of its clock and at the very epoch;"
                     " is --epoch in the past?")

        # the recording rules first, then the alerts over what they recorded; each query's
        # step is the evaluation interval (vmalert's default, 5 m, would skip most of it)
        frm, to = rfc3339(lo), rfc3339(hi)
        for rules in (a.rules, a.alerts):
            run([vmalert, f"-rule={rules}", f"-datasource.url={vm}", f"-remoteWrite.url={vm}",
                 f"-replay.timeFrom={frm}", f"-replay.timeTo={to}",
                 f"-evaluationInterval={a.step_s}s", "-datasource.queryStep=0",
                 "-replay.rulesDelay=0s", "-replay.disableProgressBar", "-loggerLevel=ERROR"],
                f"vmalert -replay of {rules}")
            get(vm + "/internal/force_flush")

        body = get(vm + "/api/v1/export", {"match[]": 'ALERTS{alertstate="firing"}',
                                            "start": lo // 1000, "end": hi // 1000 + 1})
        step = a.step_s * 1000
        firings = []
        for line in body.splitlines():
            s = json.loads(line)
            labels = {k: v for k, v in s["metric"].items()
                      if k not in ("__name__", "alertname", "alertstate", "instance")}
            ts = sorted(s["timestamps"])
            # one stretch per run of evaluations a step apart
            start = prev = ts[0]
            for t in ts[1:] + [None]:
                if t is not None and t - prev <= step:
                    prev = t
                    continue
                firings.append({"alert": s["metric"].get("alertname", ""),
                                "instance": s["metric"].get("instance", ""),
                                "labels": labels, "from": rfc3339(start), "to": rfc3339(prev),
                                "from_ms": start, "to_ms": prev})
                if t is not None:
                    start = prev = t
        firings.sort(key=lambda f: (f["from_ms"], f["alert"], f["instance"], sorted(f["labels"].items())))
        if a.json:
            print(json.dumps({"from": rfc3339(lo), "to": rfc3339(hi), "firings": firings}, indent=1))
        else:
            print(f"# history {rfc3339(lo)} .. {rfc3339(hi)}, evaluated every {a.step_s} s: "
                  f"{len(firings)} firing stretches")
            for f in firings:
                other = ",".join(f"{k}={v}" for k, v in sorted(f["labels"].items()))
                print(f"{f['alert']}\t{f['instance']}\t{other}\t{f['from']}\t{f['to']}")
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
