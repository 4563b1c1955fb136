//! The pipeline's floors: the least seconds per proof each resource allows at the work the
//! log shows per sector, set beside the measured steady state, with what would change it.
//!
//! - **GPU floor**: the GPU work a sector needs that cannot overlap (per GPU call, the GPU
//!   lock's held time, `CUZK_TIMING` `mutex_held_ms`, times the calls per sector; without those
//!   lines, the union of the TIMELINE GPU intervals per sector), over the GPUs.
//! - **Synthesis floor**: the synthesis time per sector (SYNTH_START..SYNTH_END of its
//!   partitions) over the synthesis workers (the most partitions synthesized at once).
//!
//! The measured seconds per proof is at a floor when within [`AT_FLOOR`] of it: there, only
//! that resource can make the pipeline faster. (cuzk's engineers once took the *sum* of the
//! GPU intervals for a floor: an "ideal" of 70 s/proof against a measured 37.4 s/proof.)

use super::Engine;
use crate::report::Floors;

/// Within this fraction of a floor (above or below it), the measured figure is at that
/// floor; further below, the floor is overestimated.
pub const AT_FLOOR: f64 = 0.03;

impl Engine {
    /// The GPU lock's held time and calls so far (`CUZK_TIMING`), if any.
    pub(super) fn lock_held(&self) -> Option<(u64, u64)> {
        let d = &self.kernel.tally.lock_held;
        let calls = d.count();
        (calls > 0).then(|| (u64::try_from(d.sum().max(0)).unwrap_or(u64::MAX), calls))
    }

    /// The two floors in seconds per proof, from the totals so far (`busy_all_ms`: the GPUs'
    /// busy time, `gpus` of them), and what the GPU floor is measured from; `None` before a
    /// job completed. The live gauges take these; [`Engine::floors`] adds the words.
    pub(super) fn floor_figures(&self, busy_all_ms: u64, gpus: usize) -> Option<FloorFigures> {
        debug_assert!(
            self.totals.deferred.is_none(),
            "floors while another thread adds up the partitions' stages"
        );
        let t = &self.totals;
        if t.jobs_complete == 0 || t.partitions_complete == 0 || gpus == 0 {
            return None;
        }
        // the totals hold the work of every partition that ran (of jobs in flight, evicted
        // or cut by a restart too): per sector is per the sectors' worth of partitions that
        // ran, a sector being as many partitions as a completed job had
        let parts_per_sector = t.partitions_complete as f64 / t.jobs_complete as f64;
        let sectors = (t.partitions_done as f64 / parts_per_sector).max(1.0);
        // with CUZK_TIMING: the lock's held time per call, times the calls a sector makes
        let (gpu_ms, lock_held) = match self.lock_held() {
            Some((held, calls)) if held > 0 => {
                (held as f64 / calls as f64 * parts_per_sector, true)
            }
            _ => (busy_all_ms as f64 / sectors, false),
        };
        let workers = self.gauges.max_synthesizing.max(1);
        let synth_ms = t.stages.stage[0].sum().max(0) as f64 / sectors;
        Some(FloorFigures {
            gpu_s: gpu_ms / gpus as f64 / 1000.0,
            synthesis_s: synth_ms / f64::from(workers) / 1000.0,
            synthesis_per_sector_s: synth_ms / 1000.0,
            lock_held,
            gpus,
            workers,
        })
    }

    /// The floors, with the measured figure beside them and what would change it.
    pub(super) fn floors(
        &self,
        busy_all_ms: u64,
        gpu_count: usize,
        measured: Option<f64>,
    ) -> Option<Floors> {
        let f = self.floor_figures(busy_all_ms, gpu_count)?;
        let (gpu_s, synth_s, workers, gpus) = (f.gpu_s, f.synthesis_s, f.workers, f.gpus);
        // (within the margin on either side: a measured figure further below a floor than
        // that is faster than the floor allows, and says the floor is overestimated)
        let near = |floor: f64| {
            measured.is_some_and(|m| m <= floor * (1.0 + AT_FLOOR) && m >= floor * (1.0 - AT_FLOOR))
        };
        // the higher floor decides when both are near
        let (higher, lower) = if gpu_s >= synth_s {
            (("gpu", gpu_s), ("synthesis", synth_s))
        } else {
            (("synthesis", synth_s), ("gpu", gpu_s))
        };
        // faster than the higher floor: that floor is overestimated, and at neither (the
        // lower one may be near, but a run cannot be at a floor while beating a higher one)
        let beats_higher = measured.is_some_and(|m| m < higher.1 * (1.0 - AT_FLOOR));
        let at_floor = [higher, lower]
            .into_iter()
            .find(|&(_, floor)| !beats_higher && near(floor))
            .map_or("none", |(name, _)| name);
        let basis_words = if f.lock_held {
            "the GPU lock's held time"
        } else {
            "the TIMELINE GPU intervals"
        };
        let floors = format!(
            "GPU floor of {gpu_s:.2} s/proof ({basis_words} per sector over {gpus} GPU{}) and a synthesis floor of {synth_s:.2} s/proof ({:.1} s per sector over {workers} worker{})",
            if gpus == 1 { "" } else { "s" },
            f.synthesis_per_sector_s,
            if workers == 1 { "" } else { "s" },
        );
        let sentence = match (measured, at_floor) {
            (None, _) => format!(
                "{floors}; no steady state to set beside them (fewer than two jobs completed)"
            ),
            (Some(m), _) if beats_higher => {
                let (name, floor) = higher;
                let why = match (name, f.lock_held) {
                    ("gpu", true) => {
                        "fewer GPUs counted than the prover has: check --gpu-workers-per-device; or CUZK_TIMING mutex_held_ms values out of line"
                    }
                    ("gpu", false) => {
                        "fewer GPUs counted than the prover has: check --gpu-workers-per-device"
                    }
                    _ => "fewer synthesis workers seen at once than the prover has",
                };
                let name = if name == "gpu" { "GPU" } else { name };
                format!(
                    "{m:.2} s/proof against a {floors}: {:.0} % faster than the {name} floor of {floor:.2} s/proof, which no run can be: that floor is overestimated ({why}), and is no bound here",
                    (1.0 - m / floor) * 100.0
                )
            }
            (Some(m), "gpu") => format!(
                "{m:.2} s/proof against a {floors}: at the GPU floor; more synthesis workers cannot help, another GPU or faster GPU work can"
            ),
            (Some(m), "synthesis") => format!(
                "{m:.2} s/proof against a {floors}: at the synthesis floor; more synthesis workers (or faster synthesis) can help, another GPU cannot"
            ),
            (Some(m), _) => format!(
                "{m:.2} s/proof against a {floors}: {:.0} % above the higher floor; time is lost between the stages (hand-offs, idle GPUs), not in one resource",
                (m / higher.1 - 1.0) * 100.0
            ),
        };
        Some(Floors {
            gpu_s_per_proof: gpu_s,
            gpu_basis: if f.lock_held {
                "lock_held"
            } else {
                "timeline_busy"
            }
            .to_owned(),
            gpus: u32::try_from(gpus).unwrap_or(u32::MAX),
            synthesis_s_per_proof: synth_s,
            synthesis_workers: workers,
            measured_s_per_proof: measured,
            at_floor: at_floor.to_owned(),
            sentence,
        })
    }
}

/// The floors' figures, before any words.
#[derive(Debug, Clone, Copy)]
pub(super) struct FloorFigures {
    pub gpu_s: f64,
    pub synthesis_s: f64,
    pub synthesis_per_sector_s: f64,
    /// The GPU floor is the lock's held time (`CUZK_TIMING`), not the TIMELINE busy time.
    pub lock_held: bool,
    pub gpus: usize,
    pub workers: u32,
}

#[cfg(test)]
mod tests {
    use crate::sink::NoUpdates;
    use crate::{Engine, EngineConfig, parse_line};

    /// Two jobs of two partitions on one GPU (two workers), whose floors are computed by
    /// hand below.
    const HAND: [&str; 16] = [
        "TIMELINE,0,SYNTH_START,a,partition=0",
        "TIMELINE,0,SYNTH_START,a,partition=1",
        "TIMELINE,100,SYNTH_END,a,partition=0,synth_ms=100",
        "TIMELINE,100,SYNTH_END,a,partition=1,synth_ms=100",
        "TIMELINE,100,SYNTH_START,b,partition=0",
        "TIMELINE,100,SYNTH_START,b,partition=1",
        "TIMELINE,100,GPU_START,a,worker=0,partition=0",
        "TIMELINE,150,GPU_END,a,worker=0,partition=0,gpu_ms=50",
        "TIMELINE,150,GPU_START,a,worker=1,partition=1",
        "TIMELINE,200,GPU_END,a,worker=1,partition=1,gpu_ms=50",
        "TIMELINE,300,SYNTH_END,b,partition=0,synth_ms=200",
        "TIMELINE,300,SYNTH_END,b,partition=1,synth_ms=200",
        "TIMELINE,300,GPU_START,b,worker=0,partition=0",
        "TIMELINE,350,GPU_END,b,worker=0,partition=0,gpu_ms=50",
        "TIMELINE,350,GPU_START,b,worker=1,partition=1",
        "TIMELINE,400,GPU_END,b,worker=1,partition=1,gpu_ms=50",
    ];

    /// `lines` read with a count of two partitions, and finished.
    fn engine(lines: &[&str]) -> Engine {
        let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(2)));
        for l in lines {
            e.ingest(&parse_line(l).unwrap().unwrap(), &mut NoUpdates);
        }
        e.finish(&mut NoUpdates);
        e
    }

    /// Two jobs of two partitions on one GPU, computed by hand: GPU busy (union) 100 ms a
    /// job, so a GPU floor of 0.1 s/proof; synthesis 200 + 400 ms over two jobs, two
    /// partitions at once, so 0.15 s/proof; measured (400 - 200) / 1 = 0.2 s/proof, 33 %
    /// above the higher floor.
    #[test]
    fn floors_are_the_hand_computed_ones() {
        let r = engine(&HAND).report();
        let f = r.floors.expect("floors");
        assert!((f.gpu_s_per_proof - 0.1).abs() < 1e-9, "{f:?}");
        assert_eq!((f.gpu_basis.as_str(), f.gpus), ("timeline_busy", 1));
        assert_eq!(f.synthesis_workers, 2);
        assert!((f.synthesis_s_per_proof - 0.15).abs() < 1e-9, "{f:?}");
        assert_eq!(f.measured_s_per_proof, Some(0.2));
        assert_eq!(f.at_floor, "none");
        assert!(
            f.sentence.contains("33 % above the higher floor"),
            "{}",
            f.sentence
        );
    }

    /// A measured figure further below a floor than the margin is faster than the floor
    /// allows: not "at" it (as it read when only the upper side was checked), but the floor
    /// named as overestimated, with where to look. Within the margin on either side it is at
    /// the floor. (`HAND`: GPU floor 0.1 s/proof, synthesis 0.15, one GPU, GPU busy
    /// 200 ms.)
    #[test]
    fn a_measured_figure_below_a_floor_says_the_floor_is_overestimated() {
        let e = engine(&HAND);
        let below = e.floors(200, 1, Some(0.05)).expect("floors");
        assert_eq!(below.at_floor, "none");
        assert!(
            below.sentence.contains(
                "67 % faster than the synthesis floor of 0.15 s/proof, which no run can be"
            ),
            "{}",
            below.sentence
        );
        // within 3 % below the higher floor, and above it: at it
        assert_eq!(
            e.floors(200, 1, Some(0.146)).expect("floors").at_floor,
            "synthesis"
        );
        assert_eq!(
            e.floors(200, 1, Some(0.154)).expect("floors").at_floor,
            "synthesis"
        );
        // at the lower floor while faster than the higher one: not "at" it, the higher one
        // overestimated (GPU floor 1.0 from 2 s busy, synthesis 0.15)
        let both = e.floors(2_000, 1, Some(0.15)).expect("floors");
        assert_eq!(both.at_floor, "none");
        assert!(
            both.sentence
                .contains("85 % faster than the GPU floor of 1.00 s/proof"),
            "{}",
            both.sentence
        );
        // the GPU floor above the measured figure (one GPU counted of more), named with the
        // setting to check
        let gpu = e.floors(2_000, 1, Some(0.5)).expect("floors");
        assert_eq!(gpu.at_floor, "none");
        assert!(
            gpu.sentence
                .contains("faster than the GPU floor of 1.00 s/proof")
                && gpu.sentence.contains("--gpu-workers-per-device"),
            "{}",
            gpu.sentence
        );
    }

    /// The live GPU floor counts the busy stretch still open: on a GPU that never goes
    /// idle (two workers whose intervals overlap, as on a GPU-bound prover) no stretch has
    /// closed yet, and the gauge read 0 where it matters most. Mid-run it is the union of
    /// the intervals so far per sector done; at the end it is the report's.
    #[test]
    fn the_live_gpu_floor_counts_the_busy_stretch_still_open() {
        let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(1)));
        let at = |e: &mut Engine, l: &str| {
            e.ingest(&parse_line(l).unwrap().unwrap(), &mut NoUpdates);
        };
        // jobs of one partition; worker 0 and 1 (one GPU) take turns with overlap, so the
        // GPU is busy from 0 on without a gap: job j on the GPU over [100 j, 100 j + 150]
        for j in 0..6u64 {
            let (s, w) = (100 * j, j % 2);
            at(
                &mut e,
                &format!("TIMELINE,{s},SYNTH_START,j{j},partition=0"),
            );
            at(
                &mut e,
                &format!("TIMELINE,{s},SYNTH_END,j{j},partition=0,synth_ms=0"),
            );
            at(
                &mut e,
                &format!("TIMELINE,{s},GPU_START,j{j},worker={w},partition=0"),
            );
            if j > 0 {
                let (end, pw) = (100 * j + 50, (j - 1) % 2);
                at(
                    &mut e,
                    &format!(
                        "TIMELINE,{end},GPU_END,j{},worker={pw},partition=0,gpu_ms=150",
                        j - 1
                    ),
                );
            }
        }
        // the events up to 500 ms are processed past the reorder window
        e.advance(10_000, &mut NoUpdates);
        let live = e.live();
        assert_eq!(live.gpus.len(), 1);
        let (gpu, _) = live.floors.expect("five jobs completed");
        // busy from 0 to the present (10 s less the reorder window, past the last GPU_START
        // at 500 with the last interval still open), over five sectors done: > 0.1 s each
        assert!(gpu > 0.1, "live GPU floor {gpu}");
        e.finish(&mut NoUpdates);
        let f = e.report().floors.expect("floors");
        assert!(f.gpu_s_per_proof > 0.1, "{f:?}");
    }

    /// With CUZK_TIMING lines, the GPU floor is the lock's held time per call, times the
    /// calls a sector makes, over the GPUs; a measured figure within 3 % of it is at it.
    #[test]
    fn the_gpu_floor_is_the_locks_held_time_when_the_prover_prints_it() {
        let e = crate::engine::calls_on_one_gpu(
            &["CUZK_TIMING: mutex_held_ms=90 total_start_fn_ms=95"],
            1,
        );
        let f = e.report().floors.expect("floors");
        // 90 ms a call, 2 calls a sector, 1 GPU
        assert_eq!(f.gpu_basis, "lock_held");
        assert!((f.gpu_s_per_proof - 0.18).abs() < 1e-9, "{f:?}");
        // measured 0.2 s/proof: 11 % above, not at the floor
        assert_eq!(f.at_floor, "none");
    }
}
