//! Small, dependency-free statistics used by the suites and the reports.
//!
//! Definitions (also in `docs/benchmarks.md`):
//!
//! * **Percentiles are nearest-rank**: for `n` sorted samples and `0 < p <= 100`
//!   the p-th percentile is the sample at 1-based rank `ceil(p/100 · n)`;
//!   `p = 0` is the minimum. The result is always an observed sample, never an
//!   interpolation.
//! * **The median is the nearest-rank 50th percentile**: for an even count it is
//!   the lower of the two middle samples (`[1, 2, 3, 4]` → `2`). This keeps the
//!   median of a figure identical to the p50 the latency tables print.
//! * **Standard deviation is the sample one** (Bessel's `n − 1`); it needs at
//!   least two samples.
//! * **Jain's fairness index** on throughputs `t_i` with fair shares `s_i`:
//!   `x_i = t_i / s_i`, `J = (Σx)² / (n · Σx²)`; 1 is perfectly fair, `1/n` is
//!   one tenant taking everything.
//! * **Retention** is `loaded / baseline`: the share of its alone-throughput a
//!   tenant keeps under a noisy neighbour (1.0 = unaffected).
//!
//! Every function ignores nothing silently: non-finite inputs make the result
//! `None` rather than a NaN that would poison a report.

fn finite(xs: &[f64]) -> bool {
    xs.iter().all(|x| x.is_finite())
}

/// Sorted copy of `xs`, or `None` if empty or any value is not finite.
pub fn sorted(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() || !finite(xs) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite values compare"));
    Some(v)
}

/// Nearest-rank percentile of already **sorted** finite samples.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// Nearest-rank percentile (`0 <= p <= 100`) of unsorted samples.
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    percentile_sorted(&sorted(xs)?, p)
}

/// Several nearest-rank percentiles at once (sorts once).
pub fn percentiles(xs: &[f64], ps: &[f64]) -> Option<Vec<f64>> {
    let s = sorted(xs)?;
    ps.iter().map(|&p| percentile_sorted(&s, p)).collect()
}

/// Nearest-rank median (lower middle for an even count).
pub fn median(xs: &[f64]) -> Option<f64> {
    percentile(xs, 50.0)
}

/// Arithmetic mean.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || !finite(xs) {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (n − 1); `None` for fewer than two samples.
pub fn stddev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
    Some(var.sqrt())
}

/// Jain's fairness index of `throughputs` normalised by `fair_shares`
/// (both the same length, shares > 0). `None` when undefined (empty input,
/// length mismatch, non-positive share, all throughputs zero).
pub fn jain_fairness(throughputs: &[f64], fair_shares: &[f64]) -> Option<f64> {
    if throughputs.is_empty() || throughputs.len() != fair_shares.len() {
        return None;
    }
    if !finite(throughputs) || !finite(fair_shares) || fair_shares.iter().any(|&s| s <= 0.0) {
        return None;
    }
    let x: Vec<f64> = throughputs
        .iter()
        .zip(fair_shares)
        .map(|(t, s)| t / s)
        .collect();
    let sum: f64 = x.iter().sum();
    let sum_sq: f64 = x.iter().map(|v| v * v).sum();
    if sum_sq == 0.0 {
        return None;
    }
    Some(sum * sum / (x.len() as f64 * sum_sq))
}

/// Jain's index when every tenant deserves the same share.
pub fn jain_fairness_equal(throughputs: &[f64]) -> Option<f64> {
    jain_fairness(throughputs, &vec![1.0; throughputs.len()])
}

/// `loaded / baseline`; `None` unless `baseline > 0`.
pub fn retention(loaded: f64, baseline: f64) -> Option<f64> {
    (baseline > 0.0 && baseline.is_finite() && loaded.is_finite()).then(|| loaded / baseline)
}

/// Relative change of `value` against `base` in percent:
/// `(value − base) / base · 100`. `None` when `base` is 0.
pub fn change_percent(base: f64, value: f64) -> Option<f64> {
    (base != 0.0 && base.is_finite() && value.is_finite()).then(|| (value - base) / base * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn nearest_rank_percentiles() {
        // The classic nearest-rank example.
        let xs = [15.0, 20.0, 35.0, 40.0, 50.0];
        assert_eq!(percentile(&xs, 5.0), Some(15.0));
        assert_eq!(percentile(&xs, 30.0), Some(20.0));
        assert_eq!(percentile(&xs, 40.0), Some(20.0));
        assert_eq!(percentile(&xs, 50.0), Some(35.0));
        assert_eq!(percentile(&xs, 100.0), Some(50.0));
        assert_eq!(percentile(&xs, 0.0), Some(15.0));
        assert_eq!(percentile(&xs, 101.0), None);
        let hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(
            percentiles(&hundred, &[50.0, 90.0, 99.0]),
            Some(vec![50.0, 90.0, 99.0])
        );
        assert_eq!(percentile(&hundred, 99.5), Some(100.0));
    }

    #[test]
    fn median_is_lower_middle() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn mean_and_stddev() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs), Some(5.0));
        // Population sd is 2; the sample sd is sqrt(32/7).
        assert!(close(stddev(&xs).unwrap(), (32.0f64 / 7.0).sqrt()));
        assert_eq!(stddev(&[1.0]), None);
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn jain_index() {
        assert!(close(
            jain_fairness_equal(&[100.0, 100.0, 100.0]).unwrap(),
            1.0
        ));
        // One tenant takes everything: 1/n.
        assert!(close(
            jain_fairness_equal(&[300.0, 0.0, 0.0]).unwrap(),
            1.0 / 3.0
        ));
        // (1+2)^2 / (2 * (1+4)) = 0.9
        assert!(close(jain_fairness_equal(&[1.0, 2.0]).unwrap(), 0.9));
        // Shares make an unequal split fair: 2:1 split with 2:1 shares.
        assert!(close(
            jain_fairness(&[200.0, 100.0], &[2.0, 1.0]).unwrap(),
            1.0
        ));
        // Article 003, test 3 (static): 939.45, 947.72, 722.74 trans/sec.
        let j = jain_fairness_equal(&[939.45, 947.72, 722.74]).unwrap();
        assert!((j - 0.985867).abs() < 1e-6, "{j}");
        assert_eq!(jain_fairness(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(jain_fairness(&[1.0, 1.0], &[1.0, 0.0]), None);
        assert_eq!(jain_fairness_equal(&[0.0, 0.0]), None);
        assert_eq!(jain_fairness_equal(&[]), None);
    }

    #[test]
    fn retention_and_change() {
        // Article 003: victim alone 2326.62 trans/s, under noisy neighbours 283.73.
        let r = retention(283.73, 2326.62).unwrap();
        assert!((r - 0.12195).abs() < 1e-4, "{r}");
        assert_eq!(retention(1.0, 0.0), None);
        // Article 004, Execl Throughput 1 thread: 82.00 vs native 204.90 → −60.0 %.
        let c = change_percent(204.90, 82.00).unwrap();
        assert!((c + 59.98).abs() < 0.01, "{c}");
        assert_eq!(change_percent(0.0, 1.0), None);
    }
}
