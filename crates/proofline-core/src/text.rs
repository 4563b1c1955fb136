//! The text form of a [`Report`]: the tables cuzk's engineers wrote by hand.

use std::fmt::Write as _;

use crate::dist::DistSummary;
use crate::report::{JobRecord, Report};

/// A table with right-aligned columns (the first left-aligned).
#[derive(Debug, Default)]
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Self {
        Table {
            rows: vec![header.iter().map(|s| (*s).to_owned()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self, out: &mut String) {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in &self.rows {
            let mut line = String::from("  ");
            for (c, cell) in row.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                if c == 0 {
                    let _ = write!(line, "{cell:<w$}", w = widths[c]);
                } else {
                    let _ = write!(line, "{cell:>w$}", w = widths[c]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

fn secs(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".to_owned(), |v| format!("{:.1}", v as f64 / 1000.0))
}

fn ms_i(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
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
    for j in jobs {
        let parts = match j.partitions_expected {
            Some(n) => format!("{}/{}", j.partitions_done, n),
            None => j.partitions_done.to_string(),
        };
        let mut status = if with_status {
            j.status.as_str().replace('_', " ")
        } else {
            String::new()
        };
        if j.unobserved_gpu {
            status.push_str(if status.is_empty() {
                "unobserved gpu"
            } else {
                ", unobserved gpu"
            });
        }
        if j.attempt > 0 {
            status.push_str(&format!(" (attempt {})", j.attempt + 1));
        }
        t.row(vec![
            j.job_id.to_string(),
            j.proof_kind.as_deref().unwrap_or("-").to_owned(),
            parts,
            secs(j.wall_ms),
            secs(Some(j.synthesis_total_ms)),
            secs(Some(j.gpu_total_ms)),
            secs(j.first_synth_to_first_gpu_ms),
            secs(j.cold_start_ms),
            status.trim().to_owned(),
        ]);
    }
    t
}

/// Renders the report as text.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let l = &r.lines;
    let e = &r.events;
    if l.lines > 0 || l.truncated_last_line {
        let _ = write!(
            o,
            "Input: {} lines, {} TIMELINE, {} malformed{}; ",
            l.lines,
            l.timeline_lines,
            l.malformed,
            if l.truncated_last_line {
                ", last line cut short (not used)"
            } else {
                ""
            },
        );
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
        if e.runs == 1 {
            ""
        } else {
            "s (daemon restarts)"
        },
    );
    let _ = writeln!(o, "\nVerdict: {}\n", r.verdict.sentence);

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

    if !r.jobs.is_empty() {
        let _ = writeln!(o, "\nSectors (complete, in completion order)");
        job_table(&r.jobs, false).render(&mut o);
        if r.jobs_omitted > 0 {
            let _ = writeln!(
                o,
                "  ... and {} more (see --format json or csv)",
                r.jobs_omitted
            );
        }
    }

    if !r.transitions.is_empty() {
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
        for x in &r.transitions {
            t.row(vec![
                x.gpu.to_string(),
                x.from_job.to_string(),
                x.to_job.to_string(),
                x.gap_ms.to_string(),
                ms_i(x.handoff_ms),
                x.overlap_ms.to_string(),
                ms_i(x.synthesis_lead_ms),
            ]);
        }
        t.render(&mut o);
        if r.transitions_omitted > 0 {
            let _ = writeln!(o, "  ... and {} more", r.transitions_omitted);
        }
    }

    if !r.gpus.is_empty() {
        let _ = writeln!(
            o,
            "\nGPUs (busy = union of worker intervals; serial = their sum)"
        );
        let mut t = Table::new(&[
            "gpu",
            "workers",
            "busy s",
            "serial s",
            "concurrency",
            "busy",
            "steady busy",
            "gaps <50ms",
            "50-500ms",
            ">500ms",
            "idle total s",
            "cross-sector",
            "intra-sector",
            "idle, queue waiting s",
            "idle, queue empty s",
        ]);
        for g in &r.gpus {
            let b = |i: usize| {
                g.idle_gaps_by_size.get(i).map_or_else(String::new, |x| {
                    format!("{} ({} s)", x.count, secs(Some(x.total_ms)))
                })
            };
            t.row(vec![
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
        t.row(dist_row(name, d));
    }
    t.render(&mut o);

    if !r.incomplete.is_empty() {
        let _ = writeln!(o, "\nIncomplete jobs");
        job_table(&r.incomplete, true).render(&mut o);
    }
    if l.malformed > 0 {
        let _ = writeln!(
            o,
            "\nMalformed TIMELINE lines ({} in all; the first {}):",
            l.malformed,
            l.malformed_examples.len()
        );
        for m in &l.malformed_examples {
            let _ = writeln!(o, "  line {}: {}", m.line, m.error);
        }
    }
    if !e.conflict_examples.is_empty() {
        let _ = writeln!(
            o,
            "\nConflicting records ({} in all; the first {}):",
            e.conflicts + e.rejected,
            e.conflict_examples.len()
        );
        for c in &e.conflict_examples {
            let _ = writeln!(o, "  {c}");
        }
    }
    o
}
