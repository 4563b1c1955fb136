//! `proofline replay`: an old log's traces, sent to an OTLP collector.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use proofline_core::sink::UpdateSink;

use crate::input::{EngineArgs, newest_offset, run_log};

#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The log: a file (plain or gzip) or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,
    /// Wall-clock time of TIMELINE offset 0 (RFC 3339, e.g. 2026-11-30T01:31:00Z). Default:
    /// the file's modification time minus its newest offset (stdin: now).
    #[arg(long, value_name = "RFC3339")]
    epoch: Option<String>,
    /// Collector endpoint (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT, OTLP/HTTP).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Name of the prover in trace ids (use the one its live metrics used, to match exemplars).
    #[arg(long, default_value = "cuzk")]
    instance: String,
    /// How long to wait at the end for the collector to take everything.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    timeout_s: u64,
    #[command(flatten)]
    engine: EngineArgs,
}

pub(crate) fn run(args: &ReplayArgs) -> Result<()> {
    if args.endpoint.is_none() && proofline_otlp::endpoint_from_env().is_none() {
        bail!(
            "no collector: pass --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318)"
        );
    }
    let epoch = match &args.epoch {
        Some(e) => proofline_otlp::parse_rfc3339(e).with_context(|| {
            format!("--epoch `{e}` is not an RFC 3339 time such as 2026-11-30T01:31:00Z")
        })?,
        None if args.input.as_os_str() == "-" => {
            proofline_core::ids::unix_ms(std::time::SystemTime::now())
        }
        None => {
            let mtime = std::fs::metadata(&args.input)
                .and_then(|m| m.modified())
                .with_context(|| {
                    format!(
                        "cannot read the modification time of {}",
                        args.input.display()
                    )
                })?;
            proofline_core::ids::unix_ms(mtime).saturating_sub(newest_offset(&args.input)?)
        }
    };
    let mut cfg =
        proofline_otlp::OtlpConfig::new(proofline_core::ids::run_key(&args.instance, epoch), epoch);
    // --endpoint is read like OTEL_EXPORTER_OTLP_ENDPOINT (the base URL); without it the
    // exporter reads the OTEL_* variables itself
    cfg.endpoint = args.endpoint.as_ref().map(|e| {
        let e = e.trim_end_matches('/');
        if e.ends_with("/v1/traces") {
            e.to_owned()
        } else {
            format!("{e}/v1/traces")
        }
    });
    cfg.block_when_full = true;
    let (mut sink, mut handle) = proofline_otlp::start(cfg)?;
    let counters = sink.counters();
    let report = run_log(&args.input, args.engine.config(), |u| sink.update(u))?;
    drop(sink);
    let result = handle.shutdown(Duration::from_secs(args.timeout_s));
    use std::sync::atomic::Ordering::Relaxed;
    eprintln!(
        "proofline replay: {} jobs -> {} traces queued, {} spans exported, {} spans failed",
        report.summary.jobs_complete + report.summary.jobs_incomplete,
        counters.traces_queued.load(Relaxed),
        counters.spans_exported.load(Relaxed),
        counters.spans_failed.load(Relaxed),
    );
    let unplaced = counters.links_unplaced.load(Relaxed);
    if unplaced > 0 {
        eprintln!(
            "proofline replay: {unplaced} sector-to-sector links had no trace to carry them (both sectors finished before the one ahead of them on their GPU)"
        );
    }
    result?;
    if counters.spans_failed.load(Relaxed) > 0 {
        bail!("some spans were not accepted by the collector (is it up at the endpoint?)");
    }
    Ok(())
}
