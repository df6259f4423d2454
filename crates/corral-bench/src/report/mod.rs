//! Reports: `report.md` ([`markdown`]) and a self-contained `report.html`
//! ([`html`], tables plus inline SVG charts from [`svg`]).
//!
//! What each suite's section looks like is data, not code: [`LAYOUTS`] maps a
//! suite name to a table shape and the figures worth charting. A suite with
//! no entry gets the generic layout (a `test × mode` table of every figure as
//! `median [min–max]`, and a chart per test and figure).

pub mod html;
pub mod markdown;
pub mod sections;
pub mod svg;

use crate::{h2load, siege};

/// How a suite's rows become tables.
#[derive(Debug, Clone, Copy)]
pub enum TableKind {
    /// A load test (CGI under h2load, siege): one table per test, one row per
    /// mode, the listed columns (medians), then ratios against reference modes.
    Load {
        columns: &'static [Column],
        references: &'static [Reference],
    },
    /// Micro-benchmarks (UnixBench, pid-namespace cost): one table per figure,
    /// one row per test, columns `baseline | contender | diff % | …`. The
    /// baseline is the first of `baselines` present in the suite; with none
    /// present the generic table is used.
    Micro { baselines: &'static [&'static str] },
    /// `test × mode` rows, every figure as `median [min–max]`.
    Generic,
}

/// A load-table column showing one figure's median.
#[derive(Debug, Clone, Copy)]
pub enum Column {
    Figure {
        figure: &'static str,
        header: &'static str,
    },
    /// Several figures in one cell, `a / b / c` (latency percentiles).
    Joined {
        figures: &'static [&'static str],
        header: &'static str,
    },
}

/// How a reference column compares a mode with the reference mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefStyle {
    /// `×4.23`: this mode's median divided by the reference's.
    Ratio,
    /// `−19.4 %`: relative change against the reference.
    Percent,
}

/// A `vs <mode>` column of a load table.
#[derive(Debug, Clone, Copy)]
pub struct Reference {
    pub header: &'static str,
    pub mode: &'static str,
    pub figure: &'static str,
    pub style: RefStyle,
}

/// One suite's presentation.
#[derive(Debug, Clone, Copy)]
pub struct SuiteLayout {
    pub suite: &'static str,
    pub title: &'static str,
    pub intro: &'static str,
    pub table: TableKind,
    /// Figures charted per test (bars per mode, min–max error bars). Empty, or
    /// none of them present in a test: every figure of that test is charted.
    pub charts: &'static [&'static str],
    /// Figure names of p50/p90/p99 for a grouped latency chart per test.
    pub latency: Option<[&'static str; 3]>,
}

const CGI_COLUMNS: &[Column] = &[
    Column::Figure {
        figure: h2load::fig::SECONDS,
        header: "seconds",
    },
    Column::Figure {
        figure: h2load::fig::REQ_PER_S,
        header: "req/s",
    },
    Column::Figure {
        figure: h2load::fig::KIB_PER_S,
        header: "KiB/s",
    },
    Column::Figure {
        figure: h2load::fig::SUCCEEDED,
        header: "succeeded",
    },
    Column::Figure {
        figure: h2load::fig::FAILED,
        header: "failed",
    },
    Column::Joined {
        figures: &[
            h2load::fig::P50_MS,
            h2load::fig::P90_MS,
            h2load::fig::P99_MS,
        ],
        header: "p50 / p90 / p99 ms",
    },
    Column::Figure {
        figure: "h2load_cpu_s",
        header: "h2load CPU s",
    },
];

const JOIN_COLUMNS: &[Column] = &[
    Column::Figure {
        figure: "ms",
        header: "median ms",
    },
    Column::Figure {
        figure: "p90_ms",
        header: "p90 ms",
    },
    Column::Figure {
        figure: "cpu_ms",
        header: "CPU ms",
    },
    Column::Figure {
        figure: "failed",
        header: "failed",
    },
];

const SIEGE_COLUMNS: &[Column] = &[
    Column::Figure {
        figure: siege::fig::TRANS_PER_S,
        header: "trans/s",
    },
    Column::Figure {
        figure: siege::fig::AVAILABILITY,
        header: "availability %",
    },
    Column::Figure {
        figure: siege::fig::RESPONSE_TIME_MS,
        header: "response ms",
    },
    Column::Figure {
        figure: siege::fig::LONGEST_MS,
        header: "longest ms",
    },
    Column::Figure {
        figure: siege::fig::TRANSACTIONS,
        header: "transactions",
    },
    Column::Figure {
        figure: siege::fig::FAILED,
        header: "failed",
    },
    Column::Figure {
        figure: "retention",
        header: "retention",
    },
    Column::Figure {
        figure: "jain",
        header: "Jain index",
    },
];

const NEIGHBOURS_COLUMNS: &[Column] = &[
    Column::Figure {
        figure: "users",
        header: "users",
    },
    Column::Figure {
        figure: siege::fig::TRANSACTIONS,
        header: "transactions",
    },
    Column::Figure {
        figure: siege::fig::AVAILABILITY,
        header: "availability %",
    },
    Column::Joined {
        figures: &[siege::fig::RESPONSE_TIME_MS, h2load::fig::P99_MS],
        header: "mean / p99 ms",
    },
    Column::Figure {
        figure: siege::fig::TRANS_PER_S,
        header: "trans/s",
    },
    Column::Figure {
        figure: siege::fig::THROUGHPUT_MB_S,
        header: "MB/s",
    },
    Column::Figure {
        figure: siege::fig::LONGEST_MS,
        header: "longest ms",
    },
    Column::Figure {
        figure: siege::fig::FAILED,
        header: "failed",
    },
    Column::Figure {
        figure: "tenant_cpu_pct",
        header: "tenant CPU %",
    },
    Column::Figure {
        figure: "tenant_cpu_share",
        header: "CPU share %",
    },
    Column::Figure {
        figure: "throttled_periods",
        header: "throttled",
    },
    Column::Figure {
        figure: "client_cpu_pct",
        header: "client CPU %",
    },
    Column::Figure {
        figure: "total_trans_per_s",
        header: "total trans/s",
    },
    Column::Figure {
        figure: "jain",
        header: "Jain index",
    },
    Column::Figure {
        figure: "retention",
        header: "victim retention",
    },
    Column::Joined {
        figures: &["cpu_user", "cpu_system", "cpu_steal", "cpu_idle"],
        header: "CPU user / system / steal / idle %",
    },
    Column::Figure {
        figure: "server_cpu_busy",
        header: "server CPU busy %",
    },
    Column::Figure {
        figure: "client_cpu_busy",
        header: "client CPU busy %",
    },
    Column::Figure {
        figure: "nginx_cpu_pct",
        header: "nginx CPU %",
    },
    Column::Figure {
        figure: "tenants_cpu_pct",
        header: "tenants CPU %",
    },
    Column::Figure {
        figure: "mem_used_mib",
        header: "memory used MiB",
    },
];

const SCALE_COLUMNS: &[Column] = &[
    Column::Figure {
        figure: "up_ms_per_tenant",
        header: "up ms per tenant (bulk)",
    },
    Column::Figure {
        figure: "up_total_s",
        header: "up s (bulk)",
    },
    Column::Figure {
        figure: "up_one_ms",
        header: "up ms (one, others up)",
    },
    Column::Joined {
        figures: &["join_ms", "join_p90_ms"],
        header: "join ms median / p90",
    },
    Column::Figure {
        figure: "join_ref_ms",
        header: "1-tenant join ms (interleaved)",
    },
    Column::Figure {
        figure: "join_vs_ref",
        header: "join vs 1 tenant",
    },
    Column::Figure {
        figure: "join_vs_first",
        header: "join vs smallest (both vs 1 tenant)",
    },
    Column::Figure {
        figure: "down_total_s",
        header: "down --all s",
    },
    Column::Figure {
        figure: "down_ms_per_tenant",
        header: "down ms per tenant",
    },
    Column::Joined {
        figures: &["init_pss_kib", "init_rss_kib"],
        header: "init PSS / RSS KiB",
    },
    Column::Figure {
        figure: "kernel_kib",
        header: "kernel KiB",
    },
    Column::Figure {
        figure: "tmpfs_kib",
        header: "tmpfs KiB",
    },
    Column::Figure {
        figure: "total_kib",
        header: "KiB per idle tenant",
    },
    Column::Figure {
        figure: "floor_kib",
        header: "kernel floor KiB (no corral)",
    },
    Column::Figure {
        figure: "above_floor_kib",
        header: "KiB above the floor",
    },
    Column::Figure {
        figure: "used_kib",
        header: "MemAvailable drop KiB",
    },
    Column::Figure {
        figure: "host_mounts",
        header: "host mounts per tenant",
    },
];

/// Suite name → layout. Suites not listed use [`GENERIC`].
pub const LAYOUTS: &[SuiteLayout] = &[
    SuiteLayout {
        suite: "join",
        title: "Joining a sandbox: the cost of one exec",
        intro: "`/bin/true` started many times per mode, modes interleaved: bare (no sandbox), \
                `corral run` (one setns per persisted namespace file, cgroup, seccomp, drop privileges), \
                an nsenter join of the same namespace files (the OpenLiteSpeed way, no limits), and \
                bubblewrap building its sandbox at every exec. Wall time from spawn to reap; `vs bare` is \
                the ratio of median times (×2.00: twice as slow). `corral up` is the one-time cost of \
                building a sandbox.",
        table: TableKind::Load {
            columns: JOIN_COLUMNS,
            references: &[Reference {
                header: "vs bare",
                mode: "bare",
                figure: "ms",
                style: RefStyle::Ratio,
            }],
        },
        charts: &["ms", "cpu_ms"],
        latency: None,
    },
    SuiteLayout {
        suite: "cgi",
        title: "CGI under h2load: bubblewrap vs persisted namespaces",
        intro: "A trivial CGI program behind the web server, run per request inside each sandbox mode, \
                loaded with h2load (as in the OpenLiteSpeed namespaces article). `vs bubblewrap` is the \
                req/s ratio to the bubblewrap mode; `vs bare` is the req/s change against no sandbox.",
        table: TableKind::Load {
            columns: CGI_COLUMNS,
            references: &[
                Reference {
                    header: "vs bubblewrap",
                    mode: "bubblewrap",
                    figure: h2load::fig::REQ_PER_S,
                    style: RefStyle::Ratio,
                },
                Reference {
                    header: "vs bare",
                    mode: "bare",
                    figure: h2load::fig::REQ_PER_S,
                    style: RefStyle::Percent,
                },
            ],
        },
        charts: &[h2load::fig::REQ_PER_S, h2load::fig::SECONDS],
        latency: Some([h2load::fig::P50_MS, h2load::fig::P90_MS, h2load::fig::P99_MS]),
    },
    SuiteLayout {
        suite: "noisy",
        title: "Noisy neighbour under siege",
        intro: "One tenant under steady load while neighbours hammer theirs (as in the CloudLinux \
                comparison article). `retention` is the tenant's throughput under load divided by its \
                throughput alone; the Jain index (1 = fair) is over fair-share-normalised throughputs.",
        table: TableKind::Load {
            columns: SIEGE_COLUMNS,
            references: &[],
        },
        charts: &[siege::fig::TRANS_PER_S, siege::fig::RESPONSE_TIME_MS],
        latency: None,
    },
    SuiteLayout {
        suite: "unixbench",
        title: "UnixBench overhead",
        intro: "BYTE UnixBench micro-benchmarks natively and inside each sandbox (as in the lx zones \
                article). `diff %` is the change against native: negative means a lower score.",
        table: TableKind::Micro {
            baselines: &["native", "bare", "host"],
        },
        charts: &["score"],
        latency: None,
    },
    SuiteLayout {
        suite: "micro",
        title: "UnixBench-style micro-benchmarks: native vs sandboxed",
        intro: "The UnixBench system tests (re-implemented in bench/c/ubench.c) natively, natively under \
                the seccomp floor (a one-instruction allow-all filter: what any filter costs), the same in a \
                cgroup next to the tenant's with its limits (`floor-cgroup`: the kernel's whole floor of a \
                limited tenant), inside a corral sandbox and inside bubblewrap, with 1 copy and with one copy per CPU (as in the lx \
                zones article). `diff %` is the change against native: negative means a lower score.",
        table: TableKind::Micro {
            baselines: &["native"],
        },
        charts: &["single", "parallel"],
        latency: None,
    },
    SuiteLayout {
        suite: "pidns",
        title: "pid-namespace cost",
        intro: "CPU time per getpid, fork+wait and thread create+join in the initial pid namespace \
                (`host`), in pid namespaces nested 1 to 3 levels below it, and inside a corral sandbox \
                (as in the pid namespaces patch-set measurements). `diff %` is against the host.",
        table: TableKind::Micro {
            baselines: &["host", "native", "bare"],
        },
        charts: &[],
        latency: None,
    },
    SuiteLayout {
        suite: "neighbours",
        title: "Noisy neighbours: three virtual hosts under load",
        intro: "The CloudLinux comparison article's four tests on one server: a static page served by nginx and \
                `phpinfo()` served by each tenant's own PHP-FPM pool inside its corral sandbox and cgroup, \
                loaded by h2load clients in separate network namespaces (one per article client); one host \
                alone, two and three hosts together, and a noisy neighbour (the victim with 100 users while a \
                second host gets 2 × 500). Each test without limits and with a corral CPU cap per tenant. \
                Per host the article's siege figures; per test (`summary`) the server's CPU and memory like \
                sar, Jain's fairness index over the hosts' rates (equal shares: every tenant has the same \
                plan; 1 = fair) and the victim's retention (its rate under the noisy neighbour divided by its \
                rate alone, same limits).",
        table: TableKind::Load {
            columns: NEIGHBOURS_COLUMNS,
            references: &[],
        },
        charts: &[siege::fig::TRANS_PER_S, h2load::fig::P99_MS, "jain", "retention"],
        latency: None,
    },
    SuiteLayout {
        suite: "scale",
        title: "Scale: many idle tenants",
        intro: "N tenants brought up with `corral up` (in bulk, and one at a time with the others up), \
                `corral run TENANT -- /bin/true` on random tenants (joining is O(1): the latency must not \
                grow with N), each join alternating with one into a tenant alone in its own environment \
                (`join vs 1 tenant`: the machine's noise hits both alike), memory per idle tenant (the init's PSS plus the kernel's share: slab, stacks, \
                page tables, per-CPU data and tmpfs, from /proc/meminfo deltas divided by N) against the \
                kernel's floor at the same N (no corral: static processes each holding the same namespaces, a \
                procfs and cgroups of their own in the same hierarchies, counted the same way), and \
                `corral down --all`. Targets: at 1,000 tenants the join latency within 10 % of the smallest \
                size's and at most 300 KiB per idle tenant.",
        table: TableKind::Load {
            columns: SCALE_COLUMNS,
            references: &[],
        },
        charts: &["join_ms", "up_ms_per_tenant", "total_kib", "init_pss_kib"],
        latency: None,
    },
];

/// The layout of a suite without an entry in [`LAYOUTS`].
pub const GENERIC: SuiteLayout = SuiteLayout {
    suite: "",
    title: "",
    intro: "",
    table: TableKind::Generic,
    charts: &[],
    latency: None,
};

/// The layout for `suite`.
pub fn layout_for(suite: &str) -> &'static SuiteLayout {
    LAYOUTS
        .iter()
        .find(|l| l.suite == suite)
        .unwrap_or(&GENERIC)
}

/// Readable names for well-known figures (chart titles); others are shown as is.
pub const FIGURE_LABELS: &[(&str, &str)] = &[
    (h2load::fig::SECONDS, "wall time"),
    (h2load::fig::REQ_PER_S, "throughput"),
    (h2load::fig::KIB_PER_S, "transfer rate"),
    (h2load::fig::SUCCEEDED, "succeeded requests"),
    (h2load::fig::FAILED, "failed requests"),
    (siege::fig::TRANS_PER_S, "transaction rate"),
    (siege::fig::AVAILABILITY, "availability"),
    (siege::fig::RESPONSE_TIME_MS, "mean response time"),
    (siege::fig::LONGEST_MS, "longest transaction"),
    (siege::fig::THROUGHPUT_MB_S, "data throughput"),
    (siege::fig::TRANSACTIONS, "transactions"),
    ("retention", "throughput retention"),
    ("jain", "Jain fairness index"),
    ("h2load_cpu_s", "h2load CPU time"),
    ("ms", "time per exec"),
    ("cpu_ms", "CPU time per exec"),
    ("single", "score, 1 copy"),
    ("parallel", "score, one copy per CPU"),
    ("cpu_ns", "CPU time per operation"),
    ("wall_ns", "wall time per operation"),
    ("users", "simulated users"),
    ("p99_ms", "p99 response time"),
    ("total_trans_per_s", "total transaction rate"),
    ("tenant_cpu_pct", "tenant CPU"),
    ("join_ms", "join latency (corral run /bin/true)"),
    ("up_ms_per_tenant", "corral up per tenant (bulk)"),
    ("total_kib", "memory per idle tenant"),
    ("init_pss_kib", "init PSS"),
];

/// The readable name of a figure.
pub fn figure_label(figure: &str) -> &str {
    FIGURE_LABELS
        .iter()
        .find(|(f, _)| *f == figure)
        .map(|(_, l)| *l)
        .unwrap_or(figure)
}

/// Units whose values are counts: printed without decimals.
const COUNT_UNITS: &[&str] = &["requests", "hits", "transactions", "count", "errors"];

/// Format a value for a table cell: counts as integers, otherwise about
/// three significant digits (`761`, `24.3`, `0.291`); NaN as `n/a`.
pub fn fmt_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    if COUNT_UNITS.contains(&unit) {
        return format!("{v:.0}");
    }
    if unit == "%" {
        // 99.98 % availability must not print as 100.
        return format!("{v:.2}");
    }
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        let digits = (-a.log10().floor()) as usize + 2;
        format!("{v:.digits$}")
    }
}

/// `median [min–max]`, or just the median when the range is a point.
pub fn fmt_range(f: &crate::Figure) -> String {
    let m = fmt_value(f.median, &f.unit);
    let (lo, hi) = (fmt_value(f.min, &f.unit), fmt_value(f.max, &f.unit));
    if f.samples.len() < 2 || lo == hi {
        m
    } else {
        format!("{m} [{lo}–{hi}]")
    }
}

/// `−19.4 %` / `+3.0 %` with a real minus sign.
pub fn fmt_percent(p: f64) -> String {
    if !p.is_finite() {
        return "n/a".into();
    }
    let s = format!("{:+.1} %", p);
    s.replacen('-', "−", 1)
}

/// `×4.23`.
pub fn fmt_ratio(r: f64) -> String {
    if !r.is_finite() {
        return "n/a".into();
    }
    format!(
        "×{}",
        if r >= 100.0 {
            format!("{r:.0}")
        } else {
            format!("{r:.2}")
        }
    )
}

/// Bytes as `23.5 GiB`.
pub fn fmt_bytes(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        assert_eq!(fmt_value(761.4, "req/s"), "761");
        assert_eq!(fmt_value(24.33, "ms"), "24.3");
        assert_eq!(fmt_value(7.0, "KiB/s"), "7.00");
        assert_eq!(fmt_value(0.2914, "ms"), "0.291");
        assert_eq!(fmt_value(0.0521, "ms"), "0.0521");
        assert_eq!(fmt_value(0.0, "ms"), "0");
        assert_eq!(fmt_value(199.6, "requests"), "200");
        assert_eq!(fmt_value(99.98, "%"), "99.98");
        assert_eq!(fmt_value(f64::NAN, "s"), "n/a");
        assert_eq!(fmt_percent(-19.44), "−19.4 %");
        assert_eq!(fmt_percent(3.0), "+3.0 %");
        assert_eq!(fmt_ratio(4.2276), "×4.23");
        assert_eq!(fmt_bytes(24_684_092 * 1024), "23.5 GiB");
    }

    #[test]
    fn unknown_suites_are_generic() {
        assert!(matches!(layout_for("cgi").table, TableKind::Load { .. }));
        assert!(matches!(
            layout_for("something-new").table,
            TableKind::Generic
        ));
    }
}
