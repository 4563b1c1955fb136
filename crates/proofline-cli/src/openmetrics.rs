//! `proofline export --format openmetrics`: the series a prover's `/metrics` would have shown
//! had it been scraped every `--step-s` while the log was written, with timestamps, as
//! OpenMetrics text. Loaded into a TSDB (`promtool tsdb create-blocks-from openmetrics`,
//! VictoriaMetrics' importer), it is history the recording rules and alerts run over
//! (`vmalert -replay`): "would this alert have fired last month, and when?".
//!
//! The log is read once, on its own clock: before the engine takes an event, every scrape
//! instant up to the event's time is taken first (the engine's clock moved there with
//! [`Engine::advance`], the Prometheus sink ticked as `watch` ticks it, the registry rendered
//! as `/metrics` renders it), so that a scrape sees exactly the lines written before it,
//! gaps, stalls and silences included (a line far ahead of the newest is the end of a silence
//! only once a second line follows it, as the engine decides; a stray one moves no clock). Each sample gets the scrape's timestamp and the labels a scrape
//! adds (`instance`, `job`, ...; a label of the exposition with the same name becomes
//! `exported_NAME`, as Prometheus does); exemplars are left out (a TSDB block holds none).
//!
//! OpenMetrics wants each metric family written whole, and each series' points together in
//! time order, while scrapes come one instant at a time: samples are gathered per series,
//! and when more than [`SPILL_BYTES`] wait in memory they go to one anonymous temporary file
//! (a segment per series), so that memory stays flat whatever the length of the log. The
//! output is written at the end, family by family.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use proofline_core::Engine;
use proofline_core::reader::LineFeeder;
use proofline_core::sink::{RunInfo, TelemetryCounts, UpdateSink};
use proofline_prometheus::{Metrics, PrometheusSink};

/// Samples held in memory before they are written to the temporary file.
pub(crate) const SPILL_BYTES: usize = 32 << 20;

/// The most scrapes an export takes: 10 years at 60 s, 2.4 years at 15 s (about 100 GB of
/// output at cuzk's series). A longer span is refused before anything is written: an
/// offset or a `--scrape-until` far off is likely a mistake.
pub(crate) const MAX_SCRAPES: u64 = 5_000_000;

/// A label a scrape adds: a Prometheus label name and its value.
pub(crate) fn parse_label(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not NAME=VALUE (e.g. instance=prover-07)"))?;
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "`{name}` is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
        ));
    }
    if matches!(name, "le" | "quantile") {
        return Err(format!(
            "`{name}` is a histogram's or summary's own label: a scrape adds no such label"
        ));
    }
    if name.starts_with("__") {
        return Err(format!(
            "`{name}`: names starting with __ are reserved for Prometheus' own use"
        ));
    }
    if value.is_empty() {
        return Err(format!(
            "`{name}=`: an empty value is no label (Prometheus drops it)"
        ));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// A label value in the exposition's quoting.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One sample line of a rendering, taken apart: the metric name, its labels' text (without
/// the braces), and the value.
struct Sample<'a> {
    name: &'a str,
    labels: &'a str,
    value: &'a str,
}

/// Parses `name{labels} value[ # exemplar]` or `name value`; quotes in label values are
/// respected.
fn sample(line: &str) -> Option<Sample<'_>> {
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let (labels, rest) = if line[name_end..].starts_with('{') {
        let body = &line[name_end + 1..];
        let mut quoted = false;
        let mut escaped = false;
        let mut close = None;
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                '}' if !quoted => {
                    close = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let close = close?;
        (&body[..close], &body[close + 1..])
    } else {
        ("", &line[name_end..])
    };
    let value = rest.trim_start().split(' ').next()?;
    (!value.is_empty()).then_some(Sample {
        name,
        labels,
        value,
    })
}

/// The labels of a label text (`a="x",b="y"`): each name and its quoted value.
fn label_pairs(labels: &str) -> Vec<(&str, &str)> {
    let mut pairs = Vec::new();
    let mut quoted = false;
    let mut escaped = false;
    let (mut start, mut eq) = (0, None);
    for (i, c) in labels.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '=' if !quoted => eq = Some(i),
            ',' if !quoted => {
                if let Some(e) = eq.take() {
                    pairs.push((&labels[start..e], &labels[e + 1..i]));
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if let Some(e) = eq {
        pairs.push((&labels[start..e], &labels[e + 1..]));
    }
    pairs
}

/// Where one series' points are: segments in the temporary file, then memory.
#[derive(Debug, Default)]
struct Series {
    /// Its labels but `le`, which order the series of a family (the registry's own order
    /// changes from process to process: the output would too).
    key: String,
    segments: Vec<(u64, u64)>,
    buf: Vec<u8>,
}

/// A metric family: its descriptor lines and its series, in the order first seen.
#[derive(Debug)]
struct Family {
    header: String,
    series: Vec<usize>,
}

/// The history being gathered.
#[derive(Debug)]
pub(crate) struct History {
    /// The labels each sample gets, rendered (`,instance="a",job="b"`), and their names.
    added: String,
    added_names: Vec<String>,
    families: Vec<Family>,
    family_index: HashMap<String, usize>,
    series: Vec<Series>,
    series_index: HashMap<String, usize>,
    buffered: usize,
    spill: Option<(File, u64)>,
    /// Where the temporary file goes (beside the output; else the system's temporary dir).
    spill_dir: Option<std::path::PathBuf>,
    /// Points written (a scrape instant each).
    pub(crate) points: u64,
    last_ts: Option<u64>,
}

impl History {
    pub(crate) fn new(labels: &[(String, String)], spill_dir: Option<&Path>) -> History {
        let mut added = String::new();
        for (n, v) in labels {
            added.push_str(&format!(",{n}=\"{}\"", escape(v)));
        }
        History {
            added,
            added_names: labels.iter().map(|(n, _)| n.clone()).collect(),
            families: Vec::new(),
            family_index: HashMap::new(),
            series: Vec::new(),
            series_index: HashMap::new(),
            buffered: 0,
            spill: None,
            spill_dir: spill_dir.map(Path::to_path_buf),
            points: 0,
            last_ts: None,
        }
    }

    /// Takes one rendering of `/metrics` (OpenMetrics text) as scraped at `unix_ms`.
    pub(crate) fn add(&mut self, text: &str, unix_ms: u64) -> io::Result<()> {
        debug_assert!(self.last_ts.is_none_or(|t| unix_ms > t));
        self.last_ts = Some(unix_ms);
        self.points += 1;
        let ts = format!(" {}.{:03}\n", unix_ms / 1000, unix_ms % 1000);
        let mut family: Option<usize> = None;
        let mut header_open = false;
        for line in text.lines() {
            if line == "# EOF" {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let mut words = rest.splitn(3, ' ');
                let (Some(what), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                if !matches!(what, "HELP" | "TYPE" | "UNIT") {
                    continue;
                }
                let (idx, fresh) = match self.family_index.get(name) {
                    Some(&i) => (i, false),
                    None => {
                        self.family_index
                            .insert(name.to_owned(), self.families.len());
                        self.families.push(Family {
                            header: String::new(),
                            series: Vec::new(),
                        });
                        (self.families.len() - 1, true)
                    }
                };
                if family != Some(idx) {
                    family = Some(idx);
                    header_open = fresh;
                }
                if header_open {
                    let h = &mut self.families[idx].header;
                    h.push_str(line);
                    h.push('\n');
                }
                continue;
            }
            let (Some(fam), Some(s)) = (family, sample(line)) else {
                continue;
            };
            // a scrape's own labels win; the exposition's of the same name are renamed. A
            // series is its family and its labels but `le` (a histogram's point is its
            // buckets, sum and count together).
            let pairs = label_pairs(s.labels);
            let mut labels = String::with_capacity(s.labels.len() + self.added.len() + 16);
            let mut key = format!("{fam}");
            for (n, v) in &pairs {
                if !labels.is_empty() {
                    labels.push(',');
                }
                if self.added_names.iter().any(|a| a == n) {
                    labels.push_str("exported_");
                }
                labels.push_str(n);
                labels.push('=');
                labels.push_str(v);
                if *n != "le" {
                    key.push('\u{0}');
                    key.push_str(n);
                    key.push('=');
                    key.push_str(v);
                }
            }
            if labels.is_empty() {
                labels.push_str(self.added.trim_start_matches(','));
            } else {
                labels.push_str(&self.added);
            }
            let idx = match self.series_index.get(&key) {
                Some(&i) => i,
                None => {
                    let i = self.series.len();
                    self.series.push(Series {
                        key: key[key.find('\u{0}').unwrap_or(key.len())..].to_owned(),
                        ..Series::default()
                    });
                    self.series_index.insert(key, i);
                    self.families[fam].series.push(i);
                    i
                }
            };
            let buf = &mut self.series[idx].buf;
            let before = buf.len();
            buf.extend_from_slice(s.name.as_bytes());
            if !labels.is_empty() {
                buf.push(b'{');
                buf.extend_from_slice(labels.as_bytes());
                buf.push(b'}');
            }
            buf.push(b' ');
            buf.extend_from_slice(s.value.as_bytes());
            buf.extend_from_slice(ts.as_bytes());
            self.buffered += buf.len() - before;
        }
        if self.buffered > SPILL_BYTES {
            self.spill_all()?;
        }
        Ok(())
    }

    /// Moves every series' buffered points to the temporary file.
    fn spill_all(&mut self) -> io::Result<()> {
        if self.spill.is_none() {
            let file = match &self.spill_dir {
                Some(d) => tempfile::tempfile_in(d)?,
                None => tempfile::tempfile()?,
            };
            self.spill = Some((file, 0));
        }
        let Some((file, len)) = &mut self.spill else {
            unreachable!()
        };
        let mut w = io::BufWriter::with_capacity(1 << 20, &*file);
        for s in &mut self.series {
            if s.buf.is_empty() {
                continue;
            }
            w.write_all(&s.buf)?;
            s.segments.push((*len, s.buf.len() as u64));
            *len += s.buf.len() as u64;
            s.buf.clear();
        }
        w.flush()?;
        self.buffered = 0;
        Ok(())
    }

    /// Writes the whole history, family by family, and `# EOF`.
    pub(crate) fn write(mut self, out: &mut impl Write) -> io::Result<()> {
        let mut copy = vec![0u8; 1 << 16];
        for fam in &mut self.families {
            fam.series
                .sort_by(|&a, &b| self.series[a].key.cmp(&self.series[b].key));
        }
        for fam in &self.families {
            out.write_all(fam.header.as_bytes())?;
            for &i in &fam.series {
                let s = &self.series[i];
                if let Some((file, _)) = &mut self.spill {
                    for &(at, len) in &s.segments {
                        file.seek(SeekFrom::Start(at))?;
                        let mut left = len;
                        while left > 0 {
                            let n = left.min(copy.len() as u64) as usize;
                            file.read_exact(&mut copy[..n])?;
                            out.write_all(&copy[..n])?;
                            left -= n as u64;
                        }
                    }
                }
                out.write_all(&s.buf)?;
            }
        }
        out.write_all(b"# EOF\n")?;
        out.flush()
    }
}

/// What the export reads and where its scrapes fall.
pub(crate) struct Plan<'a> {
    pub(crate) input: &'a Path,
    pub(crate) cfg: proofline_core::EngineConfig,
    /// Unix ms of the log's offset 0.
    pub(crate) epoch_ms: u64,
    pub(crate) step_ms: u64,
    /// Unix ms of the last scrape, when the prover's `/metrics` is to be followed past its
    /// last line (a prover that went silent).
    pub(crate) until_ms: Option<u64>,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) instance: String,
    /// The histograms' buckets (the live sidecar's).
    pub(crate) buckets: proofline_prometheus::Buckets,
    /// Where the samples' temporary file goes (beside the output).
    pub(crate) spill_dir: Option<std::path::PathBuf>,
}

/// What the export did.
#[derive(Debug)]
pub(crate) struct Done {
    pub(crate) history: History,
    pub(crate) first_ms: Option<u64>,
    pub(crate) last_ms: Option<u64>,
    /// `--scrape-until` was before the log's last line (the scrapes went on to it).
    pub(crate) until_too_early: bool,
    /// The engine's counts of the events: its runs (a prover restart starts one), events
    /// later than its reorder window, and what makes the figures doubtful
    /// ([`proofline_core::text::doubts`]).
    pub(crate) events: proofline_core::report::EventStats,
    pub(crate) lines: proofline_core::report::LineStats,
    /// What the reading did not use ([`proofline_core::text::not_used`]).
    pub(crate) not_used: Vec<String>,
    pub(crate) error: Option<anyhow::Error>,
}

/// Reads the log on its own clock, scraping every step.
pub(crate) fn gather(plan: &Plan<'_>) -> Result<Done> {
    let mut input = crate::input::open_log(plan.input, None)?;
    let metrics: Arc<Metrics> = Metrics::with_buckets(plan.buckets.clone())?;
    let mut sink = PrometheusSink::new(metrics.clone());
    let mut run = RunInfo::new(plan.instance.clone(), plan.epoch_ms);
    run.gpu_interval_source = plan.cfg.get_gpu_interval_source().map(str::to_owned);
    sink.start_run(&run);
    let mut engine = Engine::new(plan.cfg.clone());
    // the engine's own (it is at least the reorder window)
    let restart_after = engine.config().get_restart_after_ms();
    // a line far ahead of the newest, which the engine holds until the next line says
    // whether the prover was silent that long (a second line out there) or it was a stray
    let mut ahead: Option<u64> = None;
    let mut feeder = LineFeeder::new();
    let mut history = History::new(&plan.labels, plan.spill_dir.as_deref());
    // the next scrape, on the engine's timeline (ms from the log's offset 0)
    let mut next: Option<u64> = None;
    let mut first_ms = None;
    let mut write_error: Option<io::Error> = None;
    let step = plan.step_ms;
    let epoch = plan.epoch_ms;
    let mut scrape = |t: u64,
                      engine: &mut Engine,
                      sink: &mut PrometheusSink,
                      counts: &TelemetryCounts,
                      history: &mut History|
     -> io::Result<()> {
        if history.points >= MAX_SCRAPES {
            return Err(io::Error::other(format!(
                "more than {MAX_SCRAPES} scrapes: the log's time (or --scrape-until) spans {} days at --step-s {}; a wider step, or check the log's offsets",
                t / 86_400_000,
                step / 1000
            )));
        }
        engine.advance(t.saturating_sub(engine.run_base()), sink);
        sink.tick(&engine.live(), counts);
        first_ms.get_or_insert(epoch + t);
        history.add(&metrics.render_openmetrics(), epoch + t)
    };
    let counts = TelemetryCounts::default();
    let read = feeder.feed_all_stepped(
        &mut input,
        &mut engine,
        &mut sink,
        |_| {},
        |offset, engine, sink| {
            if write_error.is_some() {
                return;
            }
            // only a line ahead of the newest moves the clock: one behind it is disorder (or
            // a restart, which the engine decides on). One far ahead may be a stray line: the
            // engine holds it, and so does the clock, until a second line far ahead says the
            // prover was silent until the first (the engine takes both with that second line:
            // the silence's scrapes come first, seeing neither)
            let held = ahead.take();
            let mut t = engine.run_base() + offset;
            if let Some(n) = engine.newest_offset() {
                if offset <= n {
                    return;
                }
                if offset - n > restart_after {
                    match held {
                        Some(first) => t = t.min(first),
                        None => {
                            ahead = Some(t);
                            return;
                        }
                    }
                }
            }
            let at = next.get_or_insert(t.div_ceil(step) * step);
            while *at <= t {
                if let Err(e) = scrape(*at, engine, sink, &counts, &mut history) {
                    write_error = Some(e);
                    return;
                }
                *at += step;
            }
        },
    );
    if let Some(e) = write_error {
        return Err(e).context("the export stopped");
    }
    // the last scrapes: until the engine has taken every line, or on past it to
    // --scrape-until
    let newest = engine
        .newest_offset()
        .map(|o| engine.run_base() + o)
        .or_else(|| next.map(|n| n.saturating_sub(step)));
    // (as a live watch shows it once the engine has taken everything: a reorder window and
    // a job's completion grace after the last line)
    let settle =
        engine.config().get_reorder_window_ms() + engine.config().get_completion_grace_ms();
    let after_last = newest.map(|n| {
        let n = n + settle;
        n - n % step + step
    });
    let until = plan.until_ms.map(|u| u.saturating_sub(epoch));
    let until_too_early = until.zip(newest).is_some_and(|(u, n)| u < n);
    let end = match until {
        Some(u) => Some(u.max(after_last.unwrap_or(u))),
        None => after_last,
    };
    let counts = feeder.telemetry_counts();
    if let Some(end) = end {
        let at = next.get_or_insert(newest.unwrap_or(end).div_ceil(step) * step);
        while *at <= end {
            scrape(*at, &mut engine, &mut sink, &counts, &mut history)
                .context("the export stopped")?;
            *at += step;
        }
    }
    let last_ms = history.last_ts;
    // (after the last scrape: what the engine still held, stray lines at the log's end
    // among it, is decided for the warnings, as `analyze` decides it)
    engine.finish(&mut sink);
    let mut r = engine.into_report();
    r.lines = feeder.stats.clone();
    Ok(Done {
        not_used: proofline_core::text::not_used(&r, &plan.cfg),
        events: r.events,
        history,
        first_ms,
        last_ms,
        until_too_early,
        lines: r.lines,
        error: read
            .err()
            .map(|e| anyhow::Error::new(e).context(format!("reading {}", plan.input.display()))),
    })
}

/// Checks `--until` against the epoch.
pub(crate) fn check_until(epoch_ms: u64, until_ms: Option<u64>) -> Result<()> {
    if let Some(u) = until_ms {
        if u <= epoch_ms {
            bail!(
                "--scrape-until is not after --epoch: the scrapes would end before the log begins"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Vec<(String, String)> {
        vec![
            ("instance".into(), "p\"1".into()),
            ("job".into(), "proofline".into()),
        ]
    }

    #[test]
    fn samples_get_labels_and_timestamps_and_lose_exemplars() {
        let mut h = History::new(&labels(), None);
        let om = "# HELP a Busy.\n# TYPE a counter\na_total{gpu=\"0\"} 1.5\na_total{gpu=\"1\"} 2\n\
# HELP g Depth.\n# TYPE g gauge\ng 3\n\
# HELP h Gaps.\n# TYPE h histogram\nh_bucket{boundary=\"x\",le=\"1.0\"} 1 # {trace_id=\"ab\"} 0.5\nh_bucket{boundary=\"x\",le=\"+Inf\"} 1\nh_sum{boundary=\"x\"} 0.5\nh_count{boundary=\"x\"} 1\n# EOF\n";
        h.add(om, 1_000_000_000_000).unwrap();
        h.add(&om.replace("1.5", "4.5"), 1_000_000_015_250).unwrap();
        let mut out = Vec::new();
        h.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lb = r#"instance="p\"1",job="proofline""#;
        assert_eq!(
            text,
            format!(
                "# HELP a Busy.\n# TYPE a counter\n\
a_total{{gpu=\"0\",{lb}}} 1.5 1000000000.000\na_total{{gpu=\"0\",{lb}}} 4.5 1000000015.250\n\
a_total{{gpu=\"1\",{lb}}} 2 1000000000.000\na_total{{gpu=\"1\",{lb}}} 2 1000000015.250\n\
# HELP g Depth.\n# TYPE g gauge\ng{{{lb}}} 3 1000000000.000\ng{{{lb}}} 3 1000000015.250\n\
# HELP h Gaps.\n# TYPE h histogram\n\
h_bucket{{boundary=\"x\",le=\"1.0\",{lb}}} 1 1000000000.000\nh_bucket{{boundary=\"x\",le=\"+Inf\",{lb}}} 1 1000000000.000\nh_sum{{boundary=\"x\",{lb}}} 0.5 1000000000.000\nh_count{{boundary=\"x\",{lb}}} 1 1000000000.000\n\
h_bucket{{boundary=\"x\",le=\"1.0\",{lb}}} 1 1000000015.250\nh_bucket{{boundary=\"x\",le=\"+Inf\",{lb}}} 1 1000000015.250\nh_sum{{boundary=\"x\",{lb}}} 0.5 1000000015.250\nh_count{{boundary=\"x\",{lb}}} 1 1000000015.250\n\
# EOF\n"
            )
        );
    }

    #[test]
    fn an_exposed_label_of_a_scrape_label_s_name_is_renamed_as_prometheus_does() {
        let mut h = History::new(&labels(), None);
        h.add(
            "# HELP i Info.\n# TYPE i gauge\ni{instance=\"cuzk\",x=\"instance=\"} 1\n# EOF\n",
            5_000,
        )
        .unwrap();
        let mut out = Vec::new();
        h.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "i{exported_instance=\"cuzk\",x=\"instance=\",instance=\"p\\\"1\",job=\"proofline\"} 1 5.000\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn spilled_points_come_back_in_order_with_those_still_in_memory() {
        let mut h = History::new(&[("job".into(), "j".into())], None);
        let mut expected_a = String::new();
        for i in 0..5u64 {
            h.add(
                &format!(
                    "# HELP a A.\n# TYPE a gauge\na{{k=\"1\"}} {i}\na{{k=\"2\"}} {}\n# EOF\n",
                    i * 10
                ),
                (i + 1) * 1000,
            )
            .unwrap();
            expected_a.push_str(&format!("a{{k=\"1\",job=\"j\"}} {i} {}.000\n", i + 1));
            if i == 0 || i == 2 {
                h.spill_all().unwrap();
            }
        }
        assert!(h.series[0].segments.len() == 2 && !h.series[0].buf.is_empty());
        let mut out = Vec::new();
        h.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(&expected_a), "{text}");
        let k2: Vec<&str> = text.lines().filter(|l| l.contains("k=\"2\"")).collect();
        assert_eq!(k2.len(), 5);
        assert_eq!(k2[4], "a{k=\"2\",job=\"j\"} 40 5.000");
    }

    #[test]
    fn labels_are_checked() {
        assert!(parse_label("instance=a").is_ok());
        assert!(parse_label("__name__=a").unwrap_err().contains("reserved"));
        assert!(parse_label("1x=a").unwrap_err().contains("label name"));
        assert!(parse_label("x").unwrap_err().contains("NAME=VALUE"));
        assert!(parse_label("x=").unwrap_err().contains("empty"));
    }
}
