//! Parsers against real output captured by scripts/capture-fixtures.sh
//! (h2load nghttp2/1.52.0, siege 4.0.7, nginx 1.22.1 on Debian 12, loopback).

use corral_bench::h2load::{self, fig as hfig};
use corral_bench::siege::{self, fig as sfig, SiegeFormat};
use corral_bench::Samples;

fn fixture(name: &str) -> String {
    let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn h2load_static_summary() {
    let s = h2load::parse_summary(&fixture("h2load-static.txt")).unwrap();
    assert!(close(s.finished_s, 3.49e-3), "{}", s.finished_s);
    assert!(close(s.req_per_s, 57372.35));
    assert!(close(s.bytes_per_s, 69.21 * 1024.0 * 1024.0));
    let r = s.requests;
    assert_eq!(
        (
            r.total,
            r.started,
            r.done,
            r.succeeded,
            r.failed,
            r.errored,
            r.timeout
        ),
        (200, 200, 200, 200, 0, 0, 0)
    );
    assert_eq!(
        (s.status.s2xx, s.status.s3xx, s.status.s4xx, s.status.s5xx),
        (200, 0, 0, 0)
    );
    let t = s.traffic.unwrap();
    assert_eq!((t.total, t.headers, t.data), (253_000, 37_600, 205_200));
    let req = s.time_for_request.unwrap();
    assert!(
        close(req.min, 14e-6)
            && close(req.max, 356e-6)
            && close(req.mean, 130e-6)
            && close(req.sd, 66e-6)
    );
    assert!(close(req.within_sd_pct, 79.0));
    let conn = s.time_for_connect.unwrap();
    assert!(close(conn.min, 76e-6) && close(conn.max, 417e-6));
    let ttfb = s.time_to_first_byte.unwrap();
    assert!(close(ttfb.mean, 534e-6) && close(ttfb.sd, 75e-6));
    let per_client = s.req_per_s_per_client.unwrap();
    assert!(
        close(per_client.min, 6502.95)
            && close(per_client.max, 7837.10)
            && close(per_client.mean, 7052.18)
    );
    assert_eq!(s.failure(), None);
}

#[test]
fn h2load_multiplexed_summary() {
    let s = h2load::parse_summary(&fixture("h2load-static-m4.txt")).unwrap();
    assert!(close(s.finished_s, 2.78e-3));
    assert!(close(s.req_per_s, 72020.17));
    assert_eq!(s.requests.succeeded, 200);
    assert!(close(s.time_for_request.unwrap().max, 742e-6));
}

#[test]
fn h2load_failures_are_visible_although_exit_status_is_zero() {
    // 200/404/500/502 round robin: 4xx and 5xx count as failed.
    let s = h2load::parse_summary(&fixture("h2load-mixed.txt")).unwrap();
    assert_eq!(
        (s.requests.succeeded, s.requests.failed, s.requests.errored),
        (50, 150, 0)
    );
    assert_eq!((s.status.s2xx, s.status.s4xx, s.status.s5xx), (50, 50, 100));
    let why = s.failure().unwrap();
    assert!(why.starts_with("150 of 200 requests failed"), "{why}");

    // Connections closed without a response (nginx 444): errored.
    let s = h2load::parse_summary(&fixture("h2load-close.txt")).unwrap();
    let r = s.requests;
    assert_eq!(
        (r.total, r.started, r.done, r.succeeded, r.failed, r.errored),
        (60, 9, 6, 6, 54, 54)
    );
    assert!(close(s.finished_s, 789e-6));

    // Nobody listening.
    let s = h2load::parse_summary(&fixture("h2load-refused.txt")).unwrap();
    assert_eq!((s.requests.succeeded, s.requests.errored), (0, 20));
    assert_eq!(s.req_per_s, 0.0);
    assert_eq!(s.bytes_per_s, 0.0);
    assert_eq!(s.traffic.unwrap().total, 0);
    assert!(s.failure().unwrap().contains("20 errored"));
}

#[test]
fn h2load_log_file_latency() {
    let entries = h2load::parse_log(&fixture("h2load-static.log")).unwrap();
    assert_eq!(entries.len(), 200);
    // Start times are µs since the epoch (the capture ran in 2026).
    assert_eq!(
        entries.iter().map(|e| e.start_us).min(),
        Some(1_795_368_706_193_983)
    );
    assert!(entries.iter().all(|e| e.status == 200));
    let l = h2load::latency(&entries);
    assert_eq!((l.logged, l.ok, l.failed_streams), (200, 200, 0));
    assert_eq!(l.p50_ms, Some(0.130));
    assert_eq!(l.p90_ms, Some(0.188));
    assert_eq!(l.p99_ms, Some(0.341));
    // The log's extremes are the summary's `time for request` min/max.
    let s = h2load::parse_summary(&fixture("h2load-static.txt")).unwrap();
    let req = s.time_for_request.unwrap();
    assert!(close(l.min_ms.unwrap() / 1000.0, req.min));
    assert!(close(l.max_ms.unwrap() / 1000.0, req.max));

    let m4 = h2load::latency(&h2load::parse_log(&fixture("h2load-static-m4.log")).unwrap());
    assert_eq!(
        (m4.p50_ms, m4.p90_ms, m4.p99_ms),
        (Some(0.337), Some(0.691), Some(0.740))
    );
}

#[test]
fn h2load_log_counts_only_successes() {
    let entries = h2load::parse_log(&fixture("h2load-mixed.log")).unwrap();
    assert_eq!(entries.len(), 200);
    let count = |code| entries.iter().filter(|e| e.status == code).count();
    assert_eq!(
        (count(200), count(404), count(500), count(502)),
        (50, 50, 50, 50)
    );
    let l = h2load::latency(&entries);
    assert_eq!((l.ok, l.p50_ms, l.p99_ms), (50, Some(0.129), Some(0.259)));

    // Closed connections are not logged at all; an all-refused run logs nothing.
    assert_eq!(
        h2load::parse_log(&fixture("h2load-close.log"))
            .unwrap()
            .len(),
        6
    );
    let none = h2load::latency(&h2load::parse_log(&fixture("h2load-refused.log")).unwrap());
    assert_eq!((none.logged, none.p50_ms), (0, None));
}

#[test]
fn h2load_record_makes_cgi_figures() {
    let mut samples = Samples::new();
    for f in ["h2load-static.txt", "h2load-mixed.txt"] {
        let s = h2load::parse_summary(&fixture(f)).unwrap();
        let log = fixture(&f.replace(".txt", ".log"));
        let l = h2load::latency(&h2load::parse_log(&log).unwrap());
        h2load::record(&mut samples, &s, Some(&l));
    }
    let row = samples.into_row("cgi", "small", "bare");
    assert_eq!(
        row.figure(hfig::REQ_PER_S).unwrap().samples,
        vec![57372.35, 55555.56]
    );
    assert_eq!(row.figure(hfig::FAILED).unwrap().samples, vec![0.0, 150.0]);
    let kib = row.figure(hfig::KIB_PER_S).unwrap();
    assert!(close(kib.samples[0], 69.21 * 1024.0) && kib.unit == "KiB/s");
    assert_eq!(
        row.figure(hfig::P50_MS).unwrap().samples,
        vec![0.130, 0.129]
    );
    assert_eq!(row.figure(hfig::SECONDS).unwrap().unit, "s");
}

#[test]
fn siege_text_summaries() {
    let s = siege::parse(&fixture("siege-static-t3s.txt")).unwrap();
    assert_eq!(s.format, SiegeFormat::Text);
    assert_eq!(s.transactions, 53203);
    assert_eq!(s.availability, 100.0);
    assert_eq!(s.elapsed_time, 2.74);
    assert_eq!(s.data_transferred, 52.06);
    assert_eq!(s.response_time, 0.0);
    assert_eq!(s.transaction_rate, 19417.15);
    assert_eq!(s.throughput, 19.0);
    assert_eq!(s.concurrency, 9.62);
    assert_eq!(
        (s.successful_transactions, s.failed_transactions),
        (53203, 0)
    );
    assert_eq!((s.longest_transaction, s.shortest_transaction), (0.01, 0.0));

    let s = siege::parse(&fixture("siege-static-r20.txt")).unwrap();
    assert_eq!((s.transactions, s.successful_transactions), (200, 200));
    assert_eq!(s.transaction_rate, 10000.0);
}

#[test]
fn siege_counting_quirks() {
    // 200/404/500/502 round robin, 60 requests: 404s are transactions but not
    // successful; 5xx are failed; availability = 30 / (30 + 30).
    let s = siege::parse(&fixture("siege-mixed-r12.txt")).unwrap();
    assert_eq!(
        (
            s.transactions,
            s.successful_transactions,
            s.failed_transactions
        ),
        (30, 15, 30)
    );
    assert_eq!(s.availability, 50.0);

    // Connection refused: [error] lines with ANSI colour precede the block.
    let s = siege::parse(&fixture("siege-refused-r5.txt")).unwrap();
    assert_eq!(
        (s.transactions, s.failed_transactions, s.availability),
        (0, 10, 0.0)
    );
}

#[test]
fn siege_json_summaries() {
    let s = siege::parse(&fixture("siege-static-json.txt")).unwrap();
    assert_eq!(s.format, SiegeFormat::Json);
    assert_eq!(s.transactions, 200);
    assert_eq!(s.transaction_rate, 10000.0);
    assert_eq!(s.throughput, 9.78);
    assert_eq!(s.concurrency, 10.0);
    let m = siege::parse(&fixture("siege-mixed-json.txt")).unwrap();
    assert_eq!(
        (
            m.transactions,
            m.successful_transactions,
            m.failed_transactions
        ),
        (30, 15, 30)
    );
    assert_eq!(m.availability, 50.0);

    let mut samples = Samples::new();
    siege::record(&mut samples, &m);
    let row = samples.into_row("noisy", "static", "victim");
    assert_eq!(row.median(sfig::TRANS_PER_S), Some(3000.0));
    assert_eq!(row.median(sfig::LONGEST_MS), Some(10.0));
    assert_eq!(row.median(sfig::FAILED), Some(30.0));
}

#[test]
fn garbage_is_rejected() {
    assert!(h2load::parse_summary(&fixture("siege-static-r20.txt")).is_err());
    assert!(siege::parse(&fixture("h2load-static.txt")).is_err());
}
