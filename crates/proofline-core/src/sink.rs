//! Where the engine's results go: the [`Update`]s it emits, the [`UpdateSink`]s that take
//! them (the Prometheus exporter, the OTLP exporter, a progress line, a test's `Vec`), the
//! [`LiveState`] handed to them with each tick, and [`Fanout`], which feeds several.
//!
//! ```text
//!  Engine ──update()──► Fanout ──► sink, sink, ...      (on the engine's thread, in order)
//!         ──tick(live, counts)──►  (the layer: each `tick`, 1 s; watch: each poll)
//!  owner  ──flush() / shutdown(deadline)──►             (the layer's guard, demo, watch)
//! ```
//!
//! A sink's lifecycle: updates and ticks while the engine runs; `flush` to hand what it
//! holds to its exporter without waiting for delivery; `shutdown` once, after the engine's
//! last update, which may wait for delivery until the deadline and says what it could not do.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use crate::report::{IdleGap, JobRecord, PartitionRecord, TransitionRecord};

/// A typed update the engine emits the moment it learns something.
///
/// New kinds of update come as the engine learns more: a sink matches the ones it uses and
/// ignores the rest (`_ => {}`), so that a new one breaks no sink.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Update {
    /// A partition's GPU work ended (or it was abandoned with its job). Sent only to sinks
    /// whose [`UpdateSink::wants_partitions`] says yes.
    Partition(Arc<PartitionRecord>),
    /// A job completed or was given up on.
    Job(Arc<JobRecord>),
    /// Two consecutive jobs on a GPU are known. Transitions come only in a burst just before
    /// a [`Update::Job`], whose job's end released them (it is their `to_job`, or their
    /// `from_job` when the job after it on that GPU finished first, or neither when both
    /// finished earlier): a sink can settle them at that job's record.
    Transition(Arc<TransitionRecord>),
    /// A GPU was idle between two busy intervals.
    IdleGap(Arc<IdleGap>),
    /// A GPU went from idle to busy (`busy = true`) or back, at `t_ms`.
    GpuBusy {
        /// The device.
        gpu: u32,
        /// Whether it is now busy.
        busy: bool,
        /// When.
        t_ms: u64,
    },
    /// A daemon restart was detected: a new run begins at `t_ms`.
    NewRun {
        /// Run index, from 0.
        run: u32,
        /// Where the run starts on the timeline.
        t_ms: u64,
    },
}

/// A snapshot of what is in flight, for live gauges. Every figure here is computed by the
/// engine; sinks publish it as it is.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct LiveState {
    /// Timeline time of the engine's present.
    pub now_ms: u64,
    /// Partitions synthesized and not yet picked up.
    pub queue_depth: u32,
    /// Partitions being synthesized.
    pub synthesizing: u32,
    /// Partitions picked up, GPU work not started.
    pub picked_up: u32,
    /// Partitions whose GPU work started and did not end.
    pub on_gpu: u32,
    /// Jobs in flight.
    pub jobs_in_flight: u32,
    /// Seconds per proof over the latest completions of the current run
    /// ([`crate::engine::LIVE_SPP_WINDOW`]): (latest - earliest completion) / (n - 1);
    /// `None` until two completions.
    pub seconds_per_proof: Option<f64>,
    /// Each GPU, by index.
    pub gpus: Vec<GpuLive>,
    /// What the `CUZK_TIMING:` lines read so far add up to (zeros without them).
    pub kernel: KernelLive,
    /// The floors so far: GPU and synthesis seconds per proof (`None` before a job
    /// completed; see [`crate::report::Floors`]).
    pub floors: Option<(f64, f64)>,
    /// How far the clock is past the newest event of the run, ms: the prover's silence,
    /// when a live clock moves the engine on ([`crate::Engine::advance`]); `None` before
    /// an event.
    pub last_event_age_ms: Option<u64>,
    /// How long the job in flight the longest has been (since its first event), ms;
    /// `None` with no job in flight.
    pub oldest_job_age_ms: Option<u64>,
    /// Runs so far: 1 + the daemon restarts seen.
    pub runs: u32,
}

/// Totals of the `CUZK_TIMING:` lines read so far (`crate::timing`), ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelLive {
    /// GPU calls (`mutex_held_ms` lines).
    pub calls: u64,
    /// Kernel time (`ntt_msm_h_ms + batch_add_ms + tail_msm_ms`).
    pub kernel_ms: u64,
    /// GPU lock held (`mutex_held_ms`).
    pub lock_held_ms: u64,
    /// GPU lock waited for (`mutex_wait_ms`).
    pub lock_wait_ms: u64,
    /// `prep_msm_ms` (CPU, on the critical path).
    pub prep_msm_ms: u64,
    /// `b_g2_msm_ms` (CPU).
    pub b_g2_msm_ms: u64,
}

/// One GPU's live figures.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct GpuLive {
    /// The device.
    pub gpu: u32,
    /// Busy ratio over the busy window (merged intervals).
    pub busy_ratio: f64,
    /// Milliseconds since it was last busy (0 while busy).
    pub idle_ms: u64,
    /// Busy time since the engine started, ms (merged intervals, the open stretch
    /// included): monotonic except when an abandoned interval is cut back to its last
    /// observed end.
    pub busy_ms: u64,
    /// GPU intervals found stuck here so far (see `EngineConfig::stuck_min_ms`).
    pub stuck_intervals: u64,
}

/// Counters about the telemetry itself, kept by whoever feeds the engine (the layer, or
/// `watch`) and handed to sinks with each [`UpdateSink::tick`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelemetryCounts {
    /// Events the prover produced that did not fit in the queue (dropped, never waited for).
    pub events_dropped: u64,
    /// Malformed TIMELINE and `CUZK_TIMING:` lines read (and, by `watch`, lines over the
    /// length limit).
    pub malformed_lines: u64,
}

/// Counters of an exporter that pushes traces (OTLP). The exporter registers them in the
/// run's [`Exports`], where a sink that publishes them (Prometheus) reads them when it is
/// scraped, without the two depending on each other. Counted with [`ExportCounters::add`],
/// read as a [`ExportTotals`] snapshot.
#[derive(Debug, Default)]
pub struct ExportCounters {
    counts: [AtomicU64; ExportCount::ALL.len()],
}

/// What an exporter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportCount {
    /// Traces handed to the exporter's queue.
    TracesQueued,
    /// Traces dropped because the export queue was full.
    TracesDropped,
    /// Spans the collector accepted.
    SpansExported,
    /// Spans whose export failed (collector down, refused, timed out), or that the collector
    /// rejected.
    SpansFailed,
    /// Traces the collector accepted.
    TracesExported,
    /// Traces whose export failed.
    TracesFailed,
    /// Transitions whose two jobs' traces had both been sent before the transition was
    /// known (both finished before the job ahead of them on the GPU): no trace could carry
    /// their link.
    LinksUnplaced,
}

impl ExportCount {
    /// Every count, in the order of [`ExportTotals`]' fields.
    pub const ALL: [ExportCount; 7] = [
        ExportCount::TracesQueued,
        ExportCount::TracesDropped,
        ExportCount::SpansExported,
        ExportCount::SpansFailed,
        ExportCount::TracesExported,
        ExportCount::TracesFailed,
        ExportCount::LinksUnplaced,
    ];
}

impl ExportCounters {
    /// Adds `n` to a count.
    pub fn add(&self, what: ExportCount, n: u64) {
        self.counts[what as usize].fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// A trace counted as queued that did not get into the queue after all: one queued less,
    /// one dropped more (it is counted queued before it is sent, so that a reader never sees
    /// more delivered than queued).
    pub fn queued_then_dropped(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.counts[ExportCount::TracesQueued as usize].fetch_sub(1, Relaxed);
        self.counts[ExportCount::TracesDropped as usize].fetch_add(1, Relaxed);
    }

    /// The counters' values now.
    pub fn snapshot(&self) -> ExportTotals {
        let v = |c: ExportCount| self.counts[c as usize].load(std::sync::atomic::Ordering::Relaxed);
        ExportTotals {
            traces_queued: v(ExportCount::TracesQueued),
            traces_dropped: v(ExportCount::TracesDropped),
            spans_exported: v(ExportCount::SpansExported),
            spans_failed: v(ExportCount::SpansFailed),
            traces_exported: v(ExportCount::TracesExported),
            traces_failed: v(ExportCount::TracesFailed),
            links_unplaced: v(ExportCount::LinksUnplaced),
        }
    }
}

/// [`ExportCounters`]' values at one moment (or their sum over several exporters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportTotals {
    /// Traces handed to the exporter's queue.
    pub traces_queued: u64,
    /// Traces dropped because the export queue was full.
    pub traces_dropped: u64,
    /// Spans the collector accepted.
    pub spans_exported: u64,
    /// Spans whose export failed, or that the collector rejected.
    pub spans_failed: u64,
    /// Traces the collector accepted.
    pub traces_exported: u64,
    /// Traces whose export failed.
    pub traces_failed: u64,
    /// Links no trace could carry.
    pub links_unplaced: u64,
}

impl std::ops::Add for ExportTotals {
    type Output = ExportTotals;
    fn add(self, o: ExportTotals) -> ExportTotals {
        ExportTotals {
            traces_queued: self.traces_queued + o.traces_queued,
            traces_dropped: self.traces_dropped + o.traces_dropped,
            spans_exported: self.spans_exported + o.spans_exported,
            spans_failed: self.spans_failed + o.spans_failed,
            traces_exported: self.traces_exported + o.traces_exported,
            traces_failed: self.traces_failed + o.traces_failed,
            links_unplaced: self.links_unplaced + o.links_unplaced,
        }
    }
}

/// The exporters' counters of one engine's sinks: each exporter registers its own when its
/// run starts ([`UpdateSink::start_run`]), a publisher reads their sum when asked.
#[derive(Debug, Default)]
pub struct Exports {
    counters: std::sync::Mutex<Vec<Arc<ExportCounters>>>,
}

impl Exports {
    /// Registers an exporter's counters (once: a second call with the same is ignored).
    pub fn register(&self, counters: &Arc<ExportCounters>) {
        let mut all = self
            .counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !all.iter().any(|c| Arc::ptr_eq(c, counters)) {
            all.push(counters.clone());
        }
    }

    /// The sum of every registered exporter's counters now.
    pub fn totals(&self) -> ExportTotals {
        self.counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|c| c.snapshot())
            .fold(ExportTotals::default(), |a, b| a + b)
    }
}

/// The run a sink reports on: which prover instance, the key its trace ids derive from, and
/// the wall-clock instant its timeline offsets count from. Every sink of one engine gets the
/// same, so Prometheus exemplars and OTLP traces name the same traces.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunInfo {
    /// The prover instance's name.
    pub instance: String,
    /// The run key of trace ids ([`crate::ids::run_key`] of the instance and the epoch the
    /// run started with; it stays when the epoch is refined).
    pub run_key: String,
    /// Unix milliseconds of timeline offset 0.
    pub epoch_unix_ms: u64,
    /// Where the GPU intervals come from when not from the prover's own events
    /// ([`crate::EngineConfig::gpu_interval_source`]), for sinks that label them.
    pub gpu_interval_source: Option<String>,
    /// The exporters' counters, shared by every sink of the run.
    pub exports: Arc<Exports>,
}

impl PartialEq for RunInfo {
    fn eq(&self, o: &RunInfo) -> bool {
        (
            &self.instance,
            &self.run_key,
            self.epoch_unix_ms,
            &self.gpu_interval_source,
        ) == (
            &o.instance,
            &o.run_key,
            o.epoch_unix_ms,
            &o.gpu_interval_source,
        ) && Arc::ptr_eq(&self.exports, &o.exports)
    }
}

impl Eq for RunInfo {}

impl RunInfo {
    /// The run of `instance` whose offsets count from `epoch_unix_ms`.
    pub fn new(instance: impl Into<String>, epoch_unix_ms: u64) -> Self {
        let instance = instance.into();
        RunInfo {
            run_key: crate::ids::run_key(&instance, epoch_unix_ms),
            instance,
            epoch_unix_ms,
            gpu_interval_source: None,
            exports: Arc::default(),
        }
    }
}

/// What a sink could not do at shutdown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{sink}: {message}")]
pub struct SinkError {
    /// Which sink.
    pub sink: String,
    /// What it could not do, and how to fix it.
    pub message: String,
}

/// Receives the engine's updates.
pub trait UpdateSink {
    /// Called once per update, on the engine's thread, in the order the engine learns them.
    fn update(&mut self, update: Update);

    /// Called by the engine's owner with what is in flight (for gauges): the layer's
    /// worker at each of its ticks (1 s by default) and once after its last update, `watch`
    /// after each poll of its log (`--poll-ms`); `analyze` never ticks. The default does
    /// nothing.
    fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        let _ = (live, counts);
    }

    /// The owner read again history that was already reported (`watch` resuming from its
    /// journal cursor reads the run in progress again, its updates not sent, to rebuild the
    /// engine's state): what follows totals takes `live` and `counts` as its starting point,
    /// without counting them. The default does nothing.
    fn baseline(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        let _ = (live, counts);
    }

    /// Whether this sink uses [`Update::Partition`], the most frequent update (one per
    /// partition). When every sink fed by an engine says no, the engine does not build
    /// them. The default is yes.
    fn wants_partitions(&self) -> bool {
        true
    }

    /// Whether this sink uses [`Update::IdleGap`] (one per idle gap of a GPU: one every few
    /// partitions on a prover whose GPUs wait). When every sink fed by an engine says no,
    /// the engine does not build them. The default is yes.
    fn wants_idle_gaps(&self) -> bool {
        true
    }

    /// Whether this sink uses [`Update::Job`] and [`Update::Transition`] (one per job that
    /// finished, one per pair of jobs in a row on a GPU). When every sink fed by an engine
    /// says no, the engine does not build them (the report's rows are kept either way). The
    /// default is yes.
    fn wants_records(&self) -> bool {
        true
    }

    /// The run the updates belong to: called by the engine's owner before the first update
    /// (a [`Driver`]'s start), and again when it learns the run's epoch better (`watch`
    /// reading a log, the layer taking the prover's own offsets). An exporter registers its
    /// counters in `run.exports` here; a publisher reads them from there. The default
    /// ignores it.
    fn start_run(&mut self, run: &RunInfo) {
        let _ = run;
    }

    /// Hands what the sink holds to its exporter, without waiting for delivery. The
    /// default does nothing.
    fn flush(&mut self) {}

    /// Called once, after the engine's last update: waits for delivery until `deadline` at
    /// most, and says what was not delivered. Safe to call twice. The default does nothing.
    fn shutdown(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let _ = deadline;
        Ok(())
    }
}

/// Discards every update.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoUpdates;

impl UpdateSink for NoUpdates {
    #[inline]
    fn update(&mut self, _: Update) {}

    fn wants_partitions(&self) -> bool {
        false
    }

    fn wants_idle_gaps(&self) -> bool {
        false
    }

    fn wants_records(&self) -> bool {
        false
    }
}

impl UpdateSink for Vec<Update> {
    fn update(&mut self, update: Update) {
        self.push(update);
    }
}

impl<F: FnMut(Update)> UpdateSink for F {
    fn update(&mut self, update: Update) {
        self(update)
    }
}

impl UpdateSink for Box<dyn UpdateSink + Send> {
    fn update(&mut self, update: Update) {
        (**self).update(update);
    }

    fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        (**self).tick(live, counts);
    }

    fn baseline(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        (**self).baseline(live, counts);
    }

    fn wants_partitions(&self) -> bool {
        (**self).wants_partitions()
    }

    fn wants_idle_gaps(&self) -> bool {
        (**self).wants_idle_gaps()
    }

    fn wants_records(&self) -> bool {
        (**self).wants_records()
    }

    fn start_run(&mut self, run: &RunInfo) {
        (**self).start_run(run);
    }

    fn flush(&mut self) {
        (**self).flush();
    }

    fn shutdown(&mut self, deadline: Instant) -> Result<(), SinkError> {
        (**self).shutdown(deadline)
    }
}

/// Feeds every sink it holds, in the order they were added. Partition, idle-gap and record
/// (job, transition) updates go only to the sinks that want them, and are built only when
/// one does.
#[derive(Default)]
pub struct Fanout {
    sinks: Vec<Box<dyn UpdateSink + Send>>,
    /// What each sink (by index) said it wants of the updates a sink may decline.
    wants: Vec<Wants>,
}

/// The updates a sink may decline, and whether it wants them (asked once, when it is
/// added to a [`Fanout`]).
#[derive(Debug, Clone, Copy)]
struct Wants {
    partitions: bool,
    idle_gaps: bool,
    records: bool,
}

impl Wants {
    fn of(sink: &impl UpdateSink) -> Self {
        Wants {
            partitions: sink.wants_partitions(),
            idle_gaps: sink.wants_idle_gaps(),
            records: sink.wants_records(),
        }
    }

    /// Whether the sink takes `update`.
    fn takes(self, update: &Update) -> bool {
        match update {
            Update::Partition(_) => self.partitions,
            Update::IdleGap(_) => self.idle_gaps,
            Update::Job(_) | Update::Transition(_) => self.records,
            _ => true,
        }
    }
}

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fanout")
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl Fanout {
    /// No sinks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a sink.
    pub fn push(&mut self, sink: impl UpdateSink + Send + 'static) {
        self.wants.push(Wants::of(&sink));
        self.sinks.push(Box::new(sink));
    }

    /// Adds a sink (builder form).
    pub fn with(mut self, sink: impl UpdateSink + Send + 'static) -> Self {
        self.push(sink);
        self
    }

    /// Sinks held.
    pub fn len(&self) -> usize {
        self.sinks.len()
    }

    /// Whether it holds no sink.
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }
}

impl UpdateSink for Fanout {
    fn update(&mut self, update: Update) {
        let mut targets = self
            .sinks
            .iter_mut()
            .zip(&self.wants)
            .filter(|(_, w)| w.takes(&update))
            .map(|(s, _)| s)
            .peekable();
        while let Some(s) = targets.next() {
            if targets.peek().is_some() {
                s.update(update.clone());
            } else {
                s.update(update);
                break;
            }
        }
    }

    fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        for s in &mut self.sinks {
            s.tick(live, counts);
        }
    }

    fn baseline(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        for s in &mut self.sinks {
            s.baseline(live, counts);
        }
    }

    fn wants_partitions(&self) -> bool {
        self.wants.iter().any(|w| w.partitions)
    }

    fn wants_idle_gaps(&self) -> bool {
        self.wants.iter().any(|w| w.idle_gaps)
    }

    fn wants_records(&self) -> bool {
        self.wants.iter().any(|w| w.records)
    }

    fn start_run(&mut self, run: &RunInfo) {
        for s in &mut self.sinks {
            s.start_run(run);
        }
    }

    fn flush(&mut self) {
        for s in &mut self.sinks {
            s.flush();
        }
    }

    /// Shuts every sink down, each with the same deadline; the first error is returned
    /// after all were asked.
    fn shutdown(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let mut first = Ok(());
        for s in &mut self.sinks {
            let r = s.shutdown(deadline);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// The one lifecycle of an engine's sinks, for every owner of an engine (the layer's
/// worker, `watch`): [`Driver::start`] gives them their run, [`Driver::tick`] hands them
/// what is in flight, [`Driver::finish`] ticks a last time, flushes, and shuts them down
/// within a deadline.
#[derive(Debug)]
pub struct Driver {
    sinks: Fanout,
    run: RunInfo,
    every: std::time::Duration,
    last_tick: Option<Instant>,
}

impl Driver {
    /// Starts `sinks` on `run`; a tick is due once per `every` ([`Driver::tick_due`]).
    pub fn start(mut sinks: Fanout, run: RunInfo, every: std::time::Duration) -> Driver {
        sinks.start_run(&run);
        Driver {
            sinks,
            run,
            every,
            last_tick: None,
        }
    }

    /// The run the sinks report on.
    pub fn run(&self) -> &RunInfo {
        &self.run
    }

    /// The run's offsets count from `epoch_unix_ms` after all (its key, and so its trace
    /// ids, stay): the sinks are told.
    pub fn set_epoch(&mut self, epoch_unix_ms: u64) {
        self.run.epoch_unix_ms = epoch_unix_ms;
        self.sinks.start_run(&self.run);
    }

    /// The run is another after all (`watch` learning a log's epoch from its first lines:
    /// the run key derives from it): the sinks are told; the exporters' counters stay
    /// where they were registered.
    pub fn restart(&mut self, mut run: RunInfo) {
        run.exports = self.run.exports.clone();
        self.run = run;
        self.sinks.start_run(&self.run);
    }

    /// The sinks, for the engine to feed.
    pub fn sinks(&mut self) -> &mut Fanout {
        &mut self.sinks
    }

    /// Whether a tick is due.
    pub fn tick_due(&self) -> bool {
        self.last_tick.is_none_or(|t| t.elapsed() >= self.every)
    }

    /// Hands the sinks what is in flight now.
    pub fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        self.last_tick = Some(Instant::now());
        self.sinks.tick(live, counts);
    }

    /// History already reported was read again: see [`UpdateSink::baseline`].
    pub fn baseline(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        self.sinks.baseline(live, counts);
    }

    /// After the engine's last update: a last tick, a flush, and a shutdown that waits
    /// until `deadline` at most. Returns what the sinks could not deliver.
    pub fn finish(
        mut self,
        live: &LiveState,
        counts: &TelemetryCounts,
        deadline: Instant,
    ) -> Result<(), SinkError> {
        self.tick(live, counts);
        self.sinks.flush();
        self.sinks.shutdown(deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Count {
        wants: bool,
        gaps: bool,
        records: bool,
        partitions: Arc<AtomicU64>,
        others: Arc<AtomicU64>,
    }

    impl UpdateSink for Count {
        fn update(&mut self, u: Update) {
            use std::sync::atomic::Ordering::Relaxed;
            match u {
                Update::Partition(_) => self.partitions.fetch_add(1, Relaxed),
                _ => self.others.fetch_add(1, Relaxed),
            };
        }
        fn wants_partitions(&self) -> bool {
            self.wants
        }
        fn wants_idle_gaps(&self) -> bool {
            self.gaps
        }
        fn wants_records(&self) -> bool {
            self.records
        }
    }

    fn partition() -> Update {
        Update::Partition(Arc::new(PartitionRecord {
            job_id: "j".into(),
            run: 0,
            proof_kind: None,
            partition: Some(0),
            worker: None,
            gpu: None,
            synth_start_ms: None,
            synth_end_ms: None,
            queue_start_ms: None,
            pickup_ms: None,
            gpu_start_ms: None,
            gpu_end_ms: None,
            synthesis_ms: None,
            queue_ms: None,
            lock_wait_ms: None,
            gpu_ms: None,
            synth_reported_ms: None,
            gpu_reported_ms: None,
            kernel_ms: None,
        }))
    }

    #[test]
    fn fanout_forwards_partitions_only_to_sinks_that_want_them() {
        use std::sync::atomic::Ordering::Relaxed;
        let (a, b) = (
            Count::default(),
            Count {
                wants: true,
                ..Default::default()
            },
        );
        let (ap, ao, bp, bo) = (
            a.partitions.clone(),
            a.others.clone(),
            b.partitions.clone(),
            b.others.clone(),
        );
        let mut f = Fanout::new().with(a);
        assert!(!f.wants_partitions(), "no sink wants partitions yet");
        f.push(b);
        assert!(f.wants_partitions());
        f.update(partition());
        f.update(Update::NewRun { run: 1, t_ms: 0 });
        assert_eq!((ap.load(Relaxed), ao.load(Relaxed)), (0, 1));
        assert_eq!((bp.load(Relaxed), bo.load(Relaxed)), (1, 1));
        // a boxed sink keeps saying what it wants
        let boxed: Box<dyn UpdateSink + Send> = Box::new(Count::default());
        assert!(!boxed.wants_partitions());
        assert!(!boxed.wants_idle_gaps());
    }

    /// An update a sink may decline goes only to the sinks whose `wants` says yes (the
    /// others still get every other update); `wants` is no for `NoUpdates` and the test's
    /// default sink, boxed or not, and yes by default. Returns the fanout of a sink that
    /// declines and one (`taker`) that wants it.
    fn forwards_only_to_takers(
        update: Update,
        taker: Count,
        wants: impl Fn(&dyn UpdateSink) -> bool,
    ) -> Fanout {
        use std::sync::atomic::Ordering::Relaxed;
        let a = Count::default();
        let (ao, bo) = (a.others.clone(), taker.others.clone());
        let mut f = Fanout::new().with(a);
        assert!(!wants(&f), "no sink wants it yet");
        f.push(taker);
        assert!(wants(&f));
        f.update(update);
        f.update(Update::NewRun { run: 1, t_ms: 0 });
        assert_eq!((ao.load(Relaxed), bo.load(Relaxed)), (1, 2));
        assert!(!wants(&NoUpdates));
        let boxed: Box<dyn UpdateSink + Send> = Box::new(Count::default());
        assert!(!wants(&boxed));
        assert!(wants(&|_: Update| {}), "the default is yes");
        f
    }

    #[test]
    fn fanout_forwards_idle_gaps_only_to_sinks_that_want_them() {
        let gap = Update::IdleGap(Arc::new(crate::report::IdleGap {
            gpu: 0,
            start_ms: 1,
            end_ms: 2,
            boundary: crate::report::Boundary::CrossSector,
            with_queue_ms: 0,
            next_job: "j".into(),
            next_attempt: 0,
            run: 0,
        }));
        let taker = Count {
            gaps: true,
            ..Default::default()
        };
        let f = forwards_only_to_takers(gap, taker, |s| s.wants_idle_gaps());
        assert!(!f.wants_partitions());
    }

    #[test]
    fn fanout_forwards_records_only_to_sinks_that_want_them() {
        let rec = Update::Transition(Arc::new(crate::report::TransitionRecord {
            gpu: 0,
            from_job: "a".into(),
            from_attempt: 0,
            to_job: "b".into(),
            run: 0,
            to_attempt: 0,
            from_last_gpu_end_ms: 1,
            to_first_gpu_start_ms: 2,
            gap_ms: 1,
            overlap_ms: 0,
            handoff_ms: None,
            synthesis_lead_ms: None,
        }));
        let taker = Count {
            records: true,
            ..Default::default()
        };
        let f = forwards_only_to_takers(rec, taker, |s| s.wants_records());
        assert!(!f.wants_partitions() && !f.wants_idle_gaps());
    }

    struct Failing(&'static str, Arc<AtomicU64>);
    impl UpdateSink for Failing {
        fn update(&mut self, _: Update) {}
        fn shutdown(&mut self, _: Instant) -> Result<(), SinkError> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(SinkError {
                sink: self.0.into(),
                message: "down".into(),
            })
        }
    }

    #[test]
    fn fanout_shuts_every_sink_down_and_returns_the_first_error() {
        let calls = Arc::new(AtomicU64::new(0));
        let mut f = Fanout::new()
            .with(Failing("a", calls.clone()))
            .with(Failing("b", calls.clone()));
        let err = f.shutdown(Instant::now()).unwrap_err();
        assert_eq!(err.sink, "a");
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 2);
    }
}
