//! Requests told apart: two requests of one job id in flight at once.
//!
//! A client may send a job id again while the first request of it still runs (Curio does,
//! after its proof timeout, without cancelling the first), and the prover then works both.
//! Their TIMELINE lines carry the same id; where the prover opens a span for each request
//! (a span of its own, not mapped, carrying the job id and no partition, such as a
//! `prove{job_id}` around the request's work), the layer numbers the requests of an id in
//! flight and the spans inside each carry its number. The first request of an id is number
//! 1 and is not written (`request=` appears only on the lines of a second request while the
//! first runs, so a prover that never overlaps requests writes cuzk's lines exactly); the
//! next ones count up until no request of the id is in flight.
//!
//! The table is touched once when a request span opens and once when it closes (a request,
//! not a partition: once a proof), under a lock of its own that no exporter takes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use rustc_hash::FxHashMap as HashMap;

/// The requests of one job id in flight: their numbers, and the next one's (never one given
/// while any of the id's requests is in flight: a retry after the second failed while the
/// first runs is the third, not the second again).
#[derive(Debug, Default)]
struct InFlight {
    numbers: Vec<u32>,
    next: u32,
}

/// Request numbers in flight, by job id.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    open: Mutex<HashMap<Box<str>, InFlight>>,
    /// Request spans open, of any id: while there are none (a prover without request
    /// spans, cuzk's engine among them) a span looks for no request around it.
    count: AtomicUsize,
}

impl Requests {
    /// A request span of `job` opened: its number (1 when none of the id is in flight, else
    /// one more than the last given).
    pub fn open(&self, job: &str) -> u32 {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let id = open.entry(job.into()).or_default();
        let n = id.next.max(1);
        id.next = n.saturating_add(1);
        id.numbers.push(n);
        self.count.fetch_add(1, Ordering::Relaxed);
        n
    }

    /// Whether any request span is open (a hint: a span made as the first request opens on
    /// another thread may miss it, and so may the requests it could not belong to anyway).
    #[inline]
    pub fn any_open(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Request `n` of `job` closed.
    pub fn close(&self, job: &str, n: u32) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(id) = open.get_mut(job) {
            if let Some(at) = id.numbers.iter().position(|&m| m == n) {
                id.numbers.swap_remove(at);
                self.count.fetch_sub(1, Ordering::Relaxed);
            }
            if id.numbers.is_empty() {
                open.remove(job);
            }
        }
    }

    /// Job ids with a request span open.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_count_up_while_requests_overlap_and_start_again_after() {
        let r = Requests::default();
        assert_eq!(r.open("a"), 1);
        assert_eq!(r.open("b"), 1, "another id has its own numbers");
        assert_eq!(r.open("a"), 2);
        r.close("a", 1);
        // the first is gone, the second runs: the next is not 1 again (that would be
        // the number the first one's lines had)
        assert_eq!(r.open("a"), 3);
        // the newest closes first, the oldest still runs: the next is 4, not 3 again
        r.close("a", 3);
        assert_eq!(r.open("a"), 4);
        r.close("a", 2);
        r.close("a", 4);
        r.close("b", 1);
        assert_eq!(r.len(), 0, "nothing kept once no request is in flight");
        assert_eq!(r.open("a"), 1);
    }
}
