//! What the engine learns: the records it emits as it goes (carried by
//! [`crate::sink::Update`]) and the [`Report`]
//! that sums up a run.
//!
//! All times are *timeline milliseconds*: the TIMELINE offset of the first run of a log; a
//! daemon restart inside a log starts a new run, placed just after the previous one, so that
//! every instant of a log has one place on a single time axis.
//!
//! The JSON form of [`Report`] is a stable, versioned schema ([`SCHEMA_VERSION`]): fields are
//! only added in minor revisions; a removal or change of meaning bumps the version.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::dist::DistSummary;

/// Version of the JSON report schema.
pub const SCHEMA_VERSION: u32 = 1;

/// The four stages of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// SYNTH_START .. SYNTH_END
    Synthesis,
    /// GPU_QUEUE (or SYNTH_END) .. GPU_PICKUP
    Queue,
    /// GPU_PICKUP .. GPU_START
    LockWait,
    /// GPU_START .. GPU_END
    Gpu,
}

impl Stage {
    /// All stages in pipeline order.
    pub const ALL: [Stage; 4] = [Stage::Synthesis, Stage::Queue, Stage::LockWait, Stage::Gpu];

    /// Snake-case name, as used in labels and CSV headers.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stage::Synthesis => "synthesis",
            Stage::Queue => "queue",
            Stage::LockWait => "lock_wait",
            Stage::Gpu => "gpu",
        }
    }
}

/// One partition (or the single unit of a whole-proof job).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// The job id.
    pub job_id: Arc<str>,
    /// Run of the log (0 unless the daemon restarted).
    pub run: u32,
    /// Proof kind, when known.
    pub proof_kind: Option<Arc<str>>,
    /// Partition index; `None` for whole-proof jobs.
    pub partition: Option<u32>,
    /// GPU worker.
    pub worker: Option<u32>,
    /// GPU device.
    pub gpu: Option<u32>,
    /// SYNTH_START.
    pub synth_start_ms: Option<u64>,
    /// SYNTH_END.
    pub synth_end_ms: Option<u64>,
    /// When the queue stage began (GPU_QUEUE, else SYNTH_END).
    pub queue_start_ms: Option<u64>,
    /// GPU_PICKUP.
    pub pickup_ms: Option<u64>,
    /// GPU_START.
    pub gpu_start_ms: Option<u64>,
    /// GPU_END.
    pub gpu_end_ms: Option<u64>,
    /// Synthesis stage length from offsets.
    pub synthesis_ms: Option<u64>,
    /// Queue stage length.
    pub queue_ms: Option<u64>,
    /// Lock wait stage length.
    pub lock_wait_ms: Option<u64>,
    /// GPU stage length from offsets.
    pub gpu_ms: Option<u64>,
    /// `synth_ms` as the prover printed it.
    pub synth_reported_ms: Option<u64>,
    /// `gpu_ms` as the prover printed it.
    pub gpu_reported_ms: Option<u64>,
    /// Kernel time of its GPU call, from `CUZK_TIMING:` lines, when the call could be given
    /// to it (its interval alone was open on its GPU when the call's lines came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_ms: Option<u64>,
}

impl PartitionRecord {
    /// Every edge instant it records, in pipeline order (`None` where unseen).
    pub fn instants(&self) -> [Option<u64>; 6] {
        [
            self.synth_start_ms,
            self.synth_end_ms,
            self.queue_start_ms,
            self.pickup_ms,
            self.gpu_start_ms,
            self.gpu_end_ms,
        ]
    }

    /// The length of one stage, when both its edges were seen.
    pub fn stage_ms(&self, stage: Stage) -> Option<u64> {
        match stage {
            Stage::Synthesis => self.synthesis_ms,
            Stage::Queue => self.queue_ms,
            Stage::LockWait => self.lock_wait_ms,
            Stage::Gpu => self.gpu_ms,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Every expected partition finished its GPU work.
    Complete,
    /// No event for longer than the job timeout.
    Evicted,
    /// The daemon restarted while the job was in flight.
    Restarted,
    /// The log ended while the job was in flight.
    InFlightAtEnd,
}

impl JobStatus {
    /// Snake-case name, as in the JSON report, labels and span attributes.
    pub const fn as_str(self) -> &'static str {
        match self {
            JobStatus::Complete => "complete",
            JobStatus::Evicted => "evicted",
            JobStatus::Restarted => "restarted",
            JobStatus::InFlightAtEnd => "in_flight_at_end",
        }
    }

    /// Every way a job can end without completing.
    pub const INCOMPLETE: [JobStatus; 3] = [
        JobStatus::Evicted,
        JobStatus::Restarted,
        JobStatus::InFlightAtEnd,
    ];
}

/// One job (a sector, or a whole-proof request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job id.
    pub job_id: Arc<str>,
    /// Run of the log.
    pub run: u32,
    /// 0 for the first instance of this id the engine holds, 1 for a retry while the
    /// first is still held, ... (an id is held while its job is in flight and for about two
    /// reorder windows after it finished; a retry after that counts from 0 again).
    pub attempt: u32,
    /// Proof kind, when known (from `kind=` or the id's prefix).
    pub proof_kind: Option<Arc<str>>,
    /// How it ended.
    pub status: JobStatus,
    /// Partitions expected (`None`: unknown, taken as the highest seen + 1).
    pub partitions_expected: Option<u32>,
    /// Partitions whose GPU work ended.
    pub partitions_done: u32,
    /// First SYNTH_START.
    pub first_synth_start_ms: Option<u64>,
    /// First SYNTH_END.
    pub first_synth_end_ms: Option<u64>,
    /// First GPU_START.
    pub first_gpu_start_ms: Option<u64>,
    /// Last GPU_END.
    pub last_gpu_end_ms: Option<u64>,
    /// First SYNTH_START .. last GPU_END.
    pub wall_ms: Option<u64>,
    /// Sum of the partitions' synthesis stages (from offsets).
    pub synthesis_total_ms: u64,
    /// Sum of the partitions' GPU stages (from offsets).
    pub gpu_total_ms: u64,
    /// Sum of the printed `synth_ms`.
    pub synth_reported_total_ms: u64,
    /// Sum of the printed `gpu_ms`.
    pub gpu_reported_total_ms: u64,
    /// First SYNTH_START .. first GPU_START.
    pub first_synth_to_first_gpu_ms: Option<u64>,
    /// Cold start, when the job's first GPU work found its GPU idle.
    pub cold_start_ms: Option<u64>,
    /// Some partition was picked up by a GPU worker but its GPU_START/GPU_END were never seen:
    /// its GPU time is unobserved (not idle).
    pub unobserved_gpu: bool,
}

/// Consecutive jobs N -> N+1 on one GPU, in the order their GPU work started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransitionRecord {
    /// The device.
    pub gpu: u32,
    /// Job N.
    pub from_job: Arc<str>,
    /// Attempt of job N.
    pub from_attempt: u32,
    /// Job N+1.
    pub to_job: Arc<str>,
    /// Run of the log.
    pub run: u32,
    /// Attempt of job N+1.
    pub to_attempt: u32,
    /// Last GPU_END of N on this GPU.
    pub from_last_gpu_end_ms: u64,
    /// First GPU_START of N+1 on this GPU.
    pub to_first_gpu_start_ms: u64,
    /// First GPU_START of N+1 - last GPU_END of N (negative: they overlapped).
    pub gap_ms: i64,
    /// Overlap of N and N+1 (`-gap` when the gap is negative, else 0).
    pub overlap_ms: u64,
    /// Second-to-last GPU_END of N -> first GPU_START of N+1 (needs two intervals of N here).
    pub handoff_ms: Option<i64>,
    /// Last GPU_END of N - first SYNTH_END of N+1 (positive: synthesis was ahead).
    pub synthesis_lead_ms: Option<i64>,
}

/// Whether a GPU idle gap separates two different jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundary {
    /// The jobs after the gap differ from those before it.
    CrossSector,
    /// The jobs starting after the gap are among those that ended before it.
    IntraSector,
}

impl Boundary {
    /// Snake-case name, as used in labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Boundary::CrossSector => "cross_sector",
            Boundary::IntraSector => "intra_sector",
        }
    }
}

/// A hole between two consecutive busy intervals of a GPU (all its workers idle).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleGap {
    /// The device.
    pub gpu: u32,
    /// End of the busy interval before.
    pub start_ms: u64,
    /// Start of the busy interval after.
    pub end_ms: u64,
    /// Cross- or intra-sector.
    pub boundary: Boundary,
    /// Part of the gap during which synthesized partitions waited in the GPU queue.
    pub with_queue_ms: u64,
    /// A job whose GPU work starts at the end of the gap.
    pub next_job: Arc<str>,
    /// That job's attempt (0 unless its id was reused by a retry).
    pub next_attempt: u32,
    /// Run of the log.
    pub run: u32,
}

impl IdleGap {
    /// Length of the gap.
    pub fn len_ms(&self) -> u64 {
        self.end_ms - self.start_ms
    }
}

/// What bounds throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The GPUs were busy: busy ratio >= 0.95 (the steady state's, else the whole run's
    /// when fewer than two jobs completed).
    GpuBound,
    /// The GPUs idled with an empty queue: synthesis did not keep up.
    SynthesisBound,
    /// The GPUs idled while synthesized partitions waited.
    HandoffBound,
    /// The GPUs look busy (busy ratio >= 0.85) but the kernels fill less than 75 % of
    /// that busy time: the GPU lock is held by CPU work (prep_msm, b_g2_msm); more GPUs
    /// would not help.
    LockHeldByCpu,
    /// Not enough data to say: no GPU interval; or the GPUs below the GPU-bound ratio, not
    /// hand-off bound, and no synthesis observed (an empty queue is then no evidence that
    /// they waited on synthesis).
    Unknown,
}

impl Bound {
    /// Snake-case name, as in the JSON report.
    pub const fn as_str(self) -> &'static str {
        match self {
            Bound::GpuBound => "gpu_bound",
            Bound::SynthesisBound => "synthesis_bound",
            Bound::HandoffBound => "handoff_bound",
            Bound::LockHeldByCpu => "lock_held_by_cpu",
            Bound::Unknown => "unknown",
        }
    }
}

/// The verdict and the numbers that decided it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Verdict {
    /// What bounds throughput.
    pub bound: Bound,
    /// One sentence with the numbers.
    pub sentence: String,
    /// Busy ratio over all GPUs that decided it (steady state when there is one).
    pub busy_ratio: Option<f64>,
    /// Whether `busy_ratio` is the steady state's (else the whole run's).
    pub steady_state: bool,
    /// GPU idle time (inside gaps, all GPUs) while partitions waited.
    pub idle_with_queue_ms: u64,
    /// GPU idle time (inside gaps, all GPUs) while the queue was empty.
    pub idle_queue_empty_ms: u64,
    /// Median synthesis lead over the transitions.
    pub synthesis_lead_p50_ms: Option<i64>,
    /// Kernel time / the GPUs' busy time, when `CUZK_TIMING:` lines were read and decided
    /// (they cover the GPU intervals, and fill no more than `KERNEL_FILL_MAX` of them: more
    /// cannot be, and `None` with the sentence saying why).
    #[serde(default)]
    pub kernel_fill: Option<f64>,
    /// Kernel time / the GPUs' elapsed time, when `CUZK_TIMING:` lines were read.
    #[serde(default)]
    pub kernel_utilisation: Option<f64>,
}

/// Idle gaps of one size class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GapBucket {
    /// `<50ms`, `50-500ms` or `>500ms`.
    pub label: String,
    /// Number of gaps.
    pub count: u64,
    /// Their total length.
    pub total_ms: u64,
}

/// Idle gaps of one boundary kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GapCount {
    /// Number of gaps.
    pub count: u64,
    /// Their total length.
    pub total_ms: u64,
}

/// One GPU device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GpuReport {
    /// Device index (`worker / gpu_workers_per_device` unless the log says `gpu=`).
    pub gpu: u32,
    /// GPU workers seen on it.
    pub workers: Vec<u32>,
    /// Closed GPU intervals (GPU_START..GPU_END pairs).
    pub intervals: u64,
    /// Length of the union of the intervals.
    pub busy_ms: u64,
    /// Sum of the interval lengths.
    pub serial_sum_ms: u64,
    /// serial sum / busy: how many workers were busy at once, on average.
    pub concurrency: Option<f64>,
    /// First GPU_START .. last GPU_END, summed over runs.
    pub elapsed_ms: u64,
    /// busy / elapsed.
    pub busy_ratio: Option<f64>,
    /// Busy time inside the steady state.
    pub steady_busy_ms: u64,
    /// Length of the steady state.
    pub steady_elapsed_ms: u64,
    /// Steady-state busy / steady-state length.
    pub steady_busy_ratio: Option<f64>,
    /// Idle gaps by size: < 50 ms, 50-500 ms, > 500 ms.
    pub idle_gaps_by_size: Vec<GapBucket>,
    /// Cross-sector idle gaps.
    pub idle_cross_sector: GapCount,
    /// Intra-sector idle gaps.
    pub idle_intra_sector: GapCount,
    /// All idle gaps.
    pub idle_total: GapCount,
    /// Idle time inside gaps while partitions waited in the queue.
    pub idle_with_queue_ms: u64,
    /// Idle time inside gaps while the queue was empty.
    pub idle_queue_empty_ms: u64,
    /// GPU intervals found stuck here (open past the stuck threshold; not counted busy).
    #[serde(default)]
    pub stuck_intervals: u64,
}

/// Stage length distributions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StageSummaries {
    /// Synthesis (from offsets).
    pub synthesis: DistSummary,
    /// Queue.
    pub queue: DistSummary,
    /// Lock wait.
    pub lock_wait: DistSummary,
    /// GPU (from offsets).
    pub gpu: DistSummary,
    /// `synth_ms` as printed.
    pub synth_reported: DistSummary,
    /// `gpu_ms` as printed.
    pub gpu_reported: DistSummary,
}

/// Transition distributions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TransitionSummaries {
    /// Gap (negative: overlap).
    pub gap: DistSummary,
    /// Hand-off.
    pub handoff: DistSummary,
    /// Synthesis lead.
    pub synthesis_lead: DistSummary,
}

/// Queue depth over time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueSummary {
    /// Largest number of synthesized partitions waiting for a GPU worker.
    pub max_depth: u32,
    /// Time-weighted mean depth, first to last event.
    pub mean_depth: f64,
}

/// Counts about the events themselves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EventStats {
    /// Events taken in.
    pub events: u64,
    /// Exact duplicates, dropped.
    pub duplicates: u64,
    /// Second, different records of the same (event, job, partition); the first was kept.
    pub conflicts: u64,
    /// The first few conflicts, described.
    pub conflict_examples: Vec<String>,
    /// Events that arrived later than the reorder window (still used where possible).
    pub late: u64,
    /// Events rejected by the engine: an absurd partition, worker or GPU index, an offset
    /// beyond any uptime, or a GPU event with no worker or GPU.
    pub rejected: u64,
    /// Runs in the log (a daemon restart starts a new one).
    pub runs: u32,
    /// Restarts taken from the lines (not from the journal, which knows) whose first line
    /// fell back less than halfway to offset 0: a restarted prover counts its offsets from
    /// its own start again, so these may be lines further out of order than the reorder
    /// window rather than restarts.
    #[serde(default)]
    pub shallow_restarts: u32,
    /// The first of them: from which offset back to which.
    #[serde(default)]
    pub shallow_restart_example: Option<String>,
    /// Events of a partition past the count of partitions that completes their job (a
    /// `--partitions-for` rule, the id's form, or `--partitions`): the count is
    /// lower than the prover's, so jobs complete early and their later lines read as
    /// conflicts and new attempts.
    #[serde(default)]
    pub partitions_past_count: u64,
    /// The first of them: the job, the partition, the count and where it came from.
    #[serde(default)]
    pub partition_past_count_example: Option<String>,
    /// The `--partitions-for` and `--proof-kind-for` rules
    /// ([`crate::EngineConfig::partitions_for`], [`crate::EngineConfig::proof_kind_for`])
    /// whose prefix no job id of the reading started with, as the command line gives them
    /// (`--partitions-for porep=3`; a layer's `Builder::partitions_for` rule is written so
    /// too): a misspelt prefix changes nothing, silently.
    #[serde(default)]
    pub rules_matching_no_job: Vec<String>,
    /// Lines far behind the newest one, alone: stray late lines, not used.
    #[serde(default)]
    pub stray_late: u64,
    /// Lines far ahead of the newest one, alone: stray early lines, not used.
    #[serde(default)]
    pub stray_early: u64,
    /// Span edges the layer could not tie to a job (no job id on the span or its
    /// ancestors): not used, nothing invented for them. Live reports only.
    #[serde(default)]
    pub unattributed: u64,
    /// Jobs given up on (status `evicted`) to stay within the cap on jobs in flight
    /// (`EngineConfig::max_jobs_in_flight`): the oldest went to make room.
    #[serde(default)]
    pub evicted_over_cap: u64,
    /// Events that came for a job after it was evicted, for silence (the job timeout was
    /// shorter than a silence of a job that was alive) or over the cap on jobs in flight:
    /// taken as a new attempt, or ignored.
    #[serde(default)]
    pub after_eviction: u64,
    /// GPU intervals found stuck: open past `max(stuck_min_ms, stuck_factor x the longest
    /// closed on their GPU)`, no longer counted busy (each named among the examples).
    #[serde(default)]
    pub gpu_stuck: u64,
    /// Jobs with a second attempt under the same id in flight at once (a partition started
    /// twice while the job was active): Curio resubmits after its timeout without cancelling
    /// the first. From TIMELINE lines the attempts cannot be told apart: the figures are the
    /// first's, the second's lines counted as conflicts.
    #[serde(default)]
    pub overlapping_attempts: u64,
    /// The first few of those jobs.
    #[serde(default)]
    pub overlapping_examples: Vec<String>,
    /// Requests of a job id that came while another request of the id was in flight, told
    /// apart by the `request=` their writer (proofline's layer) gave them: each is a job of
    /// its own (the next attempt), with its own figures and trace.
    #[serde(default)]
    pub concurrent_requests: u64,
}

/// Counts about the input lines (filled by the reader, not the engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LineStats {
    /// Lines read.
    pub lines: u64,
    /// Lines holding a TIMELINE event (well-formed or not).
    pub timeline_lines: u64,
    /// `CUZK_TIMING:` lines (timings and notes, well-formed or not).
    #[serde(default)]
    pub timing_lines: u64,
    /// Malformed lines: TIMELINE lines, and the `CUZK_TIMING:` lines of `malformed_timing`.
    pub malformed: u64,
    /// Of `malformed`, the timing lines (`CUZK_TIMING:`, and the few `CUZK_NTT_H:` ones): a
    /// pair that is no whole number (the line's other pairs are used), a line that is no
    /// `key=value` pairs, or one that is not UTF-8.
    #[serde(default)]
    pub malformed_timing: u64,
    /// The first few malformed lines with their number and error.
    pub malformed_examples: Vec<LineError>,
    /// Whether the last line was cut short (no newline) and so not used.
    pub truncated_last_line: bool,
    /// Lines longer than [`crate::reader::MAX_LINE_BYTES`]: skipped to their newline, never
    /// held whole in memory, not parsed.
    #[serde(default)]
    pub oversized: u64,
    /// The number (1-based) of the first of the `oversized` lines.
    #[serde(default)]
    pub first_oversized: Option<u64>,
    /// The number of the first `CUZK_TIMING:` line not used for a value over an hour
    /// (`kernel.absurd_lines` counts them).
    #[serde(default)]
    pub first_absurd_timing: Option<u64>,
    /// The report is of an input read (a file or a stream), not of a live process: with
    /// no lines, the input was empty.
    #[serde(default)]
    pub from_input: bool,
    /// Reading stopped at this error (e.g. a truncated compressed log): the report covers
    /// the lines read before it.
    #[serde(default)]
    pub read_error: Option<String>,
}

/// A malformed line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LineError {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub error: String,
}

/// Headline numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Summary {
    /// Jobs seen (retries count again).
    pub jobs_seen: u64,
    /// Jobs that completed.
    pub jobs_complete: u64,
    /// Jobs that did not (evicted, restarted, in flight at the end).
    pub jobs_incomplete: u64,
    /// Completed jobs per proof kind.
    pub complete_by_kind: Vec<(String, u64)>,
    /// Partitions whose GPU work ended.
    pub partitions_done: u64,
    /// First event on the timeline.
    pub first_event_ms: Option<u64>,
    /// Last event on the timeline.
    pub last_event_ms: Option<u64>,
    /// Cold start of the first job of the log (first GPU_START - first SYNTH_START).
    pub cold_start_ms: Option<u64>,
    /// Steady-state seconds per proof: (last completion - first completion) / (jobs - 1).
    pub seconds_per_proof: Option<f64>,
    /// First job completion .. last, summed over runs.
    pub steady_state_ms: u64,
    /// Busy ratio over all GPUs in the steady state.
    pub steady_busy_ratio: Option<f64>,
    /// Busy ratio over all GPUs, first GPU_START to last GPU_END of each.
    pub busy_ratio: Option<f64>,
}

/// The pipeline's floors: the least seconds per proof each resource allows at the work the
/// log shows per sector, beside the measured steady state (docs/definitions.md, "Floors").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Floors {
    /// GPU floor: the GPU work a sector needs that cannot overlap, over the GPUs.
    pub gpu_s_per_proof: f64,
    /// What the GPU floor is measured from: `lock_held` (`CUZK_TIMING` mutex_held_ms, the
    /// GPU lock's held time per call) or `timeline_busy` (the union of the TIMELINE GPU
    /// intervals, which also holds CPU work done while a worker holds the GPU).
    pub gpu_basis: String,
    /// GPUs the log shows.
    pub gpus: u32,
    /// Synthesis floor: synthesis time per sector over the synthesis workers.
    pub synthesis_s_per_proof: f64,
    /// Synthesis workers: the most partitions the log shows synthesized at once.
    pub synthesis_workers: u32,
    /// Measured steady-state seconds per proof, if two jobs completed.
    pub measured_s_per_proof: Option<f64>,
    /// Which floor bounds the measured figure (within 3 %): `gpu`, `synthesis`, or `none`.
    pub at_floor: String,
    /// The floors and the measured figure, and what would change it, in a sentence.
    pub sentence: String,
}

/// What cuzk's `CUZK_TIMING:` lines say about the GPU's own work (`crate::timing`; the
/// attribution rule is in the engine's `kernel` module docs and docs/definitions.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KernelReport {
    /// Timing lines read.
    pub timing_lines: u64,
    /// `CUZK_TIMING:` lines that are no timing (pool threshold, `d_a_cache allocated`).
    pub other_lines: u64,
    /// Timing lines ignored whole for a value over an hour (`MAX_TIMING_MS`): corrupt or made
    /// up, they would set the GPU floor and the kernel fill by themselves. Counted in
    /// `timing_lines`, and left out of every figure.
    #[serde(default)]
    pub absurd_lines: u64,
    /// The first of them: the key, its value and the line's `gpu_tid`.
    #[serde(default)]
    pub absurd_example: Option<String>,
    /// Keys not known to this version (kept, not used).
    pub unknown_keys: Vec<String>,
    /// GPU calls (`mutex_held_ms` lines).
    pub calls: u64,
    /// GPU threads of the calls (`gpu_total_ms` lines).
    pub gpu_threads: u64,
    /// Kernel time: every GPU thread's `ntt_msm_h_ms + batch_add_ms + tail_msm_ms`.
    pub kernel_ms: u64,
    /// Kernel time per call, of the calls whose lines came one after the other.
    pub kernel_per_call: DistSummary,
    /// Calls whose lines interleaved with another call's on the same GPU.
    pub calls_interleaved: u64,
    /// Kernel time / the GPUs' elapsed time (first GPU_START to last GPU_END, summed).
    pub kernel_utilisation: Option<f64>,
    /// The merged-interval busy ratio over the same span, beside it.
    pub busy_ratio: Option<f64>,
    /// Kernel time / the GPUs' busy time: how much of the pipeline's GPU time the kernels
    /// fill.
    pub kernel_fill: Option<f64>,
    /// GPU threads with timing lines / closed GPU intervals: how much of the run the lines
    /// cover (the verdict uses the kernel figures only from 90 %).
    #[serde(default)]
    pub coverage: Option<f64>,
    /// `mutex_held_ms`, summed.
    pub lock_held_ms: u64,
    /// Lock held minus kernel time: CPU work inside the lock (at least this much).
    pub lock_held_not_kernel_ms: u64,
    /// `mutex_held_ms` per call.
    pub lock_held: DistSummary,
    /// `mutex_wait_ms` per call.
    pub lock_wait: DistSummary,
    /// `pre_lock_cpu_ms` per call: CPU work before the lock request (what `whatif` takes
    /// for the work a GPU worker does before it can queue for the lock).
    #[serde(default)]
    pub pre_lock_cpu: DistSummary,
    /// `barrier_wait_ms` per GPU thread: the GPU waiting, inside the lock, on `prep_msm`.
    pub barrier_wait: DistSummary,
    /// `prep_msm_ms` per call (CPU, on the critical path: the GPU thread waits for it).
    pub prep_msm: DistSummary,
    /// `b_g2_msm_ms` per call (CPU, alongside the GPU's last steps).
    pub b_g2_msm: DistSummary,
    /// Whether every kernel line was given a GPU (per-GPU figures only then).
    pub attributed: bool,
    /// How the lines were attributed, in words.
    pub attribution: String,
    /// Per GPU, when attributed.
    pub gpus: Vec<GpuKernel>,
    /// `CUZK_NTT_H:` lines read (the H polynomial's NTT and MSM, per GPU call).
    #[serde(default)]
    pub ntt_h_lines: u64,
    /// Their stages, in the order printed, each with its milliseconds per call.
    #[serde(default)]
    pub ntt_h: Vec<NttHStage>,
}

/// One stage of the `CUZK_NTT_H:` lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NttHStage {
    /// The key as printed (`ntt_kernels`, `msm_invoke`, ...).
    pub key: String,
    /// Its milliseconds per line.
    pub ms: DistSummary,
}

/// One GPU's kernel time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GpuKernel {
    /// The device.
    pub gpu: u32,
    /// Its kernel time.
    pub kernel_ms: u64,
    /// Kernel time / its elapsed time.
    pub kernel_utilisation: Option<f64>,
    /// Its merged-interval busy ratio, beside it.
    pub busy_ratio: Option<f64>,
}

/// Everything the engine knows about a log or a live run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `gpu_workers_per_device` the GPUs were derived with.
    pub gpu_workers_per_device: u32,
    /// Where the worker-to-GPU mapping came from, in words: cuzk's start-up lines, the
    /// user's `--gpu-workers-per-device`, or cuzk's default.
    #[serde(default)]
    pub gpu_mapping: String,
    /// What cuzk's start-up lines said against the user's mapping, or placed past the
    /// workers and GPUs the engine follows (the first few).
    #[serde(default)]
    pub gpu_mapping_disagreements: Vec<String>,
    /// Where the GPU intervals came from when not from the prover's own GPU_START/GPU_END
    /// events (absent then): e.g. the edges of the `gpu_worker` span, which end before
    /// cuzk's finalizer work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_interval_source: Option<String>,
    /// Input lines (from the reader).
    pub lines: LineStats,
    /// Events.
    pub events: EventStats,
    /// Headline numbers.
    pub summary: Summary,
    /// What bounds throughput.
    pub verdict: Verdict,
    /// The least seconds per proof each resource allows, beside the measured figure
    /// (absent before a job completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floors: Option<Floors>,
    /// Per GPU.
    pub gpus: Vec<GpuReport>,
    /// What `CUZK_TIMING:` lines say (absent without them: kernel time was not observed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelReport>,
    /// Stage distributions.
    pub stages: StageSummaries,
    /// Job wall-time distribution (complete jobs).
    pub job_wall: DistSummary,
    /// Transition distributions.
    pub transitions_summary: TransitionSummaries,
    /// Idle gap length distribution (all GPUs).
    pub idle_gaps: DistSummary,
    /// Queue depth.
    pub queue: QueueSummary,
    /// Jobs, in completion order (the first `max_rows`).
    pub jobs: Vec<JobRecord>,
    /// Jobs left out of `jobs` by the row cap.
    pub jobs_omitted: u64,
    /// Transitions, in order (the first `max_rows`).
    pub transitions: Vec<TransitionRecord>,
    /// Transitions left out by the row cap.
    pub transitions_omitted: u64,
    /// Incomplete jobs (the first `max_rows`).
    pub incomplete: Vec<JobRecord>,
}
