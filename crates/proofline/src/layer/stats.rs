//! The layer's own counters.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by the layer, its worker and its guard (a prover reads them as a
/// [`StatsSnapshot`], `TimelineGuard::stats`).
#[derive(Debug, Default)]
pub(crate) struct LayerStats {
    /// The layer's number ([`crate::handoff::Handoff::id`]): whose entries a thread's
    /// record of the proof kind they carried last is for (see `queued::kind_sent`).
    pub layer: u64,
    /// Events the worker took in: off the queue, or (first-enter events) from the span
    /// table. Counted by the worker, once per batch, so the prover's threads pay no shared
    /// counter for an event that fits.
    pub received: AtomicU64,
    /// Events dropped because the queue was full (or the worker had stopped).
    pub dropped: AtomicU64,
    /// `CUZK_TIMING:` lines (logged through `tracing`) dropped likewise.
    pub timing_dropped: AtomicU64,
    /// TIMELINE lines written.
    pub written: AtomicU64,
    /// Close edges not emitted because the span closed while its thread panicked.
    pub aborted: AtomicU64,
    /// Events not emitted because no job id was found on the span or its ancestors.
    pub missing_job_id: AtomicU64,
    /// Spans that recorded an error: their SYNTH_END or GPU_END was not emitted.
    pub failed: AtomicU64,
    /// `timeline` events whose message was a malformed TIMELINE line, or a `CUZK_TIMING:`
    /// line that did not read (not used).
    pub malformed: AtomicU64,
    /// Span callsites the layer maps that were registered (the prover has such spans).
    pub mapped_callsites: AtomicU64,
    /// Warnings printed on stderr (nothing received, no GPU_START, events dropped, ...).
    pub warnings: AtomicU64,
    /// The first mapped span made with no job id on it or its ancestors (named in the
    /// warning about events without one).
    pub(crate) first_without_job_id: std::sync::OnceLock<&'static str>,
    /// A span mapped to a GPU event named a worker and no GPU (GPU = worker / N assumed).
    pub(crate) gpu_assumed: std::sync::atomic::AtomicBool,
}

/// The layer's counters at one instant (`TimelineGuard::stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// Events the worker took off the queue.
    pub received: u64,
    /// Events dropped because the queue was full (or the worker had stopped).
    pub dropped: u64,
    /// `CUZK_TIMING:` lines logged through `tracing` that the queue could not take (each
    /// a GPU call's kernel and lock figures lost; counted in `proofline_events_dropped`
    /// with the events).
    pub timing_lines_dropped: u64,
    /// TIMELINE lines written.
    pub written: u64,
    /// Close edges not emitted because the span closed while its thread panicked.
    pub aborted: u64,
    /// Events not emitted for want of a job id.
    pub missing_job_id: u64,
    /// Spans that recorded an error (no SYNTH_END or GPU_END emitted).
    pub failed: u64,
    /// `timeline` events whose message was a malformed TIMELINE line, or a `CUZK_TIMING:`
    /// line that does not read (counted by the worker, when it reads the line; a line dropped
    /// for a full queue is counted in `dropped` or `timing_lines_dropped` instead).
    pub malformed: u64,
    /// Warnings printed on stderr.
    pub warnings: u64,
}

impl LayerStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            received: self.received.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            timing_lines_dropped: self.timing_dropped.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            aborted: self.aborted.load(Ordering::Relaxed),
            missing_job_id: self.missing_job_id.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            warnings: self.warnings.load(Ordering::Relaxed),
        }
    }
}
