//! The layer's clock.
//!
//! A mapped span reads the clock twice on the prover's thread. `quanta` reads the CPU's
//! time-stamp counter where it is invariant (and, by its documentation, falls back to the
//! OS's monotonic clock where it is not), calibrated against the monotonic clock: in an A/B
//! against `std::time::Instant` a mapped span was cheaper in each interleaved pair
//! (figures in BENCHMARKS.md). The worker
//! reads the same clock, so that its idea of "now" and the events' offsets never drift
//! apart.
//!
//! The calibration is taken once, and its error is a rate: ~220 ppm was measured on one
//! machine, 0.8 s an hour, 19 s a day. Durations (a span's close minus its first enter)
//! keep it (a 30 s synthesis, 7 ms); offsets, which place events on the wall clock (epoch +
//! offset), do not: the worker re-anchors the clock to the OS's monotonic clock about once
//! a second ([`Clock::reanchor`]), and an offset is the time-stamp counter's time since the
//! last anchor plus the monotonic clock's time at it. The prover's threads read the
//! correction with one relaxed load.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A raw reading: only meaningful to the [`Clock`] that took it.
pub(crate) type Raw = u64;

/// Nanoseconds since the epoch by the reference clock (the OS's monotonic clock).
type Reference = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Milliseconds since the layer was built.
#[derive(Clone)]
pub(crate) struct Clock {
    clock: quanta::Clock,
    epoch: Raw,
    /// The reference clock's time minus the counter's, at the last anchor, in ns.
    correction: Arc<AtomicI64>,
    reference: Reference,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock")
            .field("epoch", &self.epoch)
            .field("correction_ns", &self.correction.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Self {
        // (quanta calibrates in `new`, up to 200 ms the first time: the reference starts
        // after it, with the counter's epoch)
        let clock = quanta::Clock::new();
        let started = std::time::Instant::now();
        Self::with(
            clock,
            Arc::new(move || u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)),
        )
    }

    /// A clock reading `clock`, re-anchored to `reference` (ns since now).
    fn with(clock: quanta::Clock, reference: Reference) -> Self {
        let epoch = clock.raw();
        Clock {
            clock,
            epoch,
            correction: Arc::new(AtomicI64::new(0)),
            reference,
        }
    }

    #[inline]
    pub fn now(&self) -> Raw {
        self.clock.raw()
    }

    /// Milliseconds from the epoch to `at`, on the reference clock's rate (as of the last
    /// anchor).
    #[inline]
    pub fn offset_ms(&self, at: Raw) -> u64 {
        let counted = self.clock.delta_as_nanos(self.epoch, at);
        let ns = i64::try_from(counted)
            .unwrap_or(i64::MAX)
            .saturating_add(self.correction.load(Ordering::Relaxed));
        u64::try_from(ns).unwrap_or(0) / 1_000_000
    }

    /// Whole milliseconds from `from` to `to` (0 if `to` is earlier), on the counter: a
    /// duration.
    #[inline]
    pub fn ms_between(&self, from: Raw, to: Raw) -> u64 {
        self.clock.delta_as_nanos(from, to) / 1_000_000
    }

    /// Takes the reference clock's time now as the offsets' anchor: the counter's drift
    /// since the last anchor is gone from the offsets from now on. (An offset may step back
    /// by the drift of one interval, a fraction of a millisecond: the engine's reorder
    /// window absorbs it.)
    pub fn reanchor(&self) {
        let counted = self.clock.delta_as_nanos(self.epoch, self.clock.raw());
        let reference = (self.reference)();
        let correction = i128::from(reference) - i128::from(counted);
        let correction = i64::try_from(correction).unwrap_or(0);
        self.correction.store(correction, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::time::{Duration, Instant};

    #[test]
    fn milliseconds_agree_with_the_os_clock() {
        let c = Clock::start();
        let t0 = Instant::now();
        let a = c.now();
        std::thread::sleep(Duration::from_millis(120));
        let b = c.now();
        let os = t0.elapsed().as_millis() as u64;
        let ms = c.ms_between(a, b);
        assert!(
            ms >= 119 && ms <= os + 2,
            "{ms} ms by the clock, {os} ms by the OS"
        );
        assert!(c.offset_ms(b) >= ms);
        assert_eq!(c.ms_between(b, a), 0);
        c.reanchor();
        let os = t0.elapsed().as_millis() as u64;
        assert!(c.offset_ms(c.now()).abs_diff(os) <= 2);
    }

    /// An hour of a counter that runs 220 ppm fast (the calibration error measured on one
    /// machine), simulated: without anchors the offsets end 792 ms ahead of the reference
    /// clock; re-anchored each second, within a millisecond of it all along.
    #[test]
    fn an_hour_of_drift_is_taken_out_of_the_offsets() {
        let (counter, mock) = quanta::Clock::mock();
        let reference_ns = Arc::new(AtomicU64::new(0));
        let r = reference_ns.clone();
        let clock = Clock::with(counter, Arc::new(move || r.load(Ordering::Relaxed)));
        let fast = Duration::from_nanos(1_000_220_000);
        let mut worst = 0u64;
        for s in 1..=3600u64 {
            mock.increment(fast);
            reference_ns.store(s * 1_000_000_000, Ordering::Relaxed);
            let truth_ms = s * 1_000;
            // the offset of an event just before the anchor: one second of drift at most
            worst = worst.max(clock.offset_ms(clock.now()).abs_diff(truth_ms));
            clock.reanchor();
            worst = worst.max(clock.offset_ms(clock.now()).abs_diff(truth_ms));
        }
        assert!(worst <= 1, "{worst} ms off the reference clock");
        // the same counter never re-anchored (a clone shares the anchor: a fresh one here)
        let (counter, mock) = quanta::Clock::mock();
        let unanchored = Clock::with(counter, Arc::new(|| 0));
        mock.increment(fast * 3600);
        let off = unanchored.offset_ms(unanchored.now()) - 3_600_000;
        assert!((790..=794).contains(&off), "{off} ms of drift in an hour");
    }
}
