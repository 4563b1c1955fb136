//! `proofline chart`: a Gantt chart of the pipeline, as SVG or as an HTML page that zooms and
//! pans.
//!
//! ```text
//!  header: verdict and key numbers
//!  axis (seconds)
//!  Synthesis   slot 0..n    ███ sector-coloured synthesis bars
//!  Queue       row 0..m     ░░░ synthesized, waiting for a GPU worker
//!  GPU g       busy         ▇▇▇▇ merged busy ▕ idle gap (length) ▏  ┆ cross-sector transition
//!              worker w     ▪███ lock wait + GPU bars (sub-rows where a worker's intervals overlap)
//!                            ▁▁  kernel time of the bar's GPU call, where CUZK_TIMING lines give it
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use ::svg::Document;
use ::svg::node::element::{Group, Line, Rectangle, Style, Text, Title};
use anyhow::{Context, Result};

use crate::input::{EngineArgs, OutputFile};
use crate::timeline::{self, Lanes, Timeline};

#[derive(Debug, clap::Args)]
pub(crate) struct ChartArgs {
    /// The log: a file (plain or gzip) or `-` for stdin. Or the journal, with
    /// --journal-unit, --journal-file or --journal-dir.
    #[arg(value_name = "FILE|-",
        required_unless_present_any = ["journal_unit", "journal_file", "journal_dir"],
        conflicts_with_all = ["journal_unit", "journal_file", "journal_dir"])]
    input: Option<PathBuf>,
    #[command(flatten)]
    journal: crate::journal::JournalArgs,
    /// Where to write the chart: `.svg`, or `.html` for a page that zooms and pans.
    #[arg(short, long, default_value = "timeline.svg")]
    output: PathBuf,
    /// Draw at most this many partitions (the first to finish from --from-s on); the
    /// header's figures always cover the whole log. Range 1..=50000: a chart of 50,000
    /// partitions is about 13 MB of SVG, what a browser still opens; for more, chart a part
    /// (--from-s) or export the trace (proofline export) for Perfetto.
    #[arg(long, default_value_t = timeline::DEFAULT_MAX_PARTITIONS, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=50_000))]
    max_partitions: usize,
    /// Draw from this time of the log on (seconds of its TIMELINE offsets).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    from_s: u64,
    #[command(flatten)]
    engine: EngineArgs,
}

pub(crate) fn run(args: &ChartArgs) -> Result<()> {
    args.journal.check_window(args.input.as_deref())?;
    args.engine.check()?;
    let source = crate::input::Source::of(args.input.as_deref(), &args.journal);
    let out = OutputFile::create(source.path(), &args.output, FORMATS)?;
    let (t, run) = timeline::Timeline::from_log(
        source,
        args.engine.config()?,
        args.from_s.saturating_mul(1000),
        args.max_partitions,
    )?;
    if t.window.capped {
        eprintln!(
            "proofline: the log has {} partitions; {} are drawn (--max-partitions, --from-s); the header's figures cover them all",
            t.window.log_partitions,
            t.parts.len()
        );
    }
    let title = format!("proofline timeline: {}", source.describe());
    write(&t, &title, out)?;
    eprintln!("proofline: wrote {}", args.output.display());
    run.result()
}

/// What `chart` writes, by extension.
pub(crate) const FORMATS: &[(&str, &str)] = &[
    ("svg", "SVG"),
    ("html", "HTML page that zooms and pans"),
    ("htm", "HTML"),
];

const LEFT: f64 = 170.0;
const RIGHT: f64 = 30.0;
const HEADER: f64 = 78.0;
const AXIS: f64 = 26.0;
const ROW: f64 = 16.0;
const GROUP_GAP: f64 = 14.0;
/// Rows of one lane group at most (more overlapping intervals share the last row).
const MAX_ROWS: usize = 64;

/// Sector colours (Tableau 10 and a few more), by order of first appearance.
const PALETTE: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
    "#af7aa1", "#17becf", "#8c564b", "#bcbd22",
];

const CSS: &str = "text{font-family:Helvetica,Arial,sans-serif;font-size:11px;fill:#222}\
.h1{font-size:15px;font-weight:bold}.lane{fill:#555}.group{font-weight:bold;fill:#000}\
.tick{stroke:#ddd;stroke-width:1}.ticklabel{fill:#777;font-size:10px}\
.bar{stroke:none}.synthesis{opacity:0.95}.queue{opacity:0.35}.lock_wait{opacity:0.55}.gpu{opacity:0.9}\
.busy{fill:#2ca02c;opacity:0.5}.gap{fill:#d62728}.gaplabel{fill:#d62728;font-size:10px}\
.transition{stroke:#222;stroke-width:1;stroke-dasharray:3,2}.translabel{font-size:9px;fill:#222}.window{fill:#555;font-size:10px}.kernel{fill:#111;opacity:0.8}";

/// The chart's width in pixels for a run of `ms` milliseconds: ~5 px a second for short runs,
/// capped so that 500 sectors stay drawable (the HTML page zooms).
fn plot_width(ms: u64) -> f64 {
    (ms as f64 / 1000.0 * 5.0).clamp(900.0, 24_000.0)
}

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn nice_step(span_s: f64, px: f64) -> f64 {
    let target = span_s / (px / 90.0).max(1.0);
    let mag = 10f64.powf(target.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= target)
        .unwrap_or(10.0 * mag)
}

/// Builds the SVG document.
pub fn svg(t: &Timeline, title: &str) -> Document {
    let (t0, t1) = t.span();
    svg_on_scale(t, title, t1 - t0)
}

/// [`svg`] on the time scale of a run `scale_ms` long: charts drawn with the same
/// `scale_ms` have the same pixels per second (`compare` stacks two on one scale).
pub fn svg_on_scale(t: &Timeline, title: &str, scale_ms: u64) -> Document {
    let (t0, t1) = t.span();
    let scale_ms = scale_ms.max(t1 - t0).max(1);
    let width = plot_width(scale_ms) * (t1 - t0) as f64 / scale_ms as f64;
    let x = |ms: u64| LEFT + (ms.saturating_sub(t0)) as f64 / (t1 - t0) as f64 * width;
    let w = |a: u64, b: u64| ((b.saturating_sub(a)) as f64 / (t1 - t0) as f64 * width).max(0.6);
    let colour = t.job_index();
    let col = |job: &str| PALETTE[colour.get(job).copied().unwrap_or(0) % PALETTE.len()];

    let mut bars = Group::new().set("id", "bars");
    let mut labels = Group::new().set("id", "labels");
    let mut y = HEADER + AXIS;

    // synthesis slots, then the GPU queue
    for (group, stage, lanes, min_rows) in [
        ("Synthesis", "synthesis", t.synthesis_lanes(MAX_ROWS), 0),
        ("GPU queue", "queue", t.queue_lanes(MAX_ROWS), 1),
    ] {
        labels = labels.add(
            Text::new(group)
                .set("x", 8)
                .set("y", y + 11.0)
                .set("class", "group"),
        );
        if stage == "synthesis" {
            for r in 0..lanes.rows {
                labels = labels.add(
                    Text::new(format!("slot {r}"))
                        .set("x", 100)
                        .set("y", y + r as f64 * ROW + 11.0)
                        .set("class", "lane"),
                );
            }
        }
        for &(i, s, e, r) in &lanes.items {
            let p = &t.parts[i];
            bars = bars.add(bar(
                x(s),
                y + r as f64 * ROW,
                w(s, e),
                col(&p.job_id),
                stage,
                &tip(p, stage, s, e),
            ));
        }
        y += lanes.rows.max(min_rows) as f64 * ROW + GROUP_GAP;
    }

    // GPUs: a busy row with gaps and transitions, then a row per worker
    let mut by_gpu: BTreeMap<u32, Vec<(u32, Lanes)>> = BTreeMap::new();
    for ((gpu, worker), lanes) in t.worker_lanes(4) {
        by_gpu.entry(gpu).or_default().push((worker, lanes));
    }
    for g in t
        .busy
        .iter()
        .map(|b| b.0)
        .chain(t.gaps.iter().map(|g| g.gpu))
    {
        by_gpu.entry(g).or_default();
    }
    let mut marks = Group::new().set("id", "marks");
    for (gpu, workers) in &by_gpu {
        labels = labels.add(
            Text::new(format!("GPU {gpu}"))
                .set("x", 8)
                .set("y", y + 11.0)
                .set("class", "group"),
        );
        labels = labels.add(
            Text::new("busy")
                .set("x", 100)
                .set("y", y + 11.0)
                .set("class", "lane"),
        );
        let mut open: Option<u64> = None;
        for &(g, busy, at) in t.busy.iter().filter(|b| b.0 == *gpu) {
            match (busy, open) {
                (true, None) => open = Some(at),
                (false, Some(s)) => {
                    bars = bars.add(
                        Rectangle::new()
                            .set("x", x(s))
                            .set("y", y + 2.0)
                            .set("width", w(s, at))
                            .set("height", ROW - 4.0)
                            .set("class", "busy")
                            .add(Title::new(format!("GPU {g} busy {}", secs(at - s)))),
                    );
                    open = None;
                }
                _ => {}
            }
        }
        for gap in t.gaps.iter().filter(|g| g.gpu == *gpu) {
            let gx = x(gap.start_ms);
            let gw = w(gap.start_ms, gap.end_ms);
            marks = marks.add(
                Rectangle::new()
                    .set("x", gx)
                    .set("y", y)
                    .set("width", gw.max(1.5))
                    .set("height", ROW)
                    .set("class", format!("gap {}", gap.boundary.as_str()))
                    .add(Title::new(format!(
                        "GPU {gpu} idle {} ({}) before {}",
                        secs(gap.len_ms()),
                        gap.boundary.as_str().replace('_', "-"),
                        gap.next_job
                    ))),
            );
            // wide enough for its label, or in the largest size class
            let largest = proofline_core::engine::GAP_SIZE_CLASSES.len() - 1;
            if gw > 28.0 || proofline_core::engine::gap_size_class(gap.len_ms()) == largest {
                marks = marks.add(
                    Text::new(secs(gap.len_ms()))
                        .set("x", gx + gw / 2.0)
                        .set("y", y - 2.0)
                        .set("text-anchor", "middle")
                        .set("class", "gaplabel"),
                );
            }
        }
        let rows_here: usize = workers.iter().map(|(_, l)| l.rows).sum::<usize>().max(1);
        let lanes_h = ROW + rows_here as f64 * ROW;
        for tr in t.transitions.iter().filter(|tr| tr.gpu == *gpu) {
            let tx = x(tr.to_first_gpu_start_ms);
            marks = marks.add(
                Line::new()
                    .set("x1", tx)
                    .set("x2", tx)
                    .set("y1", y - 4.0)
                    .set("y2", y + lanes_h)
                    .set("class", "transition")
                    .add(Title::new(format!(
                        "{} -> {}: gap {} ms, hand-off {}, synthesis lead {}",
                        tr.from_job,
                        tr.to_job,
                        tr.gap_ms,
                        tr.handoff_ms.map_or("-".into(), |h| format!("{h} ms")),
                        tr.synthesis_lead_ms
                            .map_or("-".into(), |l| format!("{l} ms"))
                    ))),
            );
            marks = marks.add(
                Text::new(format!("{:+.1} s", tr.gap_ms as f64 / 1000.0))
                    .set("x", tx + 2.0)
                    .set("y", y + lanes_h - 2.0)
                    .set("class", "translabel"),
            );
        }
        y += ROW;
        for (worker, lanes) in workers {
            labels = labels.add(
                Text::new(format!("worker {worker}"))
                    .set("x", 100)
                    .set("y", y + 11.0)
                    .set("class", "lane"),
            );
            for &(i, _, _, r) in &lanes.items {
                let p = &t.parts[i];
                let row_y = y + r as f64 * ROW;
                if let (Some(pick), Some(start)) = (p.pickup_ms, p.gpu_start_ms) {
                    bars = bars.add(bar(
                        x(pick),
                        row_y,
                        w(pick, start),
                        col(&p.job_id),
                        "lock_wait",
                        &tip(p, "lock wait", pick, start),
                    ));
                }
                let (s, e) = (p.gpu_start_ms.unwrap_or(0), p.gpu_end_ms.unwrap_or(0));
                bars = bars.add(bar(
                    x(s),
                    row_y,
                    w(s, e),
                    col(&p.job_id),
                    "gpu",
                    &tip(p, "gpu", s, e),
                ));
                // its call's kernel time (CUZK_TIMING), where the call could be given to
                // it: a dark stripe as long as the kernels ran, from the bar's start (its
                // length is known, not its place inside the interval)
                if let Some(k) = p.kernel_ms {
                    let len = k.min(e.saturating_sub(s));
                    marks = marks.add(
                        Rectangle::new()
                            .set("x", x(s))
                            .set("y", row_y + ROW - 5.0)
                            .set("width", w(s, s + len))
                            .set("height", 3.0)
                            .set("class", "kernel")
                            .add(Title::new(format!(
                                "{} p{}: kernels {} of the {} GPU interval (CUZK_TIMING)",
                                p.job_id,
                                p.partition.unwrap_or(0),
                                secs(k),
                                secs(e.saturating_sub(s))
                            ))),
                    );
                }
            }
            y += lanes.rows.max(1) as f64 * ROW;
        }
        y += GROUP_GAP;
    }

    // axis and header
    let height = y + 10.0;
    let total_w = LEFT + width + RIGHT;
    let mut axis = Group::new().set("id", "axis");
    let span_s = (t1 - t0) as f64 / 1000.0;
    let step = nice_step(span_s, width);
    let mut s = 0.0;
    while s <= span_s + 1e-9 {
        let tx = LEFT + s / span_s * width;
        axis = axis
            .add(
                Line::new()
                    .set("x1", tx)
                    .set("x2", tx)
                    .set("y1", HEADER + AXIS - 6.0)
                    .set("y2", height)
                    .set("class", "tick"),
            )
            .add(
                Text::new(format!("{s:.0} s"))
                    .set("x", tx)
                    .set("y", HEADER + AXIS - 10.0)
                    .set("text-anchor", "middle")
                    .set("class", "ticklabel"),
            );
        s += step;
    }
    let mut header = Group::new().set("id", "header");
    header = header.add(Text::new(title).set("x", 8).set("y", 20).set("class", "h1"));
    if let Some(r) = &t.report {
        header = header.add(
            Text::new(r.verdict.sentence.clone())
                .set("x", 8)
                .set("y", 40),
        );
        let s = &r.summary;
        header = header.add(
            Text::new(format!(
                "{} jobs complete, {} incomplete · {} per proof (steady state) · GPU busy {} (merged intervals) · cold start {} · {} idle gaps, {} cross-sector",
                s.jobs_complete,
                s.jobs_incomplete,
                s.seconds_per_proof.map_or("-".into(), |v| format!("{v:.2} s")),
                s.steady_busy_ratio.or(s.busy_ratio).map_or("-".into(), |v| format!("{:.1}%", v * 100.0)),
                s.cold_start_ms.map_or("-".into(), secs),
                r.gpus.iter().map(|g| g.idle_total.count).sum::<u64>(),
                r.gpus.iter().map(|g| g.idle_cross_sector.count).sum::<u64>(),
            ))
            .set("x", 8)
            .set("y", 58),
        );
    }
    let (w0, w1) = t.span();
    let shown = if t.window.whole() {
        format!("{} partitions, the whole log", t.parts.len())
    } else {
        format!(
            "drawn: {} of the log's {} partitions, {} to {} of its timeline; the figures above cover the whole log",
            t.parts.len(),
            t.window.log_partitions,
            secs(w0),
            secs(w1)
        )
    };
    header = header.add(
        Text::new(shown)
            .set("x", 8)
            .set("y", 73)
            .set("class", "window"),
    );
    Document::new()
        .set("width", total_w)
        .set("height", height)
        .set("viewBox", (0, 0, total_w, height))
        .add(Style::new(CSS))
        .add(
            Rectangle::new()
                .set("width", total_w)
                .set("height", height)
                .set("fill", "#fff"),
        )
        .add(axis)
        .add(header)
        .add(labels)
        .add(bars)
        .add(marks)
}

fn tip(p: &proofline_core::report::PartitionRecord, stage: &str, s: u64, e: u64) -> String {
    let part = p
        .partition
        .map_or_else(|| "whole proof".to_owned(), |p| format!("partition {p}"));
    let worker = p
        .worker
        .map(|w| format!(", worker {w}"))
        .unwrap_or_default();
    format!(
        "{} {part}{worker}: {stage} {} ({} ms .. {} ms)",
        p.job_id,
        secs(e.saturating_sub(s)),
        s,
        e
    )
}

fn bar(x: f64, y: f64, w: f64, colour: &str, stage: &str, tip: &str) -> Rectangle {
    let (top, h) = if stage == "lock_wait" {
        (y + 5.0, ROW - 10.0)
    } else {
        (y + 1.0, ROW - 2.0)
    };
    Rectangle::new()
        .set("x", x)
        .set("y", top)
        .set("width", w)
        .set("height", h)
        .set("fill", colour)
        .set("class", format!("bar {stage}"))
        .add(Title::new(tip))
}

/// Text made safe inside HTML elements and attribute values.
pub(crate) fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An HTML page around the SVG: drag to pan, wheel (or the buttons) to zoom the time axis.
pub fn html(doc: &Document, title: &str) -> String {
    let svg = doc.to_string();
    let mut out = String::with_capacity(svg.len() + 4096);
    let esc = html_escape(title);
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc}</title>
<style>
body{{margin:0;font-family:Helvetica,Arial,sans-serif;background:#fafafa}}
#bar{{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 10px;z-index:1}}
#bar button{{margin-right:4px}} #hint{{color:#777;font-size:12px;margin-left:8px}}
#view{{overflow:hidden;cursor:grab}} #view.drag{{cursor:grabbing}} svg{{display:block}}
</style></head><body>
<div id="bar"><button id="zin">zoom in</button><button id="zout">zoom out</button><button id="reset">reset</button>
<span id="hint">wheel: zoom time · drag: pan · hover a bar for its numbers</span></div>
<div id="view">
{svg}
</div>
<script>
(function () {{
  var svg = document.querySelector('#view svg');
  var full = svg.viewBox.baseVal;
  var W = full.width, H = full.height;
  var vx = 0, vw = W;
  svg.setAttribute('width', '100%');
  svg.removeAttribute('height');
  function apply() {{
    vw = Math.min(W, Math.max(W / 400, vw));
    vx = Math.min(W - vw, Math.max(0, vx));
    svg.setAttribute('viewBox', vx + ' 0 ' + vw + ' ' + H);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.style.height = (H * Math.max(1, window.innerWidth / W)) + 'px';
  }}
  function zoom(f, cx) {{
    var at = vx + vw * cx;
    vw = vw / f;
    vx = at - vw * cx;
    apply();
  }}
  svg.addEventListener('wheel', function (e) {{
    e.preventDefault();
    var r = svg.getBoundingClientRect();
    zoom(e.deltaY < 0 ? 1.25 : 0.8, (e.clientX - r.left) / r.width);
  }}, {{ passive: false }});
  var view = document.getElementById('view'), drag = null;
  view.addEventListener('mousedown', function (e) {{ drag = {{ x: e.clientX, vx: vx }}; view.classList.add('drag'); }});
  window.addEventListener('mouseup', function () {{ drag = null; view.classList.remove('drag'); }});
  window.addEventListener('mousemove', function (e) {{
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    vx = drag.vx - (e.clientX - drag.x) / r.width * vw;
    apply();
  }});
  document.getElementById('zin').onclick = function () {{ zoom(2, 0.5); }};
  document.getElementById('zout').onclick = function () {{ zoom(0.5, 0.5); }};
  document.getElementById('reset').onclick = function () {{ vx = 0; vw = W; apply(); }};
  // a long run opens on its first quarter; a short one whole
  vw = W > 8000 ? W / 4 : W;
  apply();
  console.log('proofline-chart-ready ' + document.querySelectorAll('rect.bar').length + ' bars');
}})();
</script>
</body></html>
"#
    );
    out
}

/// Writes the chart to `out`: HTML when its name ends in `.html`/`.htm`, else SVG.
pub(crate) fn write(t: &Timeline, title: &str, out: OutputFile) -> Result<()> {
    let doc = svg(t, title);
    let body = if out.ext() == "svg" {
        doc.to_string()
    } else {
        html(&doc, title)
    };
    let mut f = out.file()?;
    std::io::Write::write_all(&mut f, body.as_bytes())
        .and_then(|()| f.sync_data())
        .context("cannot write the chart")?;
    out.commit()
}
