//! A small fixed-bucket histogram kept beside each tool's Prometheus series, so `/admin/tools`
//! can state means, maxima and percentiles without querying Prometheus. It uses the buckets of
//! the matching series, so its percentiles are the estimates `histogram_quantile` would give
//! (linear within a bucket), except that they never exceed the largest value observed.

use serde::ser::{Serialize, SerializeMap, Serializer};

/// Observations counted per bucket (`counts[i]` holds the values in `(bounds[i-1], bounds[i]]`,
/// the last one those above every bound).
#[derive(Debug, Clone)]
pub(super) struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    count: u64,
    sum: f64,
    max: f64,
}

/// The buckets of an integer histogram, serialised as an object in bucket order, e.g.
/// `{"0": 2, "1": 5, "5-8": 1, "65+": 0}`.
#[derive(Debug, Clone)]
pub struct IntBuckets(Vec<(String, u64)>);

// === impl Histogram ===

impl Histogram {
    pub(super) fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, counts: vec![0; bounds.len() + 1], count: 0, sum: 0.0, max: 0.0 }
    }

    pub(super) fn observe(&mut self, value: f64) {
        let bucket = self.bounds.iter().position(|b| value <= *b).unwrap_or(self.bounds.len());
        self.counts[bucket] += 1;
        self.count += 1;
        self.sum += value;
        self.max = if self.count == 1 { value } else { self.max.max(value) };
    }

    pub(super) fn count(&self) -> u64 {
        self.count
    }

    pub(super) fn sum(&self) -> f64 {
        self.sum
    }

    pub(super) fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    pub(super) fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }

    /// The `q` quantile (0 < q ≤ 1), interpolated linearly inside its bucket.
    pub(super) fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = q * self.count as f64;
        let mut below = 0u64;
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 && (below + n) as f64 >= rank {
                let low = if i == 0 { 0.0 } else { self.bounds[i - 1] };
                let high = self.bounds.get(i).copied().unwrap_or(self.max);
                let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
                return Some((low + (high - low) * within).min(self.max));
            }
            below += n;
        }
        Some(self.max)
    }

    /// The buckets of a histogram of whole numbers, labelled by the values each one holds.
    pub(super) fn int_buckets(&self) -> IntBuckets {
        let mut out = Vec::with_capacity(self.counts.len());
        for (i, &n) in self.counts.iter().enumerate() {
            let label = match (i.checked_sub(1).map(|p| self.bounds[p]), self.bounds.get(i)) {
                (None, Some(high)) => format!("{high}"),
                (Some(low), Some(high)) if low + 1.0 == *high => format!("{high}"),
                (Some(low), Some(high)) => format!("{}-{high}", low + 1.0),
                (_, None) => format!("{}+", self.bounds.last().copied().unwrap_or(0.0) + 1.0),
            };
            out.push((label, n));
        }
        IntBuckets(out)
    }
}

// === impl IntBuckets ===

impl Serialize for IntBuckets {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (label, n) in &self.0 {
            map.serialize_entry(label, n)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: &[f64] = &[0.0, 1.0, 2.0, 4.0];

    #[test]
    fn counts_means_and_maxima() {
        let mut h = Histogram::new(BOUNDS);
        assert_eq!((h.mean(), h.max(), h.quantile(0.5)), (None, None, None));
        for v in [0.0, 1.0, 1.0, 3.0, 9.0] {
            h.observe(v);
        }
        assert_eq!((h.count(), h.sum(), h.mean(), h.max()), (5, 14.0, Some(2.8), Some(9.0)));
        let labels: Vec<_> = h.int_buckets().0;
        let expected: Vec<(String, u64)> =
            [("0", 1), ("1", 2), ("2", 0), ("3-4", 1), ("5+", 1)].map(|(l, n)| (l.to_owned(), n)).to_vec();
        assert_eq!(labels, expected);
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket_and_stop_at_the_maximum() {
        let mut h = Histogram::new(&[0.01, 0.1, 1.0]);
        for v in [0.02, 0.08] {
            for _ in 0..5 {
                h.observe(v);
            }
        }
        // All ten in (0.01, 0.1]: the median half-way through it, the top capped at the maximum.
        let median = h.quantile(0.5).unwrap();
        assert!((median - 0.055).abs() < 1e-12, "{median}");
        assert_eq!(h.quantile(0.99), Some(0.08));
        h.observe(5.0);
        assert_eq!(h.quantile(1.0), Some(5.0), "above every bound: the maximum");
    }
}
