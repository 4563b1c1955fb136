//! Jobs and their partitions: what is known of each while it is in flight.

use crate::event::EventKind;

/// Where a partition is in the pipeline. It only moves forward (an event of an earlier
/// stage that arrives late changes no stage), so each partition is counted in exactly one
/// live gauge.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum PartStage {
    /// Known, but no stage entered yet (an event of a later stage may still come).
    #[default]
    Seen,
    /// Between SYNTH_START and SYNTH_END.
    Synthesizing,
    /// Synthesized (SYNTH_END or GPU_QUEUE), not picked up.
    Queued,
    /// GPU_PICKUP, GPU work not started.
    PickedUp,
    /// GPU_START, no GPU_END: the interval is open on its device.
    OnGpu,
    /// GPU_END seen.
    Done,
    /// Its job was given up on before GPU_END.
    Abandoned,
}

impl PartStage {
    /// The live gauge a partition in this stage counts in.
    pub fn gauge(self) -> Option<usize> {
        match self {
            PartStage::Synthesizing => Some(0),
            PartStage::Queued => Some(1),
            PartStage::PickedUp => Some(2),
            PartStage::OnGpu => Some(3),
            PartStage::Seen | PartStage::Done | PartStage::Abandoned => None,
        }
    }
}

/// One partition (or the whole job, for whole-proof jobs: partition slot 0).
#[derive(Debug, Default, Clone)]
pub(super) struct Part {
    /// When each event was recorded, by [`EventKind::index`]; the first record is kept.
    pub t: [Option<u64>; 6],
    /// What the recorded events said, for telling duplicates from conflicts.
    pub sig: [u64; 6],
    /// The stage, moved forward only by [`super::gauges::Gauges::advance`].
    pub stage: PartStage,
    /// The last `worker=` seen.
    pub worker: Option<u32>,
    /// The device its GPU interval was placed on (set at GPU_START).
    pub gpu: Option<u32>,
    /// `synth_ms=` as printed.
    pub synth_reported: Option<u64>,
    /// `gpu_ms=` as printed.
    pub gpu_reported: Option<u64>,
    /// Where queue time starts: the first GPU_QUEUE, else SYNTH_END.
    pub queue_start: Option<u64>,
}

impl Part {
    /// When `kind` was recorded.
    pub fn at(&self, kind: EventKind) -> Option<u64> {
        self.t[kind.index()]
    }

    /// GPU_END was seen.
    pub fn is_done(&self) -> bool {
        self.stage == PartStage::Done
    }

    /// The stage durations, in [`crate::report::Stage::ALL`] order.
    pub fn stages(&self) -> [Option<u64>; 4] {
        let span = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let pickup = self.at(EventKind::GpuPickup);
        let start = self.at(EventKind::GpuStart);
        [
            span(self.at(EventKind::SynthStart), self.at(EventKind::SynthEnd)),
            span(self.queue_start, pickup.or(start)),
            span(pickup, start),
            span(start, self.at(EventKind::GpuEnd)),
        ]
    }
}

/// A job's work on one device, for transitions.
#[derive(Debug, Clone, Copy)]
pub(super) struct DevJob {
    /// The device.
    pub gpu: u32,
    /// Its first GPU_START there (the chain's order).
    pub first_start: u64,
    /// Its latest GPU_END there.
    pub last_end: Option<u64>,
    /// The GPU_END before that (for the hand-over).
    pub second_last_end: Option<u64>,
    /// Intervals closed there.
    pub closed: u32,
}

/// Whether a job can still change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JobState {
    /// Events still go to it.
    Active,
    /// Its record was emitted; it is kept only for duplicate detection and transitions.
    Finished(crate::report::JobStatus),
}

/// One job instance (a job id's attempt within a run).
#[derive(Debug)]
pub(super) struct Job {
    /// Unique over the engine's life (instances reuse slots, never uids).
    pub uid: u64,
    /// Interned job id (one reference held while the job exists).
    pub name: u32,
    /// Instances of this id before this one.
    pub attempt: u32,
    /// The run it belongs to.
    pub run: u32,
    /// Interned proof kind, from `kind=` or the id's prefix.
    pub proof_kind: Option<u16>,
    /// Partitions that complete it (`None`: unknown, completes after a grace period).
    pub expected: Option<u32>,
    /// A whole-proof job (its events carry no partition).
    pub whole: bool,
    /// Its partitions, by index.
    pub parts: Vec<Part>,
    /// Earliest SYNTH_START.
    pub first_synth_start: Option<u64>,
    /// Earliest SYNTH_END.
    pub first_synth_end: Option<u64>,
    /// Earliest GPU_START.
    pub first_gpu_start: Option<u64>,
    /// Latest GPU_END.
    pub last_gpu_end: Option<u64>,
    /// Sum of SYNTH_START..SYNTH_END from offsets.
    pub synth_total: u64,
    /// Sum of GPU_START..GPU_END from offsets.
    pub gpu_total: u64,
    /// Sum of printed `synth_ms`.
    pub synth_reported: u64,
    /// Sum of printed `gpu_ms`.
    pub gpu_reported: u64,
    /// Partitions with GPU_END.
    pub done: u32,
    /// Its work per device.
    pub devs: Vec<DevJob>,
    /// Its newest event's time (timeouts count from it).
    pub last_activity: u64,
    /// Active or finished.
    pub state: JobState,
    /// First GPU_START - first SYNTH_START, when the job found its GPU idle.
    pub cold_start: Option<u64>,
    /// Some GPU time of it was not observed (GPU_END without GPU_START, an interval left
    /// open at give-up).
    pub unobserved_gpu: bool,
    /// Device chains that still hold it (it is kept until they let go).
    pub chain_refs: u32,
    /// Kept at least until then after finishing, for duplicate detection.
    pub retain_until: u64,
}

impl Job {
    /// Its work on device `gpu`.
    pub fn dev(&mut self, gpu: u32) -> Option<&mut DevJob> {
        self.devs.iter_mut().find(|d| d.gpu == gpu)
    }

    /// A job whose partition count is unknown, each of whose partitions is done.
    pub fn unknown_count_complete(&self) -> bool {
        self.expected.is_none() && !self.parts.is_empty() && self.parts.iter().all(Part::is_done)
    }

    /// Some GPU time of it was not observed.
    pub fn gpu_unobserved(&self) -> bool {
        self.unobserved_gpu
            || self
                .parts
                .iter()
                .any(|p| p.at(EventKind::GpuPickup).is_some() && !p.is_done())
    }
}

/// Earliest of an optional instant and `t`.
pub(super) fn earliest(v: Option<u64>, t: u64) -> Option<u64> {
    Some(v.map_or(t, |v| v.min(t)))
}

/// Latest of an optional instant and `t`.
pub(super) fn latest(v: Option<u64>, t: u64) -> Option<u64> {
    Some(v.map_or(t, |v| v.max(t)))
}
