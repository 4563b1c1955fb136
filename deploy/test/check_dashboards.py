#!/usr/bin/env python3
"""Checks the Grafana dashboards: valid against Grafana's published dashboard schema, unique
panel ids, grid positions that fit and do not overlap, unique refIds, a datasource and a
query on every target; and every query parses (written as recording rules, checked by
`promtool check rules`). `--exprs` prints the queries (variables substituted) as JSON."""
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
GRAFANA = os.path.join(HERE, "..", "grafana")
SUBST = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h", '"$instance"': '".*"', '"$gpu"': '".*"'}


def dashboards():
    d = os.path.join(GRAFANA, "dashboards")
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                yield name, json.load(f)


def substitute(expr):
    for k, v in SUBST.items():
        expr = expr.replace(k, v)
    return expr


def check(name, dash, schema):
    errors = [f"{name}: {e.json_path}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(dash)]
    panels = dash.get("panels", [])
    ids = [p["id"] for p in panels]
    if len(ids) != len(set(ids)):
        errors.append(f"{name}: panel ids repeat: {ids}")
    cells = {}
    for p in panels:
        g = p["gridPos"]
        if g["x"] < 0 or g["x"] + g["w"] > 24 or g["w"] <= 0 or g["h"] <= 0:
            errors.append(f"{name}: panel {p['id']} does not fit the 24-column grid: {g}")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    errors.append(f"{name}: panels {cells[(x, y)]} and {p['id']} overlap at ({x},{y})")
                cells[(x, y)] = p["id"]
        refs = [t.get("refId") for t in p.get("targets", [])]
        if len(refs) != len(set(refs)) or None in refs:
            errors.append(f"{name}: panel {p['id']} refIds missing or repeated: {refs}")
        for t in p.get("targets", []):
            if not t.get("expr") or not t.get("datasource"):
                errors.append(f"{name}: panel {p['id']} target {t.get('refId')} lacks expr or datasource")
    return sorted(set(errors))


def exprs():
    out = []
    for name, dash in dashboards():
        for p in dash["panels"]:
            for t in p.get("targets", []):
                out.append({"dashboard": name, "panel": p["title"], "refId": t["refId"], "expr": substitute(t["expr"]),
                            "datasource": t["datasource"]["uid"]})
    return out


def main():
    if "--exprs" in sys.argv:
        json.dump(exprs(), sys.stdout, indent=1)
        return 0
    with open(os.path.join(GRAFANA, "schema", "dashboard.schema.json")) as f:
        schema = json.load(f)
    errors, n = [], 0
    for name, dash in dashboards():
        errors += check(name, dash, schema)
        n += 1
    qs = exprs()
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("groups:\n  - name: dashboard_queries\n    rules:\n")
        for i, q in enumerate(qs):
            f.write(f"      - record: dashboard:query:{i}\n        expr: {json.dumps(q['expr'])}\n")
        rules = f.name
    r = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
    os.unlink(rules)
    if r.returncode != 0:
        errors.append("promtool check rules on the dashboards' queries failed:\n" + r.stdout + r.stderr)
    for e in errors:
        print(e, file=sys.stderr)
    print(f"{n} dashboards, {len(qs)} queries: {'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
