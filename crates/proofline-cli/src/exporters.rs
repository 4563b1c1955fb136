//! The exporters `demo` and `watch` run, wired in one place: a Prometheus endpoint, and OTLP
//! traces when the standard `OTEL_EXPORTER_OTLP_*` variables name a collector. They are fed
//! through one [`Fanout`], which also gives both the same run (so exemplars name the traces
//! the OTLP side sends) and has the OTLP exporter's counters published with the metrics.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use proofline_core::sink::{Fanout, RunInfo, UpdateSink};
use proofline_otlp::OtlpHandle;
use proofline_prometheus::{Metrics, MetricsServer, PrometheusSink};

/// The exporters of one prover instance.
#[derive(Debug)]
pub(crate) struct Exporters {
    /// The sinks, fed as one.
    pub sink: Fanout,
    /// Keeps `/metrics` served (it stops when dropped).
    pub server: Option<MetricsServer>,
    otlp_handle: Option<OtlpHandle>,
}

impl Exporters {
    /// Starts the exporters: `/metrics` on `metrics_addr` unless `None`, OTLP when the
    /// environment names a collector. `who` prefixes what it says on stderr. Their run is
    /// given with [`UpdateSink::start_run`] (the layer's build does it; `watch` itself).
    pub fn start(who: &str, metrics_addr: Option<SocketAddr>) -> Result<Self> {
        let mut sink = Fanout::new();
        let mut otlp_handle = None;
        if proofline_otlp::endpoint_from_env().is_some() {
            let (s, h) = proofline_otlp::start(proofline_otlp::OtlpConfig::default())?;
            eprintln!("{who}: OTLP traces to the collector in OTEL_EXPORTER_OTLP_ENDPOINT");
            sink.push(s);
            otlp_handle = Some(h);
        }
        let mut server = None;
        if let Some(addr) = metrics_addr {
            let metrics = Metrics::new();
            server = Some(proofline_prometheus::serve(metrics.clone(), addr)?);
            sink.push(PrometheusSink::new(metrics));
        }
        if let Some(c) = sink.export_counters() {
            sink.publish_export_counters(c);
        }
        Ok(Exporters {
            sink,
            server,
            otlp_handle,
        })
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(MetricsServer::local_addr)
    }

    /// The sinks, for a layer that owns its sinks; the rest (the server, the OTLP handle)
    /// stays here and must be kept alive.
    pub fn take_sink(&mut self) -> Fanout {
        std::mem::take(&mut self.sink)
    }

    /// Gives the sinks their run.
    pub fn start_run(&mut self, instance: &str, epoch_unix_ms: u64) {
        self.sink.start_run(&RunInfo::new(instance, epoch_unix_ms));
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
