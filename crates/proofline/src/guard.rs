//! The guard: keeps the worker running, and shuts it down with a bound on time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proofline_core::Report;
use proofline_core::sink::{RunInfo, SinkError};

use crate::DEFAULT_SHUTDOWN_TIMEOUT;
use crate::layer::{LayerStats, StatsSnapshot};

/// Why a shutdown did not deliver everything.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
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
    /// A sink could not deliver everything by the deadline: the TIMELINE lines and the
    /// engine's report are complete (here), what the sink names was not delivered.
    #[error("the proofline worker finished, but a sink did not: {error}")]
    Sink {
        /// The engine's final report.
        report: Box<Report>,
        /// What the sink could not do.
        error: SinkError,
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
    pub(crate) shutdown: Arc<AtomicBool>,
    /// When the sinks must be done, handed to the worker at shutdown.
    pub(crate) deadline: Arc<Mutex<Option<Instant>>>,
    pub(crate) done: Receiver<(Report, Result<(), SinkError>)>,
    pub(crate) handle: Option<JoinHandle<()>>,
    pub(crate) result: Option<Result<Report, ShutdownError>>,
    pub(crate) stats: Arc<LayerStats>,
    pub(crate) run: RunInfo,
}

impl TimelineGuard {
    /// The layer's counters (events received, dropped, lines written, ...).
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The run the sinks were given: the instance, the run key of trace ids, and the
    /// wall-clock instant (Unix ms) that the layer's TIMELINE offsets count from.
    pub fn run(&self) -> &RunInfo {
        &self.run
    }

    /// Unix milliseconds of TIMELINE offset 0 (the instant the layer was built).
    pub fn epoch_unix_ms(&self) -> u64 {
        self.run.epoch_unix_ms
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

    /// Delivers what is queued, closes the engine (jobs in flight become incomplete) and
    /// returns its final report, waiting at most `timeout`. Safe to call again: later calls
    /// return the first call's result. Events emitted after shutdown are dropped and counted.
    pub fn shutdown(&mut self, timeout: Duration) -> Result<Report, ShutdownError> {
        if let Some(r) = &self.result {
            return r.clone();
        }
        let deadline = Instant::now() + timeout;
        // the sinks get most of the time, so that the worker's report still comes back
        // within the deadline when a sink uses all of its share
        *self
            .deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Instant::now() + timeout.mul_f64(0.9));
        // from now on the layer drops (and counts) new events; the worker drains the rest
        self.shutdown.store(true, Ordering::Release);
        self.wake();
        let remaining = deadline.saturating_duration_since(Instant::now());
        let s = self.stats.snapshot();
        let result = match self.done.recv_timeout(remaining) {
            Ok((report, delivered)) => {
                if let Some(h) = self.handle.take() {
                    let _ = h.join();
                }
                match delivered {
                    Ok(()) => Ok(report),
                    Err(error) => Err(ShutdownError::Sink {
                        report: Box::new(report),
                        error,
                    }),
                }
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
                let _ = std::io::Write::write_fmt(
                    &mut std::io::stderr(),
                    format_args!("proofline: {e}\n"),
                );
            }
        }
    }
}
