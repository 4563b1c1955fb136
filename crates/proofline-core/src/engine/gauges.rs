//! The live gauges: partitions per stage, and the queue's depth over time.

use super::job::{Part, PartStage};

/// Partitions in each in-flight stage, kept equal to the count of partitions whose
/// [`Part::stage`] is that stage: every stage change goes through [`Gauges::advance`].
#[derive(Debug, Default)]
pub(super) struct Gauges {
    /// Synthesizing, queued, picked up, on the GPU (by [`PartStage::gauge`]).
    pub in_stage: [u32; 4],
    /// Queue depth integrated over timeline time (partition-ms), for the mean depth.
    pub queue_integral: u128,
    /// Deepest queue seen.
    pub max_queue: u32,
    /// Most partitions being synthesized at once over a stretch of time (the synthesis
    /// workers the log shows).
    pub max_synthesizing: u32,
}

impl Gauges {
    /// Partitions synthesized and not yet picked up.
    pub fn queue_depth(&self) -> u32 {
        self.in_stage[1]
    }

    /// Moves a partition forward to `to`; a stage at or before the present one changes
    /// nothing. Returns whether it moved.
    pub fn advance(&mut self, part: &mut Part, to: PartStage) -> bool {
        let Some(was) = part.advance_to(to) else {
            return false;
        };
        if let Some(g) = was.gauge() {
            self.in_stage[g] -= 1;
        }
        if let Some(g) = to.gauge() {
            self.in_stage[g] += 1;
        }
        if to == PartStage::Queued {
            self.max_queue = self.max_queue.max(self.queue_depth());
        }
        true
    }

    /// Timeline time `dt` passed at the present depth.
    pub fn elapse(&mut self, dt: u64) {
        self.queue_integral += u128::from(self.queue_depth()) * u128::from(dt);
        // partitions synthesizing at once for some time, not within one instant: a worker's
        // next SYNTH_START printed before its SYNTH_END of the same millisecond is no
        // extra worker
        if dt > 0 {
            self.max_synthesizing = self.max_synthesizing.max(self.in_stage[0]);
        }
    }
}
