//! `report.md`: the sections' tables as GitHub-flavoured Markdown.

use std::fmt::Write;

use crate::report::sections::{self, Table};
use crate::results::ResultSet;

/// Escape a cell: pipes and newlines would break the table.
fn cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// One Markdown table with its caption as an emphasised line above it.
pub fn table(t: &Table) -> String {
    let mut out = String::new();
    if !t.caption.is_empty() {
        let _ = writeln!(out, "*{}*\n", cell(&t.caption));
    }
    let head: Vec<String> = t.header.iter().map(|h| cell(h)).collect();
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let rule: Vec<&str> = t
        .numeric
        .iter()
        .map(|&n| if n { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// The whole report.
pub fn render(rs: &ResultSet) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# corral benchmark report\n");
    let _ = writeln!(
        out,
        "Run {} → {} on {} ({} × {}), corral {}.{}\n",
        rs.started,
        rs.finished,
        cell(&rs.machine.distro),
        rs.machine.cpus,
        cell(&rs.machine.cpu_model),
        rs.corral_version,
        if rs.quick {
            " **Quick run: reduced counts, not comparable to a full run.**"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "Charts with min–max ranges are in `report.html`; raw samples in `results.json`.\n"
    );
    for s in sections::build(rs) {
        let _ = writeln!(out, "## {}\n", cell(&s.title));
        if !s.intro.is_empty() {
            let _ = writeln!(out, "{}\n", s.intro);
        }
        for t in &s.tables {
            let _ = writeln!(out, "{}", table(t));
        }
        if !s.notes.is_empty() {
            let _ = writeln!(out, "Notes:\n");
            for n in &s.notes {
                let _ = writeln!(out, "- {}", cell(n));
            }
            out.push('\n');
        }
    }
    if !rs.notes.is_empty() {
        let _ = writeln!(out, "## Notes\n");
        for n in &rs.notes {
            let _ = writeln!(out, "- {}", cell(n));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "## Machine\n");
    let m = sections::machine_table(rs);
    let _ = writeln!(out, "| | |\n|---|---|");
    for r in &m.rows {
        let _ = writeln!(out, "| {} | {} |", cell(&r[0]), cell(&r[1]));
    }
    out.push('\n');
    if !rs.machine.tools.is_empty() {
        let mut t = sections::tools_table(rs);
        t.caption.clear();
        let _ = writeln!(out, "{}", table(&t));
    }
    out
}
