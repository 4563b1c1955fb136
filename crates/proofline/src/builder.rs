//! The builder: every setting of the layer, its worker and its engine, with its default.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use proofline_core::sink::{Driver, Fanout, RunInfo, UpdateSink};
use proofline_core::{Engine, EngineConfig, EventKind};

use crate::layer::{
    CallsiteSet, Edge, LayerConfig, LayerStats, SpanRule, SpanTable, TimelineLayer,
};
use crate::worker::Worker;
use crate::{
    DEFAULT_CHANNEL_CAPACITY, DEFAULT_EVENT_TARGET, DEFAULT_INSTANCE,
    DEFAULT_LIVE_REORDER_WINDOW_MS, DEFAULT_POLL_INTERVAL, FieldNames, TimelineGuard, clock,
    handoff,
};

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
    instance: String,
    silence: Duration,
    rules: Vec<SpanRule>,
    whole: Vec<(String, Option<String>)>,
    fields: FieldNames,
    event_target: String,
    gpu_queue_on_synth_end: bool,
    /// The spans mapped to GPU_START and GPU_END are the GPU work itself.
    gpu_spans_are_the_work: bool,
    /// The mappings are the prover's own ([`Builder::clear_mappings`] was called).
    own_mappings: bool,
    engine: EngineConfig,
    /// Engine settings given by their own setters: applied over `engine` at build, so that
    /// the setters and `engine_config` compose in any order.
    overrides: EngineOverrides,
    channel_capacity: usize,
    output: Output,
    sinks: Fanout,
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
            instance: DEFAULT_INSTANCE.to_owned(),
            silence: crate::DEFAULT_SILENCE_WARNING,
            rules: SpanRule::cuzk_defaults(),
            whole: crate::layer::cuzk_whole_proof_spans(),
            fields: FieldNames::default(),
            event_target: DEFAULT_EVENT_TARGET.to_owned(),
            gpu_queue_on_synth_end: true,
            gpu_spans_are_the_work: false,
            own_mappings: false,
            engine: EngineConfig::default()
                .reorder_window_ms(DEFAULT_LIVE_REORDER_WINDOW_MS)
                .completion_grace_ms(DEFAULT_LIVE_REORDER_WINDOW_MS)
                .max_rows(crate::DEFAULT_LIVE_MAX_ROWS),
            overrides: EngineOverrides::default(),
            channel_capacity: DEFAULT_CHANNEL_CAPACITY,
            output: Output::Stderr,
            sinks: Fanout::new(),
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
    /// The prover instance's name (default [`DEFAULT_INSTANCE`]): with the wall-clock
    /// instant the layer is built, it keys the trace ids of every sink given to
    /// [`Builder::sink`], so Prometheus exemplars and OTLP traces name the same traces.
    pub fn instance(mut self, name: impl Into<String>) -> Self {
        self.instance = name.into();
        self
    }

    /// GPU = worker / N when a span has no `gpu` field (default 2, as cuzk). Given (here, or in
    /// [`Builder::engine_config`]'s own setter), the layer's TIMELINE output gets a line that
    /// says so before its first TIMELINE line, in the form of cuzk's own start-up line
    /// (`proofline: initializing GPU workers gpu_workers_per_device=N ...`), so that
    /// `proofline analyze` of the log places the GPUs as the layer did (in a file appended to
    /// by several processes, from each one's line on).
    pub fn gpu_workers_per_device(mut self, n: u32) -> Self {
        self.overrides.gpu_workers_per_device = Some(n.max(1));
        self
    }

    /// How far out of time order events may arrive and still be processed in order (default
    /// [`DEFAULT_LIVE_REORDER_WINDOW_MS`]: the layer's events are nearly in order).
    pub fn reorder_window(mut self, window: Duration) -> Self {
        self.overrides.reorder_window_ms = Some(window.as_millis() as u64);
        self
    }

    /// How long a job whose partition count is unknown must be quiet, all its partitions
    /// done, before it completes. Default: the reorder window (not the offline default).
    pub fn completion_grace(mut self, grace: Duration) -> Self {
        self.overrides.completion_grace_ms = Some(grace.as_millis() as u64);
        self
    }

    /// A job with no event for this long is evicted and reported incomplete (default
    /// [`proofline_core::engine::DEFAULT_JOB_TIMEOUT_MS`], 30 min).
    pub fn job_timeout(mut self, timeout: Duration) -> Self {
        self.overrides.job_timeout_ms = Some(timeout.as_millis() as u64);
        self
    }

    /// Jobs whose id starts with `prefix` have `n` partitions (repeatable; the longest
    /// matching prefix wins over every other rule: see
    /// [`EngineConfig::expected_partitions_of`]; a prefix given again replaces its value).
    /// Default: none.
    pub fn partitions_for(mut self, prefix: impl Into<String>, n: u32) -> Self {
        self.overrides.partitions_by_prefix.push((prefix.into(), n));
        self
    }

    /// Declares that the spans mapped to GPU_START and GPU_END are the GPU work itself (a
    /// span around the kernel calls, not a worker's span that also waits for a lock or hands
    /// the proof on): their intervals are then the prover's own GPU intervals, and the report,
    /// `/metrics` (`proofline_gpu_interval_source`) and the traces say nothing of where they
    /// come from. By default they say the intervals come from spans, which can start and end
    /// elsewhere than the GPU work (cuzk's `gpu_worker` does).
    pub fn gpu_spans_are_the_work(mut self) -> Self {
        self.gpu_spans_are_the_work = true;
        self
    }

    /// Jobs whose id starts with `prefix` are of proof kind `kind` where their spans name
    /// none (repeatable; the longest matching prefix wins; `""` is every job's; a prefix
    /// given again replaces its kind), e.g.
    /// `proof_kind_for("batch-", "batch")`: the kind of the metrics' `proof_kind` label and
    /// the traces' root names. Default: cuzk's ids' forms, else `unknown`.
    pub fn proof_kind_for(mut self, prefix: impl Into<String>, kind: impl Into<String>) -> Self {
        self.overrides
            .kinds_by_prefix
            .push((prefix.into(), kind.into()));
        self
    }

    /// The proof kind of a job nothing else names (no `proof_kind` field, no
    /// [`Builder::proof_kind_for`] rule, an id of no form cuzk's ids have). Default: with
    /// cuzk's mappings, `unknown`; with the prover's own ([`Builder::clear_mappings`], then
    /// [`Builder::map`]), the name of the one span mapped to GPU_START (else of the one mapped
    /// to SYNTH_START), e.g. `prove_segment`; `unknown` when several are.
    pub fn default_proof_kind(mut self, kind: impl Into<String>) -> Self {
        self.overrides.default_kind = Some(kind.into());
        self
    }

    /// Partitions of a partitioned job that no prefix rule and not its id's form tells
    /// (default: the highest partition seen + 1, once the job is quiet).
    pub fn expected_partitions(mut self, n: u32) -> Self {
        self.overrides.expected_partitions = Some(n);
        self
    }

    /// Adds a mapping from a span edge to a TIMELINE event, to the ones in force (default:
    /// [`SpanRule::cuzk_defaults`]; [`Builder::clear_mappings`] starts from none).
    pub fn map(self, span: impl Into<String>, event: EventKind, edge: Edge) -> Self {
        self.rule(SpanRule::new(span, event, edge))
    }

    /// Adds a [`SpanRule`] (what [`Builder::map`] builds), e.g. one of
    /// [`SpanRule::cuzk_defaults`] after [`Builder::clear_mappings`].
    pub fn rule(mut self, rule: SpanRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Forgets every mapping and whole-proof span, cuzk's defaults included (then add your
    /// own with [`Builder::map`] and [`Builder::whole_proof_span`]).
    pub fn clear_mappings(mut self) -> Self {
        self.own_mappings = true;
        self.rules.clear();
        self.whole.clear();
        self
    }

    /// Marks spans named `span` as whole-proof work: the events their edges emit carry no
    /// partition (whatever fields the span has), and SYNTH_START carries `kind` as its proof
    /// kind unless the span records a `proof_kind`. Default: cuzk's whole-proof synthesis
    /// spans and `monolithic_worker`.
    pub fn whole_proof_span(mut self, span: impl Into<String>, kind: Option<&str>) -> Self {
        self.whole.push((span.into(), kind.map(str::to_owned)));
        self
    }

    /// How long the layer waits before it says, once, on stderr, that mapped spans exist but
    /// nothing reached it (a filter hiding them), or that GPU_PICKUPs come and no GPU_START
    /// (GPU time not observed), or GPU events and no synthesis event; six times this for
    /// synthesis ending and no GPU event at all. Default [`crate::DEFAULT_SILENCE_WARNING`].
    pub fn silence_warning_after(mut self, after: Duration) -> Self {
        self.silence = after;
        self
    }

    /// The preset for a cuzk whose `timeline_event()` logs its line through `tracing`
    /// instead of printing it (the one-line change in docs/layer.md, "Adopting proofline in
    /// cuzk"): the TIMELINE events come from those lines alone, with cuzk's own offsets, so
    /// the lines the layer writes are the ones cuzk printed, and no span mapping adds a
    /// second copy. The same as [`Builder::clear_mappings`] and
    /// `gpu_queue_on_synth_end(false)`.
    pub fn cuzk_timeline_events(self) -> Self {
        self.clear_mappings().gpu_queue_on_synth_end(false)
    }

    /// The names of the fields looked up on spans and their ancestors (default
    /// [`FieldNames::default`]: `job_id`; `partition`; `worker`, `worker_id`; `gpu`;
    /// `proof_kind`, `kind`).
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
    /// interval, so a thread would have to emit this many within one to lose any. A thread
    /// that logs TIMELINE or `CUZK_TIMING:` lines through `tracing` also gets a ring for their
    /// text, of as many bytes as its queue's entries take (at least 4 KiB: 256 KiB by
    /// default, some 3 000 TIMELINE or 1 700 `CUZK_TIMING:` lines within one poll interval),
    /// at its first such line; a line longer than that goes in an allocation of its own.
    pub fn channel_capacity(mut self, n: usize) -> Self {
        self.channel_capacity = n.max(1);
        self
    }

    /// The live engine's settings, as a base: the builder's own engine setters
    /// ([`Builder::gpu_workers_per_device`], [`Builder::reorder_window`], ...) apply over it
    /// whatever their order, and the completion grace follows the reorder window unless
    /// [`Builder::completion_grace`] sets it. Default: [`EngineConfig::default`] with a
    /// reorder window of [`DEFAULT_LIVE_REORDER_WINDOW_MS`] and report rows capped at
    /// [`crate::DEFAULT_LIVE_MAX_ROWS`] (keep a cap of the kind in a base of one's own: the
    /// rows are what the engine keeps per finished sector).
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
        self.sinks.push(sink);
        self
    }

    /// How often the worker moves the engine's clock on and ticks the sinks (gauges), busy or
    /// idle (default 1 s, at least 10 ms).
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
        let engine = self.overrides.apply(self.engine);
        // told how workers share a GPU (the setter, or engine_config's)
        let workers_per_device_set = engine.get_gpu_workers_per_device_given();
        // a prover's own mapping: its jobs are of its GPU span's kind unless told
        let engine = match engine.get_default_proof_kind() {
            None if self.own_mappings => {
                let kind = default_kind(&self.rules);
                engine.default_proof_kind(kind)
            }
            _ => engine,
        };
        let engine = engine.gpu_interval_source(if self.gpu_spans_are_the_work {
            None
        } else {
            gpu_interval_source(&self.rules)
        });
        let setup_of = |cfg: &Arc<LayerConfig>, engine: &EngineConfig| crate::worker::Setup {
            cfg: cfg.clone(),
            workers_per_device: engine.get_gpu_workers_per_device(),
            workers_per_device_given: engine.get_gpu_workers_per_device_given(),
            warned_job_id: false,
            warned_assumed_gpu: false,
            gpu_since: None,
            warned_no_synth: false,
            synth_since: None,
            warned_no_gpu: false,
            no_partition: 0,
            warned_no_partition: false,
        };
        let cfg = Arc::new(LayerConfig {
            rules: self.rules,
            whole: self.whole,
            fields: self.fields,
            event_target: self.event_target,
            gpu_queue_on_synth_end: self.gpu_queue_on_synth_end,
        });
        let handoff = Arc::new(handoff::Handoff::new(self.channel_capacity));
        // one run for every sink: the instance and the instant offsets count from
        let clock = clock::Clock::start();
        let mut run = RunInfo::new(
            self.instance,
            proofline_core::ids::unix_ms(SystemTime::now()),
        );
        run.gpu_interval_source = engine.get_gpu_interval_source().map(str::to_owned);
        let driver = Driver::start(self.sinks, run.clone(), self.tick);
        let shutdown = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel();
        let deadline = Arc::new(std::sync::Mutex::new(None));
        let stats = Arc::new(LayerStats {
            layer: handoff.id(),
            ..LayerStats::default()
        });
        let spans = Arc::new(SpanTable::new());
        let mut out: Option<Box<dyn Write + Send>> = match self.output {
            Output::Stderr => Some(Box::new(io::stderr())),
            Output::Writer(w) => Some(w),
            Output::Discard => None,
        };
        if let (Some(out), true) = (&mut out, workers_per_device_set) {
            // what the layer was told, where `analyze` reads cuzk's own (its start-up line):
            // the TIMELINE lines name workers, and the GPU of each follows from it
            // (written here, before any TIMELINE line; a write error is the timeline's, as
            // the worker's are: ignored, the prover goes on)
            let n = engine.get_gpu_workers_per_device();
            let _ = writeln!(
                out,
                "{} gpu_workers_per_device={n} (the layer's: GPU = worker / {n} where a line names no gpu)",
                proofline_core::timing::LAYER_STARTUP
            );
        }
        let setup = setup_of(&cfg, &engine);
        let worker = Worker {
            handoff: handoff.clone(),
            rings: handoff::Rings::default(),
            shutdown: shutdown.clone(),
            poll: self.poll,
            engine: Engine::new(engine),
            feeder: proofline_core::reader::LineFeeder::new(),
            out,
            driver,
            deadline: deadline.clone(),
            stats: stats.clone(),
            clock: clock.clone(),
            spans: spans.clone(),
            done: done_tx,
            warned: false,
            skew_ms: None,
            layer_events: false,
            warned_mixed: false,
            silence: self.silence,
            silent_since: None,
            warned_silent: false,
            pickup_since: None,
            warned_no_start: false,
            kinds_seen: [0; 6],
            setup,
            anchored: None,
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
            requests: crate::layer::Requests::default(),
        };
        let guard = TimelineGuard {
            shutdown,
            done: done_rx,
            handle: Some(handle),
            result: None,
            stats,
            deadline,
            run,
        };
        (layer, guard)
    }
}

/// The name of the one span mapped to GPU_START, else of the one mapped to SYNTH_START;
/// `None` when several are (a kind named after one of them would mislabel the others).
fn default_kind(rules: &[SpanRule]) -> Option<String> {
    let only = |kind: EventKind| -> Option<Option<&str>> {
        let mut names = rules
            .iter()
            .filter(|r| r.event == kind)
            .map(|r| r.span.as_str());
        let first = names.next()?;
        Some(names.all(|n| n == first).then_some(first))
    };
    only(EventKind::GpuStart)
        .or_else(|| only(EventKind::SynthStart))
        .flatten()
        .map(str::to_owned)
}

/// Where the GPU intervals come from when spans give them: the spans and edges of the rules
/// that map GPU_START and GPU_END (`None` when no rule does: the prover's own events).
fn gpu_interval_source(rules: &[SpanRule]) -> Option<String> {
    let edge = |kind: EventKind| {
        rules
            .iter()
            .filter(|r| r.event == kind)
            .map(|r| {
                let edge = match r.edge {
                    Edge::Created => "creation",
                    Edge::FirstEnter => "first enter",
                    Edge::Close => "close",
                };
                format!("{edge} of `{}`", r.span)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (start, end) = (edge(EventKind::GpuStart), edge(EventKind::GpuEnd));
    (!start.is_empty() || !end.is_empty()).then(|| {
        format!(
            "spans: GPU_START at {}, GPU_END at {}",
            if start.is_empty() { "none" } else { &start },
            if end.is_empty() { "none" } else { &end }
        )
    })
}

/// Engine settings given by the builder's own setters.
#[derive(Debug, Default)]
struct EngineOverrides {
    gpu_workers_per_device: Option<u32>,
    reorder_window_ms: Option<u64>,
    completion_grace_ms: Option<u64>,
    job_timeout_ms: Option<u64>,
    partitions_by_prefix: Vec<(String, u32)>,
    kinds_by_prefix: Vec<(String, String)>,
    expected_partitions: Option<u32>,
    default_kind: Option<String>,
}

impl EngineOverrides {
    /// `base` with the setters' values over it; the completion grace follows the reorder
    /// window unless set.
    fn apply(self, mut base: EngineConfig) -> EngineConfig {
        if let Some(n) = self.gpu_workers_per_device {
            base = base.gpu_workers_per_device(n);
        }
        if let Some(w) = self.reorder_window_ms {
            base = base.reorder_window_ms(w);
        }
        let grace = self
            .completion_grace_ms
            .unwrap_or(base.get_reorder_window_ms());
        base = base.completion_grace_ms(grace);
        if let Some(t) = self.job_timeout_ms {
            base = base.job_timeout_ms(t);
        }
        for (prefix, n) in self.partitions_by_prefix {
            base = base.partitions_for(prefix, n);
        }
        for (prefix, kind) in self.kinds_by_prefix {
            base = base.proof_kind_for(prefix, kind);
        }
        if let Some(n) = self.expected_partitions {
            base = base.expected_partitions(Some(n));
        }
        if let Some(k) = self.default_kind {
            base = base.default_proof_kind(Some(k));
        }
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default kind is a span's name only when one span is mapped to the GPU work (else
    /// to synthesis): never one of several, which would mislabel the others' jobs.
    #[test]
    fn the_default_kind_is_the_one_gpu_span_s_name() {
        let rule = |span: &str, event| SpanRule::new(span, event, Edge::Close);
        let own = [
            rule("witness", EventKind::SynthStart),
            rule("prove_segment", EventKind::GpuStart),
            rule("prove_segment", EventKind::GpuEnd),
        ];
        assert_eq!(default_kind(&own).as_deref(), Some("prove_segment"));
        assert_eq!(default_kind(&own[..1]).as_deref(), Some("witness"));
        let two = [
            rule("prove_block", EventKind::GpuStart),
            rule("prove_tx", EventKind::GpuStart),
        ];
        assert_eq!(default_kind(&two), None);
        assert_eq!(default_kind(&[]), None);
    }
}
