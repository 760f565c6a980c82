//! Order statistics of a sample, in nanoseconds.

use serde::Serialize;

/// Min, percentiles, max and mean of one series of timings.
#[derive(Serialize, Debug, Clone)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// Percentiles 0, 1, ..., 100 (nearest rank), for plotting the distribution.
    pub cdf: Vec<f64>,
}

/// Summarises `samples` (sorted in place); nearest-rank percentiles.
pub fn summarise(samples: &mut [f64]) -> Summary {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_by(|a, b| a.total_cmp(b));
    let rank = |q: f64| samples[((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1];
    Summary {
        n: samples.len(),
        min: samples[0],
        p50: rank(0.50),
        p90: rank(0.90),
        p99: rank(0.99),
        max: samples[samples.len() - 1],
        mean: samples.iter().sum::<f64>() / samples.len() as f64,
        cdf: (0..=100).map(|q| rank(f64::from(q) / 100.0)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = summarise(&mut v);
        assert_eq!((s.min, s.p50, s.p90, s.p99, s.max), (1.0, 50.0, 90.0, 99.0, 100.0));
        assert!((s.mean - 50.5).abs() < 1e-9);
        assert_eq!((s.cdf.len(), s.cdf[0], s.cdf[100]), (101, 1.0, 100.0));
    }

    #[test]
    fn single_sample() {
        let s = summarise(&mut [7.0]);
        assert_eq!((s.p50, s.p99, s.n), (7.0, 7.0, 1));
    }
}
