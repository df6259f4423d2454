//! Hand-written inline SVG charts (no scripts, no external resources).
//!
//! Every chart is an `<svg role="img">` labelled by its `<title>` and a
//! `<desc>` that lists every plotted value, so screen readers get the data;
//! axes carry the unit, and every bar carries its value.

use std::fmt::Write;

use crate::report::fmt_value;
use crate::report::sections::{BarChart, GroupedChart};

/// Okabe–Ito colour-blind-safe palette, its yellow replaced by grey (too
/// little contrast on white).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#8C8C8C",
];

fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escape text for XML/HTML content and attributes.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A "nice" axis maximum ≥ `max` and its tick step (1, 2 or 5 × 10ᵏ).
pub fn nice_axis(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.25);
    }
    let raw = max / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// Axis tick label: as many decimals as the step needs (`0`, `0.25`, `1500`).
pub fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = (0..=6usize)
        .find(|&d| {
            let x = step * 10f64.powi(d as i32);
            (x - x.round()).abs() < 1e-6 * x.max(1.0)
        })
        .unwrap_or(6);
    format!("{v:.decimals$}")
}

const TOP: f64 = 20.0;
const PLOT_H: f64 = 180.0;
const LEFT: f64 = 70.0;
const BOTTOM: f64 = 48.0;
const FONT: &str = r#"font-family="system-ui, sans-serif""#;

/// Start a chart `LEFT + plot_w + right` wide: open the svg element with its
/// title and a desc listing every plotted value (`desc`, joined by "; "), and
/// draw the y axis (up to a nice maximum at or above `top`), its grid and its
/// unit label. Returns the svg so far and that axis maximum.
fn frame(
    id: &str,
    title: &str,
    unit: &str,
    desc: &[String],
    plot_w: f64,
    right: f64,
    top: f64,
) -> (String, f64) {
    let (axis_max, step) = nice_axis(top);
    let (w, h) = (LEFT + plot_w + right, TOP + PLOT_H + BOTTOM);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart" role="img" aria-labelledby="{id}-t {id}-d" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" {FONT} font-size="12"><title id="{id}-t">{}</title><desc id="{id}-d">{}</desc>"#,
        esc(title),
        esc(&desc.join("; "))
    );
    let mut v = 0.0;
    while v <= axis_max + step / 2.0 {
        let y = TOP + PLOT_H - v / axis_max * PLOT_H;
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            esc(&fmt_tick(v, step))
        );
        v += step;
    }
    let cy = TOP + PLOT_H / 2.0;
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{:.1}" stroke="#333"/><line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/><text transform="translate(14 {cy:.1}) rotate(-90)" text-anchor="middle" fill="#333">{}</text>"##,
        TOP + PLOT_H,
        LEFT + plot_w,
        TOP + PLOT_H,
        TOP + PLOT_H,
        esc(unit)
    );
    (out, axis_max)
}

fn y_of(v: f64, axis_max: f64) -> f64 {
    TOP + PLOT_H - (v.max(0.0) / axis_max * PLOT_H)
}

/// Bars per mode with min–max whiskers and the median printed on each bar.
pub fn bar_chart(c: &BarChart, id: &str) -> String {
    let slot = 96.0;
    let plot_w = (c.bars.len() as f64 * slot).max(192.0);
    let top = c
        .bars
        .iter()
        .map(|b| b.max.max(b.median))
        .fold(0.0, f64::max);
    let title = format!("{} ({}, {} is better)", c.title, c.unit, c.better.as_str());
    let desc: Vec<String> = c
        .bars
        .iter()
        .map(|b| {
            format!(
                "{}: median {} {} (min {}, max {}, {} runs)",
                b.label,
                fmt_value(b.median, &c.unit),
                c.unit,
                fmt_value(b.min, &c.unit),
                fmt_value(b.max, &c.unit),
                b.samples
            )
        })
        .collect();
    let (mut out, axis_max) = frame(id, &title, &c.unit, &desc, plot_w, 16.0, top);
    let offset = (plot_w - c.bars.len() as f64 * slot) / 2.0;
    for (i, b) in c.bars.iter().enumerate() {
        let cx = LEFT + offset + slot * (i as f64 + 0.5);
        let bw = slot * 0.6;
        let y = y_of(b.median, axis_max);
        let base = TOP + PLOT_H;
        let _ = write!(
            out,
            r#"<rect class="bar" x="{:.1}" y="{y:.1}" width="{bw:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
            cx - bw / 2.0,
            base - y,
            colour(b.color),
            esc(&desc[i])
        );
        let mut label_y = y - 6.0;
        if b.samples > 1 && b.max > b.min {
            let (y1, y2) = (y_of(b.min, axis_max), y_of(b.max, axis_max));
            let _ = write!(
                out,
                r##"<g class="range" stroke="#222" stroke-width="1.5"><line x1="{cx:.1}" x2="{cx:.1}" y1="{y1:.1}" y2="{y2:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{y1:.1}" y2="{y1:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{y2:.1}" y2="{y2:.1}"/></g>"##,
                cx - 6.0,
                cx + 6.0,
                cx - 6.0,
                cx + 6.0
            );
            label_y = label_y.min(y2 - 6.0);
        }
        let _ = write!(
            out,
            r##"<text class="value" x="{cx:.1}" y="{label_y:.1}" text-anchor="middle" font-weight="600" fill="#111">{}</text><text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#111">{}</text><text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#666" font-size="10">n={}</text>"##,
            esc(&fmt_value(b.median, &c.unit)),
            base + 16.0,
            esc(&b.label),
            base + 30.0,
            b.samples
        );
    }
    out.push_str("</svg>");
    out
}

/// Grouped bars (e.g. p50/p90/p99) with one bar per series and a legend.
pub fn grouped_chart(c: &GroupedChart, id: &str) -> String {
    let bw = 36.0;
    let group_w = c.series.len() as f64 * bw + 28.0;
    let plot_w = (c.groups.len() as f64 * group_w).max(192.0);
    let legend_w = 20.0
        + c.series
            .iter()
            .map(|s| s.label.chars().count())
            .max()
            .unwrap_or(0) as f64
            * 7.5;
    let top = c
        .series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let title = format!("{} ({}, lower is better)", c.title, c.unit);
    let desc: Vec<String> = c
        .series
        .iter()
        .map(|s| {
            let vals: Vec<String> = c
                .groups
                .iter()
                .zip(&s.values)
                .map(|(g, v)| format!("{g} {} {}", fmt_value(*v, &c.unit), c.unit))
                .collect();
            format!("{}: {}", s.label, vals.join(", "))
        })
        .collect();
    let (mut out, axis_max) = frame(id, &title, &c.unit, &desc, plot_w, 24.0 + legend_w, top);
    let base = TOP + PLOT_H;
    for (gi, g) in c.groups.iter().enumerate() {
        let gx = LEFT + gi as f64 * group_w + 14.0;
        for (si, s) in c.series.iter().enumerate() {
            let v = s.values.get(gi).copied().unwrap_or(f64::NAN);
            let x = gx + si as f64 * bw;
            let cx = x + bw / 2.0;
            let text = fmt_value(v, &c.unit);
            let label_y = if v.is_finite() {
                let y = y_of(v, axis_max);
                let _ = write!(
                    out,
                    r#"<rect class="bar" x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {g} {} {}</title></rect>"#,
                    x + 2.0,
                    bw - 4.0,
                    base - y,
                    colour(s.color),
                    esc(&s.label),
                    esc(&text),
                    esc(&c.unit)
                );
                y - 5.0
            } else {
                base - 5.0
            };
            let _ = write!(
                out,
                r##"<text class="value" x="{cx:.1}" y="{label_y:.1}" text-anchor="middle" font-size="10" fill="#111">{}</text>"##,
                esc(&text)
            );
        }
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#111">{}</text>"##,
            gx + c.series.len() as f64 * bw / 2.0,
            base + 16.0,
            esc(g)
        );
    }
    let lx = LEFT + plot_w + 16.0;
    for (si, s) in c.series.iter().enumerate() {
        let ly = TOP + 4.0 + si as f64 * 18.0;
        let _ = write!(
            out,
            r##"<rect x="{lx:.1}" y="{ly:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}" fill="#111">{}</text>"##,
            colour(s.color),
            lx + 18.0,
            ly + 10.0,
            esc(&s.label)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axes() {
        assert_eq!(nice_axis(761.0), (800.0, 200.0));
        assert_eq!(nice_axis(9.3), (10.0, 5.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.25));
        let (m, s) = nice_axis(0.291);
        assert!(m >= 0.291 && (m / s).round() <= 5.0, "{m} {s}");
    }

    #[test]
    fn tick_labels() {
        assert_eq!(fmt_tick(80.0, 20.0), "80");
        assert_eq!(fmt_tick(0.5, 0.25), "0.50");
        assert_eq!(fmt_tick(0.2, 0.1), "0.2");
        assert_eq!(fmt_tick(1500.0, 500.0), "1500");
    }

    #[test]
    fn escapes() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
