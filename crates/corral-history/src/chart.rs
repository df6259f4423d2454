//! A tenant's usage against its limits as one self-contained HTML page of
//! inline SVG charts (no scripts, no external resources: it opens offline,
//! like corral-bench's report). One chart per resource: the average per
//! step, the highest sample where the rows keep one, the limit in force as
//! a dashed step line; faults are drawn as red marks along the time axis.

use crate::query::{limits_at, regroup};
use crate::row::Row;
use crate::store::{LimitsRow, Snapshot};
use std::fmt::Write;

/// Okabe–Ito colours (corral-bench's palette): average, peak, limit.
const AVG: &str = "#0072B2";
const PEAK: &str = "#56B4E9";
const LIMIT: &str = "#D55E00";
const FAULT: &str = "#CC0000";

const W: f64 = 860.0;
const H: f64 = 200.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 40.0;

/// Escape text for XML/HTML content and attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A "nice" axis maximum ≥ `max` and its tick step (1, 2 or 5 × 10ᵏ).
fn nice_axis(max: f64) -> (f64, f64) {
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

/// "2026-11-25 14:05" (UTC) of Unix seconds.
pub fn utc(ts: i64) -> String {
    let secs = ts.rem_euclid(86_400);
    let (y, m, d) = corral_sandbox::services::log::civil_from_days(ts.div_euclid(86_400));
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60
    )
}

/// A value with its unit, short ("1.5 GiB", "250 %", "12 /s").
pub fn human(v: f64, unit: &str) -> String {
    if unit == "B" || unit == "B/s" {
        let mut x = v;
        for p in ["", "Ki", "Mi", "Gi", "Ti"] {
            if x.abs() < 1024.0 || p == "Ti" {
                let suffix = unit.trim_start_matches('B');
                return if p.is_empty() || x.fract() == 0.0 {
                    format!("{x:.0} {p}B{suffix}")
                } else {
                    format!("{x:.1} {p}B{suffix}")
                };
            }
            x /= 1024.0;
        }
    }
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// One resource's chart: per step (time, average, peak), the limit and the
/// fault count per step.
struct Series<'a> {
    title: &'a str,
    unit: &'a str,
    avg: Vec<(i64, f64)>,
    peak: Option<Vec<(i64, f64)>>,
    limit: Vec<(i64, Option<f64>)>,
    faults: Vec<(i64, i64)>,
}

fn chart(s: &Series, from: i64, to: i64, step: i64) -> String {
    let plot_w = W - LEFT - RIGHT;
    let x = |t: i64| {
        let f = (t - from) as f64 / (to - from).max(1) as f64;
        LEFT + f.clamp(0.0, 1.0) * plot_w
    };
    let top = s
        .avg
        .iter()
        .map(|p| p.1)
        .chain(s.peak.iter().flatten().map(|p| p.1))
        .chain(s.limit.iter().filter_map(|p| p.1))
        .fold(0.0f64, f64::max);
    // Bytes get ticks at round binary multiples (256 MiB, not 238.4 MiB).
    let scale = if s.unit.starts_with('B') {
        let mut sc = 1.0;
        while top * 1.05 / sc >= 1024.0 {
            sc *= 1024.0;
        }
        sc
    } else {
        1.0
    };
    let (ymax, ystep) = nice_axis(top * 1.05 / scale);
    let (ymax, ystep) = (ymax * scale, ystep * scale);
    let y = |v: f64| TOP + H - (v / ymax).min(1.0) * H;
    let limit_now = s.limit.last().and_then(|l| l.1);
    let peak_all = s.peak.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
    let avg_all = if s.avg.is_empty() {
        0.0
    } else {
        s.avg.iter().map(|p| p.1).sum::<f64>() / s.avg.len() as f64
    };
    let faults: i64 = s.faults.iter().map(|f| f.1).sum();
    let desc = format!(
        "{}: average {}, highest {}, limit {}, {} faults",
        s.title,
        human(avg_all, s.unit),
        human(peak_all.max(avg_all), s.unit),
        limit_now
            .map(|l| human(l, s.unit))
            .unwrap_or_else(|| "none".into()),
        faults
    );
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg role="img" viewBox="0 0 {W} {vh}" width="{W}" height="{vh}" font-family="system-ui, sans-serif" font-size="12"><title>{t}</title><desc>{d}</desc>"#,
        vh = TOP + H + BOTTOM,
        t = esc(s.title),
        d = esc(&desc)
    );
    // Grid and y axis labels.
    let mut v = 0.0;
    while v <= ymax + ystep / 2.0 {
        let _ = write!(
            o,
            r##"<line x1="{LEFT}" x2="{x2}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{label}</text>"##,
            x2 = W - RIGHT,
            yy = y(v),
            tx = LEFT - 6.0,
            ty = y(v) + 4.0,
            label = esc(&human(v, s.unit))
        );
        v += ystep;
    }
    // Time axis: 6 labels, as short as the span allows.
    let ticks = 6;
    let label_of = |t: i64| {
        let full = utc(t);
        match to - from {
            span if span <= 600 => format!("{}:{:02}", &full[11..], t.rem_euclid(60)),
            span if span <= 86_400 => full[11..].to_string(),
            _ => full[5..].to_string(),
        }
    };
    for i in 0..=ticks {
        let t = from + (to - from) * i / ticks;
        let anchor = match i {
            0 => "start",
            i if i == ticks => "end",
            _ => "middle",
        };
        let _ = write!(
            o,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{yb}" stroke="#eee"/><text x="{xx:.1}" y="{ty}" text-anchor="{anchor}">{label}</text>"##,
            xx = x(t),
            yb = TOP + H,
            ty = TOP + H + 16.0,
            label = esc(&label_of(t))
        );
    }
    let _ = write!(
        o,
        r##"<line x1="{LEFT}" x2="{x2}" y1="{yb}" y2="{yb}" stroke="#444"/><line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{yb}" stroke="#444"/>"##,
        x2 = W - RIGHT,
        yb = TOP + H
    );
    // A line that breaks where a step has no row (the tenant was down).
    let path = |pts: &[(i64, f64)]| {
        let mut d = String::new();
        let mut last: Option<i64> = None;
        for (t, v) in pts {
            let cmd = match last {
                Some(l) if t - l <= step => 'L',
                _ => 'M',
            };
            let _ = write!(d, "{cmd}{:.1},{:.1} ", x(*t + step / 2), y(*v));
            last = Some(*t);
        }
        d
    };
    if let Some(peak) = &s.peak {
        let _ = write!(
            o,
            r#"<path d="{}" fill="none" stroke="{PEAK}" stroke-width="1"/>"#,
            path(peak)
        );
    }
    let _ = write!(
        o,
        r#"<path d="{}" fill="none" stroke="{AVG}" stroke-width="2"/>"#,
        path(&s.avg)
    );
    // The limit as a step line, where one is set.
    let mut d = String::new();
    let mut prev: Option<f64> = None;
    for (i, (t, l)) in s.limit.iter().enumerate() {
        let end = s.limit.get(i + 1).map(|n| n.0).unwrap_or(to);
        if let Some(l) = l {
            let cmd = if prev.is_some() { 'L' } else { 'M' };
            let _ = write!(
                d,
                "{cmd}{:.1},{:.1} L{:.1},{:.1} ",
                x((*t).max(from)),
                y(*l),
                x(end.min(to)),
                y(*l)
            );
        }
        prev = *l;
    }
    if !d.is_empty() {
        let _ = write!(
            o,
            r#"<path d="{d}" fill="none" stroke="{LIMIT}" stroke-width="2" stroke-dasharray="6 4"/>"#
        );
    }
    for (t, n) in &s.faults {
        if *n > 0 {
            let _ = write!(
                o,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="6" fill="{FAULT}"><title>{} faults at {}</title></rect>"#,
                x(*t),
                TOP + H - 6.0,
                (x(*t + step) - x(*t)).max(2.0),
                n,
                esc(&utc(*t))
            );
        }
    }
    o.push_str("</svg>");
    o
}

/// The page: a chart per resource with a limit or any use, then the
/// snapshots taken at fault incidents.
pub fn page(
    tenant: &str,
    rows: &[Row],
    limits: &[LimitsRow],
    snapshots: &[Snapshot],
    from: i64,
    to: i64,
    step: i64,
) -> String {
    let steps = regroup(rows, step);
    let lim = |f: fn(&LimitsRow) -> Option<i64>| -> Vec<(i64, Option<f64>)> {
        let mut v: Vec<(i64, Option<f64>)> = limits
            .iter()
            .map(|l| (l.ts.max(from), f(l).map(|x| x as f64)))
            .collect();
        if let Some(first) = limits_at(limits, from) {
            v.retain(|(t, _)| *t > from);
            v.insert(0, (from, f(first).map(|x| x as f64)));
        }
        v
    };
    let pts = |f: &dyn Fn(&Row) -> f64| -> Vec<(i64, f64)> {
        steps.iter().map(|r| (r.ts, f(r))).collect()
    };
    let faults =
        |f: fn(&Row) -> i64| -> Vec<(i64, i64)> { steps.iter().map(|r| (r.ts, f(r))).collect() };
    let series = vec![
        Series {
            title: "CPU (% of one core)",
            unit: "%",
            avg: pts(&|r| r.cpu_pct()),
            peak: Some(pts(&|r| r.cpu_max as f64 / 10.0)),
            limit: lim(|l| l.cpu_pct),
            faults: faults(|r| r.f_cpu),
        },
        Series {
            title: "Memory",
            unit: "B",
            avg: pts(&|r| r.avg(r.mem_sum) * 1024.0),
            peak: Some(pts(&|r| r.mem_max as f64 * 1024.0)),
            limit: lim(|l| l.memory),
            faults: faults(|r| r.f_mem + r.f_oom),
        },
        Series {
            title: "Processes",
            unit: "",
            avg: pts(&|r| r.avg(r.procs_sum)),
            peak: Some(pts(&|r| r.procs_max as f64)),
            limit: lim(|l| l.processes),
            faults: faults(|r| r.f_procs),
        },
        Series {
            title: "Entry processes",
            unit: "",
            avg: pts(&|r| r.avg(r.ep_sum)),
            peak: Some(pts(&|r| r.ep_max as f64)),
            limit: lim(|l| l.entry),
            faults: faults(|r| r.f_ep),
        },
        Series {
            title: "IO read",
            unit: "B/s",
            avg: pts(&|r| r.per_second(r.io_rb)),
            peak: None,
            limit: lim(|l| l.io_read_bps),
            faults: vec![],
        },
        Series {
            title: "IO write",
            unit: "B/s",
            avg: pts(&|r| r.per_second(r.io_wb)),
            peak: None,
            limit: lim(|l| l.io_write_bps),
            faults: vec![],
        },
        Series {
            title: "IO operations (read + write)",
            unit: "/s",
            avg: pts(&|r| r.per_second(r.io_rops + r.io_wops)),
            peak: None,
            limit: lim(|l| match (l.io_read_iops, l.io_write_iops) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            }),
            faults: vec![],
        },
    ];
    let mut o = String::new();
    let title = format!("corral: {} from {} to {} UTC", tenant, utc(from), utc(to));
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:900px}}\
         h2{{font-size:16px;margin:22px 0 4px}}table{{border-collapse:collapse;font-size:13px}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}td.n{{text-align:right}}\
         .key span{{display:inline-block;width:18px;height:3px;margin:0 4px 3px 12px;vertical-align:middle}}</style>\
         </head><body><h1>{t}</h1>",
        t = esc(&title)
    );
    let _ = write!(
        o,
        "<p class=\"key\">Each point is {}.<span style=\"background:{AVG}\"></span>average\
         <span style=\"background:{PEAK}\"></span>highest sample\
         <span style=\"background:{LIMIT}\"></span>limit (dashed)\
         <span style=\"background:{FAULT};height:6px\"></span>faults</p>",
        esc(&human_step(step))
    );
    if steps.is_empty() {
        o.push_str("<p>No usage recorded in this window.</p>");
    }
    for s in &series {
        let used = s.avg.iter().any(|p| p.1 > 0.0) || s.limit.iter().any(|l| l.1.is_some());
        if !used {
            continue;
        }
        let _ = write!(o, "<h2>{}</h2>{}", esc(s.title), chart(s, from, to, step));
    }
    if !snapshots.is_empty() {
        o.push_str("<h2>Processes at fault incidents</h2>");
        for snap in snapshots {
            let _ = write!(
                o,
                "<p>{} UTC: {} ({} processes)</p><table><tr><th>pid</th><th>state</th>\
                 <th>CPU s</th><th>memory</th><th>command</th></tr>",
                esc(&utc(snap.ts)),
                esc(&snap.faults),
                snap.total
            );
            for p in &snap.procs {
                let _ = write!(
                    o,
                    "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{:.1}</td>\
                     <td class=\"n\">{}</td><td>{}</td></tr>",
                    p.pid,
                    esc(&p.state),
                    p.cpu_ms as f64 / 1000.0,
                    esc(&human(p.rss as f64, "B")),
                    esc(&p.cmdline)
                );
            }
            o.push_str("</table>");
        }
    }
    o.push_str("</body></html>\n");
    o
}

fn human_step(step: i64) -> String {
    match step {
        s if s % 3600 == 0 => format!("the {} h average", s / 3600),
        s if s % 60 == 0 => format!("the {} min average", s / 60),
        s => format!("the {s} s average"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_values_read_well() {
        assert_eq!(utc(0), "1970-01-01 00:00");
        assert_eq!(utc(1_767_225_600 + 3_600 * 14 + 300), "2026-01-01 14:05");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00");
        assert_eq!(human(1536.0 * 1024.0 * 1024.0, "B"), "1.5 GiB");
        assert_eq!(human(2048.0, "B/s"), "2 KiB/s");
        assert_eq!(human(2560.0, "B/s"), "2.5 KiB/s");
        assert_eq!(human(250.0, "%"), "250 %");
    }

    #[test]
    fn the_page_draws_usage_limits_and_faults() {
        let rows: Vec<Row> = (0..60)
            .map(|i| Row {
                ts: 1000 * 60 + i * 60,
                dur_ms: 60_000,
                n: 12,
                cpu_ms: 30_000,
                cpu_max: 900,
                mem_sum: 12 * 1024,
                mem_max: 2048,
                f_procs: i64::from(i == 30),
                ..Default::default()
            })
            .collect();
        let limits = vec![LimitsRow {
            ts: 0,
            cpu_pct: Some(100),
            processes: Some(10),
            ..Default::default()
        }];
        let html = page("alice<", &rows, &limits, &[], 60_000, 63_600, 60);
        assert!(html.contains("alice&lt;") && !html.contains("alice<"));
        assert!(html.contains("<title>CPU (% of one core)</title>"));
        assert!(
            html.contains("average 50 %"),
            "the CPU average is described"
        );
        assert!(html.contains("stroke-dasharray"), "a limit line");
        assert!(html.contains("1 faults at"), "the fault mark");
        assert!(!html.contains("<script"), "no scripts");
        assert!(
            !html.contains("IO read</h2>"),
            "no chart without use or limit"
        );
    }
}
