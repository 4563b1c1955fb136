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
    /// Open on its device past the stuck threshold: no longer counted busy there (a
    /// GPU_END may still come).
    Stuck,
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
            PartStage::Seen | PartStage::Stuck | PartStage::Done | PartStage::Abandoned => None,
        }
    }
}

/// One partition (or the whole job, for whole-proof jobs: partition slot 0). Its fields
/// change here only.
#[derive(Debug, Default, Clone)]
pub(super) struct Part {
    /// When each event was recorded, by [`EventKind::index`]; the first record is kept.
    t: [Option<u64>; 6],
    /// What the recorded events said, for telling duplicates from conflicts.
    sig: [u64; 6],
    /// The stage: it only moves forward ([`Part::advance_to`]).
    stage: PartStage,
    /// The last `worker=` seen.
    worker: Option<u32>,
    /// The device its GPU interval was placed on (set at GPU_START).
    gpu: Option<u32>,
    /// `synth_ms=` as printed.
    synth_reported: Option<u64>,
    /// `gpu_ms=` as printed.
    gpu_reported: Option<u64>,
    /// Where queue time starts: the first GPU_QUEUE, else SYNTH_END.
    queue_start: Option<u64>,
    /// Its open GPU interval's number on its device (`Device::opened`).
    open_seq: Option<u64>,
}

/// What recording an event on a partition found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recorded {
    /// The first of its kind: recorded.
    New,
    /// The same event again (same time, same fields): dropped.
    Duplicate,
    /// A different event of a kind already recorded (at `first`): the first is kept.
    Conflict {
        /// When the first was recorded.
        first: u64,
    },
}

impl Part {
    /// Records an event of `kind` at `t` whose fields hash to `sig`; its `worker=`, if any,
    /// becomes the partition's.
    pub fn record(&mut self, kind: EventKind, t: u64, sig: u64, worker: Option<u32>) -> Recorded {
        if let Some(first) = self.at(kind) {
            return if first == t && self.sig[kind.index()] == sig {
                Recorded::Duplicate
            } else {
                Recorded::Conflict { first }
            };
        }
        self.t[kind.index()] = Some(t);
        self.sig[kind.index()] = sig;
        if worker.is_some() {
            self.worker = worker;
        }
        Recorded::New
    }

    /// Whether an event of `kind` at `t` with fields `sig` is the one recorded.
    pub fn is_recorded(&self, kind: EventKind, t: u64, sig: u64) -> bool {
        self.at(kind) == Some(t) && self.sig[kind.index()] == sig
    }

    /// Moves the stage forward to `to`; a stage at or before the present one changes
    /// nothing. Returns the stage it left, if it moved.
    pub fn advance_to(&mut self, to: PartStage) -> Option<PartStage> {
        (to > self.stage).then(|| std::mem::replace(&mut self.stage, to))
    }

    /// Whether any event of it was recorded.
    pub fn any_recorded(&self) -> bool {
        self.t.iter().any(Option::is_some)
    }

    /// Its stage.
    pub fn stage(&self) -> PartStage {
        self.stage
    }

    /// The last `worker=` seen.
    pub fn worker(&self) -> Option<u32> {
        self.worker
    }

    /// The device its GPU interval was placed on.
    pub fn gpu(&self) -> Option<u32> {
        self.gpu
    }

    /// Places its GPU interval on `gpu`.
    pub fn place_on(&mut self, gpu: u32) {
        self.gpu = Some(gpu);
    }

    /// Its open GPU interval is number `seq` on its device.
    pub fn set_open_seq(&mut self, seq: u64) {
        self.open_seq = Some(seq);
    }

    /// Its open GPU interval's number on its device, if it has one.
    pub fn open_seq(&self) -> Option<u64> {
        self.open_seq
    }

    /// `synth_ms=` as printed.
    pub fn synth_reported(&self) -> Option<u64> {
        self.synth_reported
    }

    /// `gpu_ms=` as printed.
    pub fn gpu_reported(&self) -> Option<u64> {
        self.gpu_reported
    }

    /// Where queue time starts.
    pub fn queue_start(&self) -> Option<u64> {
        self.queue_start
    }

    /// The partition was queued at `t`: by GPU_QUEUE (`explicit`, which wins), or by
    /// SYNTH_END (only when no GPU_QUEUE set it).
    pub fn queued_at(&mut self, t: u64, explicit: bool) {
        if explicit {
            self.queue_start = Some(t);
        } else {
            self.queue_start.get_or_insert(t);
        }
    }

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

/// One job instance (a job id's attempt within a run). The engine's rooms read its fields;
/// after its creation they change only through the methods below (process.rs routes an
/// event to them), so its rules live in this file.
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
    /// Where `expected` came from.
    pub expected_from: Option<super::config::CountFrom>,
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
    /// A second attempt of it was seen in flight at once (a partition started twice).
    pub overlapped: bool,
    /// The request its events named (`request=`), when the writer knows requests apart.
    pub request: Option<std::num::NonZeroU32>,
}

impl DevJob {
    /// An interval of the job on this device closed at `t`: its last two ends move.
    pub fn closed_at(&mut self, t: u64) {
        if self.last_end.is_none_or(|l| t >= l) {
            self.second_last_end = self.last_end;
            self.last_end = Some(t);
        } else if self.second_last_end.is_none_or(|s| t > s) {
            self.second_last_end = Some(t);
        }
        self.closed += 1;
    }
}

/// Partitions a job's table makes room for at most at its first ([`Job::slot`]).
pub(super) const PARTITIONS_AT_ONCE: usize = 16;

/// The most devices a table handed on has room for (a prover's job works on one GPU, or a
/// few).
pub(super) const DEVICES_HANDED_ON: usize = 16;

/// A job's partition and device tables, emptied, for a new job ([`Job::into_tables`]).
pub(super) type Tables = (Vec<Part>, Vec<DevJob>);

impl Job {
    /// Its tables, emptied, for a new job to fill, when they are of a usual size (a table
    /// made and freed per job was an allocation and a free each): one grown by an absurd
    /// partition index (up to 65 535 slots, megabytes) or a count of devices goes with
    /// the job.
    #[inline]
    pub fn into_tables(self) -> Option<Tables> {
        let (mut parts, mut devs) = (self.parts, self.devs);
        if parts.capacity() > PARTITIONS_AT_ONCE || devs.capacity() > DEVICES_HANDED_ON {
            return None;
        }
        parts.clear();
        devs.clear();
        Some((parts, devs))
    }

    /// The partition slot `pidx`, made if it is new.
    pub fn slot(&mut self, pidx: usize) -> &mut Part {
        if self.parts.len() <= pidx {
            if self.parts.is_empty() {
                // room for the partitions the job is known to have (cuzk's PoRep 10,
                // SnapDeals 16; at most 16 at once), one for a whole-proof job: a table grown
                // from 4 moved a job's partitions twice (1.4 % of the engine's instructions);
                // a table handed on from a finished job keeps its room when it has enough
                let room = if self.whole {
                    1
                } else {
                    self.expected
                        .map_or(4, |n| n as usize)
                        .clamp(1, PARTITIONS_AT_ONCE)
                };
                self.parts.reserve_exact(room.max(pidx + 1));
            }
            self.parts.resize_with(pidx + 1, Part::default);
        }
        &mut self.parts[pidx]
    }

    /// An event of the job: whole-proof if it has no partition, its proof kind if it names
    /// one.
    pub fn saw(&mut self, whole: bool, proof_kind: Option<u16>) {
        self.whole |= whole;
        if proof_kind.is_some() {
            self.proof_kind = proof_kind;
        }
    }

    /// An event of it was recorded at `t` (a duplicate or a conflict is not activity: it
    /// must not put off the job's completion or eviction).
    pub fn touch(&mut self, t: u64) {
        self.last_activity = self.last_activity.max(t);
    }

    /// SYNTH_START of a partition at `t`.
    pub fn synth_started(&mut self, t: u64) {
        self.first_synth_start = earliest(self.first_synth_start, t);
    }

    /// SYNTH_END of partition `pidx` at `t`, `synth_ms` as printed.
    pub fn synth_ended(&mut self, pidx: usize, t: u64, synth_ms: Option<u64>) {
        self.first_synth_end = earliest(self.first_synth_end, t);
        let part = &mut self.parts[pidx];
        part.synth_reported = synth_ms;
        if let Some(s) = part.at(EventKind::SynthStart) {
            self.synth_total += t.saturating_sub(s);
        }
        self.synth_reported += synth_ms.unwrap_or(0);
    }

    /// An interval of `len` known whole at once (GPU_END before GPU_START).
    pub fn gpu_known_whole(&mut self, len: u64) {
        self.gpu_total += len;
    }

    /// GPU_START at `t` on `gpu`: returns whether it is the job's first anywhere, and
    /// whether its first on `gpu` (it then enters that device's chain).
    pub fn gpu_started(&mut self, gpu: u32, t: u64) -> (bool, bool) {
        let first_anywhere = self.first_gpu_start.is_none();
        self.first_gpu_start = earliest(self.first_gpu_start, t);
        let new_on_dev = self.dev(gpu).is_none();
        if new_on_dev {
            self.devs.push(DevJob {
                gpu,
                first_start: t,
                last_end: None,
                second_last_end: None,
                closed: 0,
            });
            self.chain_refs += 1;
        }
        (first_anywhere, new_on_dev)
    }

    /// GPU_END of partition `pidx` at `t`, `gpu_ms` as printed. `interval`: the interval's
    /// start and device when it was open (`None`: no GPU_START was seen, the GPU time is
    /// unobserved).
    pub fn gpu_ended(
        &mut self,
        pidx: usize,
        t: u64,
        gpu_ms: Option<u64>,
        interval: Option<(u64, u32)>,
    ) {
        self.parts[pidx].gpu_reported = gpu_ms;
        self.done += 1;
        self.gpu_reported += gpu_ms.unwrap_or(0);
        self.last_gpu_end = latest(self.last_gpu_end, t);
        match interval {
            Some((start, gpu)) => {
                self.gpu_total += t.saturating_sub(start);
                if let Some(dj) = self.dev(gpu) {
                    dj.closed_at(t);
                }
            }
            None if self.parts[pidx].at(EventKind::GpuStart).is_none() => {
                self.unobserved_gpu = true;
            }
            None => {}
        }
    }

    /// The job's record was emitted (`status` says how it ended); it is kept until
    /// `retain_until` at least, for duplicate detection.
    pub fn finish(&mut self, status: crate::report::JobStatus, retain_until: u64) {
        self.state = JobState::Finished(status);
        self.retain_until = retain_until;
    }

    /// An interval of it was left open when it was given up on: its GPU time there is
    /// unobserved.
    pub fn lost_gpu_time(&mut self) {
        self.unobserved_gpu = true;
    }

    /// Its first GPU work found the device idle: it started cold, `ms` after its first
    /// SYNTH_START.
    pub fn started_cold(&mut self, ms: u64) {
        self.cold_start = Some(ms);
    }

    /// A device chain let go of it.
    pub fn leave_chain(&mut self) {
        self.chain_refs -= 1;
    }

    /// Nothing holds it any more (its run ended): it can be removed at once.
    pub fn release(&mut self) {
        self.chain_refs = 0;
        self.retain_until = 0;
    }

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

#[cfg(test)]
mod tests {
    use crate::report::JobStatus;
    use crate::sink::Update;
    use crate::{Engine, EngineConfig, parse_line};

    /// Conflicting lines for a partition (a second SYNTH_START at another time) are counted,
    /// not taken for activity: the job is evicted a timeout after its last real event.
    #[test]
    fn conflicting_lines_do_not_keep_a_stalled_job_alive() {
        let mut engine = Engine::new(
            EngineConfig::default()
                .reorder_window_ms(0)
                .job_timeout_ms(10_000),
        );
        let mut updates: Vec<Update> = Vec::new();
        for l in [
            "TIMELINE,0,SYNTH_START,porep-1-1,partition=0",
            "TIMELINE,5000,SYNTH_START,porep-1-1,partition=0",
            "TIMELINE,9000,SYNTH_START,porep-1-1,partition=0",
        ] {
            engine.ingest(&parse_line(l).unwrap().unwrap(), &mut updates);
        }
        engine.advance(12_500, &mut updates);
        let evicted = updates
            .iter()
            .any(|u| matches!(u, Update::Job(j) if j.status == JobStatus::Evicted));
        assert!(evicted, "{updates:?}");
        assert_eq!(engine.report().events.conflicts, 2);
    }
}
