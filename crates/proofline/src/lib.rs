#![doc = include_str!("../README.md")]

mod clock;
mod fields;
mod handoff;
mod layer;
mod queued;
mod worker;

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use fields::FieldNames;
pub use layer::{Edge, LayerStats, SpanRule, StatsSnapshot, TimelineLayer};
pub use proofline_core::{self as core, EventKind, Report};

use proofline_core::sink::UpdateSink;
use proofline_core::{Engine, EngineConfig};

use crate::layer::{CallsiteSet, LayerConfig, SpanTable};
use crate::worker::{Sinks, Worker};

/// Entries each prover thread's queue to the worker holds before it drops (an entry is one
/// event, or a span's start and end together; 64 bytes each, allocated at a thread's first
/// event).
pub const DEFAULT_CHANNEL_CAPACITY: usize = 4_096;
/// How long dropping the guard waits for the worker to deliver what is queued.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// The live engine's reorder window: the layer's events are nearly in order.
pub const DEFAULT_LIVE_REORDER_WINDOW_MS: u64 = 1_000;
/// The target of `tracing` events read as TIMELINE events (cuzk's `timeline_event()`).
pub const DEFAULT_EVENT_TARGET: &str = "timeline";

/// How long the worker sleeps when the queue is empty: the most a TIMELINE line waits.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Where TIMELINE lines go.
enum Output {
    Stderr,
    Writer(Box<dyn Write + Send>),
    Discard,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Output::Stderr => "Stderr",
            Output::Writer(_) => "Writer",
            Output::Discard => "Discard",
        })
    }
}

/// Builds a [`TimelineLayer`] and its [`TimelineGuard`]. Every setting has a documented
/// default; setters take and return the builder by value.
pub struct Builder {
    rules: Vec<SpanRule>,
    fields: FieldNames,
    event_target: String,
    gpu_queue_on_synth_end: bool,
    engine: EngineConfig,
    channel_capacity: usize,
    output: Output,
    sinks: Vec<Box<dyn UpdateSink + Send>>,
    tick: Duration,
    poll: Duration,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("rules", &self.rules)
            .field("fields", &self.fields)
            .field("event_target", &self.event_target)
            .field("channel_capacity", &self.channel_capacity)
            .field("output", &self.output)
            .field("sinks", &self.sinks.len())
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            rules: SpanRule::cuzk_defaults(),
            fields: FieldNames::default(),
            event_target: DEFAULT_EVENT_TARGET.to_owned(),
            gpu_queue_on_synth_end: true,
            engine: EngineConfig {
                reorder_window_ms: DEFAULT_LIVE_REORDER_WINDOW_MS,
                completion_grace_ms: DEFAULT_LIVE_REORDER_WINDOW_MS,
                ..EngineConfig::default()
            },
            channel_capacity: DEFAULT_CHANNEL_CAPACITY,
            output: Output::Stderr,
            sinks: Vec::new(),
            tick: Duration::from_secs(1),
            poll: DEFAULT_POLL_INTERVAL,
        }
    }
}

impl TimelineLayer {
    /// A builder with cuzk's defaults: its span names, TIMELINE lines to stderr, two GPU
    /// workers per device, a queue of [`DEFAULT_CHANNEL_CAPACITY`] events.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl Builder {
    /// GPU = worker / N when a span has no `gpu` field (default 2, as cuzk).
    pub fn gpu_workers_per_device(mut self, n: u32) -> Self {
        self.engine.gpu_workers_per_device = n.max(1);
        self
    }

    /// Adds a mapping from a span edge to a TIMELINE event.
    pub fn map(mut self, span: impl Into<String>, event: EventKind, edge: Edge) -> Self {
        self.rules.push(SpanRule::new(span, event, edge));
        self
    }

    /// Forgets every mapping, cuzk's defaults included (then add your own with [`Builder::map`]).
    pub fn clear_mappings(mut self) -> Self {
        self.rules.clear();
        self
    }

    /// The names of the fields looked up on spans and their ancestors.
    pub fn field_names(mut self, names: FieldNames) -> Self {
        self.fields = names;
        self
    }

    /// The target of events read as TIMELINE events (default `timeline`).
    pub fn event_target(mut self, target: impl Into<String>) -> Self {
        self.event_target = target.into();
        self
    }

    /// Emit GPU_QUEUE at the instant of SYNTH_END (default true). Turn it off when the
    /// prover emits its own GPU_QUEUE `timeline` events.
    pub fn gpu_queue_on_synth_end(mut self, on: bool) -> Self {
        self.gpu_queue_on_synth_end = on;
        self
    }

    /// Entries each prover thread's queue holds before new ones are dropped (default 4 096:
    /// 256 KiB for each thread that emits events). The worker empties the queues every poll
    /// interval, so a thread would have to emit this many within one to lose any.
    pub fn channel_capacity(mut self, n: usize) -> Self {
        self.channel_capacity = n.max(1);
        self
    }

    /// The live engine's settings (the reorder window defaults to 1 s here).
    pub fn engine_config(mut self, cfg: EngineConfig) -> Self {
        self.engine = cfg;
        self
    }

    /// TIMELINE lines to stderr, as cuzk prints them (the default).
    pub fn timeline_to_stderr(mut self) -> Self {
        self.output = Output::Stderr;
        self
    }

    /// TIMELINE lines to any writer (written by the worker thread, flushed after each batch).
    pub fn timeline_to_writer(mut self, w: impl Write + Send + 'static) -> Self {
        self.output = Output::Writer(Box::new(w));
        self
    }

    /// TIMELINE lines appended to a file.
    pub fn timeline_to_file(self, path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let f = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(self.timeline_to_writer(io::BufWriter::new(f)))
    }

    /// No TIMELINE lines (the engine and the sinks still run).
    pub fn no_timeline(mut self) -> Self {
        self.output = Output::Discard;
        self
    }

    /// A receiver of the engine's updates (an exporter). Sinks run on the worker thread.
    pub fn sink(mut self, sink: impl UpdateSink + Send + 'static) -> Self {
        self.sinks.push(Box::new(sink));
        self
    }

    /// How often the worker ticks the engine and the sinks when idle (default 1 s).
    pub fn tick(mut self, every: Duration) -> Self {
        self.tick = every.max(Duration::from_millis(10));
        self
    }

    /// How long the worker sleeps when the queue is empty (default 5 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_micros(100));
        self
    }

    /// Starts the worker thread and returns the layer and the guard that shuts it down.
    ///
    /// # Panics
    /// If the OS cannot start a thread.
    pub fn build(self) -> (TimelineLayer, TimelineGuard) {
        let cfg = Arc::new(LayerConfig {
            rules: self.rules,
            fields: self.fields,
            event_target: self.event_target,
            gpu_queue_on_synth_end: self.gpu_queue_on_synth_end,
        });
        let handoff = Arc::new(handoff::Handoff::new(self.channel_capacity));
        let shutdown = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel();
        let stats = Arc::new(LayerStats::default());
        let epoch = Instant::now();
        let clock = clock::Clock::start();
        let spans = Arc::new(SpanTable::new());
        let out: Option<Box<dyn Write + Send>> = match self.output {
            Output::Stderr => Some(Box::new(io::stderr())),
            Output::Writer(w) => Some(w),
            Output::Discard => None,
        };
        let worker = Worker {
            handoff: handoff.clone(),
            rings: handoff::Rings::default(),
            shutdown: shutdown.clone(),
            poll: self.poll,
            engine: Engine::new(self.engine),
            out,
            sinks: Sinks(self.sinks),
            stats: stats.clone(),
            clock: clock.clone(),
            spans: spans.clone(),
            tick: self.tick,
            done: done_tx,
            warned: false,
        };
        let handle = std::thread::Builder::new()
            .name("proofline-worker".into())
            .spawn(move || worker.run())
            .expect("failed to start the proofline-worker thread");
        let layer = TimelineLayer {
            cfg,
            handoff,
            closed: shutdown.clone(),
            stats: stats.clone(),
            clock,
            callsites: CallsiteSet::new(),
            spans,
        };
        let guard = TimelineGuard {
            shutdown,
            done: done_rx,
            handle: Some(handle),
            result: None,
            stats,
            epoch,
        };
        (layer, guard)
    }
}

/// Why a shutdown did not deliver everything.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShutdownError {
    /// The worker did not finish within the timeout; what was queued may be lost.
    #[error(
        "the proofline worker did not finish within {waited:?}: {received} events taken in, {written} TIMELINE lines written, {dropped} events dropped; the rest was not delivered"
    )]
    Timeout {
        /// How long we waited.
        waited: Duration,
        /// Events the worker took in.
        received: u64,
        /// TIMELINE lines written.
        written: u64,
        /// Events dropped (queue full).
        dropped: u64,
    },
    /// The worker thread panicked (a sink failed); queued events were not delivered.
    #[error(
        "the proofline worker panicked; {received} events taken in, {written} TIMELINE lines written"
    )]
    WorkerPanicked {
        /// Events the worker took in.
        received: u64,
        /// TIMELINE lines written.
        written: u64,
    },
}

/// Keeps the worker running; shuts it down (bounded by [`DEFAULT_SHUTDOWN_TIMEOUT`]) when
/// dropped. Call [`TimelineGuard::shutdown`] to choose the timeout and get the final report.
#[must_use = "dropping the guard shuts down the proofline worker: keep it alive as long as the prover runs"]
#[derive(Debug)]
pub struct TimelineGuard {
    shutdown: Arc<AtomicBool>,
    done: Receiver<Report>,
    handle: Option<JoinHandle<()>>,
    result: Option<Result<Report, ShutdownError>>,
    stats: Arc<LayerStats>,
    epoch: Instant,
}

impl TimelineGuard {
    /// The layer's counters (events received, dropped, lines written, ...).
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The shared counters, for exporters that publish them.
    pub fn stats_handle(&self) -> Arc<LayerStats> {
        self.stats.clone()
    }

    /// Asks the worker to take in what is queued now rather than at its next poll, and
    /// returns at once (it unparks the worker; it never waits for it). For a program that
    /// wants its lines and metrics current at a moment it chooses (the end of a sector, a
    /// test, a benchmark that must not have the worker draining while it measures) without
    /// a short poll interval for the whole run. Prover threads never wake the worker.
    pub fn wake(&self) {
        if let Some(h) = self.handle.as_ref() {
            h.thread().unpark();
        }
    }

    /// The instant TIMELINE offsets count from (the wall-clock epoch of OTLP spans).
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Delivers what is queued, closes the engine (jobs in flight become incomplete) and
    /// returns its final report, waiting at most `timeout`. Safe to call again: later calls
    /// return the first call's result. Events emitted after shutdown are dropped and counted.
    pub fn shutdown(&mut self, timeout: Duration) -> Result<Report, ShutdownError> {
        if let Some(r) = &self.result {
            return r.clone();
        }
        let deadline = Instant::now() + timeout;
        // from now on the layer drops (and counts) new events; the worker drains the rest
        self.shutdown.store(true, Ordering::Release);
        self.wake();
        let remaining = deadline.saturating_duration_since(Instant::now());
        let s = self.stats.snapshot();
        let result = match self.done.recv_timeout(remaining) {
            Ok(report) => {
                if let Some(h) = self.handle.take() {
                    let _ = h.join();
                }
                Ok(report)
            }
            Err(RecvTimeoutError::Timeout) => {
                let s = self.stats.snapshot();
                Err(ShutdownError::Timeout {
                    waited: timeout,
                    received: s.received,
                    written: s.written,
                    dropped: s.dropped,
                })
            }
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(h) = self.handle.take() {
                    let _ = h.join();
                }
                Err(ShutdownError::WorkerPanicked {
                    received: s.received,
                    written: s.written,
                })
            }
        };
        self.result = Some(result.clone());
        result
    }
}

impl Drop for TimelineGuard {
    fn drop(&mut self) {
        if self.result.is_none() {
            if let Err(e) = self.shutdown(DEFAULT_SHUTDOWN_TIMEOUT) {
                eprintln!("proofline: {e}");
            }
        }
    }
}
