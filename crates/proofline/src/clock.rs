//! The layer's clock.
//!
//! A mapped span reads the clock twice on the prover's thread. `quanta` reads the CPU's
//! time-stamp counter where it is invariant (and, by its documentation, falls back to the
//! OS's monotonic clock where it is not), calibrated against the monotonic clock: in an A/B
//! against `std::time::Instant` a mapped span was cheaper in each interleaved pair
//! (figures in BENCHMARKS.md). The worker
//! reads the same clock, so that its idea of "now" and the events' offsets never drift
//! apart.

/// A raw reading: only meaningful to the [`Clock`] that took it.
pub(crate) type Raw = u64;

/// Milliseconds since the layer was built.
#[derive(Debug, Clone)]
pub(crate) struct Clock {
    clock: quanta::Clock,
    epoch: Raw,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Self {
        let clock = quanta::Clock::new();
        let epoch = clock.raw();
        Clock { clock, epoch }
    }

    #[inline]
    pub fn now(&self) -> Raw {
        self.clock.raw()
    }

    /// Milliseconds from the epoch to `at`.
    #[inline]
    pub fn offset_ms(&self, at: Raw) -> u64 {
        self.ms_between(self.epoch, at)
    }

    /// Whole milliseconds from `from` to `to` (0 if `to` is earlier).
    #[inline]
    pub fn ms_between(&self, from: Raw, to: Raw) -> u64 {
        self.clock.delta_as_nanos(from, to) / 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    }
}
