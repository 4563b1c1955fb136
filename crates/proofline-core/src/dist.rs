//! Distributions of millisecond durations in fixed memory.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant figures kept by the histograms: quantiles are exact to 1 %.
const SIGFIG: u8 = 2;

/// A distribution of signed millisecond values (gaps and leads can be negative).
///
/// Count, sum, min and max are exact; quantiles come from HDR histograms (1 % precision), so
/// memory stays fixed however many values are recorded.
#[derive(Debug, Clone)]
pub struct Dist {
    pos: Histogram<u64>,
    neg: Histogram<u64>,
    count: u64,
    sum: i128,
    min: i64,
    max: i64,
}

impl Default for Dist {
    fn default() -> Self {
        Self::new()
    }
}

impl Dist {
    /// An empty distribution.
    pub fn new() -> Self {
        Dist {
            pos: Histogram::new(SIGFIG).expect("valid sigfig"),
            neg: Histogram::new(SIGFIG).expect("valid sigfig"),
            count: 0,
            sum: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }

    /// Records one value.
    pub fn record(&mut self, v: i64) {
        // Auto-resizing histograms only fail on values beyond u64 range, which i64 cannot reach.
        if v >= 0 {
            let _ = self.pos.record(v as u64);
        } else {
            let _ = self.neg.record(v.unsigned_abs());
        }
        self.count += 1;
        self.sum += i128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of the values recorded.
    pub fn sum(&self) -> i128 {
        self.sum
    }

    /// The value at quantile `q` (0..=1), `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        if q >= 1.0 {
            return Some(self.max);
        }
        if q <= 0.0 {
            return Some(self.min);
        }
        let nneg = self.neg.len();
        // rank among all values, 1-based
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let v = if rank <= nneg {
            // the rank-th smallest value is negative: count from the most negative
            let qn = 1.0 - (rank - 1) as f64 / nneg as f64;
            -(self.neg.value_at_quantile(qn) as i64)
        } else {
            let npos = self.pos.len();
            let qp = (rank - nneg) as f64 / npos as f64;
            self.pos.value_at_quantile(qp) as i64
        };
        Some(v.clamp(self.min, self.max))
    }

    /// A serialisable summary.
    pub fn summary(&self) -> DistSummary {
        DistSummary {
            count: self.count,
            min_ms: (self.count > 0).then_some(self.min),
            mean_ms: (self.count > 0)
                .then(|| (self.sum as f64 / self.count as f64 * 10.0).round() / 10.0),
            p50_ms: self.quantile(0.50),
            p90_ms: self.quantile(0.90),
            p99_ms: self.quantile(0.99),
            max_ms: (self.count > 0).then_some(self.max),
            // (saturated: the sum is an i128, and `as` wrapped a total past i64 to a
            // small number, as one CUZK_TIMING value of u64::MAX did)
            total_ms: i64::try_from(self.sum).unwrap_or(if self.sum < 0 {
                i64::MIN
            } else {
                i64::MAX
            }),
        }
    }
}

/// count, min, mean, p50, p90, p99, max and total of a [`Dist`], in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DistSummary {
    /// Number of values.
    pub count: u64,
    /// Smallest value.
    pub min_ms: Option<i64>,
    /// Mean, to 0.1 ms.
    pub mean_ms: Option<f64>,
    /// Median (1 % precision).
    pub p50_ms: Option<i64>,
    /// 90th percentile (1 % precision).
    pub p90_ms: Option<i64>,
    /// 99th percentile (1 % precision).
    pub p99_ms: Option<i64>,
    /// Largest value.
    pub max_ms: Option<i64>,
    /// Sum of the values.
    pub total_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_known_values() {
        let mut d = Dist::new();
        for v in 1..=100 {
            d.record(v);
        }
        assert_eq!(d.quantile(0.5), Some(50));
        assert_eq!(d.quantile(0.9), Some(90));
        assert_eq!(d.quantile(0.99), Some(99));
        assert_eq!(d.quantile(1.0), Some(100));
        let s = d.summary();
        assert_eq!(
            (s.count, s.min_ms, s.max_ms, s.total_ms),
            (100, Some(1), Some(100), 5050)
        );
        assert_eq!(s.mean_ms, Some(50.5));
    }

    /// A total past i64 is saturated, not wrapped (two values at i64::MAX gave -2).
    #[test]
    fn a_total_past_i64_saturates() {
        let mut d = Dist::new();
        d.record(i64::MAX);
        d.record(i64::MAX);
        assert_eq!(d.summary().total_ms, i64::MAX);
        let mut d = Dist::new();
        d.record(i64::MIN);
        d.record(-5);
        assert_eq!(d.summary().total_ms, i64::MIN);
    }

    #[test]
    fn signed_values_sort_across_zero() {
        let mut d = Dist::new();
        for v in [-3000, -20, 0, 5, 4000] {
            d.record(v);
        }
        assert_eq!(d.quantile(0.2), Some(-3000));
        assert_eq!(d.quantile(0.4), Some(-20));
        assert_eq!(d.quantile(0.6), Some(0));
        assert_eq!(d.quantile(0.8), Some(5));
        assert_eq!(d.quantile(0.99), Some(4000));
        assert_eq!(d.summary().min_ms, Some(-3000));
    }

    #[test]
    fn empty_has_no_quantiles() {
        let d = Dist::new();
        assert_eq!(d.quantile(0.5), None);
        assert_eq!(d.summary(), DistSummary::default());
    }
}
