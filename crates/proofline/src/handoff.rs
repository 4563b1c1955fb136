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
//! worker adopts it at its next poll. When the thread exits, its end of the ring goes with it;
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
    static RINGS: RefCell<Vec<(u64, Producer<Queued>)>> = const { RefCell::new(Vec::new()) };
}

/// The prover's side: pushes onto the calling thread's ring.
#[derive(Debug)]
pub(crate) struct Handoff {
    id: u64,
    capacity: usize,
    /// Rings opened since the worker last looked.
    opened: Mutex<Vec<Consumer<Queued>>>,
    any_opened: AtomicBool,
}

impl Handoff {
    /// A hand-over whose rings hold `capacity` entries each.
    pub fn new(capacity: usize) -> Self {
        Handoff {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            capacity: capacity.max(1),
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
        RINGS
            .try_with(|rings| {
                let Ok(mut rings) = rings.try_borrow_mut() else {
                    return false;
                };
                let ring = match rings.iter_mut().position(|(id, _)| *id == self.id) {
                    Some(i) => &mut rings[i].1,
                    None => self.open(&mut rings),
                };
                match ring.write_chunk_uninit(1) {
                    Ok(slot) => slot.fill_from_iter(std::iter::once_with(build)) == 1,
                    Err(_) => false,
                }
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
    fn open<'a>(&self, rings: &'a mut Vec<(u64, Producer<Queued>)>) -> &'a mut Producer<Queued> {
        rings.retain(|(_, ring)| !ring.is_abandoned());
        let (producer, consumer) = RingBuffer::new(self.capacity);
        self.opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(consumer);
        self.any_opened.store(true, Ordering::Release);
        rings.push((self.id, producer));
        let last = rings.len() - 1;
        &mut rings[last].1
    }
}

/// The worker's side: every thread's ring.
#[derive(Debug, Default)]
pub(crate) struct Rings {
    rings: Vec<Consumer<Queued>>,
    /// Where the next drain starts, so that no thread's ring always goes last.
    next: usize,
}

impl Rings {
    /// Takes in the rings opened since the last call, and drops those whose thread is gone
    /// once they are empty.
    pub fn adopt(&mut self, from: &Handoff) {
        self.rings
            .retain(|ring| !(ring.is_abandoned() && ring.is_empty()));
        if from.any_opened.swap(false, Ordering::Acquire) {
            let mut opened = from
                .opened
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.rings.append(&mut opened);
        }
    }

    /// Pops entries, ring after ring, until they stand for `max` events or every ring is
    /// empty; returns the events handled.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(Queued)) -> usize {
        let mut n = 0;
        let rings = self.rings.len();
        for i in 0..rings {
            let ring = &mut self.rings[(self.next + i) % rings];
            while n < max {
                let Ok(q) = ring.pop() else { break };
                n += q.events() as usize;
                f(q);
            }
            if n >= max {
                self.next = (self.next + i) % rings;
                return n;
            }
        }
        n
    }

    /// Whether every ring is empty.
    pub fn is_empty(&self) -> bool {
        self.rings.iter().all(Consumer::is_empty)
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
        Queued::span_edge(&f, EventKind::SynthStart, 0, None, false).expect("a job id")
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
        assert_eq!(
            rings.drain(usize::MAX, |q| seen.push(q.event().partition)),
            6
        );
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
        assert_eq!(rings.drain(2, |q| seen.push(q.event().partition)), 2);
        assert_eq!(rings.drain(10, |q| seen.push(q.event().partition)), 3);
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
        assert_eq!(ra.drain(usize::MAX, |_| {}), 1);
        assert_eq!(rb.drain(usize::MAX, |_| {}), 2);
    }

    /// Thread churn: thousands of short-lived threads, each sending an event, leave no ring
    /// behind once the worker has drained them (a probe of 200,000 such threads held 18 MB
    /// in all; keep it so).
    #[test]
    fn short_lived_threads_leave_no_ring_behind() {
        let h = Arc::new(Handoff::new(4));
        let mut rings = Rings::default();
        let mut seen = 0;
        for batch in 0..40 {
            let threads: Vec<_> = (0..50)
                .map(|i| {
                    let h = h.clone();
                    std::thread::spawn(move || assert!(h.push_with(|| entry(batch * 50 + i))))
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            rings.adopt(&h);
            seen += rings.drain(usize::MAX, |_| {});
            // the rings of the threads gone, now empty, are dropped at the next look
            rings.adopt(&h);
            assert_eq!(
                rings.len(),
                0,
                "batch {batch}: rings of exited threads kept"
            );
        }
        assert_eq!(seen, 2000);
    }
}
