#!/usr/bin/env python3
"""Parses a /metrics body in both formats with the Prometheus project's own Python parsers
(prometheus_client: the classic text parser, and the strict OpenMetrics one that agents such
as Datadog's OpenMetrics check build on). Prints `classic_samples openmetrics_samples
exemplars` on success; fails with the parser's error otherwise.

    parse_exposition.py CLASSIC_FILE OPENMETRICS_FILE
"""
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_classic


def main():
    with open(sys.argv[1]) as f:
        classic = f.read()
    with open(sys.argv[2]) as f:
        om = f.read()
    n_classic = sum(len(fam.samples) for fam in parse_classic(classic))
    families = list(parse_om(om))
    n_om = sum(len(fam.samples) for fam in families)
    exemplars = sum(1 for fam in families for s in fam.samples if s.exemplar)
    print(n_classic, n_om, exemplars)


if __name__ == "__main__":
    main()
