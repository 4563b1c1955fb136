//! The hand-over from the prover's threads to the worker: one single-producer,
//! single-consumer ring per prover thread.
//!
//! A shared many-producer queue costs every push a compare-and-swap on a tail index that the
//! worker reads at each poll, so the push itself waits for that cache line to come back from
//! the worker's core (a visible share of a mapped span under `perf`: BENCHMARKS.md). A thread's own
//! ring is written with plain stores: the entry, in its slot, and then the tail, released;
//! the producer reads the worker's head only when its cached copy says the ring is full.
//! While the worker drains a thread's ring, that thread's spans cost more, by an amount that
//! varies from process to process (the bench's draining row; which cache lines it comes from
//! could not be measured on its machine: BENCHMARKS.md). The rings are `rtrb`'s (see
//! Cargo.toml).
//!
//! A thread opens its ring at its first event (a lock, once per thread and layer) and the
//! worker adopts it at its next poll. A line the prover logs through `tracing` for the worker
//! to read (a TIMELINE or `CUZK_TIMING:` line) goes as bytes into a second ring of the
//! thread's, made at its first such line and announced to the worker by an entry of the
//! first ring; the line's entry, after it, says how long it is and which marker it holds.
//! Past that first line, neither thread allocates for a line (one longer than the ring goes
//! boxed in its entry): a `String` made on the prover's thread and freed on the worker's cost
//! the prover more than reading the line did (BENCHMARKS.md). When the thread exits, its end
//! of the ring goes with it;
//! the worker drains what is left and then drops the ring. Several layers in one process
//! (tests do this) each get their own ring on a thread, told apart by the layer's id.

use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::queued::Queued;

/// Tells the layers of one process apart on a thread.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's rings, one per layer it has sent an event to (usually one).
    static RINGS: RefCell<Vec<ThreadRings>> = const { RefCell::new(Vec::new()) };
}

/// A thread's rings for one layer.
#[derive(Debug)]
struct ThreadRings {
    /// The layer's id.
    id: u64,
    entries: Producer<Queued>,
    /// The logged lines' bytes, once the thread has logged one.
    text: Option<Producer<u8>>,
}

/// Bytes of logged lines a thread's text ring holds for each entry its entry ring holds (as
/// many bytes as the entries take): a `CUZK_TIMING:` line is some 150.
const TEXT_BYTES_PER_ENTRY: usize = std::mem::size_of::<Queued>();
/// The least a text ring holds, whatever the entries: a line of this many bytes always fits
/// an empty one.
const TEXT_MIN: usize = 4096;

/// The prover's side: pushes onto the calling thread's ring.
#[derive(Debug)]
pub(crate) struct Handoff {
    id: u64,
    capacity: usize,
    /// Bytes of a thread's text ring.
    text_capacity: usize,
    /// Rings opened since the worker last looked.
    opened: Mutex<Vec<Consumer<Queued>>>,
    any_opened: AtomicBool,
}

impl Handoff {
    /// A hand-over whose rings hold `capacity` entries each.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Handoff {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            capacity,
            text_capacity: capacity.saturating_mul(TEXT_BYTES_PER_ENTRY).max(TEXT_MIN),
            opened: Mutex::new(Vec::new()),
            any_opened: AtomicBool::new(false),
        }
    }

    /// Builds an entry with `build` straight into a free slot of this thread's ring and
    /// hands it over, without waiting: `false` (and nothing built) when the ring is full, or
    /// when the thread is exiting and its rings are gone.
    ///
    /// Built in the slot, not built first and copied in: the copy of an entry just written
    /// field by field stalled on those narrow stores (`perf annotate`; figures in
    /// BENCHMARKS.md).
    #[inline]
    pub fn push_with(&self, build: impl FnOnce() -> Queued) -> bool {
        self.with_rings(|ring| push_entry(&mut ring.entries, build))
    }

    /// Hands a logged line's bytes to the worker, without waiting (`timeline`: it holds the
    /// TIMELINE marker): `false` (and nothing sent) when either of the thread's rings is
    /// full, or the line is longer than [`Handoff::text_capacity`].
    pub fn push_text(&self, text: &[u8], timeline: bool) -> bool {
        let Ok(len) = u32::try_from(text.len()) else {
            return false;
        };
        if text.len() > self.text_capacity {
            return false;
        }
        self.with_rings(|ring| {
            let text_ring = match &mut ring.text {
                Some(t) => t,
                None => {
                    // the worker learns of the text ring before the first line in it
                    if ring.entries.slots() < 2 {
                        return false;
                    }
                    let (producer, consumer) = RingBuffer::new(self.text_capacity);
                    if !push_entry(&mut ring.entries, || Queued::text_ring(consumer)) {
                        return false;
                    }
                    ring.text.insert(producer)
                }
            };
            // the bytes only when their entry has a slot: the worker reads them by it (the
            // worker's head read only when the cached one says full)
            if ring.entries.is_full() || text_ring.push_entire_slice(text).is_err() {
                return false;
            }
            push_entry(&mut ring.entries, || Queued::text(len, timeline))
        })
    }

    /// The layer's own number, no other layer's in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The longest line [`Handoff::push_text`] takes.
    pub fn text_capacity(&self) -> usize {
        self.text_capacity
    }

    /// `f` on this thread's rings for this layer (opened if need be); `false` when the thread
    /// is exiting and its rings are gone, or they are in use (`f` called within `f`).
    #[inline(always)]
    fn with_rings(&self, f: impl FnOnce(&mut ThreadRings) -> bool) -> bool {
        RINGS
            .try_with(|rings| {
                let Ok(mut rings) = rings.try_borrow_mut() else {
                    return false;
                };
                let ring = match rings.iter_mut().position(|r| r.id == self.id) {
                    Some(i) => &mut rings[i],
                    None => self.open(&mut rings),
                };
                f(ring)
            })
            .unwrap_or(false)
    }

    /// Whether a thread opened a ring the worker has not adopted yet.
    pub fn any_opened(&self) -> bool {
        self.any_opened.load(Ordering::Acquire)
    }

    /// Opens this thread's ring (its first event for this layer), and forgets the rings of
    /// layers that are gone.
    #[cold]
    fn open<'a>(&self, rings: &'a mut Vec<ThreadRings>) -> &'a mut ThreadRings {
        rings.retain(|r| !r.entries.is_abandoned());
        let (producer, consumer) = RingBuffer::new(self.capacity);
        self.opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(consumer);
        self.any_opened.store(true, Ordering::Release);
        rings.push(ThreadRings {
            id: self.id,
            entries: producer,
            text: None,
        });
        let last = rings.len() - 1;
        &mut rings[last]
    }
}

/// Builds an entry with `build` straight into a free slot of `ring`: `false` (and nothing
/// built) when it is full.
#[inline(always)]
fn push_entry(ring: &mut Producer<Queued>, build: impl FnOnce() -> Queued) -> bool {
    match ring.write_chunk_uninit(1) {
        Ok(slot) => slot.fill_from_iter(std::iter::once_with(build)) == 1,
        Err(_) => false,
    }
}

/// What a drain hands on: an entry, or a logged line's bytes.
#[derive(Debug)]
pub(crate) enum Drained<'a> {
    Entry(Queued),
    /// A line, and whether it holds the TIMELINE marker.
    Line(&'a [u8], bool),
}

/// The worker's side of a thread's rings.
#[derive(Debug)]
struct Consumers {
    entries: Consumer<Queued>,
    text: Option<Consumer<u8>>,
}

/// The worker's side: every thread's ring.
#[derive(Debug, Default)]
pub(crate) struct Rings {
    rings: Vec<Consumers>,
    /// Where the next drain starts, so that no thread's ring always goes last.
    next: usize,
    /// A line whose bytes wrap around the end of their ring, put together.
    joined: Vec<u8>,
}

impl Rings {
    /// Takes in the rings opened since the last call, and drops those whose thread is gone
    /// once they are empty.
    pub fn adopt(&mut self, from: &Handoff) {
        self.rings
            .retain(|ring| !(ring.entries.is_abandoned() && ring.entries.is_empty()));
        if from.any_opened.swap(false, Ordering::Acquire) {
            let mut opened = from
                .opened
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.rings.extend(opened.drain(..).map(|entries| Consumers {
                entries,
                text: None,
            }));
        }
    }

    /// Hands on entries, ring after ring, until `f` has counted `max` events in them or every
    /// ring is empty; returns the events counted. A logged line is handed on as its bytes
    /// (`f` counts the events it stands for: a TIMELINE line one, if it reads).
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(Drained<'_>) -> usize) -> usize {
        let mut n = 0;
        let rings = self.rings.len();
        for i in 0..rings {
            let ring = &mut self.rings[(self.next + i) % rings];
            while n < max {
                let Ok(mut q) = ring.entries.pop() else { break };
                if let Some((len, timeline)) = q.text_len() {
                    n += Self::text(ring, &mut self.joined, len, timeline, &mut f);
                    continue;
                }
                if let Some(text) = q.take_text_ring() {
                    ring.text = Some(text);
                    continue;
                }
                n += f(Drained::Entry(q));
            }
            if n >= max {
                self.next = (self.next + i) % rings;
                return n;
            }
        }
        n
    }

    /// Hands on the `len` bytes of a logged line, next in `ring`'s text ring (pushed before
    /// their entry, which was just popped); what `f` counts.
    fn text(
        ring: &mut Consumers,
        joined: &mut Vec<u8>,
        len: usize,
        timeline: bool,
        f: &mut impl FnMut(Drained<'_>) -> usize,
    ) -> usize {
        let Some(chunk) = ring.text.as_mut().and_then(|t| t.read_chunk(len).ok()) else {
            // (cannot happen: the bytes go first) the thread's later lines are lost, not
            // read out of step
            debug_assert!(false, "a line's entry without its bytes");
            ring.text = None;
            return 0;
        };
        let n = match chunk.as_slices() {
            (whole, []) => f(Drained::Line(whole, timeline)),
            (head, tail) => {
                joined.clear();
                joined.extend_from_slice(head);
                joined.extend_from_slice(tail);
                f(Drained::Line(joined, timeline))
            }
        };
        chunk.commit_all();
        n
    }

    /// Empties every ring, those opened since the last look too, handing nothing on: what a
    /// thread pushed after the worker's last drain (it found the layer open just before the
    /// shutdown, and pushed once the worker had looked). Returns what that stood for, as the
    /// layer counts what it cannot hand over: TIMELINE events, and `CUZK_TIMING:` lines.
    pub fn discard_left(&mut self, from: &Handoff) -> (u64, u64) {
        self.adopt(from);
        let (mut events, mut timing) = (0, 0);
        self.drain(usize::MAX, |d| {
            match d {
                Drained::Entry(q) => match q.as_timing() {
                    Some(crate::queued::TimingIn::Line(l)) if l.timeline => events += 1,
                    Some(_) => timing += 1,
                    None => events += q.events(),
                },
                Drained::Line(_, true) => events += 1,
                Drained::Line(_, false) => timing += 1,
            }
            0
        });
        (events, timing)
    }

    /// Whether every ring is empty.
    pub fn is_empty(&self) -> bool {
        self.rings.iter().all(|r| r.entries.is_empty())
    }

    /// How many rings are open.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.rings.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::SpanFields;
    use proofline_core::EventKind;
    use std::sync::Arc;

    fn entry(partition: u32) -> Queued {
        let f = SpanFields {
            job_id: Some(Arc::new(crate::fields::Name::new("porep-1"))),
            partition: Some(partition),
            ..SpanFields::default()
        };
        Queued::span_edge(&f, EventKind::SynthStart, 0, None, false, 1).expect("a job id")
    }

    /// A drained entry's partition (`None` for a line), pushed on `seen`; the events it
    /// stands for.
    fn partition(seen: &mut Vec<Option<u32>>, d: Drained<'_>) -> usize {
        match d {
            Drained::Entry(q) => {
                seen.push(q.event().partition);
                q.events() as usize
            }
            Drained::Line(..) => {
                seen.push(None);
                0
            }
        }
    }

    /// The events an entry stands for (none for a line).
    fn events(d: Drained<'_>) -> usize {
        match d {
            Drained::Entry(q) => q.events() as usize,
            Drained::Line(..) => 0,
        }
    }

    /// What a drain hands on, entries as `p<partition>` and lines as their text (after `TL `
    /// when it holds the TIMELINE marker).
    fn drained(rings: &mut Rings) -> Vec<String> {
        let mut seen = Vec::new();
        rings.drain(usize::MAX, |d| {
            seen.push(match d {
                Drained::Entry(q) => format!("p{}", q.event().partition.unwrap_or(0)),
                Drained::Line(t, timeline) => {
                    let t = String::from_utf8(t.to_vec()).expect("UTF-8");
                    if timeline { format!("TL {t}") } else { t }
                }
            });
            0
        });
        seen
    }

    /// Each thread gets its ring; a full ring refuses without waiting; a thread's ring
    /// outlives the thread until it is drained; the worker sees every thread's entries in
    /// each thread's order.
    #[test]
    fn rings_per_thread_in_order_and_dropped_when_drained() {
        let h = Arc::new(Handoff::new(3));
        let mut rings = Rings::default();
        let pushed: Vec<Vec<bool>> = (0..2)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    (0..4).map(|i| h.push_with(|| entry(t * 10 + i))).collect()
                })
                .join()
                .unwrap()
            })
            .collect();
        assert_eq!(pushed, vec![vec![true, true, true, false]; 2], "full at 3");
        rings.adopt(&h);
        assert_eq!(rings.len(), 2);
        let mut seen = Vec::new();
        assert_eq!(rings.drain(usize::MAX, |d| partition(&mut seen, d)), 6);
        seen.sort_by_key(|p| p.map(|p| p / 10));
        let want: Vec<_> = [0, 1, 2, 10, 11, 12].into_iter().map(Some).collect();
        assert_eq!(seen, want, "each thread's entries in its order");
        assert!(rings.is_empty());
        rings.adopt(&h);
        assert_eq!(
            rings.len(),
            0,
            "the threads are gone and their rings drained"
        );
    }

    /// What is left in the rings when the worker stops, from a thread whose ring it has
    /// adopted and from one it has not, is counted as the layer counts what it cannot hand
    /// over: a span's entry as its events, a logged TIMELINE line as one event, a parsed or
    /// logged `CUZK_TIMING:` line apart; and the rings are empty after. (Each kind comes in
    /// a number of its own, so that no two miscounts can make up for each other.)
    #[test]
    fn what_is_left_when_the_worker_stops_is_counted() {
        use crate::layer::LoggedLine;
        use crate::queued::TimingIn;
        let two_events = || {
            let f = SpanFields {
                job_id: Some(Arc::new(crate::fields::Name::new("porep-1"))),
                partition: Some(1),
                ..SpanFields::default()
            };
            // a SYNTH_END with the GPU_QUEUE that follows it
            Queued::span_edge(&f, EventKind::SynthEnd, 0, None, true, 1).expect("a job id")
        };
        assert_eq!(two_events().events(), 2);
        let h = Arc::new(Handoff::new(32));
        let mut rings = Rings::default();
        let push = |h: Arc<Handoff>| {
            std::thread::spawn(move || {
                assert!(h.push_with(two_events));
                for _ in 0..3 {
                    assert!(h.push_text(b"TIMELINE,1,SYNTH_START,porep-1,partition=1", true));
                }
                assert!(h.push_text(b"CUZK_TIMING: gpu_prove_ms=3", false));
                for _ in 0..4 {
                    assert!(h.push_with(|| Queued::timing(TimingIn::Parsed(
                        proofline_core::timing::TimingLine::Note
                    ))));
                }
                let line = |timeline| LoggedLine {
                    text: "a line too long for the ring".to_owned(),
                    timeline,
                };
                for _ in 0..5 {
                    assert!(h.push_with(|| Queued::timing(TimingIn::Line(line(true)))));
                }
                for _ in 0..7 {
                    assert!(h.push_with(|| Queued::timing(TimingIn::Line(line(false)))));
                }
            })
            .join()
            .unwrap();
        };
        push(h.clone());
        rings.adopt(&h);
        // the second thread's ring opens after the worker's last look
        push(h.clone());
        assert_eq!(
            rings.discard_left(&h),
            (2 * (2 + 3 + 5), 2 * (1 + 4 + 7)),
            "(events, timing lines)"
        );
        assert!(rings.is_empty());
        assert_eq!(rings.discard_left(&h), (0, 0));
    }

    /// A full ring refuses without building the entry: a dropped event costs no entry.
    #[test]
    fn a_full_ring_builds_nothing() {
        let h = Handoff::new(1);
        assert!(h.push_with(|| entry(0)));
        let built = std::cell::Cell::new(false);
        let pushed = h.push_with(|| {
            built.set(true);
            entry(1)
        });
        assert!(!pushed);
        assert!(!built.get(), "the entry was built for a full ring");
    }

    /// `drain` stops at `max` events and the next drain goes on where it stopped.
    #[test]
    fn a_drain_is_bounded_and_resumes() {
        let h = Handoff::new(8);
        for i in 0..5 {
            assert!(h.push_with(|| entry(i)));
        }
        let mut rings = Rings::default();
        rings.adopt(&h);
        let mut seen = Vec::new();
        assert_eq!(rings.drain(2, |d| partition(&mut seen, d)), 2);
        assert_eq!(rings.drain(10, |d| partition(&mut seen, d)), 3);
        assert_eq!(seen, (0..5).map(Some).collect::<Vec<_>>());
        assert_eq!(rings.len(), 1, "this thread is alive: its ring stays");
    }

    /// Two layers on one thread have a ring each.
    #[test]
    fn two_layers_on_one_thread_do_not_share_a_ring() {
        let (a, b) = (Handoff::new(4), Handoff::new(4));
        assert!(a.push_with(|| entry(1)));
        assert!(b.push_with(|| entry(2)));
        assert!(b.push_with(|| entry(3)));
        let (mut ra, mut rb) = (Rings::default(), Rings::default());
        ra.adopt(&a);
        rb.adopt(&b);
        assert_eq!(ra.drain(usize::MAX, events), 1);
        assert_eq!(rb.drain(usize::MAX, events), 2);
    }

    /// Waves of `per` short-lived threads, `waves` times, each calling `send(handoff, wave,
    /// thread)` and exiting; after each wave the rings are drained with `f` and the exited
    /// threads' rings, now empty, must be gone at the next look. What `f` counted.
    fn churn(
        waves: u32,
        per: u32,
        send: fn(&Handoff, u32, u32),
        mut f: impl FnMut(Drained<'_>) -> usize,
    ) -> usize {
        let h = Arc::new(Handoff::new(4));
        let mut rings = Rings::default();
        let mut counted = 0;
        for wave in 0..waves {
            let threads: Vec<_> = (0..per)
                .map(|i| {
                    let h = h.clone();
                    std::thread::spawn(move || send(&h, wave, i))
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            rings.adopt(&h);
            counted += rings.drain(usize::MAX, &mut f);
            rings.adopt(&h);
            assert_eq!(rings.len(), 0, "wave {wave}: rings of exited threads kept");
        }
        counted
    }

    /// Thread churn: thousands of short-lived threads, each sending an event, leave no ring
    /// behind once the worker has drained them (a probe of 200,000 such threads held 18 MB
    /// in all; keep it so).
    #[test]
    fn short_lived_threads_leave_no_ring_behind() {
        let seen = churn(
            40,
            50,
            |h, wave, i| assert!(h.push_with(|| entry(wave * 50 + i))),
            events,
        );
        assert_eq!(seen, 2000);
    }

    /// Logged lines reach the worker as their bytes, in their place among the thread's
    /// entries, a line that wraps around its ring's end joined again; a line's bytes go only
    /// with their entry, so a full ring of either kind loses that line alone.
    #[test]
    fn lines_go_in_order_and_whole_or_not_at_all() {
        // 4 entries; the text ring holds TEXT_MIN bytes
        let h = Handoff::new(4);
        let mut rings = Rings::default();
        let line = |i: usize, len: usize| {
            let mut s = format!("CUZK_TIMING: line={i} ");
            s.extend(std::iter::repeat_n('x', len - s.len()));
            s
        };
        assert!(h.push_with(|| entry(1)));
        let first = line(0, 1500);
        assert!(
            h.push_text(first.as_bytes(), false),
            "the text ring's entry and the line's fit"
        );
        rings.adopt(&h);
        assert_eq!(drained(&mut rings), vec!["p1".to_owned(), first]);
        // 1500 of 4096 bytes used: the next 3000-byte line wraps around the end
        let wraps = line(1, 3000);
        assert!(h.push_text(wraps.as_bytes(), false));
        assert!(h.push_with(|| entry(2)));
        assert_eq!(drained(&mut rings), vec![wraps, "p2".to_owned()]);
        // a full text ring refuses a line, and takes the next once drained
        let (a, b) = (line(2, 3000), line(3, 2000));
        assert!(h.push_text(a.as_bytes(), false));
        assert!(
            !h.push_text(b.as_bytes(), false),
            "1096 bytes left for 2000"
        );
        assert!(h.push_text(b"CUZK_TIMING: short", false));
        assert_eq!(
            drained(&mut rings),
            vec![a, "CUZK_TIMING: short".to_owned()]
        );
        // a full entry ring refuses a line without writing its bytes
        for p in 0..4 {
            assert!(h.push_with(|| entry(p)));
        }
        assert!(!h.push_text(b"CUZK_TIMING: lost", false));
        assert_eq!(drained(&mut rings).len(), 4);
        assert!(h.push_text(b"CUZK_TIMING: kept", false));
        assert!(h.push_text(b"TIMELINE,1,SYNTH_START,j", true));
        assert_eq!(
            drained(&mut rings),
            vec![
                "CUZK_TIMING: kept".to_owned(),
                "TL TIMELINE,1,SYNTH_START,j".to_owned()
            ]
        );
        // longer than the ring: refused (the layer boxes it instead)
        assert!(!h.push_text(&vec![b'x'; h.text_capacity() + 1], false));
        assert!(rings.is_empty());
    }

    /// A text ring is made only for a line that can go with it: a thread's first line, on a
    /// full ring or one with one slot left, is refused, and the next one, with room, goes.
    #[test]
    fn a_text_ring_comes_with_its_first_line() {
        let h = Handoff::new(2);
        let mut rings = Rings::default();
        assert!(h.push_with(|| entry(1)));
        assert!(h.push_with(|| entry(2)));
        assert!(!h.push_text(b"CUZK_TIMING: a", false), "a full ring");
        rings.adopt(&h);
        assert_eq!(drained(&mut rings), vec!["p1".to_owned(), "p2".to_owned()]);
        assert!(h.push_with(|| entry(3)));
        assert!(
            !h.push_text(b"CUZK_TIMING: b", false),
            "one slot for two entries"
        );
        assert_eq!(drained(&mut rings), vec!["p3".to_owned()]);
        assert!(h.push_text(b"CUZK_TIMING: c", false));
        assert!(
            !h.push_with(|| entry(4)),
            "the ring's entry and the line's fill it"
        );
        assert_eq!(drained(&mut rings), vec!["CUZK_TIMING: c".to_owned()]);
        // the text ring made: a line takes one slot
        assert!(h.push_with(|| entry(5)));
        assert!(h.push_text(b"CUZK_TIMING: d", false));
        assert_eq!(
            drained(&mut rings),
            vec!["p5".to_owned(), "CUZK_TIMING: d".to_owned()]
        );
    }

    /// A drain stops where its callback has counted `max` events, lines among the entries
    /// counted as it says, and the next goes on from there; two layers' lines on one thread
    /// go each to its own worker.
    #[test]
    fn lines_among_entries_drain_in_bounded_steps_per_layer() {
        let (a, b) = (Handoff::new(8), Handoff::new(8));
        assert!(a.push_with(|| entry(1)));
        assert!(a.push_text(b"TIMELINE,1,SYNTH_START,j", true));
        assert!(b.push_text(b"CUZK_TIMING: b", false));
        assert!(a.push_with(|| entry(2)));
        assert!(a.push_text(b"CUZK_TIMING: a", false));
        let (mut ra, mut rb) = (Rings::default(), Rings::default());
        ra.adopt(&a);
        rb.adopt(&b);
        let mut seen = Vec::new();
        let mut take = |d: Drained<'_>| match d {
            Drained::Entry(q) => {
                seen.push(format!("p{}", q.event().partition.unwrap_or(0)));
                1
            }
            Drained::Line(t, timeline) => {
                seen.push(String::from_utf8_lossy(t).into_owned());
                usize::from(timeline)
            }
        };
        assert_eq!(ra.drain(2, &mut take), 2, "an entry and a TIMELINE line");
        assert_eq!(
            ra.drain(2, &mut take),
            1,
            "an entry; a timing line counts none"
        );
        assert_eq!(
            seen,
            ["p1", "TIMELINE,1,SYNTH_START,j", "p2", "CUZK_TIMING: a"]
        );
        assert_eq!(drained(&mut rb), vec!["CUZK_TIMING: b".to_owned()]);
    }

    /// Short-lived threads that each log a line leave no ring of either kind behind.
    #[test]
    fn short_lived_threads_logging_lines_leave_no_ring_behind() {
        let lines = churn(
            10,
            20,
            |h, wave, i| {
                assert!(h.push_text(format!("CUZK_TIMING: t={wave}.{i}").as_bytes(), false));
            },
            |d| {
                usize::from(
                    matches!(d, Drained::Line(t, false) if t.starts_with(b"CUZK_TIMING: t=")),
                )
            },
        );
        assert_eq!(lines, 200);
    }
}
