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
#[derive(Debug, Clone)]
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
}

/// Counters about the telemetry itself, kept by whoever feeds the engine (the layer, or
/// `watch`) and handed to sinks with each [`UpdateSink::tick`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TelemetryCounts {
    /// Events the prover produced that did not fit in the queue (dropped, never waited for).
    pub events_dropped: u64,
    /// Malformed TIMELINE lines read.
    pub malformed_lines: u64,
}

/// Counters of an exporter that pushes traces (OTLP), shared with the sinks that publish
/// them (Prometheus) without the two depending on each other.
#[derive(Debug, Default)]
pub struct ExportCounters {
    /// Traces handed to the exporter's queue.
    pub traces_queued: AtomicU64,
    /// Traces dropped because the export queue was full.
    pub traces_dropped: AtomicU64,
    /// Spans the collector accepted.
    pub spans_exported: AtomicU64,
    /// Spans whose export failed (collector down, refused, timed out).
    pub spans_failed: AtomicU64,
    /// Traces the collector accepted.
    pub traces_exported: AtomicU64,
    /// Traces whose export failed.
    pub traces_failed: AtomicU64,
    /// Transitions whose two jobs' traces had both been sent before the transition was
    /// known (both finished before the job ahead of them on the GPU): no trace could carry
    /// their link.
    pub links_unplaced: AtomicU64,
}

/// The run a sink reports on: which prover instance, the key its trace ids derive from, and
/// the wall-clock instant its timeline offsets count from. Every sink of one engine gets the
/// same, so Prometheus exemplars and OTLP traces name the same traces.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl RunInfo {
    /// The run of `instance` whose offsets count from `epoch_unix_ms`.
    pub fn new(instance: impl Into<String>, epoch_unix_ms: u64) -> Self {
        let instance = instance.into();
        RunInfo {
            run_key: crate::ids::run_key(&instance, epoch_unix_ms),
            instance,
            epoch_unix_ms,
            gpu_interval_source: None,
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

    /// Whether this sink uses [`Update::Partition`], the most frequent update (one per
    /// partition). When every sink fed by an engine says no, the engine does not build
    /// them. The default is yes.
    fn wants_partitions(&self) -> bool {
        true
    }

    /// The run the updates belong to: called by the engine's owner before the first update
    /// (the layer's `build()`), and again when it learns the run's epoch better (`watch`
    /// reading a log, the layer taking the prover's own offsets). The default ignores it.
    fn start_run(&mut self, run: &RunInfo) {
        let _ = run;
    }

    /// Counters this sink keeps about its own export (the OTLP exporter's), for another sink
    /// to publish. The default has none.
    fn export_counters(&self) -> Option<Arc<ExportCounters>> {
        None
    }

    /// Publishes an exporter's counters (the Prometheus sink does). The default ignores them.
    fn publish_export_counters(&mut self, counters: Arc<ExportCounters>) {
        let _ = counters;
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

    fn wants_partitions(&self) -> bool {
        (**self).wants_partitions()
    }

    fn start_run(&mut self, run: &RunInfo) {
        (**self).start_run(run);
    }

    fn export_counters(&self) -> Option<Arc<ExportCounters>> {
        (**self).export_counters()
    }

    fn publish_export_counters(&mut self, counters: Arc<ExportCounters>) {
        (**self).publish_export_counters(counters);
    }

    fn flush(&mut self) {
        (**self).flush();
    }

    fn shutdown(&mut self, deadline: Instant) -> Result<(), SinkError> {
        (**self).shutdown(deadline)
    }
}

/// Feeds every sink it holds, in the order they were added. Partition updates go only to
/// the sinks that want them, and are built only when one does.
#[derive(Default)]
pub struct Fanout {
    sinks: Vec<Box<dyn UpdateSink + Send>>,
    /// Index of each sink, per whether it wants partitions.
    partitions: Vec<bool>,
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
        self.partitions.push(sink.wants_partitions());
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
        let is_partition = matches!(update, Update::Partition(_));
        let mut targets = self
            .sinks
            .iter_mut()
            .zip(&self.partitions)
            .filter(|(_, wants)| !is_partition || **wants)
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

    fn wants_partitions(&self) -> bool {
        self.partitions.iter().any(|w| *w)
    }

    fn start_run(&mut self, run: &RunInfo) {
        for s in &mut self.sinks {
            s.start_run(run);
        }
    }

    fn export_counters(&self) -> Option<Arc<ExportCounters>> {
        self.sinks.iter().find_map(|s| s.export_counters())
    }

    fn publish_export_counters(&mut self, counters: Arc<ExportCounters>) {
        for s in &mut self.sinks {
            s.publish_export_counters(counters.clone());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Count {
        wants: bool,
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
