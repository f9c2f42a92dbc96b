//! Small statistics helpers for the workload reports, and the latency
//! histogram every load loop records into.

use hdrhistogram::Histogram;

/// An empty latency histogram in µs: 1 µs .. 10 min, 2 significant digits.
pub fn histogram() -> Histogram<u64> {
    // Bounds are constants.
    Histogram::<u64>::new_with_bounds(1, 600_000_000, 2).expect("constant histogram bounds")
}

/// Min, max, mean and sample standard deviation of a series.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Spread {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub stddev: f64,
}

/// `None` for an empty series; stddev is 0 for one value (n-1 divisor).
pub fn spread(xs: &[f64]) -> Option<Spread> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    Some(Spread {
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        mean,
        stddev: var.sqrt(),
    })
}

/// Events per second; 0 for a zero duration.
pub fn rate(count: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// Decimal megabytes per second (MB = 10^6 bytes).
pub fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    rate(bytes, secs) / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_known_series() {
        let s = spread(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.min, 2.0);
        assert_eq!(s.max, 9.0);
        assert_eq!(s.mean, 5.0);
        // Sample stddev (n-1) of this series is sqrt(32/7).
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn spread_edge_cases() {
        assert!(spread(&[]).is_none());
        let s = spread(&[3.5]).unwrap();
        assert_eq!((s.min, s.max, s.mean, s.stddev), (3.5, 3.5, 3.5, 0.0));
    }

    #[test]
    fn rates() {
        assert_eq!(rate(10, 0.0), 0.0);
        assert_eq!(rate(10, 2.0), 5.0);
        assert_eq!(mb_per_s(3_000_000, 1.5), 2.0);
    }
}
