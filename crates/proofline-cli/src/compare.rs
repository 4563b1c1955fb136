//! `proofline compare A B`: two runs' figures side by side, each with its noise band and a
//! call, as text, JSON, markdown (for a pull request) or an HTML page with both timelines
//! on one time scale.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use proofline_core::compare::{self, Change, Comparison, Figure};
use proofline_core::report::{Report, SCHEMA_VERSION};
use proofline_core::sink::NoUpdates;

use crate::chart::html_escape;
use crate::input::{EngineArgs, open_log, run_log};
use crate::journal::{JournalArgs, run_journal};
use crate::timeline::{DEFAULT_MAX_PARTITIONS, Timeline};

/// The exit status when a `--fail-if` condition holds (1 is an error).
pub(crate) const FAIL_IF_STATUS: i32 = 3;

/// Output formats of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A table for people.
    Text,
    /// The comparison as JSON.
    Json,
    /// A markdown table, for a pull request.
    Markdown,
    /// An HTML page: the table, and both timelines one above the other on one time scale.
    Html,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// Before: a log (plain, gzip, `-` for stdin), a report `analyze --format json` wrote,
    /// or a journal: `journal:UNIT` (the system journal), `journal:UNIT@FILE` or
    /// `journal:UNIT@DIR` (journal files elsewhere).
    #[arg(value_name = "A")]
    a: PathBuf,
    /// After: the same kinds.
    #[arg(value_name = "B")]
    b: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit with status 3 when a figure is called so: `worse:NAME`, `better:NAME`,
    /// `changed:NAME` (either way), NAME a figure's name (`seconds_per_proof`, ...) or `any`.
    /// Repeatable; any one holding fails.
    #[arg(long, value_name = "CALL:FIGURE", value_parser = parse_fail_if)]
    fail_if: Vec<FailIf>,
    /// The family-wise false-alarm rate the bands are set for (split over the figures
    /// compared). Range 0.0001..=0.5.
    #[arg(long, default_value_t = compare::DEFAULT_ALPHA, value_parser = parse_alpha)]
    alpha: f64,
    #[command(flatten)]
    engine: EngineArgs,
}

/// A `--fail-if` condition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FailIf {
    calls: Vec<Change>,
    /// `None`: any figure.
    figure: Option<String>,
    spec: String,
}

impl FailIf {
    /// Whether the condition is about `figure` (its name, or `any`).
    fn covers(&self, figure: &Figure) -> bool {
        self.figure.as_deref().is_none_or(|n| n == figure.name)
    }
}

fn figure_names() -> Vec<&'static str> {
    compare::estimates(&empty_report())
        .into_iter()
        .map(|(n, ..)| n)
        .collect()
}

fn empty_report() -> Report {
    proofline_core::Engine::default().report()
}

fn parse_fail_if(s: &str) -> Result<FailIf, String> {
    let (call, fig) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: the form is CALL:FIGURE, e.g. worse:seconds_per_proof"))?;
    let calls = match call {
        "worse" => vec![Change::Worse],
        "better" => vec![Change::Better],
        "changed" => vec![Change::Worse, Change::Better],
        _ => {
            return Err(format!(
                "`{call}` in `{s}`: the call is worse, better or changed"
            ));
        }
    };
    let figure = if fig == "any" {
        None
    } else if figure_names().contains(&fig) {
        Some(fig.to_owned())
    } else {
        return Err(format!(
            "`{fig}` in `{s}` is no figure compare knows (any, {})",
            figure_names().join(", ")
        ));
    };
    Ok(FailIf {
        calls,
        figure,
        spec: s.to_owned(),
    })
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if !(0.0001..=0.5).contains(&v) {
        return Err(format!("`{s}`: alpha is between 0.0001 and 0.5"));
    }
    Ok(v)
}

/// One side: its report, and its timeline when drawn.
struct Side {
    report: Report,
    timeline: Option<Timeline>,
    /// A JSON report (no timeline to draw).
    from_json: bool,
}

/// Whether a file holds JSON (its first byte that is no white space is `{`).
fn is_json(path: &Path) -> Result<bool> {
    if path.as_os_str() == "-" {
        return Ok(false);
    }
    let mut r = open_log(path, None)?;
    let mut buf = [0u8; 512];
    let n = r
        .read(&mut buf)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(buf[..n]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{'))
}

/// `journal:UNIT[@FILE|@DIR]` as the journal it names.
fn journal_of(path: &Path) -> Option<JournalArgs> {
    let spec = path.to_str()?.strip_prefix("journal:")?;
    let (unit, at) = match spec.split_once('@') {
        Some((u, at)) => (u, Some(PathBuf::from(at))),
        None => (spec, None),
    };
    let mut j = JournalArgs {
        journal_unit: (!unit.is_empty()).then(|| unit.to_owned()),
        ..JournalArgs::default()
    };
    match at {
        Some(p) if p.is_dir() => j.journal_dir = Some(p),
        Some(p) => j.journal_file = vec![p],
        None => {}
    }
    Some(j)
}

/// What makes a side's figures doubtful, in words: lines not used as out of the window,
/// GPU intervals stuck, restarts that may be disorder, partitions past their job's count,
/// prefix rules that matched no job (`None` without any).
fn in_doubt(e: &proofline_core::report::EventStats) -> Option<String> {
    let mut doubts = Vec::new();
    if e.stray_late + e.stray_early > 0 {
        doubts.push(format!(
            "{} stray line(s) out of the reorder window, not used",
            e.stray_late + e.stray_early
        ));
    }
    if e.gpu_stuck > 0 {
        doubts.push(format!("{} GPU interval(s) stuck", e.gpu_stuck));
    }
    if e.shallow_restarts > 0 {
        doubts.push(format!(
            "{} restart(s) that fell back less than halfway to offset 0",
            e.shallow_restarts
        ));
    }
    if e.partitions_past_count > 0 {
        doubts.push(format!(
            "{} event(s) of a partition past its job's count of partitions (the first: {})",
            e.partitions_past_count,
            proofline_core::text::printable(
                e.partition_past_count_example.as_deref().unwrap_or("-")
            )
        ));
    }
    doubts.extend(proofline_core::text::rules_matching_no_job(e));
    (!doubts.is_empty()).then(|| doubts.join(", "))
}

fn read_side(path: &Path, args: &CompareArgs, draw: bool) -> Result<Side> {
    if let Some(j) = journal_of(path) {
        let run = run_journal(&j, args.engine.config()?, NoUpdates)?;
        if let Some(e) = run.error {
            return Err(e.context(format!("{} ended early", j.describe())));
        }
        return Ok(Side {
            report: run.report,
            timeline: None,
            from_json: false,
        });
    }
    if is_json(path)? {
        let r = open_log(path, None)?;
        let no_report = || {
            format!(
                "{} holds JSON that is no report `proofline analyze --format json` wrote",
                path.display()
            )
        };
        let value: serde_json::Value = serde_json::from_reader(r).with_context(no_report)?;
        // a report of another schema may carry the same names with other meanings, or lack
        // some: its version is looked at before it is read as this one's
        let version = value
            .get("schema_version")
            .and_then(serde_json::Value::as_u64);
        if let Some(v) = version.filter(|&v| v != u64::from(SCHEMA_VERSION)) {
            bail!(
                "{} is a report of schema version {v}; this proofline reads version {} (the \
                 report was written by {} proofline): compare the logs it was made from, or use \
                 the proofline that wrote it",
                path.display(),
                SCHEMA_VERSION,
                if v > u64::from(SCHEMA_VERSION) {
                    "a newer"
                } else {
                    "another"
                }
            );
        }
        let report: Report = serde_json::from_value(value).with_context(no_report)?;
        return Ok(Side {
            report,
            timeline: None,
            from_json: true,
        });
    }
    if draw {
        let (t, run) = Timeline::from_log(
            crate::input::Source::Log(path),
            args.engine.config()?,
            0,
            DEFAULT_MAX_PARTITIONS,
        )?;
        let report = run.report;
        if let Some(e) = run.error {
            return Err(e.context(format!("{} ended early", path.display())));
        }
        return Ok(Side {
            report,
            timeline: Some(t),
            from_json: false,
        });
    }
    let run = run_log(path, args.engine.config()?, NoUpdates)?;
    if let Some(e) = run.error {
        return Err(e.context(format!("{} ended early", path.display())));
    }
    Ok(Side {
        report: run.report,
        timeline: None,
        from_json: false,
    })
}

pub(crate) fn run(args: &CompareArgs) -> Result<()> {
    args.engine.check()?;
    if args.a.as_os_str() == "-" && args.b.as_os_str() == "-" {
        bail!("A and B cannot both be standard input");
    }
    let draw = args.format == Format::Html;
    let a = read_side(&args.a, args, draw)?;
    let b = read_side(&args.b, args, draw)?;
    // a side read wrong (lines further out of order than the window) is said: its figures
    // are compared all the same, and would pass a gate unseen
    for (name, path, side) in [("A", &args.a, &a), ("B", &args.b, &b)] {
        if let Some(w) = in_doubt(&side.report.events) {
            eprintln!(
                "proofline: warning: {name} ({}): {w}; its figures may be misread (`proofline analyze` it to see)",
                path.display()
            );
        }
    }
    for (name, s) in [(&args.a, &a), (&args.b, &b)] {
        if s.report.summary.jobs_complete < 3 {
            eprintln!(
                "proofline: warning: {} has {} complete job(s): seconds per proof needs two, its band three",
                name.display(),
                s.report.summary.jobs_complete
            );
        }
    }
    let c = compare::compare(&a.report, &b.report, args.alpha);
    let names = [args.a.display().to_string(), args.b.display().to_string()];
    let body = match args.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&c)?;
            s.push('\n');
            s
        }
        Format::Text => text(&c, &names),
        Format::Markdown => markdown(&c, &names),
        Format::Html => html(&c, &names, &a, &b),
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    out.write_all(body.as_bytes())?;
    out.flush()?;
    let held: Vec<String> = args
        .fail_if
        .iter()
        .filter_map(|f| {
            let hit: Vec<&Figure> = c
                .figures
                .iter()
                .filter(|x| f.covers(x) && f.calls.contains(&x.change))
                .collect();
            (!hit.is_empty()).then(|| {
                format!(
                    "--fail-if {}: {}",
                    f.spec,
                    hit.iter()
                        .map(|x| format!("{} {} ({})", x.name, x.change.as_str(), change(x)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        })
        .collect();
    if !held.is_empty() {
        for h in &held {
            eprintln!("proofline: {h}");
        }
        std::process::exit(FAIL_IF_STATUS);
    }
    // A gate that could not look is no pass: a condition on a figure that was not called
    // (for `any`: no figure called; an empty or unreadable B read as no jobs) is an error. So
    // is `any` whose headline, the seconds per proof, was not called: a run that finished
    // no proof (or too few for a band) passed `worse:any` on what it still had, the queue of
    // its unfinished jobs. (A figure on one side only is no bar: kernel figures come with
    // CUZK_TIMING lines, which one build may print and the other not.)
    let unchecked: Vec<String> = args
        .fail_if
        .iter()
        .filter_map(|f| {
            if c
                .figures
                .iter()
                .filter(|x| f.covers(x))
                .all(|x| x.change == Change::NotCalled)
            {
                return Some(format!(
                    "--fail-if {}: nothing to check, no figure it names was called",
                    f.spec
                ));
            }
            let headline = c.figures.iter().find(|x| x.name == "seconds_per_proof");
            (f.figure.is_none() && headline.is_some_and(|x| x.change == Change::NotCalled))
                .then(|| {
                    format!(
                        "--fail-if {}: seconds_per_proof, the figure any run is judged by first, was not called",
                        f.spec
                    )
                })
        })
        .collect();
    if !unchecked.is_empty() {
        bail!(
            "{} (a figure is called only with a noise band: both sides need it, from enough jobs, and cold_start_ms has none; {} has {} complete job(s), {} has {})",
            unchecked.join("; "),
            names[0],
            a.report.summary.jobs_complete,
            names[1],
            b.report.summary.jobs_complete
        );
    }
    Ok(())
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:+.1} %", v * 100.0))
}

fn val(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if unit == "ratio" => format!("{v:.3}"),
        Some(v) if unit == "s" => format!("{v:.2}"),
        Some(v) => format!("{v:.0}"),
    }
}

/// A value with its sign and unit (`+11983 ms`, `-0.350`): a change where a percentage of
/// A says nothing (A at or below 0, or a change of sign). The sign is the printed value's
/// (`+0 ms` for -0.4 ms).
fn signed(v: f64, unit: &str) -> String {
    let shown = val(Some(v.abs()), unit);
    let zero = shown.bytes().all(|b| b == b'0' || b == b'.');
    let sign = if v < 0.0 && !zero { '-' } else { '+' };
    match unit {
        "ratio" => format!("{sign}{shown}"),
        _ => format!("{sign}{shown} {unit}"),
    }
}

/// The change: as a percentage of A, else as a difference.
fn change(f: &Figure) -> String {
    match (f.delta_ratio, f.delta) {
        (Some(_), _) | (None, None) => pct(f.delta_ratio),
        (None, Some(d)) => signed(d, &f.unit),
    }
}

fn band(f: &Figure) -> String {
    match (f.band_ratio, f.band) {
        (Some(b), _) => format!("±{:.1} %", b * 100.0),
        (None, Some(b)) => format!("±{}", signed(b, &f.unit).trim_start_matches('+')),
        (None, None) => "-".to_owned(),
    }
}

/// A figure's row: figure (unit), A, B, delta, band (the call is each table's own).
fn cells(f: &Figure) -> [String; 5] {
    [
        format!("{} ({})", f.name, f.unit),
        val(f.a, &f.unit),
        val(f.b, &f.unit),
        change(f),
        band(f),
    ]
}

fn headline(c: &Comparison) -> String {
    match c.figure("seconds_per_proof") {
        Some(f) => format!(
            "seconds per proof {} -> {} ({}, noise band {}): {}",
            val(f.a, "s"),
            val(f.b, "s"),
            change(f),
            band(f),
            f.change.as_str()
        ),
        None => "no seconds per proof".to_owned(),
    }
}

fn text(c: &Comparison, names: &[String; 2]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "A: {} ({} complete jobs, {})",
        names[0], c.jobs[0], c.verdicts[0]
    );
    let _ = writeln!(
        o,
        "B: {} ({} complete jobs, {})",
        names[1], c.jobs[1], c.verdicts[1]
    );
    let _ = writeln!(o, "{}", headline(c));
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  {:<36} {:>10} {:>10} {:>10} {:>10}  call",
        "figure", "A", "B", "delta", "band"
    );
    for f in &c.figures {
        let [name, a, b, delta, band] = cells(f);
        let line = format!(
            "  {name:<36} {a:>10} {b:>10} {delta:>10} {band:>10}  {}",
            f.change.as_str()
        );
        let _ = writeln!(o, "{}", line.trim_end());
    }
    if c.verdicts[0] != c.verdicts[1] {
        let _ = writeln!(o, "\nverdict: {} -> {}", c.verdicts[0], c.verdicts[1]);
    }
    let _ = writeln!(o, "\nmethod: {}", c.method);
    o
}

fn markdown(c: &Comparison, names: &[String; 2]) -> String {
    let mut o = String::new();
    let esc = |s: &str| s.replace('|', "\\|").replace('`', "'");
    let _ = writeln!(o, "**{}**\n", headline(c));
    let _ = writeln!(
        o,
        "A: `{}` ({} jobs, {}) · B: `{}` ({} jobs, {})\n",
        esc(&names[0]),
        c.jobs[0],
        c.verdicts[0],
        esc(&names[1]),
        c.jobs[1],
        c.verdicts[1]
    );
    let _ = writeln!(o, "| figure | A | B | delta | band | call |");
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---|");
    for f in &c.figures {
        let call = match f.change {
            Change::Worse => "**worse**",
            Change::Better => "**better**",
            other => other.as_str(),
        };
        let _ = writeln!(o, "| {} | {call} |", cells(f).join(" | "));
    }
    let _ = writeln!(o, "\n<sub>{}</sub>", esc(&c.method));
    o
}

fn html(c: &Comparison, names: &[String; 2], a: &Side, b: &Side) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>proofline compare</title>\n<style>\
body{{font-family:Helvetica,Arial,sans-serif;margin:16px;background:#fafafa}}\
table{{border-collapse:collapse;font-size:13px}}td,th{{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}}\
td:first-child,th:first-child{{text-align:left}}.worse{{color:#c00;font-weight:bold}}.better{{color:#070;font-weight:bold}}\
.chart{{overflow-x:auto;border:1px solid #ddd;background:#fff;margin:8px 0}}.method{{color:#666;font-size:12px}}\
</style></head><body>\n<h1>proofline compare</h1>\n<p><b>{}</b></p>\n<p>A: {} ({} jobs, {}) &middot; B: {} ({} jobs, {})</p>\n",
        html_escape(&headline(c)),
        html_escape(&names[0]),
        c.jobs[0],
        c.verdicts[0],
        html_escape(&names[1]),
        c.jobs[1],
        c.verdicts[1]
    );
    let _ = writeln!(
        o,
        "<table id=\"figures\"><tr><th>figure</th><th>A</th><th>B</th><th>delta</th><th>band</th><th>call</th></tr>"
    );
    for f in &c.figures {
        let tds: String = cells(f)
            .iter()
            .map(|c| format!("<td>{}</td>", html_escape(c)))
            .collect();
        let call = f.change.as_str();
        let _ = writeln!(o, "<tr>{tds}<td class=\"{call}\">{call}</td></tr>");
    }
    let _ = writeln!(
        o,
        "</table>\n<p class=\"method\">{}</p>",
        html_escape(&c.method)
    );
    // both timelines on one time scale: the longer run sets it
    let span = |s: &Side| {
        s.timeline.as_ref().map_or(0, |t| {
            let (t0, t1) = t.span();
            t1 - t0
        })
    };
    let scale = span(a).max(span(b));
    for (name, tag, s) in [(&names[0], "A", a), (&names[1], "B", b)] {
        let _ = writeln!(o, "<h2>{tag}: {}</h2>", html_escape(name));
        match &s.timeline {
            Some(t) => {
                let doc = crate::chart::svg_on_scale(t, &format!("{tag}: {name}"), scale);
                let _ = writeln!(o, "<div class=\"chart\" id=\"chart-{tag}\">{doc}</div>");
            }
            None if s.from_json => {
                let _ = writeln!(
                    o,
                    "<p>a JSON report: no timeline to draw (compare the logs to see one)</p>"
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "<p>a journal: no timeline drawn (`proofline chart` reads files)</p>"
                );
            }
        }
    }
    o.push_str("<script>console.log('proofline-compare-ready ' + document.querySelectorAll('rect.bar').length + ' bars');</script>\n</body></html>\n");
    o
}
