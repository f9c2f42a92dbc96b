//! Log-linear latency buckets in microseconds, HdrHistogram-style with two
//! significant digits: exact below 256 µs, then 128 equal sub-buckets per
//! power of two, so any value is known within 1/128 (< 0.8%). Recording is
//! an index computation (a leading-zero count and two shifts) and one add.

use serde::{Deserialize, Serialize};

/// Values below `2^SUB_BITS` µs get a bucket each.
const SUB_BITS: u32 = 8;
/// Sub-buckets per power of two above that.
const HALF: usize = 1 << (SUB_BITS - 1);
/// Values at or above `2^MAX_EXP` µs (about 18 minutes) share the last
/// bucket; the exact maximum is kept apart.
const MAX_EXP: u32 = 30;

/// Buckets of one histogram.
pub const BUCKETS: usize = (1 << SUB_BITS) + (MAX_EXP - SUB_BITS) as usize * HALF;

// `index` shifts a u64 by up to MAX_EXP, and a bucket's number travels
// as a u32 (`Hist::buckets`).
const _: () = assert!(SUB_BITS < MAX_EXP && MAX_EXP < 64);
const _: () = assert!(BUCKETS <= u32::MAX as usize);

/// The bucket of a value in µs.
#[inline]
pub fn index(us: u64) -> usize {
    let v = us.min((1u64 << MAX_EXP) - 1);
    if v < (1 << SUB_BITS) {
        return v as usize;
    }
    // e in SUB_BITS..MAX_EXP: the position of the top bit.
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - (SUB_BITS - 1))) as usize & (HALF - 1);
    (1 << SUB_BITS) + (e - SUB_BITS) as usize * HALF + sub
}

/// Width of bucket `i`'s value range, as a power of two (shift).
fn shift(i: usize) -> u32 {
    if i < (1 << SUB_BITS) {
        0
    } else {
        ((i - (1 << SUB_BITS)) / HALF) as u32 + 1
    }
}

/// The smallest value of bucket `i`.
pub fn low(i: usize) -> u64 {
    if i < (1 << SUB_BITS) {
        return i as u64;
    }
    let k = i - (1 << SUB_BITS);
    ((HALF + k % HALF) as u64) << shift(i)
}

/// The largest value of bucket `i`.
pub fn high(i: usize) -> u64 {
    low(i) + (1u64 << shift(i)) - 1
}

/// A histogram summed over shards: sparse `(bucket, count)` pairs in bucket
/// order, plus count, sum and max.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hist {
    pub count: u64,
    pub sum_us: u64,
    pub max_us: u64,
    /// Non-empty buckets, ascending: `(bucket index, count)`.
    pub buckets: Vec<(u32, u64)>,
}

impl Hist {
    /// Build from dense bucket counts.
    pub fn from_dense(dense: &[u64], sum_us: u64, max_us: u64) -> Hist {
        let buckets: Vec<(u32, u64)> = dense
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| (i as u32, *c))
            .collect();
        Hist {
            count: buckets.iter().map(|b| b.1).sum(),
            sum_us,
            max_us,
            buckets,
        }
    }

    /// The value at quantile `q` (0..=1): the top of the bucket holding the
    /// ceil(q·count)-th smallest sample, capped by the recorded maximum (as
    /// HdrHistogram's "highest equivalent value"). 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for &(i, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                let top = high(i as usize);
                return if self.max_us > 0 {
                    top.min(self.max_us)
                } else {
                    top
                };
            }
        }
        self.max_us
    }

    /// Samples at or below `us`, counting a bucket only when its whole range
    /// is (exact at bucket boundaries, else low by less than one bucket).
    pub fn count_le(&self, us: u64) -> u64 {
        self.buckets
            .iter()
            .take_while(|(i, _)| high(*i as usize) <= us)
            .map(|b| b.1)
            .sum()
    }

    /// `self - earlier` (for rates over an interval); max is this one's.
    pub fn since(&self, earlier: &Hist) -> Hist {
        let mut out = Vec::with_capacity(self.buckets.len());
        let mut j = 0;
        for &(i, c) in &self.buckets {
            while j < earlier.buckets.len() && earlier.buckets[j].0 < i {
                j += 1;
            }
            let prev = match earlier.buckets.get(j) {
                Some(&(k, p)) if k == i => p,
                _ => 0,
            };
            let d = c.saturating_sub(prev);
            if d > 0 {
                out.push((i, d));
            }
        }
        Hist {
            count: out.iter().map(|b| b.1).sum(),
            sum_us: self.sum_us.saturating_sub(earlier.sum_us),
            max_us: self.max_us,
            buckets: out,
        }
    }

    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.count as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range() {
        assert_eq!(BUCKETS, 3072);
        let mut prev_high = None;
        for i in 0..BUCKETS {
            assert!(low(i) <= high(i));
            if let Some(p) = prev_high {
                assert_eq!(low(i), p + 1, "gap before bucket {i}");
            }
            prev_high = Some(high(i));
            assert_eq!(index(low(i)), i);
            assert_eq!(index(high(i)), i);
            // Relative width at most 1/128.
            assert!(
                (high(i) - low(i) + 1) * 128 <= low(i).max(128),
                "bucket {i}"
            );
        }
        assert_eq!(high(BUCKETS - 1), (1 << MAX_EXP) - 1);
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        assert_eq!(index(0), 0);
        assert_eq!(index(255), 255);
        assert_eq!(index(256), 256);
        assert_eq!(index(257), 256);
        assert_eq!(index(258), 257);
    }

    fn hist_of(values: &[u64]) -> Hist {
        let mut dense = vec![0u64; BUCKETS];
        for &v in values {
            dense[index(v)] += 1;
        }
        Hist::from_dense(
            &dense,
            values.iter().sum(),
            values.iter().copied().max().unwrap_or(0),
        )
    }

    /// Exact quantile by sorting, with the same rank rule.
    fn exact(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    #[test]
    fn percentiles_within_bucket_error() {
        // A skewed, wide distribution from a fixed xorshift.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut v: Vec<u64> = (0..50_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Log-uniform over 1 µs .. ~16 s.
                let e = x % 24;
                (1u64 << e) + (x >> 40) % (1u64 << e)
            })
            .collect();
        let h = hist_of(&v);
        v.sort_unstable();
        assert_eq!(h.count, 50_000);
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let want = exact(&v, q);
            let got = h.quantile(q);
            // Reported value is the top of the true value's bucket.
            assert!(got >= want, "q={q}: {got} < {want}");
            assert!(
                (got - want) as f64 <= want as f64 / 128.0 + 1.0,
                "q={q}: got {got}, exact {want}"
            );
        }
        assert_eq!(h.quantile(1.0), *v.last().unwrap());
    }

    #[test]
    fn small_values_are_exact_and_count_le() {
        let h = hist_of(&[1, 2, 2, 3, 100, 1000, 1000, 5000]);
        assert_eq!(h.quantile(0.25), 2);
        assert_eq!(h.quantile(0.5), 3);
        assert_eq!(h.quantile(0.6), 100);
        assert_eq!(h.quantile(1.0), 5000);
        assert_eq!(h.count_le(99), 4);
        assert_eq!(h.count_le(100), 5);
        // 1000 lies in [1000, 1003]: counted once the bucket is wholly in.
        assert_eq!(h.count_le(1000), 5);
        assert_eq!(h.count_le(1003), 7);
        assert_eq!(h.count_le(u64::MAX), 8);
        assert_eq!(Hist::default().quantile(0.5), 0);
    }

    #[test]
    fn since_subtracts() {
        let a = hist_of(&[5, 5, 300]);
        let b = hist_of(&[5, 5, 5, 300, 70_000]);
        let d = b.since(&a);
        assert_eq!(d.count, 2);
        assert_eq!(d.buckets, vec![(5, 1), (index(70_000) as u32, 1)]);
        assert_eq!(d.sum_us, 70_005);
    }
}
