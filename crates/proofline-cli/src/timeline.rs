//! What the pictures are drawn from: every partition's stages, the GPUs' busy edges, idle
//! gaps and transitions, collected from the engine's updates, and laid out in lanes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use proofline_core::EngineConfig;
use proofline_core::report::{IdleGap, PartitionRecord, Report, TransitionRecord};
use proofline_core::sink::Update;

/// Everything a chart or a trace export needs.
#[derive(Debug, Default)]
pub struct Timeline {
    pub parts: Vec<Arc<PartitionRecord>>,
    pub gaps: Vec<Arc<IdleGap>>,
    pub transitions: Vec<Arc<TransitionRecord>>,
    /// (gpu, busy, t_ms) edges in time order.
    pub busy: Vec<(u32, bool, u64)>,
    pub report: Option<Report>,
    pub gpu_workers_per_device: u32,
}

/// Drawn partitions are capped so that a huge log cannot exhaust memory.
pub const DEFAULT_MAX_PARTITIONS: usize = 200_000;

impl Timeline {
    /// Runs a log through the engine and keeps what the pictures need.
    pub fn from_log(path: &Path, cfg: EngineConfig, max_partitions: usize) -> Result<Timeline> {
        let wpd = cfg.gpu_workers_per_device;
        let mut t = Timeline {
            gpu_workers_per_device: wpd.max(1),
            ..Timeline::default()
        };
        let mut too_many = false;
        let report = crate::input::run_log(path, cfg, |u| {
            // past the cap nothing more is kept (busy edges, gaps and transitions included),
            // so that memory stays bounded however long the log
            if too_many {
                return;
            }
            match u {
                Update::Partition(p) if t.parts.len() < max_partitions => t.parts.push(p),
                Update::Partition(_) => too_many = true,
                Update::IdleGap(g) => t.gaps.push(g),
                Update::Transition(x) => t.transitions.push(x),
                Update::GpuBusy { gpu, busy, t_ms } => t.busy.push((gpu, busy, t_ms)),
                Update::Job(_) | Update::NewRun { .. } => {}
            }
        })?;
        if too_many {
            eprintln!(
                "proofline: the log has more than {max_partitions} partitions; only the first are drawn (--max-partitions)"
            );
        }
        if t.parts.is_empty() {
            bail!("{} holds no complete partition to draw", path.display());
        }
        t.report = Some(report);
        Ok(t)
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
