//! The exporter thread: takes traces from the bounded queue and sends them with the
//! [`Client`], counting what was delivered and recording why the rest was not; and the wait
//! for it at shutdown, shared by the sink and the handle.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proofline_core::sink::{ExportCount, ExportCounters};

use crate::diagnose::Failures;
use crate::endpoint::Endpoint;
use crate::trace::{Trace, TraceBuilder};
use crate::transport::Client;
use crate::{OtlpConfig, OtlpError, OtlpHandle, OtlpSink, ShutdownError, endpoint, lock};

/// The exporter thread and what its shutdown found.
#[derive(Debug)]
pub(crate) struct ExportThread {
    pub counters: Arc<ExportCounters>,
    /// Why exports failed.
    pub failures: Arc<Failures>,
    /// When the export in progress began, if one is.
    pub flight: Arc<Mutex<Option<Instant>>>,
    /// Where traces go (for the diagnosis of a failure).
    pub endpoint: Endpoint,
    done: Mutex<Receiver<()>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    result: Mutex<Option<Result<(), ShutdownError>>>,
    /// Set when a last wait timed out: the thread stops at its next trace.
    closer: Arc<Mutex<bool>>,
}

impl ExportThread {
    /// Waits until `deadline` at most for the queue to be exported. The first wait that
    /// sees the export finish keeps the result for later calls. A `last` wait (the handle's)
    /// that times out stops the export and keeps its error; a wait that is not the last (the
    /// sink's, within the layer's deadline) leaves the export running, so that the handle
    /// can still give it more time.
    pub(crate) fn wait(&self, deadline: Instant, last: bool) -> Result<(), ShutdownError> {
        let started = Instant::now();
        loop {
            if let Some(r) = &*lock(&self.result) {
                return r.clone();
            }
            // another waiter may hold the receiver: poll for it, within our own deadline
            if let Ok(done) = self.done.try_lock() {
                let left = deadline.saturating_duration_since(Instant::now());
                match done.recv_timeout(left.min(Duration::from_millis(50))) {
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                        if let Some(t) = lock(&self.thread).take() {
                            let _ = t.join();
                        }
                        *lock(&self.result) = Some(Ok(()));
                        return Ok(());
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                }
            } else {
                std::thread::sleep(Duration::from_millis(5));
            }
            if Instant::now() >= deadline {
                let c = self.counters.snapshot();
                let err = ShutdownError {
                    waited: started.elapsed(),
                    queued: c.traces_queued,
                    exported: c.spans_exported,
                    failed: c.spans_failed,
                    dropped: c.traces_dropped,
                    delivered: c.traces_exported,
                };
                if last {
                    // stop exporting what is left; the thread ends when its current export does
                    *lock(&self.closer) = true;
                    *lock(&self.result) = Some(Err(err.clone()));
                }
                return Err(err);
            }
        }
    }

    /// Whether a wait has kept a result.
    pub(crate) fn decided(&self) -> bool {
        lock(&self.result).is_some()
    }
}

/// Sends what the queue brings until it closes (or a last wait gave up), counting it.
fn run(
    rx: Receiver<Trace>,
    client: Client,
    export: (
        Arc<ExportCounters>,
        Arc<Failures>,
        Arc<Mutex<Option<Instant>>>,
    ),
    endpoint: Endpoint,
    closed: Arc<Mutex<bool>>,
) {
    let (c, failures, flight) = export;
    for trace in rx {
        if *lock(&closed) {
            break;
        }
        let n = trace.len() as u64;
        *lock(&flight) = Some(Instant::now());
        let result = client.export(trace);
        *lock(&flight) = None;
        match result {
            Ok(d) => {
                let rejected = d.rejected.min(n);
                c.add(ExportCount::SpansExported, n - rejected);
                c.add(ExportCount::TracesExported, 1);
                // a partial success with nothing rejected is a warning, not a failure
                if rejected > 0 {
                    c.add(ExportCount::SpansFailed, rejected);
                    failures.rejected(rejected, &d.message);
                }
            }
            Err(e) => {
                c.add(ExportCount::SpansFailed, n);
                c.add(ExportCount::TracesFailed, 1);
                failures.record(&e, n, &endpoint);
            }
        }
    }
}

/// Starts the exporter thread; returns the sink to add to the layer (or any engine) and the
/// handle that shuts the exporter down.
pub fn start(cfg: OtlpConfig) -> Result<(OtlpSink, OtlpHandle), OtlpError> {
    let endpoint = endpoint::check(&cfg)?;
    let client = Client::build(&cfg, &endpoint)?;
    let failures = Arc::new(Failures::default());
    let flight: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let counters = Arc::new(ExportCounters::default());
    let (tx, rx) = mpsc::sync_channel::<Trace>(cfg.queue_capacity.max(1));
    let (done_tx, done_rx) = mpsc::channel();
    let closer = Arc::new(Mutex::new(false));
    let shared = (counters.clone(), failures.clone(), flight.clone());
    let (for_thread, closed) = (endpoint.clone(), closer.clone());
    let thread = std::thread::Builder::new()
        .name("proofline-otlp".into())
        .spawn(move || {
            run(rx, client, shared, for_thread, closed);
            let _ = done_tx.send(());
        })
        .map_err(OtlpError::Thread)?;
    let export = Arc::new(ExportThread {
        counters: counters.clone(),
        failures,
        flight,
        endpoint,
        done: Mutex::new(done_rx),
        thread: Mutex::new(Some(thread)),
        result: Mutex::new(None),
        closer,
    });
    let sink = OtlpSink::new(
        TraceBuilder {
            run_key: cfg.run_key,
            epoch_unix_ms: cfg.epoch_unix_ms,
            gpu_interval_source: None,
            nouns: cfg.nouns,
        },
        tx,
        export.clone(),
        (cfg.block_when_full, cfg.block_until, cfg.stop_waiting),
    );
    Ok((sink, OtlpHandle { export }))
}
