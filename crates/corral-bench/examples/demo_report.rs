//! Write a demo `results.json`, `report.md` and `report.html` into a directory
//! (default `corral-bench/demo`, git-ignored), to look at the report layout:
//!
//!     cargo run -p corral-bench --example demo_report -- /tmp/demo
//!
//! The numbers are shaped after the seed articles (CGI under h2load, the
//! pid-namespace table, the siege noisy-neighbour runs, UnixBench on lx
//! zones); they are not measurements, and the report says so.

use corral_bench::{stats, write_outputs, Better, Figure, Machine, ResultSet, Row};

fn f(unit: &str, better: Better, v: &[f64]) -> Figure {
    Figure::from_samples(unit, better, v.to_vec())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    use Better::*;
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "corral-bench/demo".into());
    let mut rs = ResultSet::new(
        Machine::detect(&[
            "nginx", "h2load", "siege", "bwrap", "php-cgi", "fcgiwrap", "firejail",
        ]),
        false,
    );
    rs.add_note("DEMO DATA shaped like the seed articles, not a measurement.");

    // CGI: (mode, seconds, req/s, KiB/s, p50/p90/p99) per test, 3 runs with jitter.
    let cgi = [
        ("small", "bubblewrap", 69.0, 145.0, 7.0, [61.0, 90.0, 140.0]),
        ("small", "corral", 16.0, 613.0, 29.0, [14.0, 22.0, 35.0]),
        ("small", "bare", 13.0, 761.0, 35.0, [11.0, 18.0, 29.0]),
        (
            "large",
            "bubblewrap",
            1123.0,
            89.0,
            8.0,
            [1050.0, 1400.0, 2100.0],
        ),
        ("large", "corral", 159.0, 628.0, 36.0, [150.0, 210.0, 320.0]),
        ("large", "bare", 125.0, 799.0, 43.0, [118.0, 170.0, 260.0]),
    ];
    for (test, mode, secs, rps, kib, lat) in cgi {
        let j = |v: f64| vec![v * 0.97, v, v * 1.02];
        let n = if test == "small" { 10_000.0 } else { 100_000.0 };
        rs.push(
            Row::new("cgi", test, mode)
                .with("seconds", f("s", Lower, &j(secs)))
                .with("req_per_s", f("req/s", Higher, &j(rps)))
                .with("kib_per_s", f("KiB/s", Higher, &j(kib)))
                .with("succeeded", f("requests", Higher, &[n; 3]))
                .with("failed", f("requests", Lower, &[0.0; 3]))
                .with("p50_ms", f("ms", Lower, &j(lat[0])))
                .with("p90_ms", f("ms", Lower, &j(lat[1])))
                .with("p99_ms", f("ms", Lower, &j(lat[2]))),
        );
    }

    // Noisy neighbour, static test 4 of the siege article.
    let alone = 2326.62;
    let victim = 283.73;
    let jain =
        stats::jain_fairness(&[283.73, 1295.17, 970.76], &[1.0, 1.0, 1.0]).unwrap_or(f64::NAN);
    for (mode, rate, avail, resp, longest, failed) in [
        ("victim", victim, 99.98, 340.0, 27260.0, 19.0),
        ("neighbour-1", 1295.17, 99.97, 370.0, 55220.0, 128.0),
        ("neighbour-2", 970.76, 99.95, 490.0, 27790.0, 137.0),
    ] {
        let mut row = Row::new("noisy", "static", mode)
            .with("trans_per_s", f("trans/s", Higher, &[rate]))
            .with("availability", f("%", Higher, &[avail]))
            .with("response_time_ms", f("ms", Lower, &[resp]))
            .with("longest_ms", f("ms", Lower, &[longest]))
            .with("failed", f("transactions", Lower, &[failed]));
        if mode == "victim" {
            row = row
                .with(
                    "retention",
                    f(
                        "ratio",
                        Higher,
                        &[stats::retention(victim, alone).unwrap_or(f64::NAN)],
                    ),
                )
                .with("jain", f("index", Higher, &[jain]));
        }
        rs.push(row);
    }

    // pid namespaces: nptl perf seconds, mean ± 3 sd in the article.
    for (mode, s, e) in [
        ("host", 11.72, 0.12),
        ("pidns-flat", 12.52, 0.15),
        ("pidns-multi", 12.96, 0.14),
    ] {
        rs.push(
            Row::new("pidns", "nptl perf", mode).with("seconds", f("s", Lower, &[s - e, s, s + e])),
        );
    }

    // UnixBench, 1 thread column of the lx zones article.
    for (test, unit, native, zone) in [
        ("Execl Throughput", "lps", 204.90, 82.00),
        (
            "File Copy 1024 bufsize 2000 maxblocks",
            "KBps",
            40514.50,
            31784.90,
        ),
        ("Pipe Throughput", "lps", 89803.10, 58154.50),
        ("Process Creation", "lps", 263.30, 134.20),
        ("System Call Overhead", "lps", 58388.50, 60471.00),
    ] {
        rs.push(Row::new("unixbench", test, "native").with("score", f(unit, Higher, &[native])));
        rs.push(Row::new("unixbench", test, "corral").with("score", f(unit, Higher, &[zone])));
    }
    rs.finish();
    let out = write_outputs(&dir, &rs)?;
    println!(
        "{}\n{}\n{}",
        out.json.display(),
        out.markdown.display(),
        out.html.display()
    );
    Ok(())
}
