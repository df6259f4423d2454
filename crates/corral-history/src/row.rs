//! One row of usage: what a tenant used during an interval (a sample) or a
//! bucket of time (a rollup). Every column is a sum or a maximum, so rows
//! add up exactly: a 1-minute row is the sum (or the maximum) of the samples
//! in that minute, an hourly row the same of its 5-minute rows, and any
//! window's totals and averages follow from the sums ([`Row::avg`]).

use serde::Serialize;

/// How a column is combined when rows are rolled up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    Sum,
    Max,
}

macro_rules! row {
    ($($name:ident: $agg:ident, $doc:literal;)*) => {
        /// Usage of one tenant during `dur_ms` milliseconds starting at (for
        /// a sample: ending at) `ts`, in Unix seconds.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
        pub struct Row {
            /// Bucket start (rollups) or sample time (samples), Unix seconds.
            pub ts: i64,
            $(#[doc = $doc] pub $name: i64,)*
        }

        /// The value columns, in table order, and how each rolls up.
        pub const COLUMNS: &[(&str, Agg)] = &[$((stringify!($name), Agg::$agg),)*];

        impl Row {
            /// The value columns in [`COLUMNS`] order.
            pub fn values(&self) -> Vec<i64> {
                vec![$(self.$name,)*]
            }

            /// A row from values in [`COLUMNS`] order.
            pub fn from_values(ts: i64, v: &[i64]) -> Row {
                let mut it = v.iter().copied();
                Row { ts, $($name: it.next().unwrap_or(0),)* }
            }
        }
    };
}

row! {
    dur_ms: Sum, "Time covered, in milliseconds (the sampling intervals).";
    n: Sum, "Samples summarised.";
    cpu_ms: Sum, "CPU time used (user + system), in milliseconds.";
    cpu_max: Max, "Highest CPU of one sample, in per mille of one core (1000 = one core busy).";
    mem_sum: Sum, "Memory of each sample in KiB, summed (KiB × samples): `mem_sum / n` is the average.";
    mem_max: Max, "Highest memory of one sample, KiB.";
    procs_sum: Sum, "Processes of each sample, summed.";
    procs_max: Max, "Most processes in one sample.";
    ep_sum: Sum, "Entry processes in use of each sample, summed.";
    ep_max: Max, "Most entry processes in use in one sample.";
    io_rb: Sum, "Bytes read from block devices.";
    io_wb: Sum, "Bytes written to block devices.";
    io_rops: Sum, "Block-device read operations.";
    io_wops: Sum, "Block-device write operations.";
    f_cpu: Sum, "CPU faults: scheduler periods throttled at the CPU limit.";
    f_mem: Sum, "Memory faults: times memory reached its limit.";
    f_oom: Sum, "Processes OOM-killed at the memory limit.";
    f_procs: Sum, "Process faults: forks refused at the process limit.";
    f_ep: Sum, "Entry-process faults: entries refused with every slot in use.";
}

impl Row {
    /// Adds `other` into this row (sums add, maxima take the larger).
    pub fn add(&mut self, other: &Row) {
        let mut v = self.values();
        for ((a, b), (_, agg)) in v.iter_mut().zip(other.values()).zip(COLUMNS) {
            *a = match agg {
                Agg::Sum => a.saturating_add(b),
                Agg::Max => (*a).max(b),
            };
        }
        *self = Row::from_values(self.ts, &v);
    }

    /// Every fault of the row.
    pub fn faults(&self) -> i64 {
        self.f_cpu + self.f_mem + self.f_oom + self.f_procs + self.f_ep
    }

    /// The average of a per-sample sum column (`mem_sum`, `procs_sum`, ...).
    pub fn avg(&self, sum: i64) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            sum as f64 / self.n as f64
        }
    }

    /// Average CPU over the row's time, in % of one core.
    pub fn cpu_pct(&self) -> f64 {
        self.per_second(self.cpu_ms) / 10.0
    }

    /// A counter column per second of the row's time (`io_rb` → bytes/s).
    pub fn per_second(&self, total: i64) -> f64 {
        if self.dur_ms <= 0 {
            0.0
        } else {
            total as f64 * 1000.0 / self.dur_ms as f64
        }
    }
}

/// The kinds of fault, as named on the command line and in alert rules.
pub const FAULT_KINDS: &[&str] = &["cpu", "memory", "oom", "processes", "entry"];

/// A fault kind's count in a row; `None` for an unknown kind.
pub fn fault_count(row: &Row, kind: &str) -> Option<i64> {
    Some(match kind {
        "cpu" => row.f_cpu,
        "memory" => row.f_mem,
        "oom" => row.f_oom,
        "processes" => row.f_procs,
        "entry" => row.f_ep,
        "any" => row.faults(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_add_sums_and_take_maxima() {
        let mut a = Row {
            ts: 60,
            n: 1,
            dur_ms: 5000,
            cpu_ms: 100,
            cpu_max: 20,
            mem_sum: 10,
            mem_max: 10,
            f_procs: 2,
            ..Default::default()
        };
        let b = Row {
            ts: 65,
            n: 1,
            dur_ms: 5000,
            cpu_ms: 400,
            cpu_max: 80,
            mem_sum: 30,
            mem_max: 30,
            f_cpu: 1,
            ..Default::default()
        };
        a.add(&b);
        assert_eq!(a.ts, 60);
        assert_eq!((a.n, a.dur_ms, a.cpu_ms, a.cpu_max), (2, 10000, 500, 80));
        assert_eq!((a.mem_sum, a.mem_max, a.avg(a.mem_sum)), (40, 30, 20.0));
        assert_eq!(a.faults(), 3);
        assert_eq!(a.cpu_pct(), 5.0);
        assert_eq!(COLUMNS.len(), a.values().len());
    }
}
