//! Turns a [`ResultSet`] into renderer-neutral sections (tables and chart
//! data), following each suite's [`SuiteLayout`]. Markdown and HTML render the
//! same sections, so both reports always agree.

use crate::report::{
    fmt_bytes, fmt_percent, fmt_range, fmt_ratio, fmt_value, layout_for, Column, RefStyle,
    SuiteLayout, TableKind,
};
use crate::results::{Better, ResultSet, Row};
use crate::stats;

/// Shown for a cell without data.
pub const NONE: &str = "–";

/// A table of preformatted cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub caption: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Per column: right-align (numbers).
    pub numeric: Vec<bool>,
}

/// One bar: a mode's median with its min–max range.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: usize,
    /// Index into the palette; stable per mode within a suite.
    pub color: usize,
}

/// Bars per mode for one test and figure.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub unit: String,
    pub better: Better,
    pub bars: Vec<Bar>,
}

/// One mode's values across the groups of a grouped chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub values: Vec<f64>,
    pub color: usize,
}

/// Grouped bars: for each group (p50, p90, p99) one bar per series (mode).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedChart {
    pub title: String,
    pub unit: String,
    pub groups: Vec<String>,
    pub series: Vec<Series>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    Bars(BarChart),
    Grouped(GroupedChart),
}

/// One suite's part of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub suite: String,
    pub title: String,
    pub intro: String,
    pub tables: Vec<Table>,
    pub charts: Vec<Chart>,
    pub notes: Vec<String>,
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

/// All sections of a result set, suites in order of first appearance.
pub fn build(rs: &ResultSet) -> Vec<Section> {
    rs.suites()
        .into_iter()
        .map(|suite| {
            let layout = layout_for(suite);
            let rows: Vec<&Row> = rs.suite_rows(suite).collect();
            let tests = uniq(rows.iter().map(|r| r.test.as_str()));
            let modes = uniq(rows.iter().map(|r| r.mode.as_str()));
            // Colours follow the suite's mode order, so a mode keeps its colour
            // in every chart of the suite.
            let color = |mode: &str| modes.iter().position(|m| *m == mode).unwrap_or(0);
            let tables = match layout.table {
                TableKind::Load { .. } => tests
                    .iter()
                    .map(|t| load_table(layout, &rows, t, &modes))
                    .collect(),
                TableKind::Micro { baselines } => {
                    match baselines.iter().find(|b| modes.contains(b)) {
                        Some(base) => micro_tables(&rows, &tests, &modes, base),
                        None => vec![generic_table(&rows, &tests, &modes)],
                    }
                }
                TableKind::Generic => vec![generic_table(&rows, &tests, &modes)],
            };
            let mut charts = Vec::new();
            for t in &tests {
                charts.extend(bar_charts(layout, &rows, t, &modes, &color));
                if let Some(l) = latency_chart(layout, &rows, t, &modes, &color) {
                    charts.push(l);
                }
            }
            let notes = rows
                .iter()
                .flat_map(|r| {
                    r.notes
                        .iter()
                        .map(move |n| format!("{} / {}: {n}", r.test, r.mode))
                })
                .collect();
            Section {
                suite: suite.to_string(),
                title: if layout.title.is_empty() {
                    suite.to_string()
                } else {
                    layout.title.to_string()
                },
                intro: layout.intro.to_string(),
                tables,
                charts,
                notes,
            }
        })
        .collect()
}

fn find<'a>(rows: &[&'a Row], test: &str, mode: &str) -> Option<&'a Row> {
    rows.iter()
        .copied()
        .find(|r| r.test == test && r.mode == mode)
}

fn median_cell(row: &Row, fig: &str) -> Option<String> {
    row.figure(fig).map(|f| fmt_value(f.median, &f.unit))
}

fn runs_caption(rows: &[&Row]) -> String {
    let n = rows
        .iter()
        .flat_map(|r| r.figures.values())
        .map(|f| f.samples.len())
        .max()
        .unwrap_or(0);
    match n {
        0 | 1 => "single run".to_string(),
        n => format!("medians of {n} runs"),
    }
}

fn load_table(layout: &SuiteLayout, rows: &[&Row], test: &str, modes: &[&str]) -> Table {
    let TableKind::Load {
        columns,
        references,
    } = layout.table
    else {
        unreachable!("load_table on a non-load layout")
    };
    let test_rows: Vec<&Row> = modes.iter().filter_map(|m| find(rows, test, m)).collect();
    let has = |f: &str| test_rows.iter().any(|r| r.figures.contains_key(f));
    let mut header = vec!["mode".to_string()];
    let mut cells: Vec<Vec<String>> = test_rows.iter().map(|r| vec![r.mode.clone()]).collect();
    let mut covered: Vec<&str> = Vec::new();
    for col in columns {
        let (figs, head): (&[&str], &str) = match col {
            Column::Figure { figure, header } => (std::slice::from_ref(figure), header),
            Column::Joined { figures, header } => (figures, header),
        };
        covered.extend(figs.iter().copied());
        if !figs.iter().any(|f| has(f)) {
            continue;
        }
        header.push(head.to_string());
        for (r, c) in test_rows.iter().zip(cells.iter_mut()) {
            let parts: Vec<String> = figs
                .iter()
                .map(|f| median_cell(r, f).unwrap_or_else(|| NONE.into()))
                .collect();
            c.push(parts.join(" / "));
        }
    }
    // Figures the layout does not know are still shown, after the known ones.
    let extra = uniq(
        test_rows
            .iter()
            .flat_map(|r| r.figures.keys().map(String::as_str)),
    );
    for f in extra.into_iter().filter(|f| !covered.contains(f)) {
        let unit = test_rows
            .iter()
            .find_map(|r| r.figure(f))
            .map(|x| x.unit.clone())
            .unwrap_or_default();
        header.push(format!("{f} ({unit})"));
        for (r, c) in test_rows.iter().zip(cells.iter_mut()) {
            c.push(median_cell(r, f).unwrap_or_else(|| NONE.into()));
        }
    }
    for rf in references {
        let Some(base) = find(rows, test, rf.mode).and_then(|r| r.median(rf.figure)) else {
            continue;
        };
        header.push(rf.header.to_string());
        for (r, c) in test_rows.iter().zip(cells.iter_mut()) {
            let v = r.median(rf.figure);
            c.push(match v {
                _ if r.mode == rf.mode => NONE.to_string(),
                None => NONE.to_string(),
                Some(v) => match rf.style {
                    RefStyle::Ratio => stats::retention(v, base)
                        .map(fmt_ratio)
                        .unwrap_or_else(|| "n/a".into()),
                    RefStyle::Percent => stats::change_percent(base, v)
                        .map(fmt_percent)
                        .unwrap_or_else(|| "n/a".into()),
                },
            });
        }
    }
    let numeric = (0..header.len()).map(|i| i > 0).collect();
    Table {
        caption: format!("{test} ({})", runs_caption(&test_rows)),
        header,
        rows: cells,
        numeric,
    }
}

fn micro_tables(rows: &[&Row], tests: &[&str], modes: &[&str], base: &str) -> Vec<Table> {
    let figures = uniq(
        rows.iter()
            .flat_map(|r| r.figures.keys().map(String::as_str)),
    );
    let contenders: Vec<&str> = modes.iter().copied().filter(|m| *m != base).collect();
    figures
        .into_iter()
        .map(|fig| {
            let mut header = vec!["test".to_string(), "unit".to_string(), base.to_string()];
            for c in &contenders {
                header.push(c.to_string());
                header.push(format!("{c} diff %"));
            }
            let mut better = Vec::new();
            let mut body = Vec::new();
            let mut used = Vec::new();
            for t in tests {
                let Some(unit_fig) = modes.iter().find_map(|m| find(rows, t, m)?.figure(fig))
                else {
                    continue;
                };
                better.push(unit_fig.better);
                let b = find(rows, t, base).and_then(|r| r.median(fig));
                let mut line = vec![t.to_string(), unit_fig.unit.clone()];
                line.push(
                    b.map(|v| fmt_value(v, &unit_fig.unit))
                        .unwrap_or_else(|| NONE.into()),
                );
                for c in &contenders {
                    let row = find(rows, t, c);
                    used.extend(row);
                    let v = row.and_then(|r| r.median(fig));
                    line.push(
                        v.map(|v| fmt_value(v, &unit_fig.unit))
                            .unwrap_or_else(|| NONE.into()),
                    );
                    let d = match (b, v) {
                        (Some(b), Some(v)) => stats::change_percent(b, v).map(fmt_percent),
                        _ => None,
                    };
                    line.push(d.unwrap_or_else(|| NONE.into()));
                }
                used.extend(find(rows, t, base));
                body.push(line);
            }
            let direction = if better.iter().all(|b| *b == Better::Higher) {
                ", higher is better"
            } else if better.iter().all(|b| *b == Better::Lower) {
                ", lower is better"
            } else {
                ""
            };
            let numeric = (0..header.len()).map(|i| i > 1).collect();
            Table {
                caption: format!(
                    "{}{direction} ({}; diff % against {base})",
                    crate::report::figure_label(fig),
                    runs_caption(&used)
                ),
                header,
                rows: body,
                numeric,
            }
        })
        .collect()
}

fn generic_table(rows: &[&Row], tests: &[&str], modes: &[&str]) -> Table {
    let figures = uniq(
        rows.iter()
            .flat_map(|r| r.figures.keys().map(String::as_str)),
    );
    let mut header = vec!["test".to_string(), "mode".to_string()];
    for f in &figures {
        let unit = rows
            .iter()
            .find_map(|r| r.figure(f))
            .map(|x| x.unit.as_str())
            .unwrap_or("");
        header.push(if unit.is_empty() {
            f.to_string()
        } else {
            format!("{f} ({unit})")
        });
    }
    let mut body = Vec::new();
    for t in tests {
        for m in modes {
            let Some(r) = find(rows, t, m) else { continue };
            let mut line = vec![t.to_string(), m.to_string()];
            line.extend(
                figures
                    .iter()
                    .map(|f| r.figure(f).map(fmt_range).unwrap_or_else(|| NONE.into())),
            );
            body.push(line);
        }
    }
    let numeric = (0..header.len()).map(|i| i > 1).collect();
    Table {
        caption: format!("median [min–max] ({})", runs_caption(rows)),
        header,
        rows: body,
        numeric,
    }
}

fn bar_charts(
    layout: &SuiteLayout,
    rows: &[&Row],
    test: &str,
    modes: &[&str],
    color: &dyn Fn(&str) -> usize,
) -> Vec<Chart> {
    let test_rows: Vec<&Row> = modes.iter().filter_map(|m| find(rows, test, m)).collect();
    let present = uniq(
        test_rows
            .iter()
            .flat_map(|r| r.figures.keys().map(String::as_str)),
    );
    let mut figs: Vec<&str> = layout
        .charts
        .iter()
        .copied()
        .filter(|f| present.contains(f))
        .collect();
    if figs.is_empty() {
        let latency: &[&str] = layout.latency.as_ref().map(|l| &l[..]).unwrap_or(&[]);
        figs = present
            .into_iter()
            .filter(|f| !latency.contains(f))
            .collect();
    }
    figs.into_iter()
        .filter_map(|fig| {
            let bars: Vec<Bar> = test_rows
                .iter()
                .filter_map(|r| {
                    let f = r.figure(fig).filter(|f| !f.is_empty())?;
                    Some(Bar {
                        label: r.mode.clone(),
                        median: f.median,
                        min: f.min,
                        max: f.max,
                        samples: f.samples.len(),
                        color: color(&r.mode),
                    })
                })
                .collect();
            let first = test_rows.iter().find_map(|r| r.figure(fig))?;
            (!bars.is_empty()).then(|| {
                Chart::Bars(BarChart {
                    title: format!("{test}: {}", crate::report::figure_label(fig)),
                    unit: first.unit.clone(),
                    better: first.better,
                    bars,
                })
            })
        })
        .collect()
}

fn latency_chart(
    layout: &SuiteLayout,
    rows: &[&Row],
    test: &str,
    modes: &[&str],
    color: &dyn Fn(&str) -> usize,
) -> Option<Chart> {
    let figs = layout.latency?;
    let series: Vec<Series> = modes
        .iter()
        .filter_map(|m| find(rows, test, m))
        .filter(|r| figs.iter().any(|f| r.median(f).is_some()))
        .map(|r| Series {
            label: r.mode.clone(),
            values: figs
                .iter()
                .map(|f| r.median(f).unwrap_or(f64::NAN))
                .collect(),
            color: color(&r.mode),
        })
        .collect();
    (!series.is_empty()).then(|| {
        Chart::Grouped(GroupedChart {
            title: format!("{test}: latency percentiles"),
            unit: "ms".into(),
            groups: ["p50", "p90", "p99"].map(String::from).to_vec(),
            series,
        })
    })
}

/// The machine and run description.
pub fn machine_table(rs: &ResultSet) -> Table {
    let m = &rs.machine;
    let kv = [
        ("corral version", rs.corral_version.clone()),
        ("started", rs.started.clone()),
        ("finished", rs.finished.clone()),
        (
            "quick run",
            if rs.quick {
                "yes (reduced counts: not comparable to a full run)".into()
            } else {
                "no".into()
            },
        ),
        ("kernel", m.kernel.clone()),
        ("distribution", m.distro.clone()),
        ("CPU", format!("{} × {}", m.cpus, m.cpu_model)),
        ("memory", fmt_bytes(m.memory_bytes)),
        ("cgroup", m.cgroup.as_str().to_string()),
    ];
    Table {
        caption: "machine".into(),
        header: vec!["".into(), "".into()],
        rows: kv
            .into_iter()
            .map(|(k, v)| vec![k.to_string(), v])
            .collect(),
        numeric: vec![false, false],
    }
}

/// Tools and their versions (`missing` when not installed).
pub fn tools_table(rs: &ResultSet) -> Table {
    Table {
        caption: "tools".into(),
        header: vec!["tool".into(), "version".into(), "path".into()],
        rows: rs
            .machine
            .tools
            .iter()
            .map(|(name, t)| {
                vec![
                    name.clone(),
                    t.describe().to_string(),
                    t.path.clone().unwrap_or_else(|| NONE.into()),
                ]
            })
            .collect(),
        numeric: vec![false, false, false],
    }
}
