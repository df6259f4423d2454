//! `corral-bench compare OLD NEW`: figure-by-figure medians of two result sets.
//!
//! For each `(suite, test, mode, figure)` present in either set, the ratio is
//! `new median / old median`. The verdict uses the figure's `better`
//! direction with a tolerance (default ±2 %, see [`DEFAULT_TOLERANCE`]): within
//! it the change is `same`, outside it `better` or `worse`. Figures present on
//! one side only are `added` / `removed`.

use std::fmt::Write;

use crate::report::fmt_value;
use crate::results::{Better, ResultSet};

/// Relative change below which a difference is reported as `same`.
pub const DEFAULT_TOLERANCE: f64 = 0.02;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    Same,
    Added,
    Removed,
    /// A ratio cannot be formed (old median 0 with a non-zero new one, or no data).
    Incomparable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Same => "same",
            Verdict::Added => "added",
            Verdict::Removed => "removed",
            Verdict::Incomparable => "n/a",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonRow {
    pub suite: String,
    pub test: String,
    pub mode: String,
    pub figure: String,
    pub unit: String,
    pub better: Better,
    pub old: Option<f64>,
    pub new: Option<f64>,
    /// `new / old`.
    pub ratio: Option<f64>,
    pub verdict: Verdict,
}

/// Compare with [`DEFAULT_TOLERANCE`].
pub fn compare(old: &ResultSet, new: &ResultSet) -> Vec<ComparisonRow> {
    compare_with(old, new, DEFAULT_TOLERANCE)
}

/// Compare; rows in `new`'s order, then figures only `old` had.
pub fn compare_with(old: &ResultSet, new: &ResultSet, tolerance: f64) -> Vec<ComparisonRow> {
    let mut out = Vec::new();
    for nr in &new.rows {
        let or = old.row(&nr.suite, &nr.test, &nr.mode);
        for (name, nf) in &nr.figures {
            let of = or.and_then(|r| r.figure(name));
            let o = of.map(|f| f.median).filter(|v| v.is_finite());
            let n = Some(nf.median).filter(|v| v.is_finite());
            let (ratio, verdict) = judge(o, n, nf.better, tolerance, of.is_some());
            out.push(ComparisonRow {
                suite: nr.suite.clone(),
                test: nr.test.clone(),
                mode: nr.mode.clone(),
                figure: name.clone(),
                unit: nf.unit.clone(),
                better: nf.better,
                old: o,
                new: n,
                ratio,
                verdict,
            });
        }
    }
    for or in &old.rows {
        let nr = new.row(&or.suite, &or.test, &or.mode);
        for (name, of) in &or.figures {
            if nr.and_then(|r| r.figure(name)).is_some() {
                continue;
            }
            out.push(ComparisonRow {
                suite: or.suite.clone(),
                test: or.test.clone(),
                mode: or.mode.clone(),
                figure: name.clone(),
                unit: of.unit.clone(),
                better: of.better,
                old: Some(of.median).filter(|v| v.is_finite()),
                new: None,
                ratio: None,
                verdict: Verdict::Removed,
            });
        }
    }
    out
}

fn judge(
    old: Option<f64>,
    new: Option<f64>,
    better: Better,
    tol: f64,
    had_old: bool,
) -> (Option<f64>, Verdict) {
    match (old, new) {
        _ if !had_old => (None, Verdict::Added),
        (Some(o), Some(n)) if o == 0.0 && n == 0.0 => (Some(1.0), Verdict::Same),
        (Some(o), Some(n)) if o != 0.0 => {
            let r = n / o;
            let v = if (r - 1.0).abs() <= tol {
                Verdict::Same
            } else if (r > 1.0) == (better == Better::Higher) {
                Verdict::Better
            } else {
                Verdict::Worse
            };
            (Some(r), v)
        }
        _ => (None, Verdict::Incomparable),
    }
}

fn num(v: Option<f64>, unit: &str) -> String {
    v.map(|v| fmt_value(v, unit)).unwrap_or_else(|| "–".into())
}

fn ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.3}")).unwrap_or_else(|| "–".into())
}

const HEADER: [&str; 9] = [
    "suite", "test", "mode", "figure", "unit", "old", "new", "new/old", "verdict",
];

fn cells(r: &ComparisonRow) -> [String; 9] {
    [
        r.suite.clone(),
        r.test.clone(),
        r.mode.clone(),
        r.figure.clone(),
        format!("{} ({} better)", r.unit, r.better.as_str()),
        num(r.old, &r.unit),
        num(r.new, &r.unit),
        ratio(r.ratio),
        r.verdict.as_str().to_string(),
    ]
}

/// A Markdown table.
pub fn render_markdown(rows: &[ComparisonRow]) -> String {
    let mut o = format!(
        "| {} |\n|---|---|---|---|---|---:|---:|---:|---|\n",
        HEADER.join(" | ")
    );
    for r in rows {
        let c: Vec<String> = cells(r).iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(o, "| {} |", c.join(" | "));
    }
    o
}

/// An aligned plain-text table for terminals.
pub fn render_plain(rows: &[ComparisonRow]) -> String {
    let body: Vec<[String; 9]> = rows.iter().map(cells).collect();
    let mut w: Vec<usize> = HEADER.iter().map(|h| h.chars().count()).collect();
    for r in &body {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |c: &[String]| {
        let parts: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let pad = w[i] - s.chars().count();
                // Numbers right-aligned.
                if (5..=7).contains(&i) {
                    format!("{}{s}", " ".repeat(pad))
                } else {
                    format!("{s}{}", " ".repeat(pad))
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut o = line(&HEADER.map(String::from));
    for r in &body {
        o.push_str(&line(r));
    }
    o
}

/// One line: `2 better, 1 worse, 5 same, 0 added, 0 removed`.
pub fn summary(rows: &[ComparisonRow]) -> String {
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    format!(
        "{} better, {} worse, {} same, {} added, {} removed",
        count(Verdict::Better),
        count(Verdict::Worse),
        count(Verdict::Same),
        count(Verdict::Added),
        count(Verdict::Removed)
    )
}
