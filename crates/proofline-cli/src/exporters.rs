//! The exporters `demo` and `watch` run, wired in one place: a Prometheus endpoint, and OTLP
//! traces when the standard `OTEL_EXPORTER_OTLP_*` variables name a collector. They are fed
//! through one [`Fanout`], which a layer or a [`Driver`](proofline_core::sink::Driver) owns: it gives both the same run (so
//! exemplars name the traces the OTLP side sends, and the OTLP exporter's counters are
//! published with the metrics).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
#[allow(unused_imports)] // named in the docs
use proofline_core::sink::Driver;
use proofline_core::sink::Fanout;
use proofline_otlp::OtlpHandle;
use proofline_prometheus::{
    Buckets, Metrics, MetricsServer, PrometheusSink, ServeOptions, WebConfig,
};

/// `--metrics-addr`: `IP:PORT`, or `HOST:PORT` resolved now (`localhost:9464`), an IPv4
/// address preferred (Prometheus' own targets usually name 127.0.0.1).
pub(crate) fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let hint = "expected IP:PORT (127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464) or HOST:PORT";
    let addrs: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("`{s}`: {e}; {hint}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("`{s}` resolves to no address; {hint}"))
}

/// The `/metrics` endpoint's limits, as `demo` and `watch` take them.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServeArgs {
    /// Open /metrics connections at most; past it the connection idle the longest is
    /// closed (between requests, or a request's headers slower than 1 s), else the new one
    /// is answered 503 with Retry-After. Range 1..=65536.
    #[arg(long, default_value_t = proofline_prometheus::DEFAULT_MAX_CONNECTIONS, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub(crate) metrics_max_connections: usize,
    /// A /metrics connection that sends nothing for this long is closed. Range 1..=3600.
    #[arg(long, default_value_t = proofline_prometheus::DEFAULT_IDLE_TIMEOUT.as_secs(), value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) metrics_idle_timeout_s: u64,
    /// A request to /metrics must finish its headers this long after its first byte.
    /// Range 1..=600.
    #[arg(long, default_value_t = proofline_prometheus::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=600))]
    pub(crate) metrics_header_timeout_s: u64,
    /// TLS, client certificates and basic auth for /metrics: a web configuration file in
    /// the format of node_exporter's --web.config.file (the Prometheus exporter-toolkit's).
    /// Without it /metrics is plain HTTP, open to whoever reaches the address.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub(crate) web_config_file: Option<std::path::PathBuf>,
}

impl ServeArgs {
    /// The options; reads and checks the web configuration file, if one is named.
    pub(crate) fn options(&self) -> Result<ServeOptions> {
        let web = match &self.web_config_file {
            Some(f) => {
                let web = WebConfig::from_file(f)?;
                if !web.tls() && !web.basic_auth() {
                    eprintln!(
                        "proofline: warning: web config {} asks for neither TLS nor basic auth: /metrics is plain HTTP, open to whoever reaches it",
                        f.display()
                    );
                }
                Some(Arc::new(web))
            }
            None => None,
        };
        let options = ServeOptions::default()
            .max_connections(self.metrics_max_connections)
            .idle_timeout(Duration::from_secs(self.metrics_idle_timeout_s))
            .header_read_timeout(Duration::from_secs(self.metrics_header_timeout_s));
        Ok(match web {
            Some(w) => options.web(w),
            None => options,
        })
    }
}

/// The exporters of one prover instance.
#[derive(Debug)]
pub(crate) struct Exporters {
    /// The sinks, fed as one.
    pub sink: Fanout,
    /// Keeps `/metrics` served (it stops when dropped).
    pub server: Option<MetricsServer>,
    /// How `/metrics` is secured, in words (`plain HTTP`, `TLS, basic auth (1 users)`).
    security: String,
    otlp_handle: Option<OtlpHandle>,
}

/// `--buckets HISTOGRAM=B1,B2,...`: the histogram's name (one of `Buckets::NAMES`) and its
/// bounds (their order and count are checked where the metrics are made, with the histogram
/// named).
pub(crate) fn parse_buckets(s: &str) -> Result<(String, Vec<f64>), String> {
    let (name, list) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not HISTOGRAM=B1,B2,... (e.g. job=1,2.5,5)"))?;
    let name = name.trim();
    if !Buckets::NAMES.contains(&name) {
        return Err(format!(
            "`{name}` is no histogram: one of {}",
            Buckets::NAMES.join(", ")
        ));
    }
    let bounds = list
        .split(',')
        .map(|b| {
            b.trim()
                .parse::<f64>()
                .map_err(|e| format!("`{}` in --buckets {name}: {e}", b.trim()))
        })
        .collect::<Result<Vec<f64>, String>>()?;
    Ok((name.to_owned(), bounds))
}

/// cuzk's buckets, with the histograms `--buckets` gave (the last of a name wins; names
/// were checked by [`parse_buckets`]).
pub(crate) fn buckets(given: &[(String, Vec<f64>)]) -> Buckets {
    given.iter().fold(Buckets::default(), |b, (name, bounds)| {
        b.clone().named(name, bounds.clone()).unwrap_or(b)
    })
}

impl Exporters {
    /// Starts the exporters: `/metrics` at the address given, unless `None`, OTLP when the
    /// environment names a collector. `who` prefixes what it says on stderr. Their run is
    /// given by whoever owns their [`Fanout`] (the layer's build, `watch`'s driver). HELP
    /// texts and trace span names are in `nouns`.
    pub fn start(
        who: &str,
        metrics: Option<(SocketAddr, ServeOptions)>,
        nouns: &proofline_core::Nouns,
        buckets: proofline_prometheus::Buckets,
    ) -> Result<Self> {
        let mut sink = Fanout::new();
        let mut otlp_handle = None;
        if proofline_otlp::endpoint_from_env().is_some() {
            let cfg = proofline_otlp::OtlpConfig::default()
                .transport(proofline_otlp::Transport::from_env()?)
                .nouns(nouns.clone());
            if let Some(w) = proofline_otlp::cleartext_warning(None) {
                eprintln!("{who}: warning: {w}");
            }
            let (s, h) = proofline_otlp::start(cfg)?;
            eprintln!("{who}: OTLP traces to the collector in OTEL_EXPORTER_OTLP_ENDPOINT");
            sink.push(s);
            otlp_handle = Some(h);
        }
        let mut server = None;
        let mut security = String::new();
        if let Some((addr, options)) = metrics {
            security = options
                .web_config()
                .map_or_else(|| "plain HTTP".to_owned(), |w| w.describe());
            let metrics = Metrics::with_buckets_and_nouns(buckets, nouns)?;
            server = Some(proofline_prometheus::serve_with(
                metrics.clone(),
                addr,
                options,
            )?);
            sink.push(PrometheusSink::new(metrics));
        }
        Ok(Exporters {
            sink,
            server,
            security,
            otlp_handle,
        })
    }

    /// `/metrics`' URL and how it is secured, for the line saying where metrics are served.
    pub fn metrics_url(&self) -> Option<String> {
        let server = self.server.as_ref()?;
        let scheme = if self.security.starts_with("TLS") {
            "https"
        } else {
            "http"
        };
        Some(format!(
            "{scheme}://{}/metrics ({})",
            server.local_addr(),
            self.security
        ))
    }

    /// The sinks, for a layer or a [`Driver`](proofline_core::sink::Driver) that owns them; the rest (the server, the
    /// OTLP handle) stays here and must be kept alive.
    pub fn take_sink(&mut self) -> Fanout {
        std::mem::take(&mut self.sink)
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

    /// Closes the exporters without waiting or a word (what they did not deliver was said
    /// by their sinks already).
    pub fn close(&mut self) {
        if let Some(mut h) = self.otlp_handle.take() {
            let _ = h.shutdown(Duration::ZERO);
        }
    }
}
