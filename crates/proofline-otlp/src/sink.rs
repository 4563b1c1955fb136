//! The sink the engine feeds: partition and transition records kept per job until the
//! job's record comes, then its trace built and queued for the exporter thread; and the
//! handle that waits for the export at shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant};

use proofline_core::report::{PartitionRecord, TransitionRecord};
use proofline_core::sink::{ExportCount, ExportCounters, SinkError, Update, UpdateSink};

use crate::ShutdownError;
use crate::config::DEFAULT_SHUTDOWN_TIMEOUT;
use crate::diagnose::{ExportFailure, PROBE_TIMEOUT};
use crate::endpoint::Probe;
use crate::export::ExportThread;
use crate::lock;
use crate::trace::{Trace, TraceBuilder, Transitions};

/// Sends `trace`, waiting for room until `until` at most, and while `stop` is not set; false
/// when it was not sent.
fn send_until(
    tx: &SyncSender<Trace>,
    mut trace: Trace,
    until: Option<Instant>,
    stop: Option<&AtomicBool>,
) -> bool {
    let stopped = || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    if until.is_none() && stop.is_none() {
        return tx.send(trace).is_ok();
    }
    let mut pause = Duration::from_millis(1);
    loop {
        match tx.try_send(trace) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(t)) => trace = t,
        }
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) || stopped() {
            return false;
        }
        let left = until.map_or(pause, |u| u - now);
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Builds traces from engine updates and queues them for export.
#[derive(Debug)]
pub struct OtlpSink {
    builder: TraceBuilder,
    /// The export queue; `None` once the sink was shut down (the exporter then finishes).
    tx: Option<SyncSender<Trace>>,
    counters: Arc<ExportCounters>,
    /// The exporter thread, shared with the handle.
    export: Arc<ExportThread>,
    parts: HashMap<(u32, Arc<str>), Vec<Arc<PartitionRecord>>>,
    /// Transitions since the last job record (they all come just before one).
    transitions: Vec<Arc<TransitionRecord>>,
    block_when_full: bool,
    block_until: Option<Instant>,
    stop_waiting: Option<Arc<AtomicBool>>,
}

/// Controls the exporter thread: keep it until the sink was shut down (the layer's guard
/// does that), then [`OtlpHandle::shutdown`] for the result. Dropped while its sink is still
/// alive, it leaves the export to the sink's own shutdown. Shutting down either the sink ([`UpdateSink::shutdown`],
/// which the layer's guard does for every sink) or the handle waits for the same export;
/// the first to finish waiting keeps the result for the other.
#[derive(Debug)]
#[must_use = "keep the OtlpHandle until the sink was shut down, then call shutdown() for the result"]
pub struct OtlpHandle {
    pub(crate) export: Arc<ExportThread>,
}

impl OtlpSink {
    pub(crate) fn new(
        builder: TraceBuilder,
        tx: SyncSender<Trace>,
        export: Arc<ExportThread>,
        (block_when_full, block_until, stop_waiting): (
            bool,
            Option<Instant>,
            Option<Arc<AtomicBool>>,
        ),
    ) -> Self {
        OtlpSink {
            builder,
            tx: Some(tx),
            counters: export.counters.clone(),
            export,
            parts: HashMap::new(),
            transitions: Vec::new(),
            block_when_full,
            block_until,
            stop_waiting,
        }
    }

    /// The exporter's counters (share them with the Prometheus sink).
    pub fn counters(&self) -> Arc<ExportCounters> {
        self.counters.clone()
    }

    /// The trace builder (for tests and replays that want the spans themselves).
    pub fn builder(&self) -> &TraceBuilder {
        &self.builder
    }
}

impl UpdateSink for OtlpSink {
    fn start_run(&mut self, run: &proofline_core::RunInfo) {
        run.exports.register(&self.counters);
        self.builder.run_key.clone_from(&run.run_key);
        self.builder.epoch_unix_ms = run.epoch_unix_ms;
        self.builder
            .gpu_interval_source
            .clone_from(&run.gpu_interval_source);
    }

    fn update(&mut self, update: Update) {
        match update {
            Update::Partition(p) => self
                .parts
                .entry((p.run, p.job_id.clone()))
                .or_default()
                .push(p),
            Update::Transition(t) => self.transitions.push(t),
            Update::Job(j) => {
                let parts = self
                    .parts
                    .remove(&(j.run, j.job_id.clone()))
                    .unwrap_or_default();
                let is = |run: u32, job: &Arc<str>, attempt: u32| {
                    (run, job, attempt) == (j.run, &j.job_id, j.attempt)
                };
                let (into, rest): (Vec<_>, Vec<_>) = self
                    .transitions
                    .drain(..)
                    .partition(|t| is(t.run, &t.to_job, t.to_attempt));
                let (out_of, unplaced): (Vec<_>, Vec<_>) = rest
                    .into_iter()
                    .partition(|t| is(t.run, &t.from_job, t.from_attempt));
                self.counters
                    .add(ExportCount::LinksUnplaced, unplaced.len() as u64);
                let trs = Transitions {
                    into: &into,
                    out_of: &out_of,
                };
                let trace = self.builder.trace(&j, &parts, trs);
                self.counters.add(ExportCount::TracesQueued, 1);
                let Some(tx) = &self.tx else {
                    // shut down: nothing more is exported
                    self.counters.queued_then_dropped();
                    return;
                };
                if self.block_when_full {
                    if !send_until(tx, trace, self.block_until, self.stop_waiting.as_deref()) {
                        self.counters.queued_then_dropped();
                    }
                    return;
                }
                match tx.try_send(trace) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                        self.counters.queued_then_dropped();
                    }
                }
            }
            Update::NewRun { .. } => {
                self.parts.clear();
                self.transitions.clear();
            }
            // IdleGap, GpuBusy, and what a later version adds
            _ => {}
        }
    }

    /// Closes the export queue (nothing more is sent) and waits until `deadline` at most for
    /// what it holds to be exported.
    fn shutdown(&mut self, deadline: Instant) -> Result<(), SinkError> {
        self.tx = None;
        self.export.wait(deadline, false).map_err(|e| SinkError {
            sink: "otlp".into(),
            message: e.to_string(),
        })
    }
}

impl OtlpHandle {
    /// The exporter's counters.
    pub fn counters(&self) -> Arc<ExportCounters> {
        self.export.counters.clone()
    }

    /// Why exports failed so far: each kind of failure once, with its counts and its first
    /// message, in the order they first happened.
    pub fn failures(&self) -> Vec<ExportFailure> {
        self.export.failures.list()
    }

    /// How long the export in progress has been waiting for the collector, if one is.
    pub fn in_flight_for(&self) -> Option<Duration> {
        lock(&self.export.flight).map(|t| t.elapsed())
    }

    /// What a connection to the collector finds now (resolved? refused? accepted?): the
    /// cause of a failure the exporter itself reports only as a network error, or of an
    /// export that hangs.
    pub fn probe(&self) -> Probe {
        self.export.endpoint.probe(PROBE_TIMEOUT)
    }

    /// Waits, at most `timeout`, for the queue to be exported. Call it after the engine has
    /// finished (the layer's guard shut down, or the replay read to its end) and the sink was
    /// dropped or shut down. Safe to call twice: later calls return the first result (also
    /// when the sink's own shutdown waited first).
    pub fn shutdown(&mut self, timeout: Duration) -> Result<(), ShutdownError> {
        self.export.wait(Instant::now() + timeout, true)
    }
}

impl Drop for OtlpHandle {
    fn drop(&mut self) {
        // the sink (in the layer, or not dropped yet) shuts the export down itself
        let sink_alive = Arc::strong_count(&self.export) > 1;
        if !sink_alive && !self.export.decided() {
            if let Err(e) = self.shutdown(DEFAULT_SHUTDOWN_TIMEOUT) {
                let _ = std::io::Write::write_fmt(
                    &mut std::io::stderr(),
                    format_args!("proofline: {e}\n"),
                );
            }
        }
    }
}
