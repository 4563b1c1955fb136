//! Rendering on scrape: OpenMetrics text (with exemplars) and the classic text format.

use std::collections::HashSet;
use std::fmt::Write as _;

use prometheus_client::encoding::text;

use crate::metrics::*;

impl Metrics {
    /// The metrics in OpenMetrics text (with exemplars), ending in `# EOF`.
    pub fn render_openmetrics(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail.
        let _ = text::encode(&mut out, &self.registry);
        out
    }

    /// The metrics in Prometheus' classic text format (0.0.4): no exemplars, no `# EOF`,
    /// counters typed under their `_total` name.
    pub fn render_classic(&self) -> String {
        to_classic(&self.render_openmetrics())
    }

    /// The metrics in the format an HTTP `Accept` header asks for; returns the body and its
    /// content type. OpenMetrics when asked for, else the classic text format.
    pub fn render(&self, accept: Option<&str>) -> (String, &'static str) {
        if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
            (
                self.render_openmetrics(),
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
        } else {
            (
                self.render_classic(),
                "text/plain; version=0.0.4; charset=utf-8",
            )
        }
    }
}

/// Converts OpenMetrics text to the classic format.
pub(crate) fn to_classic(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut counters: HashSet<&str> = HashSet::new();
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.strip_suffix(" counter") {
                counters.insert(name);
            }
        }
    }
    for line in om.lines() {
        if line == "# EOF" {
            continue;
        }
        if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = &line[..7];
            if counters.contains(name) {
                let _ = writeln!(out, "{kind}{name}_total {tail}");
            } else {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        // drop the exemplar: `sample value # {labels} value [timestamp]`
        let sample = match line.find(" # {") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(sample);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_conversion() {
        let om = "# HELP a_seconds Busy.\n# TYPE a_seconds counter\na_seconds_total{gpu=\"0\"} 1.5\n\
# HELP h Gaps.\n# TYPE h histogram\nh_bucket{le=\"1.0\"} 1 # {trace_id=\"ab\"} 0.5\nh_sum 0.5\nh_count 1\n# EOF\n";
        let classic = to_classic(om);
        assert_eq!(
            classic,
            "# HELP a_seconds_total Busy.\n# TYPE a_seconds_total counter\na_seconds_total{gpu=\"0\"} 1.5\n\
# HELP h Gaps.\n# TYPE h histogram\nh_bucket{le=\"1.0\"} 1\nh_sum 0.5\nh_count 1\n"
        );
    }
}
