//! Reading TIMELINE logs: lines in, events into an [`Engine`], bad lines counted by number.

use std::io::{self, BufRead, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use crate::codec::{MARKER, parse_line};
use crate::engine::{CallLine, Engine, KernelTally, StageTally, StageValues};
use crate::event::{EventRef, Nums};
use crate::report::{LineError, LineStats};
use crate::sink::UpdateSink;
use crate::timing::{Timing, TimingLine, WorkerMap, parse_plain_timing, parse_timing};

/// How many malformed lines are kept with their error (all are counted).
pub const MAX_LINE_EXAMPLES: usize = 20;

/// The longest line read: a longer one (a log with no newlines, `/dev/zero`) is counted in
/// [`LineStats::oversized`] and skipped to its newline, so memory stays flat whatever the
/// input. TIMELINE lines are under 200 bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How much [`LineFeeder::feed_all_parallel`] reads at a time.
const CHUNK: usize = 1 << 18;

/// Whether `line` holds the TIMELINE marker or a `CUZK_` one anywhere: a line that holds
/// none holds no TIMELINE event and no timing line ([`parse_line`] gives `Ok(None)` for it,
/// and [`parse_timing`] `None`, as a property test checks). One pass for the markers' first
/// letters.
#[inline]
fn may_hold_marker(line: &[u8]) -> bool {
    use crate::timing::{NTT_H_MARKER, TIMING_MARKER};
    memchr::memchr2_iter(b'T', b'C', line).any(|at| {
        let tail = &line[at..];
        [MARKER, TIMING_MARKER, NTT_H_MARKER]
            .iter()
            .any(|m| tail.starts_with(m.as_bytes()))
    })
}

/// What a line holds that the engine takes.
enum Parsed<'a> {
    /// A TIMELINE event.
    Event(EventRef<'a>),
    /// A `CUZK_TIMING:` line.
    Timing(TimingLine),
    /// One of cuzk's start-up lines, taken because no TIMELINE line came before it (read on
    /// its own, a block's parser cannot know that of the blocks before it: the lines are
    /// told apart so that the engine's side can drop those that came after one).
    StartupMap(WorkerMap),
}

impl Parsed<'_> {
    fn feed(self, engine: &mut Engine, sink: &mut impl UpdateSink) {
        match self {
            Parsed::Event(ev) => engine.ingest(&ev, sink),
            Parsed::Timing(t) => engine.ingest_timing_line(&t),
            Parsed::StartupMap(m) => engine.ingest_timing_line(&TimingLine::WorkerMap(m)),
        }
    }
}

/// What takes the lines of a block as [`LineFeeder::parse_str_lines`] reads them.
trait Taker<'a> {
    /// Takes what a line holds.
    fn take(&mut self, p: Parsed<'a>);

    /// Takes the `CUZK_TIMING:` line at `from` in `text` (after its marker) when it is of
    /// cuzk's usual form, read by the taker itself (a block's adds its values up): the index
    /// of its `\n` and whether a value of it is over an hour (the line is not used), or
    /// `None`, nothing taken, for another line (which then goes the usual way, through
    /// [`Taker::take`]).
    #[inline(always)]
    fn take_cuzk_timing(&mut self, _text: &str, _from: usize) -> Option<(usize, bool)> {
        None
    }
}

/// A closure as a [`Taker`].
struct Each<F>(F);

impl<'a, F: FnMut(Parsed<'a>)> Taker<'a> for Each<F> {
    #[inline(always)]
    fn take(&mut self, p: Parsed<'a>) {
        (self.0)(p)
    }
}

/// Feeds log lines to an engine, counting lines and keeping the first malformed ones.
///
/// Ordinary log lines are skipped. A malformed TIMELINE or `CUZK_TIMING:` line is counted
/// (the latter in `malformed_timing` too), its number and error kept (the first
/// [`MAX_LINE_EXAMPLES`]), and the rest of the input is still used. A last
/// line without a newline is not used (a cut can turn `partition=12` into `partition=1`): it
/// is reported as `truncated_last_line`.
#[derive(Debug, Default)]
pub struct LineFeeder {
    /// What was seen so far.
    pub stats: LineStats,
    /// A TIMELINE line came since the run's start: cuzk's start-up lines (which map GPU
    /// workers to GPUs) are no longer looked for, so that the lines after cost nothing more.
    startup_over: bool,
}

impl LineFeeder {
    /// The prover starts again (a new process in the journal): its start-up lines are
    /// looked for again, until its first TIMELINE line.
    pub fn expect_startup(&mut self) {
        self.startup_over = false;
    }

    /// A new feeder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The telemetry counts a reader of a log hands its sinks: malformed lines (over-long
    /// ones included); nothing is dropped by a reader.
    pub fn telemetry_counts(&self) -> crate::sink::TelemetryCounts {
        crate::sink::TelemetryCounts {
            events_dropped: 0,
            malformed_lines: self.stats.malformed + self.stats.oversized,
        }
    }

    /// Feeds one complete line (with or without its `\n`). Returns the error of a malformed
    /// TIMELINE or timing line (it is also counted, and kept if among the first few); a
    /// partial timing line, whose other pairs are used, is counted and kept but not returned.
    pub fn feed_line(
        &mut self,
        line: &[u8],
        engine: &mut Engine,
        sink: &mut impl UpdateSink,
    ) -> Option<LineError> {
        let Ok(text) = std::str::from_utf8(line) else {
            return self.not_utf8(line);
        };
        match self.take_line(text) {
            Ok(Some(p)) => {
                p.feed(engine, sink);
                None
            }
            Ok(None) => None,
            Err(e) => Some(e),
        }
    }

    /// Counts a line that is not UTF-8; malformed if it holds the TIMELINE marker, or a
    /// timing line's (`CUZK_TIMING:`, `CUZK_NTT_H:`: dropped without a word before).
    fn not_utf8(&mut self, line: &[u8]) -> Option<LineError> {
        use crate::timing::{NTT_H_MARKER, TIMING_MARKER};
        self.stats.lines += 1;
        if contains(line, MARKER.as_bytes()) {
            self.stats.timeline_lines += 1;
        } else if [TIMING_MARKER, NTT_H_MARKER]
            .iter()
            .any(|m| contains(line, m.as_bytes()))
        {
            self.stats.timing_lines += 1;
            self.stats.malformed_timing += 1;
        } else {
            return None;
        }
        Some(self.malformed("the line is not valid UTF-8".to_owned()))
    }

    /// Counts and parses one UTF-8 line: its event or timing, nothing (another line), or the
    /// error of a malformed one (counted, and kept if among the first few).
    #[inline]
    fn take_line<'a>(&mut self, text: &'a str) -> Result<Option<Parsed<'a>>, LineError> {
        self.take_line_as(text, false)
    }

    /// [`LineFeeder::take_line`] of a line the fast path has turned down already
    /// (`fast_path_tried`): its TIMELINE part goes straight to the general parser, not
    /// through the fast path a second time.
    #[inline(always)]
    fn take_line_as<'a>(
        &mut self,
        text: &'a str,
        fast_path_tried: bool,
    ) -> Result<Option<Parsed<'a>>, LineError> {
        self.stats.lines += 1;
        // (a TIMELINE line first, most of a log, goes to its parser without another look)
        if !text.starts_with(MARKER) {
            // a timing line with no `T` after its marker (cuzk's, most of its log) holds no
            // TIMELINE event: it is not looked through for one
            if let Some(t) = parse_plain_timing(text) {
                return self.timing(text, Some(t));
            }
            // a line with no marker (a daemon's own log line) is known so in one look
            // through it, where the two parsers would look through it one after the other
            if !may_hold_marker(text.as_bytes()) {
                return self.timing(text, None);
            }
        }
        let parsed = if fast_path_tried {
            crate::codec::parse_general(text)
        } else {
            parse_line(text)
        };
        match parsed {
            Ok(None) => self.timing(text, parse_timing(text)),
            Ok(Some(ev)) => Ok(Some(self.event_line(ev))),
            Err(e) => {
                self.stats.timeline_lines += 1;
                Err(self.malformed(e.to_string()))
            }
        }
    }

    /// Counts a line (counted among the lines already) that held a TIMELINE event, and takes
    /// the event: the lines after it are past cuzk's start-up.
    #[inline(always)]
    fn event_line<'a>(&mut self, ev: EventRef<'a>) -> Parsed<'a> {
        self.stats.timeline_lines += 1;
        self.startup_over = true;
        Parsed::Event(ev)
    }

    /// Counts and takes a line that holds no TIMELINE event, as [`parse_timing`] read it:
    /// its timing (or start-up mapping), nothing, or the error of a malformed one.
    #[inline]
    fn timing<'a>(
        &mut self,
        text: &str,
        timing: Option<Result<TimingLine, String>>,
    ) -> Result<Option<Parsed<'a>>, LineError> {
        match timing {
            // (the layer's own start-up line is taken wherever it comes)
            None if text.starts_with(crate::timing::LAYER_STARTUP) => {
                Ok(crate::timing::parse_worker_map(text)
                    .map(|m| Parsed::Timing(TimingLine::WorkerMap(m))))
            }
            None if !self.startup_over => {
                Ok(crate::timing::parse_worker_map(text).map(Parsed::StartupMap))
            }
            None => Ok(None),
            Some(Ok(t)) => {
                self.stats.timing_lines += 1;
                // a partial line is used, and counted and named as malformed too
                if let TimingLine::Timing(timing) = &t {
                    if timing.is_partial() {
                        self.stats.malformed_timing += 1;
                        let _ = self.malformed(timing.bad_pairs());
                    }
                    if timing.over_max().is_some() {
                        self.absurd_timing();
                    }
                }
                Ok(Some(Parsed::Timing(t)))
            }
            Some(Err(e)) => {
                self.stats.timing_lines += 1;
                self.stats.malformed_timing += 1;
                Err(self.malformed(e))
            }
        }
    }

    fn malformed(&mut self, error: String) -> LineError {
        self.stats.malformed += 1;
        let e = LineError {
            line: self.stats.lines,
            error,
        };
        if self.stats.malformed_examples.len() < MAX_LINE_EXAMPLES {
            self.stats.malformed_examples.push(e.clone());
        }
        e
    }

    /// Notes the number of a timing line (counted among the lines already) with a value
    /// over an hour, if it is the first.
    #[cold]
    fn absurd_timing(&mut self) {
        self.stats
            .first_absurd_timing
            .get_or_insert(self.stats.lines);
    }

    /// Counts a line longer than [`MAX_LINE_BYTES`], skipped unread.
    pub fn oversized_line(&mut self) {
        self.stats.lines += 1;
        self.stats.oversized += 1;
        self.stats.first_oversized.get_or_insert(self.stats.lines);
    }

    /// Notes an unterminated last line, which is not used.
    pub fn feed_cut_line(&mut self, line: &[u8]) {
        self.stats.lines += 1;
        if contains(line, MARKER.as_bytes()) {
            self.stats.truncated_last_line = true;
        }
    }

    /// Feeds a block of lines, each ending in `\n` (a last one without is a cut line). The
    /// block is checked for UTF-8 once (the common case); only a block that fails is checked
    /// line by line, so that one bad byte costs one line.
    pub fn feed_lines(&mut self, block: &[u8], engine: &mut Engine, sink: &mut impl UpdateSink) {
        self.parse_lines(block, |p| p.feed(engine, sink));
    }

    /// Counts and parses the lines of `block` (as [`LineFeeder::feed_lines`]), giving each
    /// event to `on_event`; its strings are slices of `block`. The block is checked for UTF-8
    /// once; only one that fails, line by line.
    fn parse_lines<'a>(&mut self, block: &'a [u8], mut on_event: impl FnMut(Parsed<'a>)) {
        if let Ok(text) = std::str::from_utf8(block) {
            self.parse_str_lines(text, Each(on_event));
            return;
        }
        for line in block.split_inclusive(|&b| b == b'\n') {
            if line.last() != Some(&b'\n') {
                self.feed_cut_line(line);
            } else if let Ok(text) = std::str::from_utf8(line) {
                if let Ok(Some(ev)) = self.take_line(text) {
                    on_event(ev);
                }
            } else {
                self.not_utf8(line);
            }
        }
    }

    /// [`LineFeeder::parse_lines`] for a block known to be UTF-8.
    fn parse_str_lines<'a>(&mut self, text: &'a str, mut on: impl Taker<'a>) {
        use crate::timing::TIMING_MARKER;
        let mut start = 0;
        while start < text.len() {
            // a TIMELINE line the fast path takes is parsed up to its newline, which it
            // finds so: counted and taken as `take_line` would
            if let Some((ev, end)) = crate::codec::parse_canonical_in(text, start) {
                self.stats.lines += 1;
                on.take(self.event_line(ev));
                start = end + 1;
                continue;
            }
            // so is a timing line of cuzk's form, where the taker reads such lines itself
            // (what `take_line` would do with it: a timing line, never a partial one)
            if text.as_bytes()[start..].starts_with(TIMING_MARKER.as_bytes()) {
                if let Some((end, absurd)) = on.take_cuzk_timing(text, start + TIMING_MARKER.len())
                {
                    self.stats.lines += 1;
                    self.stats.timing_lines += 1;
                    if absurd {
                        self.absurd_timing();
                    }
                    start = end + 1;
                    continue;
                }
            }
            let Some(end) = memchr::memchr(b'\n', &text.as_bytes()[start..]) else {
                break;
            };
            let end = start + end;
            // `\n` is ASCII: both ends are char boundaries; the fast path has turned the
            // line down (or it is no TIMELINE line, which it turns down at its first byte)
            if let Ok(Some(ev)) = self.take_line_as(&text[start..=end], true) {
                on.take(ev);
            }
            start = end + 1;
        }
        if start < text.len() {
            self.feed_cut_line(&text.as_bytes()[start..]);
        }
    }

    /// Reads `input` to its end, feeding every complete line. `on_bytes` is told how many
    /// bytes each read took (for progress bars).
    ///
    /// Lines are used where they lie in `input`'s buffer; only a line that straddles two
    /// reads is copied.
    pub fn feed_all(
        &mut self,
        input: &mut impl BufRead,
        engine: &mut Engine,
        sink: &mut impl UpdateSink,
        on_bytes: impl FnMut(usize),
    ) -> io::Result<()> {
        self.feed_all_stepped(input, engine, sink, on_bytes, |_, _, _| {})
    }

    /// [`LineFeeder::feed_all`], telling `before` the offset of each TIMELINE event just
    /// before the engine takes it: a caller that replays a log on the log's own clock (the
    /// OpenMetrics export's scrapes) moves the engine's clock up to the event first
    /// ([`Engine::advance`]) and looks at what it holds then.
    pub fn feed_all_stepped<S: UpdateSink>(
        &mut self,
        input: &mut impl BufRead,
        engine: &mut Engine,
        sink: &mut S,
        mut on_bytes: impl FnMut(usize),
        mut before: impl FnMut(u64, &mut Engine, &mut S),
    ) -> io::Result<()> {
        let mut feed = |p: Parsed<'_>, engine: &mut Engine, sink: &mut S| {
            if let Parsed::Event(ev) = &p {
                before(ev.offset_ms, engine, sink);
            }
            p.feed(engine, sink);
        };
        let mut carry: Vec<u8> = Vec::new();
        // inside a line longer than MAX_LINE_BYTES: skipping to its newline
        let mut skipping = false;
        loop {
            let buf = match input.fill_buf() {
                // (no more than the limit at a time: a line inside a larger buffer would
                // be read whole, however long)
                Ok(buf) => &buf[..buf.len().min(MAX_LINE_BYTES)],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let n = buf.len();
            if n == 0 {
                if skipping {
                    self.oversized_line();
                } else if !carry.is_empty() {
                    self.feed_cut_line(&carry);
                }
                return Ok(());
            }
            let mut body = buf;
            if skipping {
                match memchr::memchr(b'\n', body) {
                    Some(end) => {
                        self.oversized_line();
                        skipping = false;
                        body = &body[end + 1..];
                    }
                    None => body = &[],
                }
            }
            if !carry.is_empty() {
                match memchr::memchr(b'\n', body) {
                    Some(end) => {
                        carry.extend_from_slice(&body[..=end]);
                        match within_limit(&carry[..carry.len() - 1]) {
                            None => self.oversized_line(),
                            Some(at) => match std::str::from_utf8(&carry[at..]) {
                                Ok(text) => {
                                    if let Ok(Some(p)) = self.take_line(text) {
                                        feed(p, engine, sink);
                                    }
                                }
                                Err(_) => drop(self.not_utf8(&carry[at..])),
                            },
                        }
                        carry.clear();
                        body = &body[end + 1..];
                    }
                    None => {
                        carry.extend_from_slice(body);
                        body = &[];
                    }
                }
            }
            match memchr::memrchr(b'\n', body) {
                Some(last) => {
                    self.parse_lines(&body[..=last], |p| feed(p, engine, sink));
                    carry.extend_from_slice(&body[last + 1..]);
                }
                None => carry.extend_from_slice(body),
            }
            if carry.len() > MAX_LINE_BYTES {
                // a hole of NUL bytes before a line is no part of it (as in `feed_blocks`)
                let text = carry.iter().position(|&b| b != 0).unwrap_or(carry.len());
                carry.drain(..text);
                if carry.len() > MAX_LINE_BYTES {
                    carry = Vec::new();
                    skipping = true;
                }
            }
            on_bytes(n);
            input.consume(n);
        }
    }

    /// What [`LineFeeder::feed_all`] does, on two threads: a reader thread reads `input` in
    /// large blocks and parses them while this thread runs the engine (and so the sink) on
    /// the events of the block before; when this thread finds no block ready, the reader
    /// hands it the next one unparsed (one at a time), so that a log the parsing is the
    /// slower part of keeps both busy. The result is the same, line numbers and all, whoever
    /// parsed what; with two cores a whole log is read in about the time the slower of the
    /// two parts takes.
    pub fn feed_all_parallel(
        &mut self,
        input: impl Read + Send,
        engine: &mut Engine,
        sink: &mut impl UpdateSink,
    ) -> io::Result<()> {
        self.feed_blocks(
            input,
            engine,
            sink,
            CHUNK,
            &mut || false,
            Handoff::WhenWaiting,
        )
        .map(drop)
    }

    /// [`LineFeeder::feed_all_parallel`], stopping early once `stop` says so (asked after
    /// each block of lines, a few milliseconds of work): returns whether it stopped early.
    /// The events read before stopping were all given to the engine. A read error (a
    /// truncated compressed file) comes after every line read before it went to the engine.
    pub fn feed_all_parallel_until(
        &mut self,
        input: impl Read + Send,
        engine: &mut Engine,
        sink: &mut impl UpdateSink,
        stop: &mut dyn FnMut() -> bool,
    ) -> io::Result<bool> {
        self.feed_blocks(input, engine, sink, CHUNK, stop, Handoff::WhenWaiting)
    }

    /// The two threads of [`LineFeeder::feed_all_parallel`], blocks of `chunk` bytes, the
    /// reader thread handing blocks over unparsed as `handoff` says.
    fn feed_blocks(
        &mut self,
        input: impl Read + Send,
        engine: &mut Engine,
        sink: &mut impl UpdateSink,
        chunk: usize,
        stop: &mut dyn FnMut() -> bool,
        handoff: Handoff,
    ) -> io::Result<bool> {
        // (a line over the limit is found as a block's first only while two reads are
        // within it: `read_batches`)
        debug_assert!(2 * chunk <= MAX_LINE_BYTES, "{chunk}");
        // Two blocks in the channel: the reader stays at most three blocks ahead.
        let (full_tx, full_rx) = mpsc::sync_channel::<Batch>(2);
        let (empty_tx, empty_rx) = mpsc::channel::<Batch>();
        let shared = Shared {
            startup_over: AtomicBool::new(self.startup_over),
            starved: AtomicBool::new(false),
            handed_over: AtomicBool::new(false),
            handoff,
        };
        // finished partitions' stages, added up on the reader's thread (`read_batches`)
        let mut tally = StageTally::default();
        engine.defer_stages();
        let result = std::thread::scope(|scope| {
            let (shared, tally) = (&shared, &mut tally);
            let handle = std::thread::Builder::new()
                .name("proofline-read".into())
                .spawn_scoped(scope, move || {
                    let read = read_batches(input, chunk, shared, &full_tx, &empty_rx, tally);
                    // (kept past the reader's end, for the blocks sent back after it)
                    (read, empty_rx)
                })?;
            let mut stopped = false;
            loop {
                // `stop` is asked between blocks, and while a slow input gives none
                let got = match full_rx.try_recv() {
                    Ok(batch) => {
                        shared.starved.store(false, Ordering::Relaxed);
                        Ok(batch)
                    }
                    Err(mpsc::TryRecvError::Empty) => {
                        shared.starved.store(true, Ordering::Relaxed);
                        full_rx.recv_timeout(std::time::Duration::from_millis(100))
                    }
                    Err(mpsc::TryRecvError::Disconnected) => {
                        Err(mpsc::RecvTimeoutError::Disconnected)
                    }
                };
                let mut batch = match got {
                    Ok(batch) => batch,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if stop() {
                            stopped = true;
                            break;
                        }
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                if let Some(block) = batch.raw.take() {
                    // handed over unparsed (this side found none ready): parsed here, where
                    // the blocks before it are known; the buffer goes back with the batch
                    shared.handed_over.store(false, Ordering::Relaxed);
                    batch.fill(&block, self.startup_over);
                    batch.raw = Some(block);
                }
                self.take_block(&mut batch, engine, sink);
                if self.startup_over {
                    shared.startup_over.store(true, Ordering::Relaxed);
                }
                // the stages of the partitions it finished go back with it, to be added up
                // by the reader (or below, when the reader is done)
                engine.take_deferred_stages(&mut batch.stages);
                // (the reader hands `empty_rx` back when it ends: the send fails only when
                // it panicked, which the join below resumes)
                let _ = empty_tx.send(batch);
                // a reader that is done has sent all there is: what is left in the channel
                // is taken, and the reading was not cut
                if !handle.is_finished() && stop() {
                    stopped = true;
                    break;
                }
            }
            // the reader's next send fails: it stops reading
            drop(full_rx);
            let (result, empty_rx) = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // the blocks that went back after the reader's last look
            for batch in empty_rx.try_iter() {
                engine.record_deferred(&batch.stages);
            }
            result.map(|()| stopped)
        });
        engine.end_deferring(&tally);
        result
    }

    /// Takes in a parsed block after the blocks before it: its lines' counts (its malformed
    /// lines numbered after the lines before), then its events and timing lines in order.
    fn take_block(&mut self, batch: &mut Batch, engine: &mut Engine, sink: &mut impl UpdateSink) {
        if self.startup_over && !batch.startup_maps.is_empty() {
            // start-up lines taken by a parser that did not know a TIMELINE line had come
            // in a block before
            let (mut at, late) = (0, &batch.startup_maps);
            batch.timings.retain(|_| {
                at += 1;
                !late.contains(&(at - 1))
            });
        }
        self.add_block(&mut batch.stats);
        engine.absorb_tally(&batch.tally);
        let mut timings = batch.timings.iter().peekable();
        let mut calls = batch.calls.iter().enumerate().peekable();
        for (i, ev) in batch.events.iter().enumerate() {
            // timing lines in their place among the events
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            Batch::timings_before(i, &mut timings, &mut calls, engine);
            ev.ingest(&batch.strs, engine, sink);
        }
        Batch::timings_before(u32::MAX, &mut timings, &mut calls, engine);
        if !batch.events.is_empty() {
            self.startup_over = true;
        }
    }

    /// Counts the lines of a block read on its own (numbered from its first), after the
    /// lines counted so far.
    fn add_block(&mut self, block: &mut LineStats) {
        let before = self.stats.lines;
        let s = &mut self.stats;
        // every field named: a new one is decided here
        let LineStats {
            lines,
            timeline_lines,
            timing_lines,
            malformed,
            malformed_timing,
            malformed_examples,
            truncated_last_line,
            oversized,
            first_oversized,
            first_absurd_timing,
            from_input: _,
            read_error: _,
        } = block;
        s.lines += *lines;
        s.timeline_lines += *timeline_lines;
        s.timing_lines += *timing_lines;
        s.malformed += *malformed;
        s.malformed_timing += *malformed_timing;
        s.oversized += *oversized;
        if let Some(n) = first_oversized.filter(|_| s.first_oversized.is_none()) {
            s.first_oversized = Some(before + n);
        }
        if let Some(n) = first_absurd_timing.filter(|_| s.first_absurd_timing.is_none()) {
            s.first_absurd_timing = Some(before + n);
        }
        s.truncated_last_line |= *truncated_last_line;
        for mut e in malformed_examples.drain(..) {
            if s.malformed_examples.len() < MAX_LINE_EXAMPLES {
                e.line += before;
                s.malformed_examples.push(e);
            }
        }
    }
}

/// Who parses a block of [`LineFeeder::feed_blocks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handoff {
    /// The reader thread, unless the engine's side found no block ready when it last
    /// looked, and took the last block handed over unparsed: then the engine's side.
    ///
    /// A log of many lines besides the TIMELINE ones (a daemon's, with `CUZK_TIMING:` and
    /// its own log lines) keeps the reader parsing and the engine waiting; handed a block
    /// now and then, the engine's side parses what it would have waited for (about one
    /// block in five on such a log; almost none where the engine is the slower, as on a log
    /// of TIMELINE lines alone). At most one waits in the channel unparsed: without that
    /// rule a third of the blocks went over, the engine's side became the slower while the
    /// reader waited (0.40 s, where this took 0.35 s on a 390 MB log). The rule is lifted
    /// when the engine's side takes the block, not when it has parsed it: waiting for the
    /// parse measured no better.
    WhenWaiting,
    /// The reader thread, always (for tests).
    #[cfg(test)]
    Never,
    /// The engine's side, always (for tests).
    #[cfg(test)]
    Always,
}

/// What the two threads of [`LineFeeder::feed_blocks`] share besides the channels.
struct Shared {
    /// A TIMELINE line came in a block taken in so far: a block's parser need not look for
    /// cuzk's start-up lines (those it takes anyway are dropped when the block is taken).
    startup_over: AtomicBool,
    /// The engine's side found no block ready when it last looked.
    starved: AtomicBool,
    /// A block was handed over unparsed, and the engine's side has not taken it yet.
    handed_over: AtomicBool,
    handoff: Handoff,
}

/// The reader thread of [`LineFeeder::feed_all_parallel`]: reads blocks of whole lines,
/// parses them (or hands them over unparsed, as [`Handoff`] says) and sends them on, reusing
/// the batches that come back (and the buffer of a block handed over), and adds up into
/// `stages` the values of the partitions finished that they bring back ([`StageTally`]).
fn read_batches(
    mut input: impl Read,
    chunk: usize,
    shared: &Shared,
    full: &mpsc::SyncSender<Batch>,
    empty: &mpsc::Receiver<Batch>,
    stages: &mut StageTally,
) -> io::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    let mut read_error = None;
    // The block is read into this thread's own buffer, again and again: the engine's side
    // never reads it (its events' strings are copied out), so its lines are in no other
    // core's cache when the next block is read into it. It goes over only when a block is
    // handed over unparsed, and comes back with the batch.
    let mut buf: Vec<u8> = Vec::new();
    // a buffer that came back while this one was in use: the next to read into once this
    // one is handed over (not a fresh one, zeroed and faulted in, at each hand-over)
    let mut spare: Option<Vec<u8>> = None;
    loop {
        let mut batch = empty.try_recv().unwrap_or_default();
        for v in batch.stages.drain(..) {
            stages.record(&v);
        }
        if let Some(back) = batch.raw.take() {
            spare.get_or_insert(back);
        }
        if buf.capacity() == 0 {
            buf = spare.take().unwrap_or_default();
        }
        // Its bytes up to its length were written before: they are read over, not
        // zeroed first (`filled` says how many are this block's). A zeroing of each block
        // was 6 % of analyze's samples once the buffers came back from the other thread.
        let mut filled = carry.len();
        if buf.len() < filled {
            buf.resize(filled, 0);
        }
        buf[..filled].copy_from_slice(&carry);
        carry.clear();
        // lines skipped as too long while the block was read: they come before its lines
        let mut skipped = 0;
        // read until the block holds a whole line, or the input ends (then the block
        // is all that is left, a cut last line included: `fill` notes it)
        let (mut lines_end, eof) = loop {
            let want = chunk.max(filled);
            let ended = match read_more(&mut input, &mut buf, &mut filled, want) {
                Ok(ended) => ended,
                Err(e) => {
                    // what was read before the error still goes to the engine
                    read_error = Some(e);
                    break (filled, true);
                }
            };
            if ended {
                break (filled, true);
            }
            if let Some(last) = memchr::memrchr(b'\n', &buf[..filled]) {
                break (last + 1, false);
            }
            buf.truncate(filled);
            if buf.len() > MAX_LINE_BYTES {
                // a hole of NUL bytes (what copytruncate leaves before the next line of a
                // writer that does not append) is no part of that line: it goes, and the
                // line is read (it was skipped as over-long with the hole)
                let text = buf.iter().position(|&b| b != 0).unwrap_or(buf.len());
                buf.drain(..text);
                filled = buf.len();
                if filled <= MAX_LINE_BYTES {
                    continue;
                }
                // a line too long to hold: skip to its newline, whatever its length
                skipped += 1;
                match skip_past_newline(&mut input, &mut buf, chunk) {
                    Ok(true) => {}
                    Ok(false) => {
                        filled = 0;
                        break (0, true);
                    }
                    Err(e) => {
                        // (the lines skipped go over with the error, counted)
                        read_error = Some(e);
                        filled = 0;
                        break (0, true);
                    }
                }
            }
            filled = buf.len();
        };
        // The block's first line may have grown past the limit before its newline came (a
        // read brings up to the limit after what it has), or, at the end of the input, be a
        // last line without one: skipped, as the line-by-line reader skips it. Only a block
        // over the limit can hold such a line, and only as its first (blocks are read at
        // most half the limit at a time, `feed_blocks`).
        if lines_end > MAX_LINE_BYTES {
            let end = memchr::memchr(b'\n', &buf[..lines_end]).unwrap_or(lines_end);
            let cut = match within_limit(&buf[..end]) {
                Some(text) => text,
                None => {
                    skipped += 1;
                    (end + 1).min(lines_end)
                }
            };
            buf.drain(..cut);
            lines_end -= cut;
            filled -= cut;
        }
        carry.extend_from_slice(&buf[lines_end..filled]);
        buf.truncate(lines_end);
        let has = !buf.is_empty() || skipped > 0;
        // (the counts of the block it held before are gone: those were added up)
        batch.stats = LineStats {
            lines: skipped,
            oversized: skipped,
            // (those skipped come before the block's lines: the first is its line 1)
            first_oversized: (skipped > 0).then_some(1),
            ..LineStats::default()
        };
        let hand_over = match shared.handoff {
            Handoff::WhenWaiting => {
                shared.starved.load(Ordering::Relaxed)
                    && !shared.handed_over.load(Ordering::Relaxed)
            }
            #[cfg(test)]
            Handoff::Never => false,
            #[cfg(test)]
            Handoff::Always => true,
        };
        if hand_over && !buf.is_empty() {
            batch.raw = Some(std::mem::take(&mut buf));
            shared.handed_over.store(true, Ordering::Relaxed);
        } else {
            batch.fill(&buf, shared.startup_over.load(Ordering::Relaxed));
        }
        if (has && full.send(batch).is_err()) || eof {
            // done, or the engine's side has gone (it stopped early, or panicked)
            return read_error.map_or(Ok(()), Err);
        }
    }
}

/// A block of lines and what they hold: parsed events, with their strings copied out, and
/// the counts of its lines; or, before it is parsed, the block itself.
#[derive(Default)]
struct Batch {
    /// The events' job ids and proof kinds, one after another: copied out of the block, so
    /// that the engine's thread reads these few bytes and not a line of the block each (the
    /// block stays on the reader's thread, which reads the next one into it).
    strs: String,
    events: Vec<Wire>,
    /// The timing lines but those of `calls` and `tally` (`CUZK_TIMING:` lines of another
    /// form, notes, `CUZK_NTT_H:` lines, start-up lines), each with the number of events and
    /// of `calls` before it in the block.
    timings: Vec<(u32, u32, TimingLine)>,
    /// Timing lines of cuzk's usual form (known keys, at most four, no value past an hour)
    /// that have kernel time, each with the number of events before it: what
    /// depends on their place (the GPU each is given to); the rest of them is in `tally`.
    calls: Vec<(u32, CallLine)>,
    /// What the timing lines of cuzk's usual form add up to (those with kernel time
    /// included), whatever their place: added up on the thread that parsed the block.
    tally: KernelTally,
    /// Which of `timings` are start-up lines taken because no TIMELINE line came before
    /// them in the block ([`Parsed::StartupMap`]).
    startup_maps: Vec<usize>,
    /// Its lines' counts, numbered from its first line (lines skipped as too long before
    /// it included).
    stats: LineStats,
    /// Going to the engine's side: the block's lines, not parsed yet. Coming back: the
    /// buffer they were in, for the reader to read into again.
    raw: Option<Vec<u8>>,
    /// The timing line being read ([`Timing::reset`] before each).
    scratch: Timing,
    /// Coming back: the stages of the partitions that the block's events finished, for the
    /// reader to add up ([`StageTally`]) while the engine's thread goes on.
    stages: Vec<StageValues>,
}

impl Batch {
    /// Parses the lines of `block` (the last one may be a cut line) into this batch, its
    /// lines counted in `stats` (after what they hold), cuzk's start-up lines looked for
    /// unless `startup_over`: the events, with their strings copied into `strs`.
    fn fill(&mut self, block: &[u8], startup_over: bool) {
        let mut feeder = LineFeeder {
            stats: std::mem::take(&mut self.stats),
            startup_over,
        };
        self.events.clear();
        self.strs.clear();
        self.timings.clear();
        self.calls.clear();
        self.tally.clear();
        self.startup_maps.clear();
        // (checked for UTF-8 once, as `parse_lines` would)
        match std::str::from_utf8(block) {
            Ok(text) => feeder.parse_str_lines(text, Fill { batch: self }),
            // rare: a line is not UTF-8 (and holds no event)
            Err(_) => {
                feeder.parse_lines(block, |p| self.take(p));
            }
        }
        self.stats = feeder.stats;
    }

    /// Keeps what a line of the block held. (A closure shared by the two ways of parsing a
    /// block was not inlined: a call per event, 3 % of the reader's instructions.)
    #[inline(always)]
    fn take(&mut self, p: Parsed<'_>) {
        match p {
            Parsed::Event(ev) => {
                let wire = Wire::new(&ev, &mut self.strs);
                self.events.push(wire);
            }
            Parsed::Timing(t) => self.push_timing(t),
            Parsed::StartupMap(m) => {
                self.startup_maps.push(self.timings.len());
                self.push_timing(TimingLine::WorkerMap(m));
            }
        }
    }

    /// Keeps a timing line in its place, after the events and calls so far.
    #[inline]
    fn push_timing(&mut self, t: TimingLine) {
        let (events, calls) = (count(self.events.len()), count(self.calls.len()));
        self.timings.push((events, calls, t));
    }

    /// Gives the engine the timing lines of `timings` and `calls` that came before the
    /// block's `i`-th event, in the order they came.
    #[inline(always)]
    fn timings_before<'t>(
        i: u32,
        timings: &mut std::iter::Peekable<std::slice::Iter<'t, (u32, u32, TimingLine)>>,
        calls: &mut std::iter::Peekable<
            std::iter::Enumerate<std::slice::Iter<'t, (u32, CallLine)>>,
        >,
        engine: &mut Engine,
    ) {
        loop {
            let call = calls
                .peek()
                .filter(|(_, (at, _))| *at <= i)
                .map(|(j, _)| *j);
            match timings.peek() {
                // a line of `timings` first when no call before it is left
                Some((at, before, t)) if *at <= i && call.is_none_or(|j| *before as usize <= j) => {
                    engine.ingest_timing_line(t);
                    timings.next();
                }
                _ => match call {
                    Some(_) => {
                        if let Some((_, (_, c))) = calls.next() {
                            engine.ingest_call_line(c);
                        }
                    }
                    None => return,
                },
            }
        }
    }
}

/// A count of a block's events or lines, which no block takes past `u32`.
#[inline(always)]
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A batch being filled from a block, as a [`Taker`].
struct Fill<'b> {
    batch: &'b mut Batch,
}

impl<'a> Taker<'a> for Fill<'_> {
    #[inline(always)]
    fn take(&mut self, p: Parsed<'a>) {
        self.batch.take(p);
    }

    #[inline(always)]
    fn take_cuzk_timing(&mut self, text: &str, from: usize) -> Option<(usize, bool)> {
        let b = &mut *self.batch;
        let t = &mut b.scratch;
        t.reset();
        // (a line with no `\n` is a cut one, for the usual way to note)
        let end = crate::timing::cuzk_pairs_in(text.as_bytes(), from, t)
            .filter(|&end| end < text.len())?;
        let t = &b.scratch;
        let mut absurd = false;
        if t.is_plain() {
            // added up here; only what depends on its place goes to the engine (read field
            // by field: moved whole, a timing just written stalled on the stores that wrote
            // it, a tenth of the reader's time on cuzk's log)
            b.tally.lines += 1;
            let parts = b.tally.add(t);
            match CallLine::new(t.gpu_tid, parts) {
                Some(c) => b.calls.push((count(b.events.len()), c)),
                // (a line of values of at most an hour fits one)
                None => debug_assert!(parts.kernel.is_none(), "{t:?}"),
            }
        } else {
            absurd = t.over_max().is_some();
            let t = std::mem::take(&mut b.scratch);
            b.push_timing(TimingLine::Timing(t));
        }
        Some((end, absurd))
    }
}

/// Where the text of a line (`line`: its bytes before its newline) starts, when it is within
/// [`MAX_LINE_BYTES`]; `None` when it is over the limit, and skipped. A hole of NUL bytes
/// at its start (what copytruncate leaves before the next line of a writer that does not
/// append) is no part of it. The rule of both readers, whatever their reads' sizes.
#[inline]
fn within_limit(line: &[u8]) -> Option<usize> {
    if line.len() <= MAX_LINE_BYTES {
        return Some(0);
    }
    let text = line.iter().position(|&b| b != 0).unwrap_or(line.len());
    (line.len() - text <= MAX_LINE_BYTES).then_some(text)
}

/// Reads `input` past the next newline, `chunk` bytes at a time: `buf` then holds what came
/// after it; `false` when the input ended first (and `buf` is empty).
fn skip_past_newline(input: &mut impl Read, buf: &mut Vec<u8>, chunk: usize) -> io::Result<bool> {
    loop {
        buf.clear();
        if read_block(input, buf, chunk)? && buf.is_empty() {
            return Ok(false);
        }
        if let Some(nl) = memchr::memchr(b'\n', buf) {
            buf.drain(..=nl);
            return Ok(true);
        }
    }
}

/// Reads up to `want` more bytes into `buf`: until it has them, until the input ends (then
/// `true`), or until a read came short with a whole line in hand (a pipe that stalls mid-block:
/// its lines go on at once, not when the block fills; a file's reads come short only at its
/// end).
fn read_block(input: &mut impl Read, buf: &mut Vec<u8>, want: usize) -> io::Result<bool> {
    let mut filled = buf.len();
    let result = read_more(input, buf, &mut filled, want);
    buf.truncate(filled);
    result
}

/// [`read_block`] into `buf[filled..]`, whose bytes past `filled` are read over (the buffer
/// grows, zeroed, only where it is too short): `filled` moves on by what was read.
fn read_more(
    input: &mut impl Read,
    buf: &mut Vec<u8>,
    filled: &mut usize,
    want: usize,
) -> io::Result<bool> {
    let end = *filled + want;
    if buf.len() < end {
        buf.resize(end, 0);
    }
    loop {
        if *filled == end {
            return Ok(false);
        }
        match input.read(&mut buf[*filled..end]) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                *filled += n;
                if *filled < end && memchr::memchr(b'\n', &buf[*filled - n..*filled]).is_some() {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// An event as the reader's thread hands it to the engine's: its strings as byte ranges of
/// its batch's `strs`, its numbers compact ([`Nums`]). 64 bytes, from 120 as a `TimelineEvent`
/// of ranges: each is read once on the engine's side, from the other core's cache, and that
/// read was a tenth of the engine thread's time.
#[derive(Debug, Clone, Copy)]
struct Wire {
    offset_ms: u64,
    nums: Nums,
    /// `job_id` and `proof_kind`, `(from, to)` in `strs` (a block is a few MiB at most).
    job_id: (u32, u32),
    proof_kind: (u32, u32),
}

impl Wire {
    /// The event of a line, its strings copied to the end of `strs`.
    #[inline(always)]
    fn new(ev: &EventRef<'_>, strs: &mut String) -> Wire {
        let mut put = |s: &str| {
            let from = count(strs.len());
            strs.push_str(s);
            (from, count(strs.len()))
        };
        let job_id = put(ev.job_id);
        let proof_kind = ev.proof_kind.map_or((0, 0), put);
        Wire {
            offset_ms: ev.offset_ms,
            nums: Nums::of(ev),
            job_id,
            proof_kind,
        }
    }

    /// A string of `strs`.
    #[inline(always)]
    fn str(text: &str, (from, to): (u32, u32)) -> &str {
        text.get(from as usize..to as usize).unwrap_or_default()
    }

    /// Gives the event, with its strings in `text`, to the engine.
    #[inline(always)]
    fn ingest(&self, text: &str, engine: &mut Engine, sink: &mut impl UpdateSink) {
        let proof_kind = self
            .nums
            .has_proof_kind()
            .then(|| Self::str(text, self.proof_kind));
        engine.ingest_nums(
            self.offset_ms,
            Self::str(text, self.job_id),
            proof_kind,
            self.nums,
            sink,
        );
    }

    /// The event with its strings in `strs`.
    #[cfg(test)]
    fn in_text<'a>(&self, text: &'a str) -> EventRef<'a> {
        self.nums.event(
            self.offset_ms,
            Self::str(text, self.job_id),
            Self::str(text, self.proof_kind),
        )
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;
    use crate::sink::NoUpdates;

    /// The stages of partitions finished while the log is read with two threads are added
    /// up on the reader's thread, and the blocks that went back after its end by the
    /// engine's: each counted once, as one thread counts them (a log long enough in time
    /// that its partitions finish while it is read, in blocks of a few lines).
    #[test]
    fn stages_added_up_on_the_reader_s_thread_count_each_partition_once() {
        let mut log = String::new();
        let jobs = 300;
        for j in 0..jobs {
            let (t, w) = (j * 1000, j % 2);
            log.push_str(&format!(
                "TIMELINE,{t},SYNTH_START,porep-{j}-0,partition=0\n\
                 TIMELINE,{},SYNTH_END,porep-{j}-0,partition=0,synth_ms=300\n\
                 TIMELINE,{},GPU_QUEUE,porep-{j}-0,partition=0\n\
                 TIMELINE,{},GPU_START,porep-{j}-0,worker={w},partition=0\n\
                 TIMELINE,{},GPU_END,porep-{j}-0,worker={w},partition=0,gpu_ms=100\n",
                t + 300,
                t + 350,
                t + 400,
                t + 500,
            ));
        }
        let read = |chunk: Option<(usize, Handoff)>| {
            let mut engine = Engine::new(EngineConfig::default());
            let mut feeder = LineFeeder::new();
            match chunk {
                Some((chunk, handoff)) => {
                    feeder
                        .feed_blocks(
                            log.as_bytes(),
                            &mut engine,
                            &mut NoUpdates,
                            chunk,
                            &mut || false,
                            handoff,
                        )
                        .unwrap();
                }
                None => {
                    let mut input = log.as_bytes();
                    feeder
                        .feed_all(&mut input, &mut engine, &mut NoUpdates, |_| {})
                        .unwrap();
                }
            }
            engine.finish(&mut NoUpdates);
            engine.report()
        };
        let one = read(None);
        assert_eq!(one.stages.gpu.count, jobs);
        assert_eq!(one.stages.synth_reported.count, jobs);
        let json = |r: &crate::report::Report| serde_json::to_string(r).unwrap();
        for (chunk, handoff) in [
            (64, Handoff::Never),
            (256, Handoff::Never),
            (4096, Handoff::Never),
            (256, Handoff::Always),
        ] {
            let two = read(Some((chunk, handoff)));
            assert_eq!(
                serde_json::to_string(&two.stages).unwrap(),
                serde_json::to_string(&one.stages).unwrap(),
                "blocks of {chunk}, {handoff:?}"
            );
            assert!(
                json(&two) == json(&one),
                "blocks of {chunk}, {handoff:?}: the reports differ"
            );
        }
    }

    /// An event handed over between the threads comes out as it went in, whatever fields it
    /// has, and stays 64 bytes.
    #[test]
    fn an_event_handed_over_is_the_event_parsed() {
        assert!(
            std::mem::size_of::<Wire>() <= 64,
            "{}",
            std::mem::size_of::<Wire>()
        );
        let text = "TIMELINE,5,SYNTH_START,snap-7-1,kind=snap-update,monolithic,request=3\n\
                    TIMELINE,9,GPU_END,porep-1-2,worker=3,gpu=1,partition=0,gpu_ms=0,synth_ms=7\n\
                    TIMELINE,1,GPU_QUEUE,x,partition=4294967295\n";
        // the strings of several events one after another, as in a batch
        let mut strs = String::new();
        let mut wires = Vec::new();
        for line in text.split_inclusive('\n') {
            let ev = parse_line(line).unwrap().unwrap();
            wires.push((Wire::new(&ev, &mut strs), line));
        }
        assert_eq!(wires.len(), 3);
        for (wire, line) in wires {
            let ev = parse_line(line).unwrap().unwrap();
            assert_eq!(wire.in_text(&strs), ev, "{line}");
        }
    }

    /// Lines straddling reads of any size are read as whole lines, the bad ones are counted
    /// at the same numbers, and the cut last line is still noticed; whichever thread parses
    /// each block (cuzk's start-up lines, taken before the first TIMELINE line only, too).
    #[test]
    fn any_read_size_reads_the_same() {
        let start_up = |w: u32, g: u32| {
            format!(
                "2026-12-01T03:00:00Z INFO cuzk: pipeline GPU worker started worker_id={w} gpu={g} sub_id=0\n"
            )
        };
        let mut log = start_up(0, 3).into_bytes();
        for i in 0..40u32 {
            log.extend_from_slice(format!("boot line {i}\n").as_bytes());
            log.extend_from_slice(
                format!(
                    "TIMELINE,{i},SYNTH_START,porep-1-{},partition={}\n",
                    i / 10,
                    i % 10
                )
                .as_bytes(),
            );
            if i % 13 == 0 {
                log.extend_from_slice(b"TIMELINE,\xff,GPU_END,j,worker=1\n");
                log.extend_from_slice(b"TIMELINE,7,NOPE,j,worker=1\r\n");
            }
            if i % 10 == 9 {
                // (worker 0 is on GPU 3: a start-up line after a TIMELINE line is no
                // start-up line, and moves nothing; a timing line inside the GPU call is
                // its kernel time, one after it nobody's)
                log.extend_from_slice(start_up(0, 7 + i).as_bytes());
                log.extend_from_slice(
                    format!(
                        "TIMELINE,{i},GPU_START,porep-1-{},worker=0,partition=0\n\
                         CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms={i}\n\
                         TIMELINE,{},GPU_END,porep-1-{},worker=0,partition=0\n",
                        i / 10,
                        i + 1,
                        i / 10,
                    )
                    .as_bytes(),
                );
            }
            if i == 20 {
                // the layer's own start-up line counts wherever it comes: worker 4 is on
                // GPU 2 after it
                log.extend_from_slice(
                    format!(
                        "{} num_gpus=3 gpu_workers_per_device=2\n\
                         TIMELINE,{i},GPU_START,porep-1-2,worker=4,partition=1\n\
                         TIMELINE,{i},GPU_END,porep-1-2,worker=4,partition=1\n",
                        crate::timing::LAYER_STARTUP
                    )
                    .as_bytes(),
                );
            }
        }
        log.extend_from_slice(b"TIMELINE,50,GPU_START,porep-1-1,wor");
        let read = |cap: usize, parallel: Option<Handoff>| {
            let mut engine = Engine::new(EngineConfig::default());
            let mut feeder = LineFeeder::new();
            if let Some(handoff) = parallel {
                feeder
                    .feed_blocks(
                        log.as_slice(),
                        &mut engine,
                        &mut NoUpdates,
                        cap,
                        &mut || false,
                        handoff,
                    )
                    .unwrap();
            } else {
                let mut input = std::io::BufReader::with_capacity(cap, log.as_slice());
                let mut bytes = 0;
                feeder
                    .feed_all(&mut input, &mut engine, &mut NoUpdates, |n| bytes += n)
                    .unwrap();
                assert_eq!(bytes, log.len());
            }
            engine.finish(&mut NoUpdates);
            (feeder.stats, engine.report())
        };
        let (whole, report) = read(1 << 20, None);
        assert_eq!(whole.lines, 1 + 80 + 2 * 4 + 4 * 4 + 3 + 1);
        assert_eq!(
            (whole.timeline_lines, whole.malformed),
            (40 + 2 * 4 + 2 * 4 + 2, 8)
        );
        assert_eq!(whole.timing_lines, 4);
        assert_eq!(whole.malformed_examples[0].line, 4);
        assert!(whole.malformed_examples[0].error.contains("UTF-8"));
        assert!(whole.truncated_last_line);
        assert_eq!(report.summary.jobs_seen, 4);
        let gpus: Vec<_> = report.gpus.iter().map(|g| (g.gpu, g.intervals)).collect();
        assert_eq!(
            gpus,
            [(2, 1), (3, 4)],
            "worker 0 on the start-up line's GPU, worker 4 on the layer's"
        );
        let kernel = report.kernel.as_ref().expect("timing lines");
        let by_gpu: Vec<_> = kernel.gpus.iter().map(|g| (g.gpu, g.kernel_ms)).collect();
        assert_eq!(
            by_gpu,
            [(2, 0), (3, 9 + 19 + 29 + 39)],
            "each line inside its GPU call"
        );
        let report = serde_json::to_string(&report).unwrap();
        let handoffs = [Handoff::Never, Handoff::Always, Handoff::WhenWaiting];
        for cap in [1, 2, 3, 7, 16, 33, 64, 100, 1 << 19] {
            for parallel in std::iter::once(None).chain(handoffs.map(Some)) {
                let (stats, r) = read(cap, parallel);
                let how = format!("read size {cap}, parallel {parallel:?}");
                assert_eq!(serde_json::to_string(&r).unwrap(), report, "{how}");
                assert_eq!(stats.lines, whole.lines, "{how}");
                assert_eq!(stats.timeline_lines, whole.timeline_lines, "{how}");
                assert_eq!(stats.malformed, whole.malformed, "{how}");
                assert_eq!(
                    stats.truncated_last_line, whole.truncated_last_line,
                    "{how}"
                );
                assert_eq!(stats.malformed_examples, whole.malformed_examples, "{how}");
            }
        }
    }

    /// A block parsed before the blocks ahead of it were taken in takes cuzk's start-up
    /// lines as such; taken in after a block with a TIMELINE line, they are dropped (as a
    /// reader of the whole log, which knows, never takes them).
    #[test]
    fn a_start_up_line_after_a_timeline_line_is_dropped_whoever_parsed_it() {
        let block = b"boot\n\
            2026-12-01T03:00:00Z INFO cuzk: pipeline GPU worker started worker_id=0 gpu=5 sub_id=0\n\
            TIMELINE,0,GPU_START,j,worker=0\n\
            2026-12-01T03:00:00Z INFO cuzk: pipeline GPU worker started worker_id=0 gpu=6 sub_id=0\n\
            TIMELINE,1,GPU_END,j,worker=0\n";
        for after_timeline in [false, true] {
            let mut batch = Batch::default();
            // its parser knew of no TIMELINE line before it
            batch.fill(block, false);
            assert_eq!(
                batch.startup_maps,
                [0],
                "the line before the block's own TIMELINE line"
            );
            let mut feeder = LineFeeder::new();
            feeder.startup_over = after_timeline;
            let mut engine = Engine::default();
            feeder.take_block(&mut batch, &mut engine, &mut NoUpdates);
            engine.finish(&mut NoUpdates);
            assert!(feeder.startup_over);
            assert_eq!(feeder.stats.lines, 5);
            let gpus: Vec<_> = engine.report().gpus.iter().map(|g| g.gpu).collect();
            let want = if after_timeline { 0 } else { 5 };
            assert_eq!(gpus, [want], "after a TIMELINE line: {after_timeline}");
        }
    }

    /// A timing line that is not UTF-8 is malformed, as a TIMELINE line is (it was dropped
    /// without a word), by both readers; an ordinary line that is not UTF-8 is not.
    #[test]
    fn a_timing_line_not_utf8_is_malformed() {
        let log: &[u8] = b"TIMELINE,0,SYNTH_START,j,partition=0\n\
            CUZK_TIMING: mutex_held_ms=3 \xfe\n\
            a line of the daemon's \xfe\n\
            CUZK_NTT_H: \xff\n\
            TIMELINE,1,SYNTH_END,j,partition=0,synth_ms=1\n";
        for parallel in [false, true] {
            let mut engine = Engine::new(EngineConfig::default());
            let mut feeder = LineFeeder::new();
            if parallel {
                feeder
                    .feed_all_parallel(log, &mut engine, &mut NoUpdates)
                    .unwrap();
            } else {
                feeder
                    .feed_all(&mut &log[..], &mut engine, &mut NoUpdates, |_| {})
                    .unwrap();
            }
            let s = &feeder.stats;
            assert_eq!(
                (s.lines, s.timeline_lines, s.timing_lines),
                (5, 2, 2),
                "parallel {parallel}"
            );
            assert_eq!(
                (s.malformed, s.malformed_timing),
                (2, 2),
                "parallel {parallel}"
            );
            let at: Vec<u64> = s.malformed_examples.iter().map(|e| e.line).collect();
            assert_eq!(at, [2, 4], "parallel {parallel}");
            assert!(s.malformed_examples[0].error.contains("not valid UTF-8"));
        }
    }

    #[test]
    fn bad_lines_are_numbered_and_the_rest_is_used() {
        let log = "boot\n\
TIMELINE,0,SYNTH_START,winpost-1-a,kind=winning-post\n\
TIMELINE,x,SYNTH_END,winpost-1-a,synth_ms=1\n\
CUZK_TIMING: msm=3us\n\
TIMELINE,10,SYNTH_END,winpost-1-a,synth_ms=10\n\
TIMELINE,10,GPU_QUEUE,winpost-1-a,monolithic\n\
TIMELINE,11,GPU_START,winpost-1-a,worker=0\n\
TIMELINE,12,GPU_WHAT,winpost-1-a,worker=0\n\
TIMELINE,20,GPU_END,winpost-1-a,worker=0,gpu_ms=9\n\
TIMELINE,30,GPU_START,winpost-1-b,wor";
        let mut engine = Engine::new(EngineConfig::default());
        let mut feeder = LineFeeder::new();
        feeder
            .feed_all(&mut log.as_bytes(), &mut engine, &mut NoUpdates, |_| {})
            .unwrap();
        engine.finish(&mut NoUpdates);
        let s = &feeder.stats;
        // a CUZK_TIMING line whose value is no number of milliseconds is malformed too
        assert_eq!((s.lines, s.timeline_lines, s.malformed), (10, 7, 3));
        assert_eq!(s.timing_lines, 1);
        assert_eq!(s.malformed_examples[0].line, 3);
        assert!(s.malformed_examples[0].error.contains("offset `x`"));
        assert_eq!(s.malformed_examples[1].line, 4);
        assert!(s.malformed_examples[1].error.contains("`msm=3us`"));
        assert_eq!(s.malformed_examples[2].line, 8);
        assert!(s.malformed_examples[2].error.contains("GPU_WHAT"));
        assert!(s.truncated_last_line);
        let r = engine.report();
        assert_eq!(r.summary.jobs_complete, 1);
        assert_eq!(r.summary.jobs_seen, 1, "the cut line must not start a job");
        assert_eq!(r.gpus[0].busy_ms, 9);
    }
}

#[cfg(test)]
mod oversized_tests {
    use super::*;
    use crate::sink::NoUpdates;

    /// A log whose second line is 3 MiB with no newline for a while, and whose last is 2
    /// MiB: both readers skip them, count them, name the first, number the lines after it
    /// right, and use them.
    fn log() -> Vec<u8> {
        let mut log = b"TIMELINE,0,SYNTH_START,a,partition=0\n".to_vec();
        log.extend(std::iter::repeat_n(b'x', 3 << 20));
        log.extend_from_slice(b"\nTIMELINE,5,SYNTH_END,a,partition=0,synth_ms=5\nbad TIMELINE,x\n");
        log.extend(std::iter::repeat_n(b'y', 2 << 20));
        log.push(b'\n');
        log
    }

    fn check(f: &LineFeeder, engine: &mut Engine) {
        engine.finish(&mut NoUpdates);
        assert_eq!((f.stats.lines, f.stats.oversized), (5, 2));
        assert_eq!(f.stats.first_oversized, Some(2), "the first is named");
        assert_eq!(
            f.stats.malformed_examples[0].line, 4,
            "numbers count the skipped line"
        );
        assert_eq!(engine.report().events.events, 2);
    }

    #[test]
    fn a_line_past_the_limit_is_skipped_and_counted_by_both_readers() {
        let (mut f, mut e) = (LineFeeder::new(), Engine::default());
        f.feed_all(
            &mut io::BufReader::with_capacity(64 << 10, &log()[..]),
            &mut e,
            &mut NoUpdates,
            |_| {},
        )
        .unwrap();
        check(&f, &mut e);
        for handoff in [Handoff::Never, Handoff::Always, Handoff::WhenWaiting] {
            let (mut f, mut e) = (LineFeeder::new(), Engine::default());
            f.feed_blocks(
                &log()[..],
                &mut e,
                &mut NoUpdates,
                64 << 10,
                &mut || false,
                handoff,
            )
            .unwrap();
            check(&f, &mut e);
        }
    }

    /// The first timing line with a value over an hour is named by its number, whichever
    /// way the log is read.
    #[test]
    fn the_first_timing_line_over_an_hour_is_numbered() {
        let log = b"TIMELINE,0,SYNTH_START,a,partition=0\n\
            CUZK_TIMING: gpu_tid=0 batch_add_ms=5\n\
            CUZK_TIMING: gpu_tid=0 batch_add_ms=3600001\n\
            CUZK_TIMING: prep_msm_ms=3600002\n";
        let mut f = LineFeeder::new();
        f.feed_all(
            &mut &log[..],
            &mut Engine::default(),
            &mut NoUpdates,
            |_| {},
        )
        .unwrap();
        assert_eq!(f.stats.first_absurd_timing, Some(3));
        for handoff in [Handoff::Never, Handoff::Always] {
            let mut f = LineFeeder::new();
            f.feed_blocks(
                &log[..],
                &mut Engine::default(),
                &mut NoUpdates,
                64,
                &mut || false,
                handoff,
            )
            .unwrap();
            assert_eq!(f.stats.first_absurd_timing, Some(3), "{handoff:?}");
        }
    }

    /// A read error while a line too long to hold is skipped: the error is returned, and
    /// the lines before it are counted, the skipped ones too, whoever parses the blocks.
    #[test]
    fn a_read_error_inside_a_skipped_line_loses_no_count() {
        struct Failing(io::Cursor<Vec<u8>>);
        impl Read for Failing {
            fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
                match self.0.read(b)? {
                    0 => Err(io::Error::other("cut off")),
                    n => Ok(n),
                }
            }
        }
        let mut bytes = b"TIMELINE,0,SYNTH_START,a,partition=0\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 2 << 20));
        bytes.push(b'\n');
        // the error comes inside this one
        bytes.extend(std::iter::repeat_n(b'y', 2 << 20));
        for handoff in [Handoff::Never, Handoff::Always, Handoff::WhenWaiting] {
            let (mut f, mut e) = (LineFeeder::new(), Engine::default());
            let input = Failing(io::Cursor::new(bytes.clone()));
            let err = f
                .feed_blocks(
                    input,
                    &mut e,
                    &mut NoUpdates,
                    1 << 18,
                    &mut || false,
                    handoff,
                )
                .unwrap_err();
            assert_eq!(err.to_string(), "cut off");
            let s = &f.stats;
            assert_eq!(
                (s.lines, s.timeline_lines, s.oversized),
                (3, 1, 2),
                "{handoff:?}"
            );
            e.finish(&mut NoUpdates);
            assert_eq!(e.report().events.events, 1, "{handoff:?}");
        }
    }

    #[test]
    fn endless_input_without_a_newline_holds_no_more_than_the_limit() {
        // 64 MiB of one letter: read, skipped, counted as one oversized last line
        let long = || io::repeat(b'x').take(64 << 20);
        let (mut f, mut e) = (LineFeeder::new(), Engine::default());
        f.feed_blocks(
            long(),
            &mut e,
            &mut NoUpdates,
            1 << 18,
            &mut || false,
            Handoff::WhenWaiting,
        )
        .unwrap();
        assert_eq!((f.stats.lines, f.stats.oversized), (1, 1));
        let (mut f, mut e) = (LineFeeder::new(), Engine::default());
        f.feed_all(
            &mut io::BufReader::new(long()),
            &mut e,
            &mut NoUpdates,
            |_| {},
        )
        .unwrap();
        assert_eq!((f.stats.lines, f.stats.oversized), (1, 1));
    }

    /// A line is skipped when it is longer than the limit before its newline, and read when
    /// it is not, by both readers, wherever it falls in their reads: the block reader read
    /// a line of up to twice the limit that grew its block, and the line-by-line reader one
    /// of up to the limit and a read more.
    #[test]
    fn the_line_limit_is_the_same_for_both_readers_wherever_a_line_falls() {
        // (lines, lines over the limit, events) and the first over it, read in blocks of
        // `chunk` or line by line through a buffer of `cap`
        type Read = ((u64, u64, u64), Option<u64>);
        let counts = |f: LineFeeder, e: Engine| {
            let got = (f.stats.lines, f.stats.oversized, e.report().events.events);
            (got, f.stats.first_oversized)
        };
        let blocks = |bytes: &[u8], chunk: usize| -> Read {
            let (mut f, mut e) = (LineFeeder::new(), Engine::default());
            f.feed_blocks(
                bytes,
                &mut e,
                &mut NoUpdates,
                chunk,
                &mut || false,
                Handoff::WhenWaiting,
            )
            .unwrap();
            counts(f, e)
        };
        let lines = |bytes: &[u8], cap: usize| -> Read {
            let (mut f, mut e) = (LineFeeder::new(), Engine::default());
            f.feed_all(
                &mut io::BufReader::with_capacity(cap, bytes),
                &mut e,
                &mut NoUpdates,
                |_| {},
            )
            .unwrap();
            counts(f, e)
        };
        let event = |j: usize| format!("TIMELINE,{j},SYNTH_START,porep-{j},partition=0\n");
        for len in [
            MAX_LINE_BYTES - 1,
            MAX_LINE_BYTES,
            MAX_LINE_BYTES + 1,
            MAX_LINE_BYTES * 3 / 2,
            MAX_LINE_BYTES * 2 - 100,
        ] {
            // a long line first, after a few lines, and after some 300 KiB of them
            for before in [0, 3, 6_000] {
                let mut log = Vec::new();
                for j in 0..before {
                    log.extend_from_slice(event(j).as_bytes());
                }
                log.extend(std::iter::repeat_n(b'x', len));
                log.push(b'\n');
                for j in before..before + 10 {
                    log.extend_from_slice(event(j).as_bytes());
                }
                let over = u64::from(len > MAX_LINE_BYTES);
                let want = (before as u64 + 11, over, before as u64 + 10);
                // (the same line last, without its newline: a cut line, or one skipped)
                let mut cut = log.clone();
                cut.extend(std::iter::repeat_n(b'x', len));
                let want_cut = (want.0 + 1, 2 * over, want.2);
                for chunk in [1 << 16, 1 << 18] {
                    let (got, first) = blocks(&log, chunk);
                    assert_eq!(got, want, "blocks of {chunk}: {len} after {before}");
                    assert_eq!(
                        first,
                        (over == 1).then_some(before as u64 + 1),
                        "blocks of {chunk}: {len} after {before}"
                    );
                    let (got, _) = blocks(&cut, chunk);
                    assert_eq!(
                        got, want_cut,
                        "blocks of {chunk}: {len} after {before}, cut"
                    );
                }
                // the line-by-line reader, with its buffer smaller than the limit and larger
                for cap in [8 << 10, 256 << 10, 4 << 20] {
                    let (got, _) = lines(&log, cap);
                    assert_eq!(got, want, "reads of {cap}: {len} after {before}");
                    let (got, _) = lines(&cut, cap);
                    assert_eq!(got, want_cut, "reads of {cap}: {len} after {before}, cut");
                }
            }
        }
    }

    /// A hole of NUL bytes over the line limit (copytruncate under a writer that does not
    /// append) at the start and in the middle: no part of the lines after it, which are read
    /// (the first line after a hole was skipped as over-long with it); memory stays bounded.
    #[test]
    fn a_hole_of_nul_bytes_before_a_line_swallows_nothing() {
        let mut clean = Vec::new();
        for j in 0..4u64 {
            for p in 0..10u64 {
                let t = j * 1000 + p;
                clean.extend_from_slice(
                    format!(
                        "TIMELINE,{t},SYNTH_START,porep-{j},partition={p}\nTIMELINE,{},SYNTH_END,porep-{j},partition={p},synth_ms=500\n",
                        t + 500
                    )
                    .as_bytes(),
                );
            }
        }
        let hole = vec![0u8; 3 << 20];
        let mid = clean.len() / 2
            + clean[clean.len() / 2..]
                .iter()
                .position(|&b| b == b'\n')
                .unwrap()
            + 1;
        let mut holed = hole.clone();
        holed.extend_from_slice(&clean[..mid]);
        holed.extend_from_slice(&hole);
        holed.extend_from_slice(&clean[mid..]);
        let read = |bytes: &[u8], parallel: bool| {
            let (mut f, mut e) = (LineFeeder::new(), Engine::default());
            if parallel {
                f.feed_blocks(
                    bytes,
                    &mut e,
                    &mut NoUpdates,
                    1 << 18,
                    &mut || false,
                    Handoff::WhenWaiting,
                )
                .unwrap();
            } else {
                f.feed_all(
                    &mut io::BufReader::new(bytes),
                    &mut e,
                    &mut NoUpdates,
                    |_| {},
                )
                .unwrap();
            }
            e.finish(&mut NoUpdates);
            (f.stats, serde_json::to_string(&e.report().jobs).unwrap())
        };
        let (want, jobs) = read(&clean, true);
        for parallel in [true, false] {
            let (got, got_jobs) = read(&holed, parallel);
            assert_eq!(got.oversized, 0, "parallel {parallel}");
            assert_eq!(
                got.timeline_lines, want.timeline_lines,
                "parallel {parallel}"
            );
            assert_eq!(got_jobs, jobs, "parallel {parallel}");
        }
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use crate::sink::NoUpdates;
    use proptest::prelude::*;

    /// What a block's parse gave, comparable: each event, timing line or start-up line, in
    /// order, and the lines' counts.
    fn parsed_of(block: &str, per_line: bool) -> (Vec<String>, LineStats, bool) {
        let mut f = LineFeeder::new();
        let mut got = Vec::new();
        let mut keep = |p: Parsed<'_>| {
            got.push(match p {
                Parsed::Event(ev) => format!("event {:?}", ev.to_owned_event()),
                Parsed::Timing(t) => format!("timing {t:?}"),
                Parsed::StartupMap(m) => format!("startup {m:?}"),
            })
        };
        if per_line {
            // one line at a time, each found by its newline first
            for line in block.split_inclusive('\n') {
                if !line.ends_with('\n') {
                    f.feed_cut_line(line.as_bytes());
                } else if let Ok(Some(p)) = f.take_line(line) {
                    keep(p);
                }
            }
        } else {
            f.parse_str_lines(block, Each(keep));
        }
        (got, f.stats, f.startup_over)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// A block's TIMELINE lines, parsed up to the newline the parse finds, give what the
        /// same lines give each found by its newline first: every event, timing line and
        /// count, whatever the lines' endings (`\r\n`, a trailing comma, a cut last line)
        /// and whatever lies around them.
        #[test]
        fn a_block_reads_as_its_lines_one_by_one(
            lines in proptest::collection::vec(
                (
                    prop_oneof![
                        Just("TIMELINE,5,GPU_END,j-1,worker=1,partition=3"),
                        Just("TIMELINE,7,SYNTH_START,j-2,partition=0,kind=porep"),
                        Just("TIMELINE,7,SYNTH_START,j-2,kind=porep,partition=0"),
                        Just("TIMELINE,7,SYNTH_END,j-2,kind="),
                        Just("TIMELINE,7,SYNTH_END,j-2,"),
                        Just("TIMELINE,7,SYNTH_END,j-2"),
                        Just("TIMELINE,8,GPU_START,j-3,worker=0,monolithic"),
                        Just("TIMELINE,8,GPU_START,j-3,partition=1"),
                        Just("TIMELINE,8,GPU_START,j-3,worker=0,partition=1,"),
                        Just("TIMELINE,9,CHAN_SEND,j-4,partition=2"),
                        Just("TIMELINE,,GPU_END,j,worker=1"),
                        Just("TIMELINE,1"),
                        Just("x TIMELINE,5,GPU_END,j-1,worker=1"),
                        Just("CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=1496"),
                        Just("2026-12-01T03:00:00Z INFO cuzk: started"),
                        Just(""),
                    ],
                    prop_oneof![
                        Just("\n"), Just("\r\n"), Just("\r\r\n"), Just(",\n"), Just("\r"),
                        Just(" \n"), Just("7\n"),
                    ],
                ),
                0..8,
            ),
            cut in prop_oneof![Just(""), Just("TIMELINE,5,GPU_END,j-1,worker=1"), Just("TIMELINE,5")],
        ) {
            let mut block: String = lines.iter().map(|(l, end)| format!("{l}{end}")).collect();
            block.push_str(cut);
            prop_assert_eq!(parsed_of(&block, false), parsed_of(&block, true), "{:?}", block);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// A line passed over as holding neither marker holds nothing either parser takes;
        /// and a line that holds a marker is never passed over.
        #[test]
        fn a_line_without_either_marker_holds_nothing_to_parse(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("TIMELINE,"), Just("TIMELINE"), Just("TIMELIN"), Just("T"),
                    Just("CUZK_TIMING:"), Just("CUZK_NTT_H:"), Just("CUZK_"), Just("CUZK"),
                    Just("C"), Just("1"), Just(","), Just(" "), Just(":"), Just("="),
                    Just("GPU_START"), Just("j-1"), Just("partition=3"), Just("ms"),
                    Just("prep_msm_ms=4"), Just("2026-12-01T03:00:00.1Z  INFO cuzk: "),
                    Just("é"), Just("\n"),
                ],
                0..12,
            )
        ) {
            let line = pieces.concat();
            let marker = [MARKER, crate::timing::TIMING_MARKER, crate::timing::NTT_H_MARKER]
                .iter()
                .any(|m| line.contains(m));
            prop_assert_eq!(may_hold_marker(line.as_bytes()), marker, "{:?}", line);
            if !marker {
                prop_assert_eq!(parse_line(&line).ok(), Some(None), "{:?}", line);
                prop_assert_eq!(parse_timing(&line), None, "{:?}", line);
            }
        }
    }

    /// A line of a log shaped like cuzk's GPU work: its TIMELINE intervals on two GPUs and
    /// the timing lines of its calls, of cuzk's usual form or not (a key this version does
    /// not know, a value past an hour, five keys, a value that is no number, a note).
    fn gpu_line() -> impl Strategy<Value = String> {
        let v = prop_oneof![4 => 0..5_000u64, 1 => Just(3_600_000u64), 1 => Just(3_600_001u64)];
        prop_oneof![
            2 => (0..4u32, 0..2u32, 0..3u32, any::<bool>()).prop_map(|(j, g, p, start)| {
                let (edge, t) = if start { ("GPU_START", 10 * j) } else { ("GPU_END", 10 * j + 5) };
                format!("TIMELINE,{t},{edge},j{j},gpu={g},partition={p}")
            }),
            4 => (0..2u32, v.clone(), v.clone()).prop_map(|(tid, a, b)| {
                [
                    format!("CUZK_TIMING: gpu_tid={tid} ntt_msm_h_ms={a}"),
                    format!("CUZK_TIMING: gpu_tid={tid} batch_add_ms={a}"),
                    format!("CUZK_TIMING: gpu_tid={tid} tail_msm_ms={a} gpu_total_ms={b}"),
                    format!("CUZK_TIMING: gpu_tid={tid} barrier_wait_ms={a}"),
                ][(a + b) as usize % 4].clone()
            }),
            2 => (v.clone(), v.clone()).prop_map(|(a, b)| {
                [
                    format!("CUZK_TIMING: mutex_held_ms={a} total_start_fn_ms={b}"),
                    format!("CUZK_TIMING:  pre_lock_cpu_ms={a} mutex_wait_ms={b}\r"),
                    format!("CUZK_TIMING: prep_msm_ms={a}"),
                    format!("CUZK_TIMING: ntt_msm_h_ms={a} b_g2_msm_ms={b}"),
                ][(a ^ b) as usize % 4].clone()
            }),
            1 => (0..2u32, v).prop_map(|(tid, a)| {
                [
                    format!("CUZK_TIMING: gpu_tid={tid} new_stage_ms={a} tail_msm_ms=1"),
                    format!(
                        "CUZK_TIMING: gpu_tid={tid} ntt_msm_h_ms={a} batch_add_ms=1 \
                         tail_msm_ms=2 gpu_total_ms=3 barrier_wait_ms=4"
                    ),
                    format!("CUZK_TIMING: gpu_tid={tid} batch_add_ms={a}x"),
                    "CUZK_TIMING: set pool release threshold".to_owned(),
                    format!("2026-01-01 INFO CUZK_TIMING: gpu_tid={tid} tail_msm_ms={a}"),
                ][a as usize % 5].clone()
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Timing lines added up on the thread that parses a block, and only what depends
        /// on their place handed to the engine, give the report that each line handed over
        /// whole gives, in blocks of any size, whoever parses them.
        #[test]
        fn timing_lines_added_up_by_block_report_as_line_by_line(
            lines in proptest::collection::vec(gpu_line(), 1..120),
            chunk in 64..2048usize,
            cut in proptest::option::of(gpu_line()),
            not_utf8 in proptest::option::of(0..120usize),
        ) {
            let mut log = (lines.join("\n") + "\n").into_bytes();
            // a line that is not UTF-8 (its block is read line by line), and a last line cut
            // before its newline (not used, wherever its block was parsed)
            if let Some(at) = not_utf8 {
                let at = log.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(at % lines.len());
                if let Some((at, _)) = at {
                    log.splice(at + 1..at + 1, *b"CUZK_TIMING: prep_msm_ms=\xff7\n");
                }
            }
            log.extend_from_slice(cut.unwrap_or_default().as_bytes());
            let log = &log[..];
            let report = |blocks: Option<Handoff>| {
                let (mut f, mut e) = (LineFeeder::new(), Engine::default());
                match blocks {
                    None => f.feed_all(&mut &log[..], &mut e, &mut NoUpdates, |_| {}).unwrap(),
                    Some(handoff) => {
                        f.feed_blocks(log, &mut e, &mut NoUpdates, chunk, &mut || false, handoff)
                            .unwrap();
                    }
                }
                e.finish(&mut NoUpdates);
                (serde_json::to_string(&e.report()).unwrap(), format!("{:?}", f.stats))
            };
            let want = report(None);
            for handoff in [Handoff::Never, Handoff::Always] {
                prop_assert_eq!(&report(Some(handoff)), &want, "{:?}", handoff);
            }
        }
    }
}
