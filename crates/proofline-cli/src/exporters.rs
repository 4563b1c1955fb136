//! The exporters `demo` and `watch` run, wired in one place: a Prometheus endpoint, and OTLP
//! traces when the standard `OTEL_EXPORTER_OTLP_*` variables name a collector. Both share
//! one run key, so exemplars name the traces the OTLP side sends, and the OTLP exporter's
//! counters are published with the other metrics.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;
use proofline_core::ids::run_key;
use proofline_core::sink::{LiveState, SinkError, TelemetryCounts, Update, UpdateSink};
use proofline_otlp::{OtlpHandle, OtlpSink};
use proofline_prometheus::{Metrics, MetricsServer, PrometheusSink};

/// The exporters of one prover instance, fed as one sink.
#[derive(Debug)]
pub(crate) struct Exporters {
    /// The sinks, fed as one.
    pub sink: ExportSink,
    /// Keeps `/metrics` served (it stops when dropped).
    pub server: Option<MetricsServer>,
    otlp_handle: Option<OtlpHandle>,
}

impl Exporters {
    /// Starts the exporters for `instance`, whose TIMELINE offset 0 is `epoch_unix_ms`:
    /// `/metrics` on `metrics_addr` unless `None`, OTLP when the environment names a
    /// collector. `who` prefixes what it says on stderr.
    pub fn start(
        who: &str,
        instance: &str,
        epoch_unix_ms: u64,
        metrics_addr: Option<SocketAddr>,
    ) -> Result<Self> {
        let key = run_key(instance, epoch_unix_ms);
        let (mut otlp, mut otlp_handle) = (None, None);
        if proofline_otlp::endpoint_from_env().is_some() {
            let (s, h) =
                proofline_otlp::start(proofline_otlp::OtlpConfig::new(key.clone(), epoch_unix_ms))?;
            eprintln!("{who}: OTLP traces to the collector in OTEL_EXPORTER_OTLP_ENDPOINT");
            otlp = Some(s);
            otlp_handle = Some(h);
        }
        let (mut prom, mut server) = (None, None);
        if let Some(addr) = metrics_addr {
            let metrics = Metrics::new();
            server = Some(proofline_prometheus::serve(metrics.clone(), addr)?);
            let mut p = PrometheusSink::new(metrics, key);
            if let Some(o) = &otlp {
                p = p.with_export_counters(o.counters());
            }
            prom = Some(p);
        }
        Ok(Exporters {
            sink: ExportSink { prom, otlp },
            server,
            otlp_handle,
        })
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(MetricsServer::local_addr)
    }

    /// The sink part, for a layer that owns its sinks; the rest (the server, the OTLP
    /// handle) stays here and must be kept alive.
    pub fn take_sink(&mut self) -> ExportSink {
        std::mem::replace(
            &mut self.sink,
            ExportSink {
                prom: None,
                otlp: None,
            },
        )
    }

    /// Waits at most `timeout` for the OTLP exporter (after its sink was shut down or
    /// dropped), saying on stderr what was not delivered.
    pub fn finish(&mut self, who: &str, timeout: Duration) {
        if let Some(mut h) = self.otlp_handle.take() {
            if let Err(e) = h.shutdown(timeout) {
                eprintln!("{who}: {e}");
            }
        }
    }
}

/// The sinks of [`Exporters`], fed as one.
#[derive(Debug)]
pub(crate) struct ExportSink {
    prom: Option<PrometheusSink>,
    otlp: Option<OtlpSink>,
}

impl ExportSink {
    /// The run's epoch became known (a reader learns it from the first lines it reads).
    pub fn set_epoch(&mut self, instance: &str, epoch_unix_ms: u64) {
        let key = run_key(instance, epoch_unix_ms);
        if let Some(p) = &mut self.prom {
            p.set_run_key(key.clone());
        }
        if let Some(o) = &mut self.otlp {
            o.set_run(key, epoch_unix_ms);
        }
    }
}

impl UpdateSink for ExportSink {
    fn update(&mut self, update: Update) {
        feed(&mut self.prom, &mut self.otlp, update);
    }

    fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        if let Some(p) = &mut self.prom {
            p.tick(live, counts);
        }
    }

    fn shutdown(&mut self, deadline: Instant) -> Result<(), SinkError> {
        match &mut self.otlp {
            Some(o) => o.shutdown(deadline),
            None => Ok(()),
        }
    }
}

fn feed(prom: &mut Option<PrometheusSink>, otlp: &mut Option<OtlpSink>, update: Update) {
    match (prom, otlp) {
        (Some(p), Some(o)) => {
            o.update(update.clone());
            p.update(update);
        }
        (Some(p), None) => p.update(update),
        (None, Some(o)) => o.update(update),
        (None, None) => {}
    }
}
