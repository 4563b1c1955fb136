//! The text form of a [`Report`]: the tables cuzk's engineers wrote by hand.

use std::fmt::{self, Write as _};

use crate::dist::DistSummary;
use crate::report::{JobRecord, Report};

/// A table with right-aligned columns (the first left-aligned).
///
/// Cells are written into one string, not one `String` each: a report of 10 000 jobs has
/// some 200 000 cells, and their allocations were most of the time it took to render.
#[derive(Debug, Default)]
struct Table {
    /// Every cell's text, one after another.
    text: String,
    /// Where each cell ends in `text`, and its width in characters.
    cells: Vec<(usize, usize)>,
    /// Where each row ends in `cells`.
    rows: Vec<usize>,
}

impl Table {
    fn new(header: &[&str]) -> Self {
        let mut t = Table::default();
        t.row(header);
        t
    }

    /// Room for `rows` more rows of the header's width, of cells of about 12 bytes (a job
    /// id is more, a count less): the table of a 10 000-job report grew by doubling, a copy
    /// of megabytes each time.
    fn reserve(&mut self, rows: usize) {
        // (the header is the first row: where it ends in `cells` is its width)
        let cols = self.rows.first().copied().unwrap_or_default();
        self.rows.reserve(rows);
        self.cells.reserve(rows * cols);
        self.text.reserve(rows * cols * 12);
    }

    /// Adds a cell to the row being written.
    fn cell(&mut self, v: impl fmt::Display) {
        let start = self.text.len();
        let _ = write!(self.text, "{v}");
        self.cells
            .push((self.text.len(), width(&self.text[start..])));
    }

    /// Ends the row being written.
    fn end_row(&mut self) {
        self.rows.push(self.cells.len());
    }

    /// Adds a cell of seconds ([`Secs`]), written without `fmt` in the usual case.
    fn cell_secs(&mut self, ms: Option<u64>) {
        match ms {
            Some(v) if v % 100 != 50 => {
                let start = self.text.len();
                let tenths = v / 100 + u64::from(v % 100 > 50);
                let mut b = itoa::Buffer::new();
                self.text.push_str(b.format(tenths / 10));
                self.text.push('.');
                self.text.push(char::from(b'0' + (tenths % 10) as u8));
                self.cells.push((self.text.len(), self.text.len() - start));
            }
            _ => self.cell(Secs(ms)),
        }
    }

    /// Adds a cell of a signed number, `-` for none ([`MsI`]).
    fn cell_int(&mut self, v: Option<i64>) {
        let start = self.text.len();
        match v {
            Some(v) => self.text.push_str(itoa::Buffer::new().format(v)),
            None => self.text.push('-'),
        }
        self.cells.push((self.text.len(), self.text.len() - start));
    }

    /// Adds a cell of a count, or of a count out of another (`done/of`).
    fn cell_count(&mut self, n: u64, of: Option<u64>) {
        let start = self.text.len();
        let mut b = itoa::Buffer::new();
        self.text.push_str(b.format(n));
        if let Some(of) = of {
            self.text.push('/');
            self.text.push_str(b.format(of));
        }
        self.cells.push((self.text.len(), self.text.len() - start));
    }

    /// Adds a cell of text as it is (no formatting machinery: a job id, a kind).
    fn cell_str(&mut self, s: &str) {
        self.text.push_str(s);
        self.cells.push((self.text.len(), width(s)));
    }

    /// Adds a whole row.
    fn row<S: AsRef<str>>(&mut self, cells: &[S]) {
        for c in cells {
            self.cell_str(c.as_ref());
        }
        self.end_row();
    }

    /// The rows, each a list of (text, width).
    fn each_row(&self) -> impl Iterator<Item = impl Iterator<Item = (&str, usize)>> {
        let mut cell_from = 0;
        self.rows.iter().map(move |&row_end| {
            let cells = &self.cells[cell_from..row_end];
            let mut text_from = if cell_from == 0 {
                0
            } else {
                self.cells[cell_from - 1].0
            };
            cell_from = row_end;
            cells.iter().map(move |&(end, w)| {
                let s = &self.text[text_from..end];
                text_from = end;
                (s, w)
            })
        })
    }

    fn render(&self, out: &mut String) {
        let mut widths: Vec<usize> = Vec::new();
        for row in self.each_row() {
            for (c, (_, w)) in row.enumerate() {
                if c == widths.len() {
                    widths.push(0);
                }
                widths[c] = widths[c].max(w);
            }
        }
        // every row at its widest: no growing (and copying) of a report of 20 000 rows
        let row_max = 1 + widths.iter().map(|w| w + 2).sum::<usize>();
        out.reserve(self.rows.len() * row_max);
        for row in self.each_row() {
            let start = out.len();
            out.push_str("  ");
            for (c, (cell, w)) in row.enumerate() {
                if c > 0 {
                    out.push_str("  ");
                }
                let pad = widths[c].saturating_sub(w);
                if c == 0 {
                    out.push_str(cell);
                    spaces(out, pad);
                } else {
                    spaces(out, pad);
                    out.push_str(cell);
                }
            }
            let line = out[start..].trim_end().len();
            out.truncate(start + line);
            out.push('\n');
        }
    }
}

/// Appends `n` spaces.
fn spaces(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// The width of a cell in characters.
fn width(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

/// Milliseconds as seconds with one decimal (`-` for none), as `{:.1}` of `ms / 1000.0`
/// writes them, but in integers (float formatting was a visible share of a large report),
/// except exactly halfway between two tenths, where the float's own rounding is kept.
struct Secs(Option<u64>);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("-"),
            Some(v) if v % 100 != 50 => {
                let tenths = v / 100 + u64::from(v % 100 > 50);
                write!(f, "{}.{}", tenths / 10, tenths % 10)
            }
            Some(v) => write!(f, "{:.1}", v as f64 / 1000.0),
        }
    }
}

fn secs(ms: Option<u64>) -> String {
    Secs(ms).to_string()
}

/// Signed milliseconds, `-` for none.
struct MsI(Option<i64>);

impl fmt::Display for MsI {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("-"),
            Some(v) => write!(f, "{v}"),
        }
    }
}

fn ms_i(v: Option<i64>) -> String {
    MsI(v).to_string()
}

fn pct(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0))
}

fn dist_row(name: &str, d: &DistSummary) -> Vec<String> {
    vec![
        name.to_owned(),
        d.count.to_string(),
        ms_i(d.p50_ms),
        ms_i(d.p90_ms),
        ms_i(d.p99_ms),
        ms_i(d.max_ms),
        if d.count > 0 {
            format!("{:.1}", d.total_ms as f64 / 1000.0)
        } else {
            "-".to_owned()
        },
    ]
}

fn job_table(jobs: &[JobRecord], with_status: bool) -> Table {
    let mut t = Table::new(&[
        "job",
        "kind",
        "parts",
        "wall s",
        "synth s",
        "gpu s",
        "synth->gpu s",
        "cold start s",
        "status",
    ]);
    t.reserve(jobs.len());
    let mut status = String::new();
    for j in jobs {
        t.cell_str(&j.job_id);
        t.cell_str(j.proof_kind.as_deref().unwrap_or("-"));
        t.cell_count(
            u64::from(j.partitions_done),
            j.partitions_expected.map(u64::from),
        );
        t.cell_secs(j.wall_ms);
        t.cell_secs(Some(j.synthesis_total_ms));
        t.cell_secs(Some(j.gpu_total_ms));
        t.cell_secs(j.first_synth_to_first_gpu_ms);
        t.cell_secs(j.cold_start_ms);
        status.clear();
        if with_status {
            status.extend(
                j.status
                    .as_str()
                    .chars()
                    .map(|c| if c == '_' { ' ' } else { c }),
            );
        }
        if j.unobserved_gpu {
            status.push_str(if status.is_empty() {
                "unobserved gpu"
            } else {
                ", unobserved gpu"
            });
        }
        if j.attempt > 0 {
            let _ = write!(status, " (attempt {})", j.attempt + 1);
        }
        t.cell_str(status.trim());
        t.end_row();
    }
    t
}

/// What the malformed lines were, before `lines` ("line(s)", "lines"): "TIMELINE lines",
/// "CUZK_TIMING lines", or, of both kinds, `lines` alone and the counts of each
/// ("2 TIMELINE, 1 CUZK_TIMING").
fn malformed_kinds(l: &crate::report::LineStats, lines: &str) -> (String, Option<String>) {
    let timing = l.malformed_timing.min(l.malformed);
    match (l.malformed - timing, timing) {
        (_, 0) => (format!("TIMELINE {lines}"), None),
        (0, _) => (format!("CUZK_TIMING {lines}"), None),
        (timeline, timing) => (
            lines.to_owned(),
            Some(format!("{timeline} TIMELINE, {timing} CUZK_TIMING")),
        ),
    }
}

/// ", first at line N" of a count whose first line is known (nothing otherwise).
pub fn first_at(line: Option<u64>) -> String {
    line.map(|n| format!(", first at line {n}"))
        .unwrap_or_default()
}

/// What a reading did not use, one phrase each, worded alike by every command that reads a
/// log (`analyze` on stderr beside JSON and CSV and for `--strict`, `export`): lines that do
/// not parse, lines over the length limit, a cut last TIMELINE line, events rejected as
/// impossible, conflicting records, stray lines, and `CUZK_TIMING:` lines with a value
/// over an hour. `cfg` is the reading's, whose reorder window and restart threshold the
/// stray lines' phrases name.
pub fn not_used(r: &Report, cfg: &crate::EngineConfig) -> Vec<String> {
    let (lines, events, kernel) = (&r.lines, &r.events, r.kernel.as_ref());
    let reorder_window_ms = cfg.get_reorder_window_ms();
    let restart_after_s = cfg.get_restart_after_ms() / 1000;
    let mut unused = Vec::new();
    if lines.malformed > 0 {
        let first = lines.malformed_examples.first();
        let (what, each) = malformed_kinds(lines, "line(s)");
        unused.push(format!(
            "{} malformed {what}{}{}",
            lines.malformed,
            each.map(|each| format!(" ({each})")).unwrap_or_default(),
            first
                .map(|m| format!(", first at line {}: {}", m.line, printable(&m.error)))
                .unwrap_or_default()
        ));
    }
    if lines.oversized > 0 {
        unused.push(oversized(lines));
    }
    if lines.truncated_last_line {
        unused.push(format!(
            "the last line (line {}) is a TIMELINE line with no newline: cut short, not used",
            lines.lines
        ));
    }
    // a count's first example, found by how its kind of message ends (the examples of
    // rejections, conflicts, stray lines and stuck intervals share one list)
    let e_g = |ends: &[&str]| {
        events
            .conflict_examples
            .iter()
            .find(|e| ends.iter().any(|end| e.ends_with(end)))
            .map(|e| format!(", e.g. {}", printable(e)))
            .unwrap_or_default()
    };
    if events.rejected > 0 {
        unused.push(format!(
            "{} TIMELINE event(s) rejected as impossible{}",
            events.rejected,
            e_g(&["event ignored"])
        ));
    }
    if events.conflicts > 0 {
        // ("..., first kept" or "... after the job had ended, ignored")
        unused.push(format!(
            "{} conflicting TIMELINE record(s), not used{}",
            events.conflicts,
            e_g(&["first kept", "ended, ignored"])
        ));
    }
    // (a line far behind is stray past the reorder window; one far ahead, past the gap
    // that reads as a restart)
    if events.stray_late > 0 {
        unused.push(format!(
            "{} stray TIMELINE line(s) far behind the newest, not used (--reorder-window-ms is {reorder_window_ms} ms)",
            events.stray_late
        ));
    }
    if events.stray_early > 0 {
        unused.push(format!(
            "{} stray TIMELINE line(s) far ahead of the newest, not used (--restart-after-s is {restart_after_s} s)",
            events.stray_early
        ));
    }
    if let Some(k) = kernel.filter(|k| k.absurd_lines > 0) {
        unused.push(format!(
            "{} CUZK_TIMING line(s) ignored for a value over an hour{}: {}",
            k.absurd_lines,
            first_at(lines.first_absurd_timing),
            printable(k.absurd_example.as_deref().unwrap_or("-"))
        ));
    }
    unused
}

/// [`not_used`]'s phrase for the lines over the length limit.
fn oversized(l: &crate::report::LineStats) -> String {
    format!(
        "{} line(s) over {} bytes, skipped{}",
        l.oversized,
        crate::reader::MAX_LINE_BYTES,
        first_at(l.first_oversized)
    )
}

/// [`not_used`]'s phrases but the one of the lines over the length limit: what is left to
/// say after [`none_readable`]'s warning, which said them.
pub fn not_used_but_oversized(unused: &[String], l: &crate::report::LineStats) -> Vec<String> {
    let said = oversized(l);
    unused.iter().filter(|u| **u != said).cloned().collect()
}

/// What a log of which every line was over the length limit holds, in words (`None` for
/// any other log): "no TIMELINE line proofline could read", not "no TIMELINE line", since
/// the lines skipped unread may have been TIMELINE lines.
pub fn none_readable(l: &crate::report::LineStats) -> Option<String> {
    (l.oversized > 0 && l.oversized == l.lines).then(|| {
        format!(
            "has no TIMELINE line proofline could read: {} of its {} line(s) are over {} bytes and were skipped unread{}",
            l.oversized,
            l.lines,
            crate::reader::MAX_LINE_BYTES,
            first_at(l.first_oversized)
        )
    })
}

/// What restarts that fell back less than halfway to offset 0 may be, in words (`None`
/// without such restarts): the text report's warning, and `analyze`'s beside JSON and CSV.
pub fn shallow_restarts(e: &crate::report::EventStats) -> Option<String> {
    (e.shallow_restarts > 0).then(|| {
        format!(
            "{} of the {} restart(s) fell back less than halfway to offset 0 ({}): a restarted prover counts its offsets from its own start again, so these may be lines further out of order than the reorder window; if the prover did not restart, a wider --reorder-window-ms reads them as one run",
            e.shallow_restarts,
            e.runs.saturating_sub(1),
            printable(e.shallow_restart_example.as_deref().unwrap_or("-"))
        )
    })
}

/// What makes a reading's figures doubtful though every line was used, one warning each:
/// restarts that may be disorder ([`shallow_restarts`]), partitions past their job's
/// count ([`partitions_past_count`]) and prefix rules that matched no job
/// ([`rules_matching_no_job`]). The text report has them among its warnings; the
/// commands that write another form (`analyze` beside JSON and CSV, `export`, `whatif`) say
/// them on stderr.
pub fn doubts(e: &crate::report::EventStats) -> Vec<String> {
    [
        shallow_restarts(e),
        partitions_past_count(e),
        rules_matching_no_job(e),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The prefix rules that no job id started with, in words (`None` when every rule matched
/// one, or the reading had no event: then nothing could).
pub fn rules_matching_no_job(e: &crate::report::EventStats) -> Option<String> {
    let rules = &e.rules_matching_no_job;
    (e.events > 0 && !rules.is_empty()).then(|| {
        format!(
            "{} matched no job: no job the reading used has an id starting with {} (matched from the id's first character, case and all)",
            one_line(&rules.join(", ")),
            if rules.len() == 1 {
                "its prefix"
            } else {
                "their prefixes"
            }
        )
    })
}

/// What events of a partition past the count that completes their job say, in words
/// (`None` without any): the count is lower than the prover's.
pub fn partitions_past_count(e: &crate::report::EventStats) -> Option<String> {
    (e.partitions_past_count > 0).then(|| {
        format!(
            "{} event(s) of a partition past the count that completes its job ({}): that count is lower than the prover's, so jobs completed early and their later lines read as conflicts and new attempts; a --partitions-for or --partitions set too low?",
            e.partitions_past_count,
            printable(e.partition_past_count_example.as_deref().unwrap_or("-"))
        )
    })
}

/// Renders the report as text: for a terminal, so that what came from the log (job ids,
/// proof kinds, quoted lines) cannot drive it ([`printable`]).
pub fn render(r: &Report) -> String {
    render_with(r, &crate::Nouns::default())
}

/// [`render`], in the prover's own words for its jobs ([`crate::Nouns`]: "Batches" where
/// cuzk's report says "Sectors").
///
/// A report whose jobs' and transitions' tables both have thousands of rows has the second
/// rendered on a scoped thread beside the first (on the calling thread where none can be
/// started); the text is the same.
pub fn render_with(r: &Report, nouns: &crate::Nouns) -> String {
    let raw = render_raw(r, nouns, PARALLEL_ROWS);
    match printable(&raw) {
        // (no copy of a report with nothing to escape, the usual one)
        std::borrow::Cow::Borrowed(_) => raw,
        std::borrow::Cow::Owned(safe) => safe,
    }
}

/// [`printable`], the newline written as `\u{a}` too: for what is said on one line (a
/// warning that names a rule given on the command line).
pub fn one_line(s: &str) -> String {
    printable(s).replace('\n', "\\u{a}")
}

/// `s` safe to print on a terminal: control characters other than the newline (escape
/// sequences that set a window's title or clear the screen), DEL, C1 controls and the
/// characters that reorder text (bidirectional overrides and isolates) are written as
/// `\u{..}`; the rest is as it is.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    // printable ASCII and newlines, the usual text, looked at a byte at a time (a look at
    // each char was a third of the time a 30 000-job report took to render)
    // (in blocks, each folded without an early exit: the compiler turns that into vector code)
    let plain = |b: &u8| matches!(b, b' '..=b'~' | b'\n');
    let all_plain = s
        .as_bytes()
        .chunks(64)
        .all(|c| c.iter().fold(true, |ok, b| ok & plain(b)));
    if all_plain || !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Rows of each of the jobs' and transitions' tables from which [`render_raw`] renders the
/// two on two threads.
const PARALLEL_ROWS: usize = 2048;

/// The jobs section (nothing when the report has none).
fn jobs_section(o: &mut String, r: &Report, nouns: &crate::Nouns) {
    // (rows past the report's limit are in no format's rows, JSON's included; a section
    // whose rows were all left out still says how many)
    if !r.jobs.is_empty() || r.jobs_omitted > 0 {
        let _ = writeln!(
            o,
            "\n{} (complete, in completion order)",
            crate::nouns::capitalized(nouns.jobs())
        );
        if !r.jobs.is_empty() {
            job_table(&r.jobs, false).render(o);
        }
        if r.jobs_omitted > 0 {
            let _ = writeln!(o, "  {}", omitted(r.jobs_omitted, !r.jobs.is_empty()));
        }
    }
}

/// The transitions section (empty when the report has none): rendered apart, so that a
/// long report renders it beside the jobs' table ([`render_raw`]).
fn transitions_section(r: &Report) -> String {
    let mut o = String::new();
    if !r.transitions.is_empty() || r.transitions_omitted > 0 {
        let _ = writeln!(o, "\nTransitions (consecutive jobs per GPU, ms)");
        let mut t = Table::new(&[
            "gpu",
            "from",
            "to",
            "gap",
            "hand-off",
            "overlap",
            "synth lead",
        ]);
        t.reserve(r.transitions.len());
        for x in &r.transitions {
            t.cell_count(u64::from(x.gpu), None);
            t.cell_str(&x.from_job);
            t.cell_str(&x.to_job);
            t.cell_int(Some(x.gap_ms));
            t.cell_int(x.handoff_ms);
            t.cell_count(x.overlap_ms, None);
            t.cell_int(x.synthesis_lead_ms);
            t.end_row();
        }
        if !r.transitions.is_empty() {
            t.render(&mut o);
        }
        if r.transitions_omitted > 0 {
            let _ = writeln!(
                o,
                "  {}",
                omitted(r.transitions_omitted, !r.transitions.is_empty())
            );
        }
    }
    o
}

/// [`render_with`] before its escapes; the jobs' and transitions' tables rendered on two
/// threads when each has `parallel_rows` rows or more.
fn render_raw(r: &Report, nouns: &crate::Nouns, parallel_rows: usize) -> String {
    let mut o = String::new();
    let l = &r.lines;
    let e = &r.events;
    if l.lines > 0 || l.truncated_last_line {
        let _ = write!(
            o,
            "Input: {} lines, {} TIMELINE, {} malformed{}{}; ",
            l.lines,
            l.timeline_lines,
            l.malformed,
            if l.oversized > 0 {
                format!(
                    ", {} longer than {} MiB (skipped{})",
                    l.oversized,
                    crate::reader::MAX_LINE_BYTES >> 20,
                    first_at(l.first_oversized)
                )
            } else {
                String::new()
            },
            if l.truncated_last_line {
                ", last line cut short (not used)"
            } else {
                ""
            },
        );
    } else if l.from_input {
        o.push_str("Input: empty (no lines); ");
    } else {
        o.push_str("Input: live; ");
    }
    let _ = writeln!(
        o,
        "{} events, {} duplicates dropped, {} conflicts, {} late, {} run{}",
        e.events,
        e.duplicates,
        e.conflicts,
        e.late,
        e.runs,
        match (e.runs, e.shallow_restarts) {
            (1, _) => "",
            (_, 0) => "s (daemon restarts)",
            // (the warning below says which)
            _ => "s (daemon restarts, or lines far out of order)",
        },
    );
    for w in doubts(e) {
        let _ = writeln!(o, "Warning: {w}");
    }
    if let Some(err) = &l.read_error {
        let _ = writeln!(
            o,
            "Input ended early: {err}; every figure covers the {} lines read before it",
            l.lines
        );
    }
    if e.evicted_over_cap > 0 {
        let _ = writeln!(
            o,
            "{} jobs evicted as incomplete to stay within the cap on jobs in flight (the oldest first; --max-jobs-in-flight)",
            e.evicted_over_cap
        );
    }
    if e.after_eviction > 0 {
        // (evicted over the cap or for silence: with the cap reached, it is the likelier)
        let why = if e.evicted_over_cap > 0 {
            "evicted: the cap on jobs in flight (--max-jobs-in-flight) is below the jobs this log has in flight at once, or the job timeout (--job-timeout-s, 1800 s by default) is shorter than its jobs are quiet"
        } else {
            "evicted for silence: the job timeout (--job-timeout-s, 1800 s by default) is shorter than this log's jobs are quiet"
        };
        let _ = writeln!(
            o,
            "Warning: {} events came for jobs after they were {why}; the figures split those jobs in attempts",
            e.after_eviction
        );
    }
    if e.gpu_stuck > 0 {
        let _ = writeln!(
            o,
            "Warning: {} GPU interval(s) stuck: open past the larger of 60 s and 4x the longest their GPU closed (a call that never returned, or a prover that died inside GPU work); not counted busy from the last sign of work on their GPU (named below)",
            e.gpu_stuck
        );
    }
    if e.stray_late + e.stray_early > 0 {
        let _ = writeln!(
            o,
            "{} stray line(s) out of the window and alone ({} behind, {} ahead of the lines around them): not used (lines further out of order than --reorder-window-ms read so, and their jobs as stuck or incomplete: a wider window uses them)",
            e.stray_late + e.stray_early,
            e.stray_late,
            e.stray_early
        );
    }
    if e.unattributed > 0 {
        let _ = writeln!(
            o,
            "{} span edges could not be tied to a job (no job_id on the span or its ancestors): not observed, not used",
            e.unattributed
        );
    }
    if e.overlapping_attempts > 0 {
        let _ = writeln!(
            o,
            "Warning: {} job(s) had a second attempt under the same id in flight at once (a partition started twice while the job ran: Curio resubmits after its timeout): {}; their figures are the first attempt's, the second's lines counted as conflicts",
            e.overlapping_attempts,
            e.overlapping_examples
                .iter()
                .map(|n| printable(n))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if e.concurrent_requests > 0 {
        let _ = writeln!(
            o,
            "{} request(s) came for a job id while another request of it was in flight (a retry that did not cancel the first); told apart by their `request=`, each is a job of its own, the next attempt",
            e.concurrent_requests
        );
    }
    for d in &r.gpu_mapping_disagreements {
        let _ = writeln!(o, "Warning: {d}");
    }
    let _ = writeln!(o, "\nVerdict: {}\n", nouns.rephrase(&r.verdict.sentence));

    let s = &r.summary;
    let kinds: Vec<String> = s
        .complete_by_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(o, "Throughput");
    let _ = writeln!(
        o,
        "  jobs complete {}{}, incomplete {}",
        s.jobs_complete,
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        },
        s.jobs_incomplete
    );
    let _ = writeln!(
        o,
        "  seconds per proof (steady state) {}  over {} s",
        s.seconds_per_proof
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.2} s")),
        secs(Some(s.steady_state_ms))
    );
    if let Some(f) = &r.floors {
        let _ = writeln!(
            o,
            "  floors: GPU {:.2} s/proof ({}), synthesis {:.2} s/proof ({} workers)",
            f.gpu_s_per_proof,
            if f.gpu_basis == "lock_held" {
                "GPU lock held, CUZK_TIMING"
            } else {
                "TIMELINE GPU intervals"
            },
            f.synthesis_s_per_proof,
            f.synthesis_workers
        );
        let _ = writeln!(o, "  {}", nouns.rephrase(&f.sentence));
    }
    let _ = writeln!(o, "  cold start {} s", secs(s.cold_start_ms));
    let _ = writeln!(
        o,
        "  GPU busy (merged intervals, all GPUs) {} of the steady state, {} overall",
        pct(s.steady_busy_ratio),
        pct(s.busy_ratio)
    );
    let _ = writeln!(
        o,
        "  GPU queue depth max {}, mean {:.2}",
        r.queue.max_depth, r.queue.mean_depth
    );
    if !r.gpu_mapping.is_empty() {
        let _ = writeln!(o, "  {}", r.gpu_mapping);
    }
    kernel_section(
        &mut o,
        r.kernel.as_ref(),
        r.events.duplicates,
        r.lines.first_absurd_timing,
    );

    // The jobs' and the transitions' tables are most of a long report's text: rendered on
    // two threads when both are long (20 000 rows: 11 ms on one thread, after the reading);
    // on this one where no thread can be had
    let transitions = std::thread::scope(|s| {
        let apart = (r.jobs.len().min(r.transitions.len()) >= parallel_rows)
            .then(|| {
                std::thread::Builder::new()
                    .name("proofline-text".into())
                    .spawn_scoped(s, || transitions_section(r))
                    .ok()
            })
            .flatten();
        jobs_section(&mut o, r, nouns);
        match apart {
            Some(t) => t
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => transitions_section(r),
        }
    });
    o.push_str(&transitions);

    if !r.gpus.is_empty() {
        let _ = writeln!(
            o,
            "\nGPUs (busy = union of worker intervals; serial = their sum)"
        );
        if let Some(src) = &r.gpu_interval_source {
            let _ = writeln!(
                o,
                "GPU intervals from {src}, not the prover's own GPU_START/GPU_END: they can start and end elsewhere (docs/layer.md, \"Adopting proofline in cuzk\")"
            );
        }
        let [(_, small), (_, mid), (_, large)] = crate::engine::GAP_SIZE_CLASSES;
        let small = format!("gaps {small}");
        let mut t = Table::new(&[
            "gpu",
            "worker ids",
            "busy s",
            "serial s",
            "concurrency",
            "busy",
            "steady busy",
            &small,
            mid,
            large,
            "idle total s",
            &format!("cross-{}", nouns.job()),
            &format!("intra-{}", nouns.job()),
            "idle, queue waiting s",
            "idle, queue empty s",
        ]);
        for g in &r.gpus {
            let b = |i: usize| {
                g.idle_gaps_by_size.get(i).map_or_else(String::new, |x| {
                    format!("{} ({} s)", x.count, secs(Some(x.total_ms)))
                })
            };
            t.row(&[
                g.gpu.to_string(),
                g.workers
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                secs(Some(g.busy_ms)),
                secs(Some(g.serial_sum_ms)),
                g.concurrency
                    .map_or_else(|| "-".to_owned(), |c| format!("{c:.2}")),
                pct(g.busy_ratio),
                pct(g.steady_busy_ratio),
                b(0),
                b(1),
                b(2),
                format!(
                    "{} ({})",
                    secs(Some(g.idle_total.total_ms)),
                    g.idle_total.count
                ),
                format!(
                    "{} ({} s)",
                    g.idle_cross_sector.count,
                    secs(Some(g.idle_cross_sector.total_ms))
                ),
                format!(
                    "{} ({} s)",
                    g.idle_intra_sector.count,
                    secs(Some(g.idle_intra_sector.total_ms))
                ),
                secs(Some(g.idle_with_queue_ms)),
                secs(Some(g.idle_queue_empty_ms)),
            ]);
        }
        t.render(&mut o);
    }

    let _ = writeln!(o, "\nStages per partition (ms)");
    let mut t = Table::new(&["stage", "count", "p50", "p90", "p99", "max", "total s"]);
    let st = &r.stages;
    for (name, d) in [
        ("synthesis", &st.synthesis),
        ("queue", &st.queue),
        ("lock wait", &st.lock_wait),
        ("gpu", &st.gpu),
        ("synth_ms (printed)", &st.synth_reported),
        ("gpu_ms (printed)", &st.gpu_reported),
        ("job wall", &r.job_wall),
        ("transition gap", &r.transitions_summary.gap),
        ("hand-off", &r.transitions_summary.handoff),
        ("synthesis lead", &r.transitions_summary.synthesis_lead),
        ("GPU idle gap", &r.idle_gaps),
    ] {
        t.row(&dist_row(name, d));
    }
    t.render(&mut o);

    let incomplete_omitted = s.jobs_incomplete.saturating_sub(r.incomplete.len() as u64);
    if !r.incomplete.is_empty() || incomplete_omitted > 0 {
        let _ = writeln!(o, "\nIncomplete jobs");
        if !r.incomplete.is_empty() {
            job_table(&r.incomplete, true).render(&mut o);
        }
        if incomplete_omitted > 0 {
            let _ = writeln!(
                o,
                "  {}",
                omitted(incomplete_omitted, !r.incomplete.is_empty())
            );
        }
    }
    if l.malformed > 0 {
        let (what, each) = malformed_kinds(l, "lines");
        let _ = writeln!(
            o,
            "\nMalformed {what} ({} in all{}; the first {}):",
            l.malformed,
            each.map(|each| format!(": {each}")).unwrap_or_default(),
            l.malformed_examples.len()
        );
        for m in &l.malformed_examples {
            let _ = writeln!(o, "  line {}: {}", m.line, m.error);
        }
    }
    if !e.conflict_examples.is_empty() {
        let _ = writeln!(
            o,
            "\nEvents not used, or in doubt ({} in all; the first {}):",
            e.conflicts + e.rejected + e.stray_late + e.stray_early + e.gpu_stuck,
            e.conflict_examples.len()
        );
        for c in &e.conflict_examples {
            let _ = writeln!(o, "  {c}");
        }
    }
    o
}

/// What a table left out: rows past the report's limit (`--max-rows`), which no format's
/// rows hold (the aggregates above count them).
fn omitted(n: u64, more: bool) -> String {
    format!(
        "... {}{n} row(s) not kept (the report's row limit, --max-rows): the figures above count them",
        if more { "and " } else { "" }
    )
}

/// The kernel time section: what `CUZK_TIMING:` lines say, or that there were none.
fn kernel_section(
    o: &mut String,
    k: Option<&crate::report::KernelReport>,
    duplicates: u64,
    first_absurd: Option<u64>,
) {
    let Some(k) = k else {
        let _ = writeln!(
            o,
            "\nKernel time: not observed (no CUZK_TIMING lines): GPU busy above is the TIMELINE intervals, which include CPU work done while the GPU lock is held"
        );
        return;
    };
    let p = |d: &crate::dist::DistSummary| {
        format!(
            "p50 {} p90 {} p99 {} s",
            secs3(d.p50_ms),
            secs3(d.p90_ms),
            secs3(d.p99_ms)
        )
    };
    let _ = writeln!(
        o,
        "\nKernel time (CUZK_TIMING: {} timing lines, {} other)",
        k.timing_lines, k.other_lines
    );
    if k.absurd_lines > 0 {
        let _ = writeln!(
            o,
            "  note: {} timing line(s) ignored, each with a value over an hour (corrupt, or not cuzk's), {}{}",
            k.absurd_lines,
            first_absurd.map_or_else(|| "e.g. ".to_owned(), |n| format!("first at line {n}: ")),
            printable(k.absurd_example.as_deref().unwrap_or("-"))
        );
    }
    if duplicates > 0 {
        // (a log read twice, or joined with an overlapping part: the repeated TIMELINE
        // lines were dropped, and its timing lines, which carry no job or time, cannot be)
        let _ = writeln!(
            o,
            "  note: {duplicates} repeated TIMELINE line(s) were dropped; repeated CUZK_TIMING lines cannot be told from new ones, so the figures below may count some twice"
        );
    }
    let _ = writeln!(
        o,
        "  kernel utilisation {} beside GPU busy (merged intervals) {}; kernels fill {} of the busy time",
        pct(k.kernel_utilisation),
        pct(k.busy_ratio),
        pct(k.kernel_fill)
    );
    let _ = writeln!(
        o,
        "  {} calls, {} GPU threads; kernel per call {} (over the {} calls whose lines were followed on one GPU; {} calls' lines interleaved: totals only)",
        k.calls,
        k.gpu_threads,
        p(&k.kernel_per_call),
        k.kernel_per_call.count,
        k.calls_interleaved
    );
    let _ = writeln!(
        o,
        "  GPU lock held {} s against {} s of kernels: {} s of CPU work inside the lock; held per call {}",
        secs(Some(k.lock_held_ms)),
        secs(Some(k.kernel_ms)),
        secs(Some(k.lock_held_not_kernel_ms)),
        p(&k.lock_held)
    );
    let _ = writeln!(o, "  lock wait {}", p(&k.lock_wait));
    let _ = writeln!(
        o,
        "  CPU on the critical path: prep_msm {}, b_g2_msm {}; GPU waiting on prep_msm (barrier) {}",
        p(&k.prep_msm),
        p(&k.b_g2_msm),
        p(&k.barrier_wait)
    );
    let _ = writeln!(o, "  attribution: {}", k.attribution);
    if let Some(c) = k.coverage {
        if c < crate::engine::KERNEL_COVERAGE_MIN {
            let _ = writeln!(
                o,
                "  the timing lines cover {} of the GPU intervals: their figures do not decide the verdict (from {})",
                pct(Some(c)),
                pct(Some(crate::engine::KERNEL_COVERAGE_MIN))
            );
        }
    }
    for g in &k.gpus {
        let _ = writeln!(
            o,
            "  GPU {}: kernels {} s, utilisation {} (busy {})",
            g.gpu,
            secs(Some(g.kernel_ms)),
            pct(g.kernel_utilisation),
            pct(g.busy_ratio)
        );
    }
    if !k.unknown_keys.is_empty() {
        let _ = writeln!(
            o,
            "  keys not known (kept, not used): {}",
            k.unknown_keys.join(", ")
        );
    }
    if k.ntt_h_lines > 0 {
        let stages: Vec<String> = k
            .ntt_h
            .iter()
            .map(|s| format!("{} {}", printable(&s.key), p(&s.ms)))
            .collect();
        let _ = writeln!(
            o,
            "  CUZK_NTT_H ({} lines; the H polynomial per call): {}",
            k.ntt_h_lines,
            stages.join(", ")
        );
    }
}

fn secs3(ms: Option<i64>) -> String {
    ms.map_or_else(|| "-".to_owned(), |v| format!("{:.2}", v as f64 / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events for a job after its eviction are blamed on the cap on jobs in flight when it
    /// evicted jobs (they were blamed on the job timeout alone), on the timeout otherwise.
    #[test]
    fn events_after_an_eviction_name_the_cap_when_it_evicted() {
        // the second job evicts the first at once (the cap), or the first is silent past the
        // timeout; then a line of the first comes
        for (cfg, end, says) in [
            (
                crate::EngineConfig::default().max_jobs_in_flight(1),
                2,
                "after they were evicted: the cap on jobs in flight (--max-jobs-in-flight)",
            ),
            (
                crate::EngineConfig::default().job_timeout_ms(10_000),
                60_000,
                "after they were evicted for silence: the job timeout",
            ),
        ] {
            let lines = [
                "TIMELINE,0,SYNTH_START,a,partition=0".to_owned(),
                "TIMELINE,1,SYNTH_START,b,partition=0".to_owned(),
                format!("TIMELINE,{end},SYNTH_END,a,partition=0,synth_ms={end}"),
            ];
            let mut e = crate::Engine::new(cfg);
            for l in &lines {
                let ev = crate::parse_line(l).unwrap().unwrap();
                e.ingest(&ev, &mut crate::sink::NoUpdates);
            }
            e.finish(&mut crate::sink::NoUpdates);
            let r = e.report();
            assert!(r.events.after_eviction > 0, "{:?}", r.events);
            let text = render(&r);
            assert!(text.contains(says), "{text}");
        }
    }

    /// A long report's two tables rendered on two threads read as rendered on one.
    #[test]
    fn a_long_report_renders_alike_on_one_thread_and_two() {
        let mut e = crate::Engine::new(crate::EngineConfig::default().expected_partitions(Some(1)));
        for j in 0..2_500u64 {
            let t = j * 100;
            for l in [
                format!("TIMELINE,{t},SYNTH_START,job-{j},partition=0"),
                format!(
                    "TIMELINE,{},SYNTH_END,job-{j},partition=0,synth_ms=10",
                    t + 10
                ),
                format!(
                    "TIMELINE,{},GPU_START,job-{j},worker={},partition=0",
                    t + 20,
                    j % 2
                ),
                format!(
                    "TIMELINE,{},GPU_END,job-{j},worker={},partition=0,gpu_ms=50",
                    t + 70,
                    j % 2
                ),
            ] {
                let ev = crate::parse_line(&l).unwrap().unwrap();
                e.ingest(&ev, &mut crate::sink::NoUpdates);
            }
        }
        e.finish(&mut crate::sink::NoUpdates);
        let r = e.report();
        assert!(
            r.jobs.len().min(r.transitions.len()) >= PARALLEL_ROWS,
            "{} {}",
            r.jobs.len(),
            r.transitions.len()
        );
        let nouns = crate::Nouns::default();
        let one = render_raw(&r, &nouns, usize::MAX);
        assert_eq!(render_raw(&r, &nouns, PARALLEL_ROWS), one);
        assert!(
            one.contains("job-2499") && one.contains("Transitions"),
            "{one}"
        );
    }

    #[test]
    fn seconds_read_as_the_float_formatting_writes_them() {
        let float = |v: u64| format!("{:.1}", v as f64 / 1000.0);
        for v in (0..200_000).chain([
            999_949,
            999_950,
            999_951,
            86_400_000,
            u64::from(u32::MAX),
            123_456_789_050,
        ]) {
            assert_eq!(secs(Some(v)), float(v), "{v} ms");
        }
        assert_eq!(secs(None), "-");
    }

    /// The table's number cells written without `fmt` read as the `Display` forms they
    /// replace.
    #[test]
    fn number_cells_read_as_their_display_forms() {
        let mut fast = Table::default();
        let mut slow = Table::default();
        let values = (0..3_000u64).chain([
            49,
            50,
            51,
            150,
            999_950,
            999_951,
            86_400_000,
            u64::MAX / 1000,
            u64::MAX,
        ]);
        for v in values {
            fast.cell_secs(Some(v));
            slow.cell(Secs(Some(v)));
            fast.cell_count(v, None);
            slow.cell(v);
            fast.cell_count(v, Some(v / 3));
            slow.cell(format_args!("{}/{}", v, v / 3));
            let i = (v as i64).wrapping_neg();
            fast.cell_int(Some(i));
            slow.cell(MsI(Some(i)));
            fast.end_row();
            slow.end_row();
        }
        fast.cell_secs(None);
        slow.cell(Secs(None));
        fast.cell_int(None);
        slow.cell(MsI(None));
        fast.end_row();
        slow.end_row();
        let (mut a, mut b) = (String::new(), String::new());
        fast.render(&mut a);
        slow.render(&mut b);
        assert_eq!(a, b);
    }

    /// Control characters are escaped wherever they fall (the plain-text look goes in
    /// blocks of 64 bytes), and a text with none is not copied.
    #[test]
    fn printable_escapes_controls_anywhere_and_borrows_plain_text() {
        let plain = "sector  12.5\n".repeat(40);
        assert!(matches!(printable(&plain), std::borrow::Cow::Borrowed(_)));
        let unicode = format!("{plain}é ok — ≥\n");
        assert!(matches!(printable(&unicode), std::borrow::Cow::Borrowed(_)));
        for at in [0, 1, 63, 64, 65, 127, 128, plain.len() - 1] {
            for c in ['\u{1b}', '\t', '\r', '\u{7f}', '\u{9b}', '\u{202e}'] {
                let mut s = plain.clone();
                s.insert(at, c);
                let out = printable(&s);
                assert!(!out.contains(c), "{c:?} at {at}");
                assert!(
                    out.contains(&format!("\\u{{{:x}}}", u32::from(c))),
                    "{c:?} at {at}"
                );
            }
        }
    }

    /// Malformed lines are named by their kind, TIMELINE, CUZK_TIMING, or both counted, in
    /// what was not used and in the text report's heading.
    #[test]
    fn malformed_lines_are_named_by_kind() {
        let mut r = crate::Engine::default().report();
        for (malformed, timing, said, heading) in [
            (
                3,
                0,
                "3 malformed TIMELINE line(s)",
                "Malformed TIMELINE lines (3 in all; the first 0):",
            ),
            (
                3,
                3,
                "3 malformed CUZK_TIMING line(s)",
                "Malformed CUZK_TIMING lines (3 in all; the first 0):",
            ),
            (
                3,
                1,
                "3 malformed line(s) (2 TIMELINE, 1 CUZK_TIMING)",
                "Malformed lines (3 in all: 2 TIMELINE, 1 CUZK_TIMING; the first 0):",
            ),
        ] {
            (r.lines.lines, r.lines.malformed, r.lines.malformed_timing) = (9, malformed, timing);
            let unused = not_used(&r, &crate::EngineConfig::default());
            assert_eq!(unused, [said]);
            let text = render(&r);
            assert!(text.contains(heading), "{text}");
        }
    }

    #[test]
    fn tables_pad_columns_and_trim_lines() {
        let mut t = Table::new(&["job", "s", "note"]);
        t.row(&["a", "12.5", ""]);
        t.row(&["long-id", "3.0", "é ok"]);
        let mut out = String::new();
        t.render(&mut out);
        assert_eq!(
            out,
            "  job         s  note\n  a        12.5\n  long-id   3.0  é ok\n"
        );
    }
}
