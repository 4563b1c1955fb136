//! What the pictures are drawn from: every partition's stages, the GPUs' busy edges, idle
//! gaps and transitions, collected from the engine's updates, and laid out in lanes.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, bail};
use proofline_core::EngineConfig;
use proofline_core::report::{IdleGap, PartitionRecord, Report, TransitionRecord};
use proofline_core::sink::Update;

/// Everything a chart needs: the partitions of a window of the log, the GPUs' busy edges,
/// idle gaps and transitions in it, and the report of the whole log.
#[derive(Debug, Default)]
pub struct Timeline {
    pub parts: Vec<Arc<PartitionRecord>>,
    pub gaps: Vec<Arc<IdleGap>>,
    pub transitions: Vec<Arc<TransitionRecord>>,
    /// (gpu, busy, t_ms) edges in time order.
    pub busy: Vec<(u32, bool, u64)>,
    pub report: Option<Report>,
    pub gpu_workers_per_device: u32,
    /// What of the log is drawn.
    pub window: Window,
}

/// The part of the log a chart draws: memory is bounded by the window, not by the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Window {
    /// Where it starts (timeline ms; 0: the log's start).
    pub from_ms: u64,
    /// Partitions in the log (every one the engine finished).
    pub log_partitions: u64,
    /// Whether partitions after the window were left out.
    pub capped: bool,
}

impl Window {
    /// Whether the whole log is drawn.
    pub fn whole(&self) -> bool {
        self.from_ms == 0 && !self.capped
    }
}

/// Partitions drawn at most by default: 500 PoRep sectors, about ten hours of a two-GPU
/// prover, and a chart of some 50 MB in memory.
pub const DEFAULT_MAX_PARTITIONS: usize = 5_000;

impl Timeline {
    /// Runs a log through the engine and keeps what the window `[from_ms, ...)` of at most
    /// `max_partitions` partitions (by the order jobs finish) needs. Memory is bounded by the
    /// window; the report covers the whole log.
    pub fn from_log(
        source: crate::input::Source<'_>,
        cfg: EngineConfig,
        from_ms: u64,
        max_partitions: usize,
    ) -> Result<(Timeline, crate::input::LogRun)> {
        let wpd = cfg.get_gpu_workers_per_device();
        let mut t = Timeline {
            gpu_workers_per_device: wpd.max(1),
            window: Window {
                from_ms,
                ..Window::default()
            },
            ..Timeline::default()
        };
        // each GPU's state before the window, so that a GPU busy as it opens is drawn busy
        let mut before: BTreeMap<u32, bool> = BTreeMap::new();
        let mut opened: BTreeMap<u32, ()> = BTreeMap::new();
        let run = source.read(
            cfg,
            |u: Update| {
                if let Update::Partition(_) = &u {
                    t.window.log_partitions += 1;
                }
                // past the window nothing more is kept (busy edges, gaps and transitions
                // included), so that memory stays bounded however long the log
                if t.window.capped {
                    return;
                }
                match u {
                    Update::Partition(p) => {
                        if p.synth_start_ms.or(p.gpu_start_ms).unwrap_or(0) < from_ms {
                            return;
                        }
                        if t.parts.len() < max_partitions {
                            t.parts.push(p);
                        } else {
                            t.window.capped = true;
                        }
                    }
                    Update::IdleGap(g) if g.start_ms >= from_ms => t.gaps.push(g),
                    Update::Transition(x) if x.to_first_gpu_start_ms >= from_ms => {
                        t.transitions.push(x)
                    }
                    Update::GpuBusy { gpu, busy, t_ms } if t_ms < from_ms => {
                        before.insert(gpu, busy);
                    }
                    Update::GpuBusy { gpu, busy, t_ms } => {
                        if opened.insert(gpu, ()).is_none() && before.get(&gpu) == Some(&true) {
                            t.busy.push((gpu, true, from_ms));
                        }
                        t.busy.push((gpu, busy, t_ms));
                    }
                    _ => {}
                }
            },
            None,
            &mut || false,
        )?;
        if t.parts.is_empty() {
            run.result()?;
            if from_ms > 0 {
                bail!(
                    "{} holds no complete partition from {} s on (--from-s)",
                    source.describe(),
                    from_ms / 1000
                );
            }
            bail!("{} holds no complete partition to draw", source.describe());
        }
        t.report = Some(run.report.clone());
        Ok((t, run))
    }

    /// First and last instant of anything drawn.
    pub fn span(&self) -> (u64, u64) {
        let mut lo = u64::MAX;
        let mut hi = 0;
        for p in &self.parts {
            for t in p.instants().into_iter().flatten() {
                lo = lo.min(t);
                hi = hi.max(t);
            }
        }
        (lo, hi.max(lo + 1))
    }

    /// Jobs in order of first appearance (their colour index).
    pub fn job_index(&self) -> BTreeMap<Arc<str>, usize> {
        let mut order: Vec<(u64, Arc<str>)> = Vec::new();
        let mut seen = BTreeMap::new();
        for p in &self.parts {
            let start = p.synth_start_ms.or(p.gpu_start_ms).unwrap_or(0);
            match seen.get_mut(&p.job_id) {
                Some(s) if *s > start => *s = start,
                Some(_) => {}
                None => {
                    seen.insert(p.job_id.clone(), start);
                }
            }
        }
        order.extend(seen.into_iter().map(|(j, s)| (s, j)));
        order.sort();
        order
            .into_iter()
            .enumerate()
            .map(|(i, (_, j))| (j, i))
            .collect()
    }

    /// The GPU of a partition.
    pub fn gpu_of(&self, p: &PartitionRecord) -> u32 {
        p.gpu
            .or(p.worker.map(|w| w / self.gpu_workers_per_device))
            .unwrap_or(0)
    }
}

/// Intervals laid out in rows: (partition index, start, end, row), and the number of rows.
#[derive(Debug, Default)]
pub struct Lanes {
    pub items: Vec<(usize, u64, u64, usize)>,
    pub rows: usize,
}

impl Timeline {
    fn lanes(
        &self,
        idx: impl Iterator<Item = usize>,
        max_rows: usize,
        edges: impl Fn(&PartitionRecord) -> Option<(u64, u64)>,
    ) -> Lanes {
        let iv: Vec<(usize, (u64, u64))> = idx
            .filter_map(|i| Some((i, edges(&self.parts[i])?)))
            .collect();
        let (row, rows) = self::rows(&iv.iter().map(|x| x.1).collect::<Vec<_>>(), max_rows);
        Lanes {
            items: iv
                .into_iter()
                .zip(row)
                .map(|((i, (s, e)), r)| (i, s, e, r))
                .collect(),
            rows,
        }
    }

    /// Synthesis intervals in slots.
    pub fn synthesis_lanes(&self, max_rows: usize) -> Lanes {
        self.lanes(0..self.parts.len(), max_rows, |p| {
            Some((p.synth_start_ms?, p.synth_end_ms?))
        })
    }

    /// Queue intervals (queued .. picked up) in rows.
    pub fn queue_lanes(&self, max_rows: usize) -> Lanes {
        self.lanes(0..self.parts.len(), max_rows, |p| {
            Some((p.queue_start_ms?, p.pickup_ms.or(p.gpu_start_ms)?))
        })
    }

    /// Per (GPU, worker): its partitions' lock wait + GPU intervals in rows (a worker's
    /// intervals overlap with cuzk's split finalizer).
    pub fn worker_lanes(&self, max_rows: usize) -> BTreeMap<(u32, u32), Lanes> {
        let mut by_worker: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for (i, p) in self.parts.iter().enumerate() {
            if p.gpu_start_ms.is_some() && p.gpu_end_ms.is_some() {
                by_worker
                    .entry((self.gpu_of(p), p.worker.unwrap_or(0)))
                    .or_default()
                    .push(i);
            }
        }
        by_worker
            .into_iter()
            .map(|(k, idx)| {
                (
                    k,
                    self.lanes(idx.into_iter(), max_rows, |p| {
                        Some((p.pickup_ms.or(p.gpu_start_ms)?, p.gpu_end_ms?))
                    }),
                )
            })
            .collect()
    }
}

/// Assigns intervals to the fewest rows so that none overlap in a row (greedy, by start).
/// Returns each interval's row and the number of rows.
pub fn rows(intervals: &[(u64, u64)], max_rows: usize) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..intervals.len()).collect();
    order.sort_by_key(|&i| intervals[i]);
    let mut ends: Vec<u64> = Vec::new();
    let mut row = vec![0; intervals.len()];
    for i in order {
        let (s, e) = intervals[i];
        let r = match ends.iter().position(|&end| end <= s) {
            Some(r) => r,
            None if ends.len() < max_rows.max(1) => {
                ends.push(0);
                ends.len() - 1
            }
            None => ends.len() - 1, // over the cap: share the last row
        };
        ends[r] = e.max(s + 1);
        row[i] = r;
    }
    (row, ends.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_do_not_overlap() {
        let iv = [(0, 10), (5, 15), (10, 20), (12, 13), (20, 30)];
        let (row, n) = rows(&iv, 10);
        assert_eq!(n, 3);
        for i in 0..iv.len() {
            for j in 0..i {
                if row[i] == row[j] {
                    assert!(
                        iv[i].1 <= iv[j].0 || iv[j].1 <= iv[i].0,
                        "{:?} {:?}",
                        iv[i],
                        iv[j]
                    );
                }
            }
        }
        assert_eq!(rows(&iv, 1).1, 1);
    }
}
