//! The one background worker: owns the engine, the TIMELINE writer and the sinks.
//!
//! ```text
//!  prover thread ──push──► its own bounded ring ──┐
//!  prover thread ──push──► its own bounded ring ──┴─► proofline-worker: write line, engine.ingest ─► sinks
//!                                                     (drains every ring, sleeps a few ms when
//!                                                      all are empty, ticks the engine once a second)
//! ```
//!
//! The worker polls instead of being woken: a wake-up per event would cost the prover a
//! futex call (BENCHMARKS.md); polling costs a TIMELINE line about one poll interval of
//! latency while the worker keeps up.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proofline_core::sink::{Driver, SinkError, TelemetryCounts};
use proofline_core::{Engine, Report, codec};
use proofline_core::{EventKind, EventRef};

use crate::clock::Clock;
use crate::handoff::{Drained, Handoff, Rings};
use crate::layer::{LayerStats, SpanTable, printed, queue_after};
use crate::queued::Queued;

/// Queue entries taken in one pass over the rings, so that the tick (and the span table's
/// pending starts) are looked at between passes under load.
const MAX_BATCH: usize = 4096;

pub(crate) struct Worker {
    pub handoff: Arc<Handoff>,
    pub rings: Rings,
    pub shutdown: Arc<AtomicBool>,
    pub poll: Duration,
    pub engine: Engine,
    /// Reads the `CUZK_TIMING:` lines the prover logged, as `analyze` reads a log's.
    pub feeder: proofline_core::reader::LineFeeder,
    pub out: Option<Box<dyn Write + Send>>,
    /// The sinks and their lifecycle (run, ticks, shutdown).
    pub driver: Driver,
    /// When the sinks must be done delivering, set by the guard before it asks the worker
    /// to stop (`None`: [`crate::DEFAULT_SHUTDOWN_TIMEOUT`] from then).
    pub deadline: Arc<Mutex<Option<Instant>>>,
    pub stats: Arc<LayerStats>,
    pub clock: Clock,
    /// The layer's span table, where first-enter events wait to be taken.
    pub spans: Arc<SpanTable>,
    pub done: Sender<(Report, Result<(), SinkError>)>,
    /// Whether the drop warning was printed.
    pub warned: bool,
    /// The layer's clock minus the prover's own offsets (TIMELINE lines it logged through
    /// `tracing` count from its own epoch): the least seen, so the engine's clock moves
    /// on in the prover's time.
    pub skew_ms: Option<i64>,
    /// Events timed by the layer's clock (span edges, structured events) were seen.
    pub layer_events: bool,
    /// Whether the warning about events from both sources was printed.
    pub warned_mixed: bool,
    /// How long a silence (nothing received though mapped spans exist; pickups and no
    /// GPU_START) lasts before the layer says so.
    pub silence: Duration,
    /// Since when mapped spans exist and nothing was received.
    pub silent_since: Option<Instant>,
    /// Whether the silence warning was printed.
    pub warned_silent: bool,
    /// Since when GPU_PICKUPs come and no GPU_START.
    pub pickup_since: Option<Instant>,
    /// Whether the no-GPU_START warning was printed.
    pub warned_no_start: bool,
    /// Events handled, by kind.
    pub kinds_seen: [u64; 6],
    /// What the warnings about the layer's set-up need, and which were printed.
    pub setup: Setup,
    /// When the clock was last re-anchored to the OS's monotonic clock.
    pub anchored: Option<Instant>,
}

/// How often the worker re-anchors the layer's clock (see `clock`).
const REANCHOR_EVERY: Duration = Duration::from_secs(1);

/// The warnings that name what in the layer's set-up is likely wrong.
pub(crate) struct Setup {
    pub cfg: Arc<crate::layer::LayerConfig>,
    /// GPU = worker / this, when an event names no GPU.
    pub workers_per_device: u32,
    /// The prover's set-up gave it (else it is cuzk's default, assumed).
    pub workers_per_device_given: bool,
    pub warned_job_id: bool,
    pub warned_assumed_gpu: bool,
    /// Since when GPU events come and no synthesis event.
    pub gpu_since: Option<Instant>,
    pub warned_no_synth: bool,
    /// Since when synthesis has ended and no GPU event came.
    pub synth_since: Option<Instant>,
    pub warned_no_gpu: bool,
    /// Events with no partition while no span is declared whole-proof (a misnamed
    /// partition field makes every job one whole proof), and whether that was said.
    pub no_partition: u64,
    pub warned_no_partition: bool,
}

impl Setup {
    /// Whether a rule maps a span edge to `kind`.
    fn maps(&self, kind: EventKind) -> bool {
        self.cfg.rules.iter().any(|r| r.event == kind)
    }

    /// The spans mapped to any of `kinds`, for a message.
    fn spans_of(&self, kinds: &[EventKind]) -> String {
        let mut names: Vec<&str> = self
            .cfg
            .rules
            .iter()
            .filter(|r| kinds.contains(&r.event))
            .map(|r| r.span.as_str())
            .collect();
        names.dedup();
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Worker {
    pub fn run(mut self) {
        // Whatever the sinks log must not come back into the prover's subscriber.
        let _quiet = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
        let mut line = String::with_capacity(160);
        let mut starts = Vec::new();
        let mut last_look = Instant::now();
        loop {
            // read the flag first: what was pushed before shutdown is drained below
            let stop = self.shutdown.load(Ordering::Acquire);
            self.rings.adopt(&self.handoff);
            let mut rings = std::mem::take(&mut self.rings);
            let mut n = rings.drain(MAX_BATCH, |d| match d {
                Drained::Entry(q) => self.handle_queued(&q, &mut line),
                Drained::Line(text, timeline) => self.handle_line(text, timeline, &mut line),
            });
            self.rings = rings;
            // creation and first-enter events of spans still open, at most once a poll interval while
            // busy (a look locks every shard of the span table, which the prover uses)
            if n < MAX_BATCH || stop || last_look.elapsed() >= self.poll {
                last_look = Instant::now();
                self.spans
                    .take_starts(&self.clock, &self.stats, &mut starts);
                n += starts.len();
                for q in starts.drain(..) {
                    self.handle_queued(&q, &mut line);
                }
            }
            if n > 0 {
                self.stats.received.fetch_add(n as u64, Ordering::Relaxed);
                self.flush();
            }
            self.warn_once();
            self.warn_no_synthesis();
            self.warn_no_gpu();
            self.check_assumed_gpu();
            if self.anchored.is_none_or(|t| t.elapsed() >= REANCHOR_EVERY) {
                self.clock.reanchor();
                self.anchored = Some(Instant::now());
            }
            if stop && self.rings.is_empty() && !self.handoff.any_opened() {
                break;
            }
            // sinks see the engine's state once a tick (gauges), not after every event
            if self.driver.tick_due() {
                // the engine's clock moves on in the prover's time: the layer's, less the skew
                // of the prover's own offsets; not before the first event, which may be one
                // of those (an advance before it would set a newest offset in the layer's time)
                if self.stats.received.load(Ordering::Relaxed) > 0 {
                    let now = self.clock.offset_ms(self.clock.now());
                    let now = (now as i64 - self.skew_ms.unwrap_or(0)).max(0) as u64;
                    self.engine.advance(now, self.driver.sinks());
                }
                self.tick_sinks();
            }
            if n < MAX_BATCH && !stop {
                std::thread::park_timeout(self.poll);
            }
        }
        self.engine.finish(self.driver.sinks());
        self.flush();
        // what a thread pushed after the last drain is lost: counted as dropped, as what
        // comes after the shutdown is (it was lost without a count)
        let (events, timing) = self.rings.discard_left(&self.handoff);
        self.stats.dropped.fetch_add(events, Ordering::Relaxed);
        self.stats
            .timing_dropped
            .fetch_add(timing, Ordering::Relaxed);
        self.warn_once();
        let deadline = self
            .deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or_else(|| Instant::now() + crate::DEFAULT_SHUTDOWN_TIMEOUT);
        let (live, counts) = (self.engine.live(), self.counts());
        let delivered = self.driver.finish(&live, &counts, deadline);
        let mut report = self.engine.report();
        report.events.unattributed = self.stats.missing_job_id.load(Ordering::Relaxed);
        let _ = self.done.send((report, delivered));
    }

    /// Once each, on stderr (not through tracing: this thread's telemetry is off, and the
    /// prover's threads never write it), counted in `stats().warnings`: when the layer first
    /// drops an event; when spans it maps exist but nothing reached it for the silence
    /// delay (a filter hiding them); when GPU_PICKUPs come and no GPU_START for that long.
    fn warn_once(&mut self) {
        if !self.warned && self.counts().events_dropped > 0 {
            self.warned = true;
            self.warn(
                "telemetry queue full or closed; dropping TIMELINE events and CUZK_TIMING lines (counted as proofline_events_dropped_total)",
            );
        }
        let received = self.stats.received.load(Ordering::Relaxed);
        let no_job_id = self.stats.missing_job_id.load(Ordering::Relaxed);
        if no_job_id > 0 && !self.setup.warned_job_id {
            self.setup.warned_job_id = true;
            let span = self
                .stats
                .first_without_job_id
                .get()
                .map(|s| format!(" (the first: `{s}`)"))
                .unwrap_or_default();
            self.warn(&format!(
                "{no_job_id} span edges had no job id{span}: none of the fields {:?} was on the span or an ancestor, so their events were dropped (counted as unattributed); name the prover's job field: Builder::field_names(FieldNames::default().job_id([\"<field>\"]))",
                self.setup.cfg.fields.job_id
            ));
        }
        if self.setup.no_partition > 0 && !self.setup.warned_no_partition {
            self.setup.warned_no_partition = true;
            self.warn(&format!(
                "{} span edges had no partition: none of the fields {:?} was on their spans or an ancestor, and no span is declared whole-proof, so each of their jobs is taken as one whole proof (its figures per job, not per partition); name the prover's partition field (FieldNames::default().partition([\"<field>\"])), or declare the spans whole-proof (Builder::whole_proof_span)",
                self.setup.no_partition, self.setup.cfg.fields.partition
            ));
        }
        // (events that were all dropped for want of a job id are said above, not blamed
        // on a filter)
        if self.stats.mapped_callsites.load(Ordering::Relaxed) > 0
            && received == 0
            && no_job_id == 0
        {
            let since = *self.silent_since.get_or_insert_with(Instant::now);
            if !self.warned_silent && since.elapsed() >= self.silence {
                self.warned_silent = true;
                self.warn(&format!(
                    "the prover has spans this layer maps, but none reached it in {:?}: a filter is likely hiding them (an EnvFilter without RUST_LOG lets only `error` through); let `info` through, e.g. EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(\"info\"))",
                    self.silence
                ));
            }
        }
        if self.kinds_seen[EventKind::GpuPickup.index()] > 0
            && self.kinds_seen[EventKind::GpuStart.index()] == 0
        {
            let since = *self.pickup_since.get_or_insert_with(Instant::now);
            if !self.warned_no_start && since.elapsed() >= self.silence {
                self.warned_no_start = true;
                self.warn(&format!(
                    "{} GPU_PICKUP events and no GPU_START in {:?}: GPU time is not observed. Map a span around the GPU work (Builder::map(span, EventKind::GpuStart, Edge::FirstEnter) and GpuEnd at Edge::Close), or log the prover's own TIMELINE lines through tracing (docs/layer.md, \"Adopting proofline in cuzk\")",
                    self.kinds_seen[EventKind::GpuPickup.index()],
                    self.silence
                ));
            }
        }
    }

    /// GPU events and no synthesis event for the silence delay, though spans are mapped to
    /// synthesis: those spans never reach the layer (filtered out by level, or named
    /// otherwise in the prover), and every figure that needs them is missing.
    fn warn_no_synthesis(&mut self) {
        let gpu = self.kinds_seen[EventKind::GpuStart.index()]
            + self.kinds_seen[EventKind::GpuEnd.index()];
        let synth = self.kinds_seen[EventKind::SynthStart.index()]
            + self.kinds_seen[EventKind::SynthEnd.index()];
        // (the rules are looked at only once GPU events came alone)
        if gpu == 0
            || synth > 0
            || self.setup.warned_no_synth
            || !(self.setup.maps(EventKind::SynthStart) || self.setup.maps(EventKind::SynthEnd))
        {
            return;
        }
        let since = *self.setup.gpu_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.silence {
            self.setup.warned_no_synth = true;
            let spans = self
                .setup
                .spans_of(&[EventKind::SynthStart, EventKind::SynthEnd]);
            self.warn(&format!(
                "{gpu} GPU events and no synthesis event in {:?}: the spans mapped to SYNTH_START and SYNTH_END ({spans}) never reached the layer; a filter is likely below their level (a `debug` span under an `info` filter), or the prover names them otherwise. Synthesis figures (lead time, synthesis-bound verdicts) are missing until they come",
                self.silence
            ));
        }
    }

    /// Synthesis ends and no GPU event comes for six times the silence delay (a minute by
    /// default: a partition's GPU work follows its synthesis within seconds), though spans are
    /// mapped to GPU events: those spans never reach the layer, or the GPU work never starts.
    fn warn_no_gpu(&mut self) {
        let gpu = [EventKind::GpuPickup, EventKind::GpuStart, EventKind::GpuEnd]
            .iter()
            .map(|k| self.kinds_seen[k.index()])
            .sum::<u64>();
        let synth_ends = self.kinds_seen[EventKind::SynthEnd.index()];
        if synth_ends == 0
            || gpu > 0
            || self.setup.warned_no_gpu
            || !(self.setup.maps(EventKind::GpuStart) || self.setup.maps(EventKind::GpuEnd))
        {
            return;
        }
        let since = *self.setup.synth_since.get_or_insert_with(Instant::now);
        let wait = self.silence * 6;
        if since.elapsed() >= wait {
            self.setup.warned_no_gpu = true;
            let spans = self.setup.spans_of(&[
                EventKind::GpuPickup,
                EventKind::GpuStart,
                EventKind::GpuEnd,
            ]);
            self.warn(&format!(
                "{synth_ends} partitions synthesized and no GPU event in {wait:?}: the spans mapped to GPU events ({spans}) never reached the layer (a filter below their level, or the prover names them otherwise), or the prover's GPU work never started. GPU figures (busy time, idle gaps, transitions) are missing until they come"
            ));
        }
    }

    /// A span mapped to a GPU event names its worker and no GPU, and nothing said how
    /// workers map to GPUs: GPU = worker / N is assumed (cuzk's layout), which mislabels a
    /// prover with one worker per GPU; said once.
    fn check_assumed_gpu(&mut self) {
        if self.setup.warned_assumed_gpu
            || self.setup.workers_per_device_given
            || !self.stats.gpu_assumed.load(Ordering::Relaxed)
        {
            return;
        }
        self.setup.warned_assumed_gpu = true;
        let n = self.setup.workers_per_device;
        self.warn(&format!(
            "GPU events name a worker and no GPU (no field of {:?} on the span or its ancestors): GPU = worker / {n} is assumed, cuzk's layout of {n} workers a GPU; where a worker has a GPU of its own, name its field for both roles (FieldNames::default().worker([\"device\"]).gpu([\"device\"])), or set Builder::gpu_workers_per_device",
            self.setup.cfg.fields.gpu
        ));
    }

    fn warn(&self, what: &str) {
        self.stats.warnings.fetch_add(1, Ordering::Relaxed);
        // never a panic on a closed standard error: the prover goes on
        let _ = writeln!(std::io::stderr(), "proofline: {what}");
    }

    fn counts(&self) -> TelemetryCounts {
        let mut counts = TelemetryCounts::default();
        // a CUZK_TIMING line lost is telemetry lost too
        counts.events_dropped = self.stats.dropped.load(Ordering::Relaxed)
            + self.stats.timing_dropped.load(Ordering::Relaxed);
        counts.malformed_lines = self.stats.malformed.load(Ordering::Relaxed);
        counts
    }

    fn tick_sinks(&mut self) {
        let (live, counts) = (self.engine.live(), self.counts());
        self.driver.tick(&live, &counts);
    }

    /// A line the prover logged through `tracing` (`timeline`: it holds the TIMELINE
    /// marker): a TIMELINE line that starts with it as its event at the line's own offset;
    /// another as `analyze` reads a log's line (a bad or partial one counted as malformed).
    /// Returns the events taken in (one for a TIMELINE line read here).
    fn handle_line(&mut self, text: &[u8], timeline: bool, line: &mut String) -> usize {
        if timeline {
            // (from a `&str`: UTF-8)
            match std::str::from_utf8(text).map(crate::layer::read_timeline_line) {
                Ok(crate::layer::Logged::Event(q)) => return self.handle_queued(&q, line),
                Ok(crate::layer::Logged::Malformed) => {
                    self.stats.malformed.fetch_add(1, Ordering::Relaxed);
                    return 0;
                }
                Ok(crate::layer::Logged::Text) | Err(_) => {}
            }
        }
        self.read_line(text);
        0
    }

    /// A logged line read as `analyze` reads a log's.
    fn read_line(&mut self, text: &[u8]) {
        let before = self.feeder.stats.malformed;
        self.feeder
            .feed_line(text, &mut self.engine, self.driver.sinks());
        let bad = self.feeder.stats.malformed - before;
        if bad > 0 {
            self.stats.malformed.fetch_add(bad, Ordering::Relaxed);
        }
    }

    /// Takes in an entry; returns the events it stood for.
    fn handle_queued(&mut self, q: &Queued, line: &mut String) -> usize {
        if let Some(t) = q.as_timing() {
            // a CUZK_TIMING line: into the engine (the prover prints it itself)
            match t {
                crate::queued::TimingIn::Parsed(t) => self.engine.ingest_timing_line(t),
                crate::queued::TimingIn::Line(l) => {
                    return self.handle_line(l.text.as_bytes(), l.timeline, line);
                }
            }
            return 0;
        }
        let mut ev = q.event();
        if q.own_offset() {
            self.note_own_offset(ev.offset_ms);
        } else {
            self.layer_events = true;
            // a span edge of no partition while no span is declared whole-proof (the
            // prover's own lines, whole-proof jobs' included, are not the layer's to judge)
            if ev.partition.is_none() && self.setup.cfg.whole.is_empty() {
                self.setup.no_partition += 1;
            }
            if let Some(skew) = self.skew_ms {
                // the prover's own offsets are in use: the layer's move into its time
                ev.offset_ms = ev.offset_ms.saturating_add_signed(-skew);
            }
        }
        if self.layer_events && self.skew_ms.is_some() && !self.warned_mixed {
            self.warned_mixed = true;
            self.warn(
                "TIMELINE events come both from the prover's own lines (logged through tracing) and from the layer's span mappings: each event is counted twice; build the layer with .cuzk_timeline_events() (or .clear_mappings())",
            );
        }
        if let Some(start) = q.start_event(&ev) {
            if let Some(lead) = q.lead_event(&start) {
                self.handle(&lead, line);
            }
            self.handle(&start, line);
        }
        self.handle(&ev, line);
        if q.then_queue() {
            self.handle(&queue_after(&ev), line);
        }
        q.events() as usize
    }

    /// A line of the prover's own, at `offset` in its time: how far the layer's clock is
    /// ahead of the prover's (the least seen: the sample with the least delay). An offset
    /// more than a day ahead of the layer's clock says nothing of the skew and is ignored.
    fn note_own_offset(&mut self, offset: u64) {
        const DAY_MS: i64 = 86_400_000;
        let now = self.clock.offset_ms(self.clock.now());
        let (Ok(now), Ok(offset)) = (i64::try_from(now), i64::try_from(offset)) else {
            return;
        };
        let skew = now - offset;
        if skew < -DAY_MS {
            return;
        }
        if self.skew_ms.is_none() {
            // the prover's offsets count from its own epoch: the sinks place spans from it
            // (the run key stays, so trace ids do not change)
            let epoch = self.driver.run().epoch_unix_ms.saturating_add_signed(skew);
            self.driver.set_epoch(epoch);
        }
        self.skew_ms = Some(self.skew_ms.map_or(skew, |s| s.min(skew)));
    }

    fn handle(&mut self, ev: &EventRef<'_>, line: &mut String) {
        self.kinds_seen[ev.kind.index()] += 1;
        if let Some(out) = &mut self.out {
            line.clear();
            codec::write_line(line, &printed(ev));
            line.push('\n');
            // one write per line, so that lines from several writers never interleave
            if out.write_all(line.as_bytes()).is_ok() {
                self.stats.written.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.engine.ingest(ev, self.driver.sinks());
    }

    fn flush(&mut self) {
        if let Some(out) = &mut self.out {
            let _ = out.flush();
        }
    }
}
