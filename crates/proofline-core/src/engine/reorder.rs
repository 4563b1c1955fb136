//! The reorder buffer: events wait here until the newest offset is a reorder window past
//! them, then leave in time order.
//!
//! Lines from many threads arrive nearly sorted: an event at or near the newest buffered
//! goes in its place at the back of a sorted queue, O(1) (a binary heap for every event was
//! a visible share of analyze time); one that lands further back goes to a min-heap beside it,
//! O(log n) whatever the disorder (inserting it in place was O(n): a reversed log was
//! quadratic). The oldest of the two fronts leaves first. How long an event waits: until an
//! event at least `reorder_window_ms` newer arrives, or until a live caller's clock passes
//! it by that much ([`super::Engine::advance`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::num::NonZeroU32;

use crate::event::Nums;

/// An event whose strings were interned, waiting in the reorder buffer: 64 bytes (88 with
/// its fields as `Option`s: it is moved in, out, and handed on by value).
#[derive(Debug, Clone, Copy)]
pub(super) struct Ev {
    /// Timeline time: the run's base plus the line's offset.
    pub t: u64,
    /// Arrival number: ties in `t` keep arrival order.
    pub seq: u64,
    /// The kind and the numbers.
    pub nums: Nums,
    /// Interned job id (one reference held while the event is buffered).
    pub name: u32,
    /// Interned `kind=` (when `nums` has one).
    proof_kind: u16,
}

impl Ev {
    /// An event not yet placed on the timeline (`t` is 0).
    #[inline(always)]
    pub fn new(seq: u64, nums: Nums, name: u32, proof_kind: Option<u16>) -> Ev {
        debug_assert_eq!(proof_kind.is_some(), nums.has_proof_kind());
        Ev {
            t: 0,
            seq,
            nums,
            name,
            proof_kind: proof_kind.unwrap_or(0),
        }
    }

    /// Interned `kind=`.
    #[inline(always)]
    pub fn proof_kind(&self) -> Option<u16> {
        self.nums.has_proof_kind().then_some(self.proof_kind)
    }

    /// `request=`, when not 0.
    #[inline(always)]
    pub fn request(&self) -> Option<NonZeroU32> {
        self.nums.request().and_then(NonZeroU32::new)
    }

    /// What a duplicate must repeat besides its time.
    pub fn signature(&self) -> u64 {
        let w = u64::from(self.nums.worker().unwrap_or(u32::MAX));
        let n = self
            .nums
            .synth_ms()
            .or(self.nums.gpu_ms())
            .unwrap_or(u64::MAX);
        w.rotate_left(40) ^ n
    }

    fn key(&self) -> (u64, u64) {
        (self.t, self.seq)
    }
}

/// How far from the back of the sorted queue an event is still put in place (a short scan
/// and a short move); further back it goes to the heap.
const NEAR: usize = 32;

/// An event ordered by its key, for the heap.
#[derive(Debug, Clone, Copy)]
struct ByKey(Ev);

impl PartialEq for ByKey {
    fn eq(&self, o: &Self) -> bool {
        self.0.key() == o.0.key()
    }
}

impl Eq for ByKey {}

impl PartialOrd for ByKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for ByKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.key().cmp(&o.0.key())
    }
}

/// A queue kept as a vector read from `head`: an event leaves by moving `head` on, and
/// the vector is emptied when the last leaves, or moved down when it is full and at least
/// half read (so its capacity stays under about four times the most events queued at
/// once, whatever the log's length). (A `VecDeque`'s look at either end computes a
/// wrapped place each time: its pushes, pops and looks were 43 instructions an event by
/// cachegrind, a twentieth of the engine thread's.)
#[derive(Debug, Default)]
struct Queue {
    /// The events from `head` on are queued; those before it have left.
    v: Vec<Ev>,
    head: usize,
}

impl Queue {
    #[inline(always)]
    fn front(&self) -> Option<&Ev> {
        self.v.get(self.head)
    }

    /// (`v` is empty whenever the queue is: its last is the queue's)
    #[inline(always)]
    fn back(&self) -> Option<&Ev> {
        self.v.last()
    }

    #[inline(always)]
    fn push_back(&mut self, e: Ev) {
        self.make_room();
        self.v.push(e);
    }

    /// Before an event goes in: a full vector at least half read is moved down rather than
    /// grown.
    #[inline(always)]
    fn make_room(&mut self) {
        if self.v.len() == self.v.capacity() && self.head >= self.v.len() / 2 {
            self.compact();
        }
    }

    /// Moves the queued events to the vector's start.
    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        self.v.drain(..self.head);
        self.head = 0;
    }

    #[inline(always)]
    fn pop_front(&mut self) -> Option<Ev> {
        let e = *self.v.get(self.head)?;
        self.head += 1;
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        }
        Some(e)
    }
}

/// Events sorted by (time, arrival).
#[derive(Debug, Default)]
pub(super) struct Reorder {
    /// The events that arrived in order, sorted by [`Ev::key`].
    pending: Queue,
    /// The events that arrived behind the newest buffered, oldest on top.
    behind: BinaryHeap<Reverse<ByKey>>,
    /// The last arrival number given.
    seq: u64,
}

impl Reorder {
    /// The next arrival number.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Buffers an event in its place: in the sorted queue when its place is among the last
    /// [`NEAR`] (a few threads' lines interleaved), else in the heap.
    #[inline(always)]
    pub fn insert(&mut self, e: Ev) {
        // most events come in order: at the back, with no search and no shift
        if self.pending.back().is_none_or(|b| b.key() <= e.key()) {
            self.pending.push_back(e);
        } else {
            self.insert_behind(e);
        }
    }

    /// [`Reorder::insert`] of an event older than the newest buffered.
    #[inline(never)]
    fn insert_behind(&mut self, e: Ev) {
        self.pending.make_room();
        let (q, head) = (&mut self.pending.v, self.pending.head);
        let len = q.len();
        let mut at = len;
        while at > head && len - at < NEAR && q[at - 1].key() > e.key() {
            at -= 1;
        }
        if at == head || q[at - 1].key() <= e.key() {
            q.insert(at, e);
        } else {
            self.behind.push(Reverse(ByKey(e)));
        }
    }

    /// The oldest event's time, and whether it is the heap's (else the queue's): one look
    /// at each front (the heap is empty while events come in order).
    #[inline]
    fn oldest(&self) -> Option<(u64, bool)> {
        match (self.pending.front(), self.behind.peek()) {
            (None, None) => None,
            (Some(a), None) => Some((a.t, false)),
            (None, Some(Reverse(ByKey(b)))) => Some((b.t, true)),
            (Some(a), Some(Reverse(ByKey(b)))) if b.key() < a.key() => Some((b.t, true)),
            (Some(a), Some(_)) => Some((a.t, false)),
        }
    }

    /// Takes the front of the heap (`behind`) or of the queue.
    #[inline]
    fn take(&mut self, behind: bool) -> Option<Ev> {
        if behind {
            self.behind.pop().map(|Reverse(ByKey(e))| e)
        } else {
            self.pending.pop_front()
        }
    }

    /// The oldest event, if it is at or before `horizon`.
    #[inline]
    pub fn pop_until(&mut self, horizon: u64) -> Option<Ev> {
        let (t, behind) = self.oldest()?;
        if t <= horizon {
            self.take(behind)
        } else {
            None
        }
    }

    /// The oldest event, whatever its time.
    #[inline]
    pub fn pop(&mut self) -> Option<Ev> {
        let (_, behind) = self.oldest()?;
        self.take(behind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    fn ev(t: u64, seq: u64) -> Ev {
        let nums = Nums::of(&crate::event::EventRef::new(0, EventKind::SynthStart, "j"));
        let mut e = Ev::new(seq, nums, 0, None);
        e.t = t;
        e
    }

    /// `request=0` is no request (a writer that cannot tell) once in the buffer's compact
    /// form: after a line of request 2, a line of the same id with `request=0` goes to that
    /// job as a line naming none does, where one of request 1 is of a request that ended
    /// (a conflict).
    #[test]
    fn request_0_is_no_request() {
        for (second, conflicts) in [(",request=0", 0), ("", 0), (",request=1", 1)] {
            let mut e = crate::Engine::default();
            for l in [
                "TIMELINE,1,SYNTH_START,j,partition=0,request=2".to_owned(),
                format!("TIMELINE,2,SYNTH_START,j,partition=1{second}"),
            ] {
                let ev = crate::parse_line(&l).unwrap().unwrap();
                e.ingest(&ev, &mut crate::sink::NoUpdates);
            }
            e.finish(&mut crate::sink::NoUpdates);
            assert_eq!(e.report().events.conflicts, conflicts, "{second:?}");
        }
    }

    #[test]
    fn an_event_in_the_buffer_stays_64_bytes() {
        assert!(
            std::mem::size_of::<Ev>() <= 64,
            "{}",
            std::mem::size_of::<Ev>()
        );
    }

    /// A long run of events, each leaving a few arrivals after it came, holds the queue's
    /// vector to a few times the events queued, not the run's length: in order (the vector
    /// fills on a push at its back), each pair swapped (the second put in place before the
    /// first), and each behind one far ahead that stays (the vector fills on an event put
    /// in place, never on a push).
    #[test]
    fn the_queue_holds_what_is_queued_not_what_went_through() {
        let far = 1 << 40;
        for pattern in ["in order", "pairs swapped", "behind a far one"] {
            let mut r = Reorder::default();
            if pattern == "behind a far one" {
                let seq = r.next_seq();
                r.insert(ev(far, seq));
            }
            let mut out = 0u64;
            for i in 0..100_000u64 {
                let t = if pattern == "pairs swapped" { i ^ 1 } else { i };
                let seq = r.next_seq();
                r.insert(ev(t, seq));
                while let Some(e) = r.pop_until(i.saturating_sub(8)) {
                    assert_eq!(e.t, out, "{pattern}: left out of order");
                    out += 1;
                }
            }
            assert!(
                r.behind.is_empty(),
                "{pattern}: put in place, not in the heap"
            );
            assert!(
                r.pending.v.capacity() <= 64,
                "{pattern}: {} for ~10 queued",
                r.pending.v.capacity()
            );
            while r.pop().is_some() {
                out += 1;
            }
            assert_eq!(
                out,
                100_000 + u64::from(pattern == "behind a far one"),
                "{pattern}"
            );
        }
    }

    /// Whatever the order events come in (sorted, reversed, shuffled, ties), they leave by
    /// (time, arrival), and only up to the horizon asked for.
    #[test]
    fn events_leave_in_time_order_whatever_order_they_came_in() {
        let mut next = super::super::xorshift(0x2545_f491_4f6c_dd1d);
        let sorted: Vec<u64> = (0..500).map(|i| i / 3).collect();
        let reversed: Vec<u64> = sorted.iter().rev().copied().collect();
        let mut shuffled = sorted.clone();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        for times in [sorted, reversed, shuffled] {
            let mut r = Reorder::default();
            for &t in &times {
                let seq = r.next_seq();
                r.insert(ev(t, seq));
            }
            let mut out = Vec::new();
            while let Some(e) = r.pop_until(100) {
                out.push(e.key());
            }
            // exactly the events at or before the horizon
            assert_eq!(out.len(), times.iter().filter(|&&t| t <= 100).count());
            assert!(out.iter().all(|&(t, _)| t <= 100));
            while let Some(e) = r.pop() {
                out.push(e.key());
            }
            assert_eq!(out.len(), times.len());
            assert!(
                out.windows(2).all(|w| w[0] < w[1]),
                "not in (time, arrival) order"
            );
        }
    }
}
