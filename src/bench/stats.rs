//! Latency samples and their percentiles (nearest rank), as `kube-tas bench` reports them.

use std::time::Duration;

/// The latencies of one measured call shape.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    durations: Vec<Duration>,
    sorted: bool,
}

impl Samples {
    /// Room for `n` samples.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            durations: Vec::with_capacity(n),
            sorted: true,
        }
    }

    /// Adds one sample.
    pub fn push(&mut self, d: Duration) {
        self.durations.push(d);
        self.sorted = false;
    }

    /// Adds every sample of `other`.
    pub fn extend(&mut self, other: &Samples) {
        self.durations.extend_from_slice(&other.durations);
        self.sorted = false;
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.durations.len()
    }

    /// No sample yet.
    pub fn is_empty(&self) -> bool {
        self.durations.is_empty()
    }

    /// The nearest-rank `p`-th percentile (0 < p ≤ 100, to a tenth) in µs; 0 without samples.
    pub fn percentile_us(&mut self, p: f64) -> f64 {
        if self.durations.is_empty() {
            return 0.0;
        }
        if !self.sorted {
            self.durations.sort_unstable();
            self.sorted = true;
        }
        let n = self.durations.len();
        // In tenths of a percent, exactly: 99.9 % of 1,000 is rank 999, not 1,000.
        let rank = ((p * 10.0).round() as usize * n).div_ceil(1000);
        self.durations[rank.clamp(1, n) - 1].as_nanos() as f64 / 1e3
    }

    /// p50, p99 and p99.9 in µs.
    pub fn summary(&mut self) -> Summary {
        Summary {
            p50: self.percentile_us(50.0),
            p99: self.percentile_us(99.0),
            p999: self.percentile_us(99.9),
            count: self.durations.len(),
        }
    }
}

/// The percentiles of a [`Samples`], in µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// How many samples.
    pub count: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut s = Samples::default();
        for us in (1..=1000).rev() {
            s.push(Duration::from_micros(us));
        }
        let sum = s.summary();
        assert_eq!(
            (sum.p50, sum.p99, sum.p999, sum.count),
            (500.0, 990.0, 999.0, 1000)
        );
        assert_eq!(s.percentile_us(100.0), 1000.0);
        assert_eq!(Samples::default().percentile_us(50.0), 0.0);
    }
}
