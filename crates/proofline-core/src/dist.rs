//! Distributions of millisecond durations in fixed memory.

use serde::{Deserialize, Serialize};

/// Counts of non-negative values in the buckets of an HDR histogram of 2 significant figures
/// (the layout of the `hdrhistogram` crate's `Histogram::new(2)`, which this replaced): the
/// values below 256 each in a bucket of their own, then each power of two from 256 up split
/// into 128 buckets of equal width (each under 0.8 % of its values). A recorded value costs
/// a shift and an add: the crate's auto-resizing `record` cost ~107 instructions a value,
/// and analyze records six for every partition (a tenth of its engine thread's work on a log
/// of TIMELINE lines). The tests check the quantiles against the crate's.
#[derive(Debug, Clone, Default)]
struct Buckets {
    /// Counts by bucket index, grown to the highest bucket recorded (2 048 for values up to
    /// an hour in milliseconds; 7 424 for any u64).
    counts: Vec<u64>,
    /// Values recorded.
    total: u64,
}

impl Buckets {
    /// The bucket of `v`: `v` itself below 256; above, the power of two's 128 buckets
    /// (`e` bits dropped) after those below it.
    #[inline(always)]
    fn index(v: u64) -> usize {
        let e = (56 - (v | 255).leading_zeros()) as usize;
        (e << 7) + (v >> e) as usize
    }

    /// The highest value of bucket `i`'s range (what a quantile in it reads as).
    fn highest(i: usize) -> u64 {
        if i < 256 {
            return i as u64;
        }
        let e = (i >> 7) - 1;
        let sub = (i - (e << 7)) as u64;
        // the last bucket's range ends at u64::MAX, where the crate saturated one lower
        (sub << e).saturating_add((1u64 << e) - 1).min(u64::MAX - 1)
    }

    #[inline(always)]
    fn record(&mut self, v: u64) {
        let i = Self::index(v);
        match self.counts.get_mut(i) {
            Some(c) => *c += 1,
            None => self.grow(i),
        }
        self.total += 1;
    }

    /// [`Buckets::record`] of a value past the buckets held.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        self.counts.resize(i + 1, 0);
        self.counts[i] += 1;
    }

    /// Adds `o`'s counts to these.
    fn absorb(&mut self, o: &Buckets) {
        if self.counts.len() < o.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (c, n) in self.counts.iter_mut().zip(&o.counts) {
            *c += n;
        }
        self.total += o.total;
    }

    /// Empties the buckets, keeping their memory.
    fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }

    /// The highest value of the bucket where the `ceil(q x total)`-th value (at least the
    /// first) lies, as the crate's `value_at_quantile` gives it for q > 0.
    fn value_at_quantile(&self, q: f64) -> u64 {
        let want = ((q.min(1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Self::highest(i);
            }
        }
        0
    }
}

/// A distribution of signed millisecond values (gaps and leads can be negative).
///
/// Count, sum, min and max are exact; quantiles come from HDR buckets (1 % precision), so
/// memory stays fixed however many values are recorded.
#[derive(Debug, Clone)]
pub struct Dist {
    pos: Buckets,
    neg: Buckets,
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
            pos: Buckets::default(),
            neg: Buckets::default(),
            count: 0,
            sum: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: i64) {
        if v >= 0 {
            self.pos.record(v as u64);
        } else {
            self.neg.record(v.unsigned_abs());
        }
        self.count += 1;
        self.sum += i128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Takes in the values `o` recorded, as if each were recorded here (the same
    /// quantiles, count, sum and bounds): for distributions kept apart and brought together
    /// (a block's, recorded on the reader's thread).
    pub fn absorb(&mut self, o: &Dist) {
        if o.count == 0 {
            return;
        }
        self.pos.absorb(&o.pos);
        self.neg.absorb(&o.neg);
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Empties the distribution, keeping its memory for the next values.
    pub fn clear(&mut self) {
        if self.count == 0 {
            return;
        }
        self.pos.clear();
        self.neg.clear();
        self.count = 0;
        self.sum = 0;
        self.min = i64::MAX;
        self.max = i64::MIN;
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
        let nneg = self.neg.total;
        // rank among all values, 1-based
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let v = if rank <= nneg {
            // the rank-th smallest value is negative: count from the most negative
            let qn = 1.0 - (rank - 1) as f64 / nneg as f64;
            -i128::from(self.neg.value_at_quantile(qn))
        } else {
            let qp = (rank - nneg) as f64 / self.pos.total as f64;
            i128::from(self.pos.value_at_quantile(qp))
        };
        Some(v.clamp(i128::from(self.min), i128::from(self.max)) as i64)
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

    /// The quantiles from the `hdrhistogram` crate's histograms of 2 significant figures, as
    /// `Dist` read them before it kept its own buckets (but for the sign of a value in the
    /// bucket of i64::MIN, which the old `-(x as i64)` wrapped: here in i128, as now).
    fn reference(values: &[i64], q: f64) -> Option<i64> {
        use hdrhistogram::Histogram;
        if values.is_empty() {
            return None;
        }
        let (mut pos, mut neg) = (
            Histogram::<u64>::new(SIGFIG_OF_THE_CRATE).unwrap(),
            Histogram::<u64>::new(SIGFIG_OF_THE_CRATE).unwrap(),
        );
        for &v in values {
            if v >= 0 {
                pos.record(v as u64).unwrap();
            } else {
                neg.record(v.unsigned_abs()).unwrap();
            }
        }
        let (min, max) = (*values.iter().min()?, *values.iter().max()?);
        if q >= 1.0 {
            return Some(max);
        }
        let nneg = neg.len();
        let rank = ((q * values.len() as f64).ceil() as u64).max(1);
        let v = if rank <= nneg {
            let qn = 1.0 - (rank - 1) as f64 / nneg as f64;
            -i128::from(neg.value_at_quantile(qn))
        } else {
            let qp = (rank - nneg) as f64 / pos.len() as f64;
            i128::from(pos.value_at_quantile(qp))
        };
        Some(v.clamp(i128::from(min), i128::from(max)) as i64)
    }

    const SIGFIG_OF_THE_CRATE: u8 = 2;

    /// Every bucket's range, at its edges, against the crate's: the same bucket for the
    /// same value, the same highest value for each.
    #[test]
    fn the_buckets_are_the_crates() {
        let h = hdrhistogram::Histogram::<u64>::new_with_max(u64::MAX / 2, 2).unwrap();
        let mut edges = vec![0u64, 1, 127, 128, 255, 256, 257, 511, 512, u64::MAX / 2];
        for b in 8..63 {
            for sub in [0u64, 1, 63, 64, 127] {
                let lo = (128 + sub) << (b - 7);
                edges.extend([lo - 1, lo, lo + 1]);
            }
        }
        for v in edges {
            let i = Buckets::index(v);
            assert_eq!(Buckets::highest(i), h.highest_equivalent(v), "value {v}");
            assert!(Buckets::highest(i) >= v, "value {v}");
            assert!(i == 0 || Buckets::highest(i - 1) < v, "value {v}");
        }
    }

    proptest::proptest! {
        /// Any values, any quantile: the same figure as the crate's histograms gave.
        #[test]
        fn quantiles_are_the_crates(
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    -5_000i64..5_000,
                    0i64..4_000_000,
                    -4_000_000i64..0,
                    (i64::MIN / 4)..(i64::MAX / 4),
                    proptest::prop_oneof![proptest::strategy::Just(i64::MIN), proptest::strategy::Just(i64::MAX), proptest::strategy::Just(0)],
                ],
                0..300,
            ),
            q in 0.001f64..1.0,
        ) {
            let mut d = Dist::new();
            for &v in &values {
                d.record(v);
            }
            proptest::prop_assert_eq!(d.quantile(q), reference(&values, q));
            for q in [0.5, 0.9, 0.99] {
                proptest::prop_assert_eq!(d.quantile(q), reference(&values, q));
            }
        }
    }

    proptest::proptest! {
        /// Values recorded in parts, each part into a distribution of its own (one reused
        /// after `clear`), and absorbed give the distribution of all of them recorded in one.
        #[test]
        fn parts_absorbed_are_the_whole(
            parts in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        -5_000i64..5_000,
                        0i64..4_000_000,
                        (i64::MIN / 4)..(i64::MAX / 4),
                    ],
                    0..40,
                ),
                0..6,
            ),
        ) {
            let (mut whole, mut absorbed, mut part) = (Dist::new(), Dist::new(), Dist::new());
            for values in &parts {
                part.clear();
                let mut fresh = Dist::new();
                for &v in values {
                    whole.record(v);
                    part.record(v);
                    fresh.record(v);
                }
                // (a part cleared holds nothing of the values before)
                proptest::prop_assert_eq!(part.summary(), fresh.summary());
                absorbed.absorb(&part);
            }
            proptest::prop_assert_eq!(absorbed.summary(), whole.summary());
            proptest::prop_assert_eq!(absorbed.sum(), whole.sum());
            for q in [0.01, 0.25, 0.5, 0.75, 0.99] {
                proptest::prop_assert_eq!(absorbed.quantile(q), whole.quantile(q));
            }
        }
    }

    #[test]
    fn empty_has_no_quantiles() {
        let d = Dist::new();
        assert_eq!(d.quantile(0.5), None);
        assert_eq!(d.summary(), DistSummary::default());
    }
}
