#!/usr/bin/env python3
"""Writes the Grafana dashboards (deploy/grafana/dashboards/*.json) from one description, so
that panel ids, grid positions and queries stay consistent. Run it after editing, commit the
JSON; deploy/test/check_dashboards.py checks the result."""
import json
import os
import sys

PROM = {"type": "prometheus", "uid": "prometheus"}
# the fleet dashboard reads the global Prometheus: recorded series only (deploy/prometheus/rules.yml)
GLOBAL = {"type": "prometheus", "uid": "prometheus-global"}
SEL = 'instance=~"$instance"'
GSEL = 'instance=~"$instance", gpu=~"$gpu"'


def target(expr, legend="", ref="A", fmt=None, exemplar=False, ds=PROM):
    t = {"refId": ref, "datasource": ds, "expr": expr, "legendFormat": legend, "exemplar": exemplar}
    if fmt:
        t["format"] = fmt
    return t


def panel(pid, title, kind, pos, targets, unit=None, description="", minv=None, maxv=None, options=None, ds=PROM):
    x, y, w, h = pos
    defaults = {}
    if unit:
        defaults["unit"] = unit
    if minv is not None:
        defaults["min"] = minv
    if maxv is not None:
        defaults["max"] = maxv
    p = {
        "id": pid,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": ds,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options or {},
        "targets": targets,
    }
    return p


def variables(with_gpu=True, ds=PROM):
    source = "proofline_gpu_busy_seconds_total" if ds == PROM else 'up{job="proofline"}'
    v = [
        {
            "name": "instance",
            "label": "Prover",
            "type": "query",
            "datasource": ds,
            "query": {"query": f"label_values({source}, instance)", "refId": "instance"},
            "refresh": 2,
            "includeAll": True,
            "multi": True,
            "allValue": ".*",
            "sort": 1,
        }
    ]
    if with_gpu:
        v.append(
            {
                "name": "gpu",
                "label": "GPU",
                "type": "query",
                "datasource": PROM,
                "query": {
                    "query": 'label_values(proofline_gpu_busy_seconds_total{instance=~"$instance"}, gpu)',
                    "refId": "gpu",
                },
                "refresh": 2,
                "includeAll": True,
                "multi": True,
                "allValue": ".*",
                "sort": 3,
            }
        )
    return v


def dashboard(uid, title, description, panels, with_gpu=True, ds=PROM):
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["proofline", "cuzk", "gpu"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "templating": {"list": variables(with_gpu, ds)},
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }


def q(quantile, metric, by, sel):
    return f"histogram_quantile({quantile}, sum by ({by}) (rate({metric}_bucket{{{sel}}}[$__rate_interval])))"


prover = dashboard(
    "proofline-prover",
    "proofline: prover",
    "Where one prover's GPU pipeline spends its time: GPU busy (merged intervals), idle gaps between sectors, synthesis lead, stages, queue, throughput, telemetry health.",
    [
        panel(1, "GPU busy ratio (merged intervals)", "timeseries", (0, 0, 12, 8),
              [target(f"rate(proofline_gpu_busy_seconds_total{{{GSEL}}}[$__rate_interval])", "{{instance}} GPU {{gpu}}")],
              unit="percentunit", minv=0, maxv=1,
              description="Share of time a GPU had at least one worker between GPU_START and GPU_END: the union of the workers' intervals, never their sum."),
        panel(2, "GPU busy, last 60 s", "stat", (12, 0, 6, 8),
              [target(f"proofline_gpu_busy_ratio{{{GSEL}}}", "GPU {{gpu}}")], unit="percentunit", minv=0, maxv=1),
        panel(3, "GPU idle now", "stat", (18, 0, 6, 8),
              [target(f"proofline_gpu_idle_seconds{{{GSEL}}}", "GPU {{gpu}}")], unit="s",
              description="Time since the GPU last had work; 0 while busy."),
        panel(4, "GPU idle gaps (heatmap)", "heatmap", (0, 8, 12, 9),
              [target(f"sum by (le) (increase(proofline_gpu_idle_gap_seconds_bucket{{{SEL}}}[$__rate_interval]))", "{{le}}",
                      fmt="heatmap", exemplar=True)],
              unit="s", description="Holes between busy intervals of the prover's GPUs. Exemplars link to the sector's trace.",
              options={"calculate": False, "yAxis": {"unit": "s"}, "exemplars": {"color": "rgba(255,0,255,0.7)"}}),
        panel(5, "Idle time by boundary", "timeseries", (12, 8, 12, 9),
              [target(f"sum by (boundary) (rate(proofline_gpu_gap_idle_seconds_total{{{GSEL}}}[$__rate_interval]))", "{{boundary}}")],
              unit="percentunit", minv=0,
              description="Share of time the GPUs sat in idle gaps; cross_sector is the GPU waiting between sectors."),
        panel(6, "Sector transitions: GPU wait and overlap", "timeseries", (0, 17, 12, 8),
              [target(q(0.5, "proofline_sector_transition_gap_seconds", "le", SEL), "wait p50", exemplar=True),
               target(q(0.9, "proofline_sector_transition_gap_seconds", "le", SEL), "wait p90", "B"),
               target(q(0.5, "proofline_sector_transition_overlap_seconds", "le", SEL), "overlap p50", "C", exemplar=True)],
              unit="s", description="First GPU_START of sector N+1 minus last GPU_END of sector N on a GPU: the GPU waited (gap), or the sectors overlapped (overlap)."),
        panel(7, "Synthesis lead and lag", "timeseries", (12, 17, 12, 8),
              [target(q(0.5, "proofline_synthesis_lead_seconds", "le", SEL), "lead p50 (synthesis ahead)", exemplar=True),
               target(q(0.5, "proofline_synthesis_lag_seconds", "le", SEL), "lag p50 (synthesis behind)", "B", exemplar=True),
               target(f"sum(rate(proofline_synthesis_lag_seconds_count{{{SEL}}}[$__rate_interval])) / (sum(rate(proofline_synthesis_lag_seconds_count{{{SEL}}}[$__rate_interval])) + sum(rate(proofline_synthesis_lead_seconds_count{{{SEL}}}[$__rate_interval])))", "share of transitions behind", "C")],
              unit="s", description="Last GPU_END of sector N minus first SYNTH_END of sector N+1: synthesis ahead of the GPU (lead) or behind it (lag, the GPU waited on synthesis)."),
        panel(8, "Partition stages (p50)", "timeseries", (0, 25, 12, 8),
              [target(q(0.5, "proofline_partition_stage_seconds", "stage, le", SEL), "{{stage}}")], unit="s",
              description="synthesis, queue (synthesized, waiting for a GPU worker), lock_wait, gpu."),
        panel(9, "Queue depth and partitions in flight", "timeseries", (12, 25, 12, 8),
              [target(f"sum(proofline_gpu_queue_depth{{{SEL}}})", "queue depth"),
               target(f"sum by (stage) (proofline_partitions_in_flight{{{SEL}}})", "{{stage}}", "B")]),
        panel(10, "Seconds per proof", "stat", (0, 33, 6, 6),
              [target(f"proofline_seconds_per_proof{{{SEL}}}", "{{instance}}")], unit="s",
              description="Steady state over the last 20 completions."),
        panel(11, "Proofs per hour", "timeseries", (6, 33, 6, 6),
              [target(f"sum by (proof_kind) (rate(proofline_proofs_completed_total{{{SEL}}}[$__rate_interval])) * 3600", "{{proof_kind}}")]),
        panel(12, "Cold start", "stat", (12, 33, 6, 6),
              [target(f"proofline_cold_start_seconds{{{SEL}}}", "{{instance}}")], unit="s",
              description="First GPU_START minus first SYNTH_START of the last job that found its GPU idle."),
        panel(13, "Telemetry: dropped events, malformed lines, incomplete jobs, failed trace exports", "timeseries", (18, 33, 6, 6),
              [target(f"sum(rate(proofline_events_dropped_total{{{SEL}}}[$__rate_interval]))", "dropped/s"),
               target(f"sum(rate(proofline_malformed_lines_total{{{SEL}}}[$__rate_interval]))", "malformed/s", "B"),
               target(f"sum(rate(proofline_jobs_incomplete_total{{{SEL}}}[$__rate_interval]))", "incomplete/s", "C"),
               target(f"sum(rate(proofline_otlp_spans_failed_total{{{SEL}}}[$__rate_interval]))", "spans not exported/s", "D")]),
        panel(14, "Kernel utilisation beside GPU busy", "timeseries", (0, 39, 12, 8),
              [target(f"avg(rate(proofline_gpu_busy_seconds_total{{{SEL}}}[$__rate_interval]))", "pipeline busy (merged TIMELINE intervals)"),
               target(f"sum(rate(proofline_gpu_kernel_seconds_total{{{SEL}}}[$__rate_interval])) / count(proofline_gpu_busy_seconds_total{{{SEL}}})", "kernels (CUZK_TIMING)", "B")],
              unit="percentunit", minv=0, maxv=1,
              description="Kernel time from cuzk's CUZK_TIMING lines over the GPUs' time, beside the busy ratio of the TIMELINE intervals. Busy high with kernels far lower: the GPU lock is held by CPU work (prep_msm, b_g2_msm). Zero without CUZK_TIMING lines."),
        panel(15, "GPU lock per call: held, kernels, waiting on prep_msm", "timeseries", (12, 39, 12, 8),
              [target(f"sum(rate(proofline_gpu_lock_held_seconds_total{{{SEL}}}[$__rate_interval])) / sum(rate(proofline_gpu_calls_total{{{SEL}}}[$__rate_interval]))", "lock held"),
               target(f"sum(rate(proofline_gpu_kernel_seconds_total{{{SEL}}}[$__rate_interval])) / sum(rate(proofline_gpu_calls_total{{{SEL}}}[$__rate_interval]))", "kernels", "B"),
               target(f"sum(rate(proofline_prep_msm_seconds_total{{{SEL}}}[$__rate_interval])) / sum(rate(proofline_gpu_calls_total{{{SEL}}}[$__rate_interval]))", "prep_msm (CPU)", "C")],
              unit="s", description="Means per GPU call, from CUZK_TIMING lines."),
    ],
)

fleet = dashboard(
    "proofline-fleet",
    "proofline: fleet",
    "Every prover at once, the worst GPUs first, from the global Prometheus (the series each site records).",
    [
        panel(1, "Worst GPUs: busy ratio over 10 m", "bargauge", (0, 0, 12, 10),
              [target(f"bottomk(10, proofline:gpu_busy_ratio:rate10m{{{SEL}}})", "{{site}} {{instance}} GPU {{gpu}}", fmt="table", ds=GLOBAL)],
              unit="percentunit", minv=0, maxv=1, options={"orientation": "horizontal", "displayMode": "gradient"}, ds=GLOBAL),
        panel(2, "Most cross-sector idle time over 10 m", "bargauge", (12, 0, 12, 10),
              [target(f"topk(10, proofline:gpu_cross_sector_idle_ratio:rate10m{{{SEL}}})", "{{site}} {{instance}} GPU {{gpu}}", fmt="table", ds=GLOBAL)],
              unit="percentunit", minv=0, options={"orientation": "horizontal", "displayMode": "gradient"}, ds=GLOBAL),
        panel(3, "GPU busy ratio per prover", "timeseries", (0, 10, 12, 8),
              [target(f"instance:proofline_gpu_busy_ratio:avg_rate10m{{{SEL}}}", "{{instance}}", ds=GLOBAL)],
              unit="percentunit", minv=0, maxv=1, ds=GLOBAL),
        panel(4, "Seconds per proof per prover", "timeseries", (12, 10, 12, 8),
              [target(f"instance:proofline_seconds_per_proof:last{{{SEL}}}", "{{instance}}", ds=GLOBAL)], unit="s", ds=GLOBAL),
        panel(5, "Proofs per hour per prover", "timeseries", (0, 18, 12, 8),
              [target(f"instance:proofline_proofs_per_hour:rate10m{{{SEL}}}", "{{instance}}", ds=GLOBAL)], ds=GLOBAL),
        panel(6, "Share of sector transitions with synthesis behind, per prover", "timeseries", (12, 18, 12, 8),
              [target(f"instance:proofline_synthesis_behind:ratio_rate10m{{{SEL}}}", "{{instance}}", ds=GLOBAL)],
              unit="percentunit", minv=0, maxv=1, ds=GLOBAL,
              description="Above 50 %: the median synthesis lead is negative, the GPUs wait on synthesis between sectors."),
        panel(7, "Provers scraped", "stat", (0, 26, 12, 6),
              [target(f'up{{job="proofline", {SEL}}}', "{{instance}}", ds=GLOBAL)], ds=GLOBAL),
        panel(8, "proofline alerts fired in this time range", "table", (12, 26, 12, 6),
              [target('max_over_time(ALERTS{alertname=~"Proofline.*", alertstate="firing"}[$__range])',
                      "{{alertname}} {{instance}}", fmt="table", ds=GLOBAL)], ds=GLOBAL),
    ],
    with_gpu=False,
    ds=GLOBAL,
)

# writes to deploy/grafana/dashboards, or to the folder given as the first argument
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboards")
for name, d in [("prover", prover), ("fleet", fleet)]:
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
