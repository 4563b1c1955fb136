//! `proofline replay`: an old log's traces, sent to an OTLP collector.
//!
//! The whole command runs within `--timeout-s`: reading, sending and the final wait. When
//! the deadline comes, reading stops, what was not delivered is counted, and the summary
//! names the cause of each kind of failure (the collector's HTTP status, a refused
//! connection, a host that does not resolve, a collector that does not answer).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use proofline_core::sink::{Update, UpdateSink};

use crate::input::{EngineArgs, Source, newest_offset};

#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The log: a file (plain or gzip) or `-` for stdin. Or the journal, with
    /// --journal-unit, --journal-file or --journal-dir: each process's spans then sit at its
    /// entries' wall-clock times.
    #[arg(value_name = "FILE|-",
        required_unless_present_any = ["journal_unit", "journal_file", "journal_dir"],
        conflicts_with_all = ["journal_unit", "journal_file", "journal_dir"])]
    input: Option<PathBuf>,
    #[command(flatten)]
    journal: crate::journal::JournalArgs,
    /// Wall-clock time of TIMELINE offset 0 (RFC 3339, e.g. 2026-11-30T01:31:00Z). Default:
    /// the file's modification time minus its newest offset (stdin: now). Not with the
    /// journal, which knows.
    #[arg(long, value_name = "RFC3339", conflicts_with_all = ["journal_unit", "journal_file", "journal_dir"])]
    epoch: Option<String>,
    /// Collector endpoint, http:// or https:// (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    /// or OTEL_EXPORTER_OTLP_ENDPOINT). TLS trust and client certificates come from
    /// OTEL_EXPORTER_OTLP_CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY; headers (an API
    /// key) from OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// OTLP protocol: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
    /// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf).
    #[arg(long, value_name = "PROTOCOL", value_parser = parse_protocol)]
    protocol: Option<proofline_otlp::Transport>,
    /// The prover's words for a job and its parts in span names (`batch,segment`: `previous
    /// batch`, `segment 3`). Default: sector,partition.
    #[arg(long, value_name = "JOB,PART", value_parser = proofline_core::Nouns::parse)]
    nouns: Option<proofline_core::Nouns>,
    /// Name of the prover in trace ids (use the one its live metrics used, to match exemplars).
    #[arg(long, default_value = "cuzk")]
    instance: String,
    /// The whole replay (reading, sending, waiting for the collector) ends within this;
    /// what is not delivered by then is counted. Range 1..=86400.
    #[arg(long, default_value_t = 60, value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout_s: u64,
    #[command(flatten)]
    engine: EngineArgs,
}

fn parse_protocol(s: &str) -> Result<proofline_otlp::Transport, String> {
    proofline_otlp::Transport::parse(s).map_err(|e| e.to_string())
}

/// How long a replay stopped by a signal goes on delivering what is queued.
const STOP_DELIVERY: Duration = Duration::from_secs(5);

pub(crate) fn run(args: &ReplayArgs) -> Result<()> {
    args.journal.check_window(args.input.as_deref())?;
    args.engine.check()?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.timeout_s);
    if args.endpoint.is_none() && proofline_otlp::endpoint_from_env().is_none() {
        bail!(
            "no collector: pass --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318)"
        );
    }
    let epoch = match &args.epoch {
        Some(e) => crate::rfc3339::parse_rfc3339(e)
            .map_err(|why| anyhow::anyhow!("--epoch `{e}` is {why}"))?,
        // the journal places each run itself (the sink is told before the run's first trace)
        None if args.input.is_none() => proofline_core::ids::unix_ms(std::time::SystemTime::now()),
        None if args.input.as_deref() == Some(std::path::Path::new("-")) => {
            proofline_core::ids::unix_ms(std::time::SystemTime::now())
        }
        None => {
            let input = args.input.as_deref().unwrap_or(std::path::Path::new("-"));
            let mtime = std::fs::metadata(input)
                .and_then(|m| m.modified())
                .with_context(|| {
                    format!("cannot read the modification time of {}", input.display())
                })?;
            proofline_core::ids::unix_ms(mtime).saturating_sub(newest_offset(input, deadline)?)
        }
    };
    // OTLP's times are nanoseconds since 1970 (u64: to 2554; many stores keep i64: to 2262)
    const Y2200_MS: u64 = 7_258_118_400_000;
    if epoch > Y2200_MS {
        bail!(
            "the epoch {}: spans after 2200 cannot be sent (OTLP's nanoseconds end in 2554, many collectors' in 2262); it is the wall-clock time of the log's offset 0 (--epoch, or the file's modification time less its newest offset)",
            args.epoch
                .clone()
                .unwrap_or_else(|| crate::rfc3339::format_rfc3339(epoch))
        );
    }
    let given = match &args.epoch {
        Some(e) => format!("--epoch {e}"),
        None => format!(
            "the epoch {} (the file's modification time less its newest offset)",
            crate::rfc3339::format_rfc3339(epoch)
        ),
    };
    let source = Source::of(args.input.as_deref(), &args.journal);
    let from_journal = matches!(source, Source::Journal(_));
    if let Some(w) = (!from_journal)
        .then(|| implausible_epoch(&given, epoch, std::time::SystemTime::now()))
        .flatten()
    {
        eprintln!("proofline replay: warning: {w}");
    }
    let transport = match args.protocol {
        Some(t) => t,
        None => proofline_otlp::Transport::from_env()?,
    };
    let mut cfg =
        proofline_otlp::OtlpConfig::new(proofline_core::ids::run_key(&args.instance, epoch), epoch)
            .transport(transport)
            .nouns(args.nouns.clone().unwrap_or_default());
    // --endpoint is read like OTEL_EXPORTER_OTLP_ENDPOINT (the base URL; OTLP/HTTP adds the
    // traces path); without it the exporter reads the OTEL_* variables itself
    if let Some(e) = &args.endpoint {
        cfg = cfg.endpoint(proofline_otlp::traces_url(e, transport));
    }
    // one export never takes longer than the whole replay may
    let configured =
        proofline_otlp::timeout_from_env().unwrap_or(proofline_otlp::DEFAULT_EXPORT_TIMEOUT);
    let export_timeout = configured.min(Duration::from_secs(args.timeout_s));
    // an export timed out at replay's own deadline, not at the collector's usual pace
    let timeout_capped = export_timeout < configured;
    if let Some(w) = proofline_otlp::cleartext_warning(args.endpoint.as_deref()) {
        eprintln!("proofline replay: warning: {w}");
    }
    // SIGTERM/SIGINT: reading stops, what is queued is delivered for a few seconds at most
    let signals = crate::signals::Stop::install()?;
    let cfg = cfg
        .timeout(export_timeout)
        .block_when_full(Some(deadline), Some(signals.flag()));
    let (mut sink, mut handle) = proofline_otlp::start(cfg)?;
    let counters = sink.counters();

    let progress = std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    });
    let mut jobs = 0u64;
    let mut last_shown = Instant::now();
    let show = |pb: &indicatif::ProgressBar, jobs: u64| {
        let c = counters.snapshot();
        pb.set_message(format!(
            "{jobs} jobs read, {} traces delivered, {} failed, {} s left",
            c.traces_exported,
            c.traces_failed,
            deadline.saturating_duration_since(Instant::now()).as_secs()
        ));
    };
    // reading stops a little before the deadline, so that the traces its end completes
    // (a pipe whose writer stalled: its last sector is made a trace only when reading stops)
    // still have time to go
    let reserve = Duration::from_secs(args.timeout_s / 4).min(Duration::from_secs(5));
    let read_until = deadline - reserve;
    let run = source.read(
        args.engine.config()?,
        Counted {
            sink: &mut sink,
            on_update: |u: &Update| {
                if let Update::Job(_) = u {
                    jobs += 1;
                }
                if let Some(pb) = &progress {
                    if last_shown.elapsed() > Duration::from_millis(200) {
                        last_shown = Instant::now();
                        show(pb, jobs);
                    }
                }
            },
        },
        Some(args.instance.as_str()),
        &mut || Instant::now() >= read_until || signals.requested(),
    )?;
    drop(sink);
    // wait for the queue until the deadline; a signal (now or while waiting) leaves
    // STOP_DELIVERY from then at most
    let mut until = deadline;
    let mut signalled = false;
    loop {
        let c = counters.snapshot();
        if c.traces_exported + c.traces_failed >= c.traces_queued || Instant::now() >= until {
            break;
        }
        if !signalled && signals.requested() {
            signalled = true;
            until = until.min(Instant::now() + STOP_DELIVERY);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let result = handle.shutdown(until.saturating_duration_since(Instant::now()));
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }

    // after the shutdown nothing counts any more: one snapshot is the whole story
    let totals = counters.snapshot();
    let traces = totals.traces_queued + totals.traces_dropped;
    let delivered = totals.traces_exported;
    let failed = totals.traces_failed;
    let dropped = totals.traces_dropped;
    let unsent = traces.saturating_sub(delivered + failed + dropped);
    let jobs_read = run.report.summary.jobs_complete + run.report.summary.jobs_incomplete;
    let spans = totals.spans_exported;
    let failures = handle.failures();
    // spans a collector took the request of, and rejected (an OTLP partial success)
    let rejection = failures
        .iter()
        .find(|f| f.kind == proofline_otlp::FailureKind::Rejected);
    let rejected = rejection.map_or(0, |f| f.spans);
    // reading cut short by the deadline: what was sent may be all of what was read, but not
    // of the log (a slow pipe's lines read after the deadline were never sent)
    let reading_cut = run.stopped && signals.name().is_none();
    if delivered == traces && rejected == 0 && !reading_cut {
        eprintln!(
            "proofline replay: {jobs_read} jobs -> {traces} traces, all delivered ({spans} spans)"
        );
    } else if delivered == traces && rejected == 0 {
        eprintln!(
            "proofline replay: {jobs_read} jobs -> {traces} traces, delivered ({spans} spans); reading stopped at the deadline after {} lines: the rest of the log was not read",
            run.report.lines.lines
        );
    } else if delivered == traces {
        eprintln!(
            "proofline replay: {jobs_read} jobs -> {traces} traces delivered, but the collector rejected {rejected} of their {} spans",
            spans + rejected
        );
    } else {
        eprintln!(
            "proofline replay: {jobs_read} jobs -> {traces} traces: {delivered} delivered ({spans} spans), {} not delivered ({failed} failed, {} spans; {dropped} dropped at the deadline; {unsent} unsent when time ran out){}",
            traces - delivered,
            totals.spans_failed,
            if run.stopped {
                format!(
                    "; reading stopped {} after {} lines",
                    signals
                        .name()
                        .map_or_else(|| "at the deadline".to_owned(), |s| format!("by {s}")),
                    run.report.lines.lines
                )
            } else {
                String::new()
            }
        );
    }
    let unplaced = totals.links_unplaced;
    if unplaced > 0 {
        eprintln!(
            "proofline replay: {unplaced} sector-to-sector links had no trace to carry them (both sectors finished before the one ahead of them on their GPU)"
        );
    }
    let no_answer = proofline_otlp::FailureKind::Network(proofline_otlp::Found::NoAnswer);
    for f in &failures {
        // an export that timed out at replay's own deadline: the collector may be slow
        let first = if timeout_capped && f.kind == no_answer {
            f.first.replace(
                "did not answer the export in time",
                "had not answered the export when replay's deadline came (--timeout-s bounds each export)",
            )
        } else {
            f.first.clone()
        };
        eprintln!(
            "proofline replay: {} trace(s) ({} spans) failed: {}; first: {first}",
            f.traces, f.spans, f.kind
        );
    }
    // an export still waiting is the cause only when nothing failed outright
    let hanging = handle.in_flight_for().filter(|_| failures.is_empty());
    // an export cut by the replay's own deadline before its timeout is not the collector's
    // fault: the collector may have been answering
    // (or its timeout was the deadline's: --timeout-s below the export timeout)
    let cut_short =
        hanging.is_some_and(|w| timeout_capped || w + Duration::from_millis(500) < export_timeout);
    if let Some(waited) = hanging {
        if cut_short {
            eprintln!(
                "proofline replay: an export had waited {:.1} s for the collector when the deadline came (its timeout: {:.1} s)",
                waited.as_secs_f64(),
                export_timeout.as_secs_f64()
            );
        } else {
            eprintln!(
                "proofline replay: an export was still waiting for the collector after {:.1} s: {}",
                waited.as_secs_f64(),
                handle.probe()
            );
        }
    }
    let elapsed = started.elapsed();
    if let Some(stopped) = signals.stopped() {
        return Err(stopped.into());
    }
    if traces > delivered {
        let slow = || {
            format!(
                "the collector had not answered an export when replay's deadline came (--timeout-s {}, which bounds each export below its timeout of {:.0} s): it may be slow rather than down; raise --timeout-s",
                args.timeout_s,
                configured.as_secs_f64()
            )
        };
        let cause = match (failures.first(), hanging) {
            (Some(f), _) if timeout_capped && f.kind == no_answer => slow(),
            (Some(f), _) => f.first.clone(),
            (None, Some(_)) if timeout_capped => slow(),
            (None, Some(_)) if cut_short => format!(
                "the deadline of {} s came first (--timeout-s), an export under way",
                args.timeout_s
            ),
            (None, Some(_)) => format!(
                "the collector did not answer within the export timeout of {:.1} s",
                export_timeout.as_secs_f64()
            ),
            (None, None) if run.stopped || result.is_err() => {
                format!("the deadline of {} s came first", args.timeout_s)
            }
            (None, None) => "the collector did not take them".to_owned(),
        };
        run.result()?;
        // (the time is how long replay ran, not a limit: a collector that refuses at once
        // read as "within 0.0 s")
        bail!(
            "{} of {traces} traces not delivered: {cause} (replay ran {:.1} s)",
            traces - delivered,
            elapsed.as_secs_f64()
        );
    }
    if reading_cut {
        run.result()?;
        bail!(
            "the deadline of {} s came before the log was read to its end (--timeout-s): what was read after it was not sent",
            args.timeout_s
        );
    }
    if let Some(r) = rejection {
        run.result()?;
        bail!(
            "the collector rejected {rejected} of {} spans: {}",
            spans + rejected,
            r.first
        );
    }
    run.result()
}

/// The OTLP sink, with what replay counts and shows of each update beside it; the journal's
/// runs reach it with their wall-clock places ([`UpdateSink::start_run`]).
struct Counted<'a, F: FnMut(&Update)> {
    sink: &'a mut proofline_otlp::OtlpSink,
    on_update: F,
}

impl<F: FnMut(&Update)> UpdateSink for Counted<'_, F> {
    fn update(&mut self, update: Update) {
        (self.on_update)(&update);
        self.sink.update(update);
    }

    fn start_run(&mut self, run: &proofline_core::RunInfo) {
        self.sink.start_run(run);
    }
}

/// A warning for an `--epoch` no log can have: before 2015 (a date typed wrong: a prover's
/// traces would sit years away from every other service's, and collectors drop spans that old),
/// or more than a day ahead of this machine's clock.
fn implausible_epoch(given: &str, epoch_ms: u64, now: std::time::SystemTime) -> Option<String> {
    const Y2015_MS: u64 = 1_420_070_400_000;
    const DAY_MS: u64 = 86_400_000;
    let now_ms = proofline_core::ids::unix_ms(now);
    if epoch_ms < Y2015_MS {
        Some(format!(
            "{given} is before 2015: the traces will sit that far from every other \
             service's, and a collector may drop spans so old; it is the wall-clock time of the \
             log's offset 0 (the prover's start)"
        ))
    } else if epoch_ms > now_ms.saturating_add(DAY_MS) {
        Some(format!(
            "{given} is {:.1} days ahead of this machine's clock: the traces will sit in \
             the future; it is the wall-clock time of the log's offset 0 (the prover's start)",
            (epoch_ms - now_ms) as f64 / DAY_MS as f64
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::implausible_epoch;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn epochs_no_log_can_have_are_said() {
        let now = UNIX_EPOCH + Duration::from_secs(1_796_000_000); // 2026-11-30
        let at = |s: &str| crate::rfc3339::parse_rfc3339(s).unwrap();
        for fine in [
            "2026-11-30T01:31:00Z",
            "2015-01-01T00:00:00Z",
            "2026-12-01T00:00:00Z",
        ] {
            assert_eq!(implausible_epoch(fine, at(fine), now), None, "{fine}");
        }
        let old = implausible_epoch("1970-01-01T00:00:00Z", 0, now).unwrap();
        assert!(old.contains("before 2015"), "{old}");
        let ahead = "2027-11-30T00:00:00Z";
        let w = implausible_epoch(ahead, at(ahead), now).unwrap();
        assert!(w.contains("days ahead"), "{w}");
    }
}
