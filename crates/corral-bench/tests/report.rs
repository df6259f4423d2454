//! Rendering, comparison and persistence of a hand-built result set whose
//! numbers follow the seed articles (CGI under h2load, UnixBench lx zones).

use std::collections::BTreeMap;

use corral_bench::compare::{self, Verdict};
use corral_bench::report::{html, markdown};
use corral_bench::{
    write_outputs, BenchError, Better, CgroupMode, Figure, Machine, ResultSet, Row, ToolInfo,
    REPORT_HTML,
};

fn machine() -> Machine {
    let mut tools = BTreeMap::new();
    tools.insert(
        "h2load".to_string(),
        ToolInfo {
            path: Some("/usr/bin/h2load".into()),
            version: Some("h2load nghttp2/1.52.0".into()),
        },
    );
    tools.insert("firejail".to_string(), ToolInfo::default());
    Machine {
        kernel: "Linux 6.1.0-18-amd64 x86_64".into(),
        distro: "Debian GNU/Linux 12 (bookworm)".into(),
        cpu_model: "Intel(R) Xeon(R) Processor".into(),
        cpus: 2,
        memory_bytes: 24 * 1024 * 1024 * 1024,
        cgroup: CgroupMode::V2,
        tools,
    }
}

fn f(unit: &str, better: Better, v: &[f64]) -> Figure {
    Figure::from_samples(unit, better, v.to_vec())
}

fn cgi_row(mode: &str, secs: &[f64], rps: &[f64], kib: &[f64], lat: [f64; 3]) -> Row {
    use Better::*;
    Row::new("cgi", "small", mode)
        .with("seconds", f("s", Lower, secs))
        .with("req_per_s", f("req/s", Higher, rps))
        .with("kib_per_s", f("KiB/s", Higher, kib))
        .with("succeeded", f("requests", Higher, &[10000.0; 3]))
        .with("failed", f("requests", Lower, &[0.0; 3]))
        .with("p50_ms", f("ms", Lower, &[lat[0]]))
        .with("p90_ms", f("ms", Lower, &[lat[1]]))
        .with("p99_ms", f("ms", Lower, &[lat[2]]))
}

fn sample_set() -> ResultSet {
    use Better::*;
    let mut rs = ResultSet::new(machine(), false);
    rs.started = "2026-03-01T12:00:00Z".into();
    rs.finished = "2026-03-01T12:40:00Z".into();
    rs.push(cgi_row(
        "bubblewrap",
        &[68.0, 69.0, 71.0],
        &[141.0, 145.0, 147.0],
        &[6.9, 7.0, 7.1],
        [61.0, 90.0, 140.0],
    ));
    rs.push(cgi_row(
        "corral",
        &[15.5, 16.0, 16.4],
        &[600.0, 613.0, 620.0],
        &[28.0, 29.0, 30.0],
        [14.0, 22.0, 35.0],
    ));
    rs.push(
        cgi_row(
            "bare",
            &[12.8, 13.0, 13.3],
            &[750.0, 761.0, 770.0],
            &[34.0, 35.0, 36.0],
            [11.0, 18.0, 29.0],
        )
        .with_note("no sandbox: reference only"),
    );
    for (test, unit, native, sandbox) in [
        ("Execl Throughput", "lps", 204.90, 82.00),
        ("Pipe Throughput", "lps", 89803.10, 58154.50),
        ("System Call Overhead", "lps", 58388.50, 60471.00),
    ] {
        rs.push(Row::new("unixbench", test, "native").with("score", f(unit, Higher, &[native])));
        rs.push(Row::new("unixbench", test, "corral").with("score", f(unit, Higher, &[sandbox])));
    }
    rs.push(Row::new("custom", "warm", "a").with("widgets", f("w/s", Higher, &[1.0, 2.0, 3.0])));
    rs.push(Row::new("custom", "warm", "b").with("widgets", f("w/s", Higher, &[5.0])));
    rs
}

#[test]
fn markdown_cgi_table_is_shaped_like_the_article() {
    let md = markdown::render(&sample_set());
    assert!(
        md.contains("## CGI under h2load: bubblewrap vs persisted namespaces"),
        "{md}"
    );
    assert!(md.contains("| mode | seconds | req/s | KiB/s | succeeded | failed | p50 / p90 / p99 ms | vs bubblewrap | vs bare |"), "{md}");
    assert!(
        md.contains(
            "| bubblewrap | 69.0 | 145 | 7.00 | 10000 | 0 | 61.0 / 90.0 / 140 | – | −80.9 % |"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "| corral | 16.0 | 613 | 29.0 | 10000 | 0 | 14.0 / 22.0 / 35.0 | ×4.23 | −19.4 % |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| bare | 13.0 | 761 | 35.0 | 10000 | 0 | 11.0 / 18.0 / 29.0 | ×5.25 | – |"),
        "{md}"
    );
    assert!(md.contains("*small (medians of 3 runs)*"), "{md}");
    assert!(
        md.contains("- small / bare: no sandbox: reference only"),
        "{md}"
    );
}

#[test]
fn markdown_micro_and_generic_tables() {
    let md = markdown::render(&sample_set());
    assert!(
        md.contains("| test | unit | native | corral | corral diff % |"),
        "{md}"
    );
    assert!(
        md.contains("| Execl Throughput | lps | 205 | 82.0 | −60.0 % |"),
        "{md}"
    );
    assert!(
        md.contains("| System Call Overhead | lps | 58388 | 60471 | +3.6 % |"),
        "{md}"
    );
    // Unknown suite: generic test × mode table with median [min–max].
    assert!(md.contains("## custom"), "{md}");
    assert!(md.contains("| test | mode | widgets (w/s) |"), "{md}");
    assert!(md.contains("| warm | a | 2.00 [1.00–3.00] |"), "{md}");
    assert!(md.contains("| warm | b | 5.00 |"), "{md}");
    // Machine section, missing tool recorded as such.
    assert!(md.contains("| cgroup | v2 |"), "{md}");
    assert!(md.contains("| memory | 24.0 GiB |"), "{md}");
    assert!(md.contains("| firejail | missing | – |"), "{md}");
    assert!(
        md.contains("| h2load | h2load nghttp2/1.52.0 | /usr/bin/h2load |"),
        "{md}"
    );
}

/// The `<svg>…</svg>` whose `<title>` starts with `title`.
fn svg_titled<'a>(html: &'a str, title: &str) -> &'a str {
    let mut rest = html;
    while let Some(i) = rest.find("<svg") {
        let end = rest[i..].find("</svg>").expect("closed svg") + i + "</svg>".len();
        let svg = &rest[i..end];
        if svg.contains(&format!("\">{title}")) {
            return svg;
        }
        rest = &rest[end..];
    }
    panic!("no chart titled {title}");
}

#[test]
fn html_is_self_contained_and_charts_every_mode() {
    let page = html::render(&sample_set());
    assert!(page.starts_with("<!doctype html>"));
    for banned in [
        "http://", "https://", "<script", "src=", "url(", "@import", "<link",
    ] {
        assert!(!page.contains(banned), "report.html contains {banned}");
    }
    // Same table rows as the Markdown.
    assert!(page.contains(
        r#"<th scope="row">corral</th><td class="num">16.0</td><td class="num">613</td>"#
    ));
    assert!(page.contains(r#"<td class="num">×4.23</td><td class="num">−19.4 %</td>"#));

    let rps = svg_titled(&page, "small: throughput (req/s, higher is better)");
    assert_eq!(rps.matches(r#"<rect class="bar""#).count(), 3, "{rps}");
    for mode in ["bubblewrap", "corral", "bare"] {
        assert!(
            rps.contains(&format!(">{mode}</text>")),
            "{mode} label missing: {rps}"
        );
    }
    // Three runs each: min–max whiskers and the median printed on the bar.
    assert_eq!(rps.matches(r#"<g class="range""#).count(), 3);
    assert!(rps.contains(">613</text>") && rps.contains(">761</text>"));
    assert!(rps.contains(r#"role="img""#) && rps.contains("<desc id="));
    assert!(rps.contains("corral: median 613 req/s (min 600, max 620, 3 runs)"));
    assert!(
        rps.contains(r##"rotate(-90)" text-anchor="middle" fill="#333">req/s</text>"##),
        "unit on the axis"
    );

    let lat = svg_titled(&page, "small: latency percentiles (ms, lower is better)");
    assert_eq!(lat.matches(r#"<rect class="bar""#).count(), 9);
    assert!(lat.contains(">p50</text>") && lat.contains(">p99</text>"));

    // Micro suite: a chart per test; single sample → no whisker.
    let execl = svg_titled(&page, "Execl Throughput: score");
    assert_eq!(execl.matches(r#"<rect class="bar""#).count(), 2);
    assert_eq!(execl.matches(r#"class="range""#).count(), 0);
    // Generic suite charts its figure.
    let custom = svg_titled(&page, "warm: widgets");
    assert_eq!(custom.matches(r#"<rect class="bar""#).count(), 2);
    // Modes keep their colour across a suite's charts (palette in mode order).
    assert!(rps.contains(r##"fill="#009E73"><title>bare"##));
    assert!(lat.contains(r##"fill="#009E73"><title>bare"##));
}

#[test]
fn comparison_ratios_and_verdicts() {
    let old = sample_set();
    let mut new = sample_set();
    let row = new
        .rows
        .iter_mut()
        .find(|r| r.suite == "cgi" && r.mode == "corral")
        .unwrap();
    row.figures
        .insert("req_per_s".into(), f("req/s", Better::Higher, &[650.0]));
    row.figures
        .insert("seconds".into(), f("s", Better::Lower, &[17.0]));
    row.figures
        .insert("kib_per_s".into(), f("KiB/s", Better::Higher, &[29.5]));
    row.figures.remove("p99_ms");
    new.push(
        Row::new("cgi", "large", "corral").with("req_per_s", f("req/s", Better::Higher, &[628.0])),
    );

    let rows = compare::compare(&old, &new);
    let get = |test: &str, mode: &str, fig: &str| {
        rows.iter()
            .find(|r| r.test == test && r.mode == mode && r.figure == fig)
            .unwrap_or_else(|| panic!("{test}/{mode}/{fig}"))
    };
    let rps = get("small", "corral", "req_per_s");
    assert_eq!((rps.old, rps.new), (Some(613.0), Some(650.0)));
    assert!((rps.ratio.unwrap() - 650.0 / 613.0).abs() < 1e-12);
    assert_eq!(rps.verdict, Verdict::Better);
    let secs = get("small", "corral", "seconds");
    assert!((secs.ratio.unwrap() - 17.0 / 16.0).abs() < 1e-12);
    assert_eq!(secs.verdict, Verdict::Worse, "more seconds is worse");
    assert_eq!(
        get("small", "corral", "kib_per_s").verdict,
        Verdict::Same,
        "+1.7 % is within 2 %"
    );
    assert_eq!(get("small", "bare", "req_per_s").verdict, Verdict::Same);
    assert_eq!(get("small", "corral", "p99_ms").verdict, Verdict::Removed);
    assert_eq!(get("large", "corral", "req_per_s").verdict, Verdict::Added);
    // Failed requests 0 → 0 is "same", not a division by zero.
    assert_eq!(get("small", "bare", "failed").ratio, Some(1.0));

    let strict = compare::compare_with(&old, &new, 0.0);
    let kib = strict
        .iter()
        .find(|r| r.mode == "corral" && r.figure == "kib_per_s")
        .unwrap();
    assert_eq!(kib.verdict, Verdict::Better);

    let md = compare::render_markdown(&rows);
    assert!(md.contains("| cgi | small | corral | req_per_s | req/s (higher better) | 613 | 650 | 1.060 | better |"), "{md}");
    let plain = compare::render_plain(&rows);
    let head: Vec<&str> = plain.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        head,
        ["suite", "test", "mode", "figure", "unit", "old", "new", "new/old", "verdict"]
    );
    assert!(plain.contains("1.062  worse"), "{plain}");
    assert_eq!(plain.lines().count(), rows.len() + 1);
    assert!(compare::summary(&rows).starts_with("1 better, 1 worse, "));
}

#[test]
fn results_json_round_trip_and_outputs() {
    let rs = sample_set();
    let dir = tempfile::tempdir().unwrap();
    let paths = write_outputs(dir.path().join("out"), &rs).unwrap();
    let back = ResultSet::load(&paths.json).unwrap();
    assert_eq!(back, rs);
    assert!(paths.html.ends_with(REPORT_HTML));
    let md = std::fs::read_to_string(&paths.markdown).unwrap();
    assert_eq!(md, markdown::render(&rs));
    // Nothing but the three outputs (no temp files left behind).
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["report.html", "report.md", "results.json"]);

    // The schema as documented: field names and `better` spelled out.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&paths.json).unwrap()).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["machine"]["cgroup"], "v2");
    assert_eq!(
        v["machine"]["tools"]["firejail"]["path"],
        serde_json::Value::Null
    );
    let fig = &v["rows"][0]["figures"]["req_per_s"];
    assert_eq!(fig["better"], "higher");
    assert_eq!(fig["median"], 145.0);
    assert_eq!(fig["samples"], serde_json::json!([141.0, 145.0, 147.0]));

    // Other schema versions are refused with a clear error.
    let future =
        std::fs::read_to_string(&paths.json)
            .unwrap()
            .replacen("\"schema\": 1", "\"schema\": 2", 1);
    let p = dir.path().join("future.json");
    std::fs::write(&p, future).unwrap();
    match ResultSet::load(&p) {
        Err(BenchError::Schema {
            found: 2,
            expected: 1,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn merging_result_sets() {
    let mut a = ResultSet::new(machine(), false);
    a.started = "2026-03-01T12:00:00Z".into();
    a.finished = "2026-03-01T12:10:00Z".into();
    a.push(
        Row::new("cgi", "small", "bare").with("req_per_s", f("req/s", Better::Higher, &[700.0])),
    );
    let mut b = ResultSet::new(machine(), true);
    b.started = "2026-03-01T11:00:00Z".into();
    b.finished = "2026-03-01T12:30:00Z".into();
    b.push(
        Row::new("cgi", "small", "bare").with("req_per_s", f("req/s", Better::Higher, &[761.0])),
    );
    b.push(
        Row::new("pidns", "getpid", "host").with("ns_per_call", f("ns", Better::Lower, &[80.0])),
    );
    b.add_note("pidns: 3 repetitions");
    a.merge(b);
    assert_eq!(
        (a.started.as_str(), a.finished.as_str(), a.quick),
        ("2026-03-01T11:00:00Z", "2026-03-01T12:30:00Z", true)
    );
    assert_eq!(a.rows.len(), 2);
    assert_eq!(
        a.row("cgi", "small", "bare").unwrap().median("req_per_s"),
        Some(761.0)
    );
    assert_eq!(a.suites(), ["cgi", "pidns"]);
    assert!(a
        .notes
        .iter()
        .any(|n| n.contains("replaced by a later run")));
    assert!(a.notes.contains(&"pidns: 3 repetitions".to_string()));
}

#[test]
fn empty_and_degenerate_sets_render() {
    let mut rs = ResultSet::new(machine(), true);
    let md = markdown::render(&rs);
    assert!(
        md.contains("**Quick run: reduced counts, not comparable to a full run.**"),
        "{md}"
    );
    assert!(md.contains("## Machine"));
    let page = html::render(&rs);
    assert!(page.contains("<strong>Quick run:</strong>") && !page.contains("<svg"));
    // A figure without samples and an all-zero figure: n/a cells, no NaN anywhere.
    rs.push(
        Row::new("cgi", "small", "bare")
            .with("req_per_s", f("req/s", Better::Higher, &[]))
            .with("failed", f("requests", Better::Lower, &[0.0, 0.0])),
    );
    let md = markdown::render(&rs);
    assert!(md.contains("| bare | n/a | 0 |"), "{md}");
    let page = html::render(&rs);
    assert!(!page.contains("NaN") && !md.contains("NaN"));
    let json = rs.to_json();
    assert!(json.contains("\"median\": null"), "{json}");
    assert_eq!(ResultSet::from_json(&json).unwrap().rows.len(), 1);
}
