//! The short table `corral-bench` prints on stdout: per suite the medians
//! that matter and the ratios against the reference mode. The full tables
//! are in report.md / report.html.

use crate::report::{fmt_percent, fmt_ratio, fmt_value};
use crate::results::{ResultSet, Row};
use crate::stats;
use crate::suites::contenders::mode;
use crate::suites::{cgi, join, micro, neighbours, pidns, scale, seccomp};

/// One headline line: suite, test, mode, median, comparison.
pub type Line = [String; 5];

fn med(r: Option<&Row>, fig: &str) -> Option<f64> {
    r.and_then(|r| r.median(fig))
}

fn unit(r: Option<&Row>, fig: &str) -> String {
    r.and_then(|r| r.figure(fig))
        .map(|f| f.unit.clone())
        .unwrap_or_default()
}

fn uniq<'a>(it: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for s in it {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

fn pct(base: Option<f64>, v: Option<f64>) -> String {
    match (base, v) {
        (Some(b), Some(v)) => stats::change_percent(b, v)
            .map(fmt_percent)
            .unwrap_or_else(|| "n/a".into()),
        _ => "–".into(),
    }
}

/// The headline lines of every suite present in `rs`.
pub fn lines(rs: &ResultSet) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut push = |s: &str, t: &str, m: &str, v: String, c: String| {
        out.push([s.into(), t.into(), m.into(), v, c]);
    };
    for suite in rs.suites() {
        let rows: Vec<&Row> = rs.suite_rows(suite).collect();
        let tests = uniq(rows.iter().map(|r| r.test.as_str()));
        let modes = uniq(rows.iter().map(|r| r.mode.as_str()));
        let find = |t: &str, m: &str| rows.iter().copied().find(|r| r.test == t && r.mode == m);
        match suite {
            join::SUITE => {
                for t in &tests {
                    let bare = med(find(t, mode::BARE), join::fig::MS);
                    for m in &modes {
                        let Some(r) = find(t, m) else { continue };
                        let Some(ms) = r.median(join::fig::MS) else {
                            push(suite, t, m, "failed".into(), String::new());
                            continue;
                        };
                        let p90 = r
                            .median(join::fig::P90_MS)
                            .map(|p| format!(" (p90 {})", fmt_value(p, "ms")))
                            .unwrap_or_default();
                        let cmp = match bare {
                            Some(b) if *m != mode::BARE => format!("{} vs bare", fmt_ratio(ms / b)),
                            _ => String::new(),
                        };
                        push(suite, t, m, format!("{} ms{p90}", fmt_value(ms, "ms")), cmp);
                    }
                }
            }
            cgi::SUITE => {
                for t in &tests {
                    let rps = |m: &str| med(find(t, m), crate::h2load::fig::REQ_PER_S);
                    let (bw, bare) = (rps(mode::BUBBLEWRAP), rps(mode::BARE));
                    for m in &modes {
                        let Some(v) = rps(m) else {
                            push(suite, t, m, "failed".into(), String::new());
                            continue;
                        };
                        let failed = med(find(t, m), crate::h2load::fig::FAILED).unwrap_or(0.0);
                        let mut val = format!("{} req/s", fmt_value(v, "req/s"));
                        if failed > 0.0 {
                            val.push_str(&format!(", {failed:.0} failed"));
                        }
                        let mut cmp = Vec::new();
                        if let Some(b) = bw.filter(|_| *m != mode::BUBBLEWRAP) {
                            cmp.push(format!("{} vs bubblewrap", fmt_ratio(v / b)));
                        }
                        if *m != mode::BARE && bare.is_some() {
                            cmp.push(format!("{} vs bare", pct(bare, Some(v))));
                        }
                        push(suite, t, m, val, cmp.join(", "));
                    }
                }
            }
            micro::SUITE => {
                for t in &tests {
                    let nat = find(t, mode::NATIVE);
                    let (n1, nn) = (med(nat, micro::fig::SINGLE), med(nat, micro::fig::PARALLEL));
                    let val = match n1 {
                        Some(v) => format!(
                            "native {} {}",
                            fmt_value(v, ""),
                            unit(nat, micro::fig::SINGLE)
                        ),
                        None => "native failed".into(),
                    };
                    let cmp: Vec<String> = modes
                        .iter()
                        .filter(|m| **m != mode::NATIVE)
                        .map(|m| {
                            let r = find(t, m);
                            format!(
                                "{m} {} / {}",
                                pct(n1, med(r, micro::fig::SINGLE)),
                                pct(nn, med(r, micro::fig::PARALLEL))
                            )
                        })
                        .collect();
                    push(suite, t, "1 / N copies", val, cmp.join(", "));
                }
            }
            pidns::SUITE => {
                for t in &tests {
                    let host = med(find(t, "host"), pidns::fig::CPU_NS);
                    let val = match host {
                        Some(v) => format!("host {} ns", fmt_value(v, "ns")),
                        None => "host failed".into(),
                    };
                    let cmp: Vec<String> = modes
                        .iter()
                        .filter(|m| **m != "host")
                        .map(|m| format!("{m} {}", pct(host, med(find(t, m), pidns::fig::CPU_NS))))
                        .collect();
                    push(suite, t, "CPU/op", val, cmp.join(", "));
                }
            }
            seccomp::SUITE => {
                for t in &tests {
                    let floor = med(find(t, seccomp::modes::FLOOR), seccomp::fig::WALL_NS);
                    let val = match floor {
                        Some(v) => format!("floor {} ns", fmt_value(v, "ns")),
                        None => "floor failed".into(),
                    };
                    let cmp: Vec<String> = modes
                        .iter()
                        .filter(|m| **m != seccomp::modes::FLOOR)
                        .map(|m| {
                            format!("{m} {}", pct(floor, med(find(t, m), seccomp::fig::WALL_NS)))
                        })
                        .collect();
                    push(suite, t, "ns/call", val, cmp.join(", "));
                }
            }
            neighbours::SUITE | scale::SUITE => {
                let ls = if suite == scale::SUITE {
                    scale::headline(rs)
                } else {
                    neighbours::headline(rs)
                };
                for [s, t, m, v, c] in ls {
                    push(&s, &t, &m, v, c);
                }
            }
            _ => {}
        }
    }
    out
}

/// The headline as an aligned text table.
pub fn render(rs: &ResultSet) -> String {
    let header: Line = ["suite", "test", "mode", "median", "compared"].map(String::from);
    let body = lines(rs);
    let mut w = [0usize; 5];
    for l in std::iter::once(&header).chain(body.iter()) {
        for (i, c) in l.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut s = String::new();
    for l in std::iter::once(&header).chain(body.iter()) {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = w[i] - c.chars().count();
                if i == 4 {
                    c.clone()
                } else {
                    format!("{c}{}", " ".repeat(pad))
                }
            })
            .collect();
        s.push_str(cells.join("  ").trim_end());
        s.push('\n');
    }
    s
}
