//! `report.html`: one self-contained page (inline CSS and SVG; no scripts,
//! fonts, images or any other external resource).

use std::fmt::Write;

use crate::report::sections::{self, Chart, Table};
use crate::report::svg::{self, esc};
use crate::results::ResultSet;

const CSS: &str = r#"
:root { color-scheme: light; --fg: #1a1a1a; --muted: #5a5a5a; --line: #d8d8d8; --head: #f3f5f7; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0 auto; max-width: 1100px; padding: 1.5rem; }
h1 { margin: 0 0 .25rem; font-size: 1.7rem; }
h2 { margin-top: 2.5rem; border-bottom: 2px solid var(--line); padding-bottom: .2rem; }
.meta { color: var(--muted); margin: 0; }
.quick { background: #fff4d6; border-left: 4px solid #E69F00; padding: .5rem .8rem; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; }
a { color: #005a8c; }
table { border-collapse: collapse; margin: 1rem 0 1.5rem; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding-bottom: .3rem; }
th, td { border: 1px solid var(--line); padding: .3rem .6rem; }
thead th { background: var(--head); }
td.num { text-align: right; white-space: nowrap; }
tbody th { text-align: left; font-weight: 500; }
.scroll { overflow-x: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 1.2rem; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: .6rem; background: #fff; }
figure svg { display: block; max-width: 100%; height: auto; }
/* The caption wraps to the chart's width instead of widening the figure. */
figcaption { font-size: .85rem; color: var(--muted); width: 0; min-width: 100%; }
figcaption strong { color: var(--fg); }
.notes { color: var(--muted); }
footer { margin-top: 3rem; color: var(--muted); font-size: .85rem; }
@media print { nav { display: none; } figure { break-inside: avoid; } }
"#;

/// Render `` `code` `` spans of already-escaped text.
fn inline_code(escaped: &str) -> String {
    let mut out = String::new();
    for (i, part) in escaped.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

fn anchor(suite: &str) -> String {
    let s: String = suite
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("suite-{s}")
}

/// One `<table>`; the first column is a row header.
pub fn table(t: &Table) -> String {
    let mut o = String::from(r#"<div class="scroll"><table>"#);
    if !t.caption.is_empty() {
        let _ = write!(o, "<caption>{}</caption>", esc(&t.caption));
    }
    if t.header.iter().any(|h| !h.is_empty()) {
        o.push_str("<thead><tr>");
        for h in &t.header {
            let _ = write!(o, r#"<th scope="col">{}</th>"#, esc(h));
        }
        o.push_str("</tr></thead>");
    }
    o.push_str("<tbody>");
    for r in &t.rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            if i == 0 {
                let _ = write!(o, r#"<th scope="row">{}</th>"#, esc(c));
            } else if t.numeric.get(i).copied().unwrap_or(false) {
                let _ = write!(o, r#"<td class="num">{}</td>"#, esc(c));
            } else {
                let _ = write!(o, "<td>{}</td>", esc(c));
            }
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table></div>\n");
    o
}

fn chart(c: &Chart, id: &str) -> String {
    let (svg, caption) = match c {
        Chart::Bars(b) => (
            svg::bar_chart(b, id),
            format!(
                "<strong>{}</strong> — {}, {} is better. Bars: median; whiskers: min–max over runs.",
                esc(&b.title),
                esc(&b.unit),
                b.better.as_str()
            ),
        ),
        Chart::Grouped(g) => (
            svg::grouped_chart(g, id),
            format!(
                "<strong>{}</strong> — {}, lower is better. Nearest-rank percentiles of successful responses (median over runs).",
                esc(&g.title),
                esc(&g.unit)
            ),
        ),
    };
    format!("<figure>{svg}<figcaption>{caption}</figcaption></figure>\n")
}

/// The whole page.
pub fn render(rs: &ResultSet) -> String {
    let secs = sections::build(rs);
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>corral benchmark report — {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        esc(&rs.started)
    );
    let _ = write!(
        o,
        "<header><h1>corral benchmark report</h1><p class=\"meta\">Run {} → {} on {} ({} × {}), corral {}. Raw samples are in <code>results.json</code>.</p>",
        esc(&rs.started),
        esc(&rs.finished),
        esc(&rs.machine.distro),
        rs.machine.cpus,
        esc(&rs.machine.cpu_model),
        esc(&rs.corral_version)
    );
    if rs.quick {
        o.push_str("<p class=\"quick\"><strong>Quick run:</strong> reduced request counts and repetitions; numbers are not comparable to a full run.</p>");
    }
    o.push_str("</header>\n<nav aria-label=\"Contents\"><ul>");
    for s in &secs {
        let _ = write!(
            o,
            "<li><a href=\"#{}\">{}</a></li>",
            anchor(&s.suite),
            esc(&s.title)
        );
    }
    o.push_str("<li><a href=\"#machine\">Machine</a></li></ul></nav>\n<main>\n");
    let mut n = 0;
    for s in &secs {
        let _ = write!(
            o,
            "<section id=\"{}\" aria-labelledby=\"{0}-h\">\n<h2 id=\"{0}-h\">{}</h2>\n",
            anchor(&s.suite),
            esc(&s.title)
        );
        if !s.intro.is_empty() {
            let _ = writeln!(o, "<p>{}</p>", inline_code(&esc(&s.intro)));
        }
        for t in &s.tables {
            o.push_str(&table(t));
        }
        if !s.charts.is_empty() {
            o.push_str("<div class=\"charts\">\n");
            for c in &s.charts {
                n += 1;
                o.push_str(&chart(c, &format!("chart{n}")));
            }
            o.push_str("</div>\n");
        }
        if !s.notes.is_empty() {
            o.push_str("<ul class=\"notes\">");
            for note in &s.notes {
                let _ = write!(o, "<li>{}</li>", esc(note));
            }
            o.push_str("</ul>\n");
        }
        o.push_str("</section>\n");
    }
    if !rs.notes.is_empty() {
        o.push_str("<section aria-labelledby=\"notes-h\"><h2 id=\"notes-h\">Notes</h2><ul class=\"notes\">");
        for note in &rs.notes {
            let _ = write!(o, "<li>{}</li>", esc(note));
        }
        o.push_str("</ul></section>\n");
    }
    o.push_str(
        "<section id=\"machine\" aria-labelledby=\"machine-h\"><h2 id=\"machine-h\">Machine</h2>\n",
    );
    let mut machine = sections::machine_table(rs);
    machine.caption.clear();
    o.push_str(&table(&machine));
    if !rs.machine.tools.is_empty() {
        o.push_str(&table(&sections::tools_table(rs)));
    }
    let _ = write!(
        o,
        "</section>\n</main>\n<footer>Generated by corral-bench {}. This page is self-contained: no scripts and no external resources.</footer>\n</body>\n</html>\n",
        esc(env!("CARGO_PKG_VERSION"))
    );
    o
}
