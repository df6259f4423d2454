//! Decodes FastCGI traffic captured from a real nginx 1.22 (see
//! `nginx_capture.rs`, which regenerates the fixtures). Needs no nginx.

#[allow(dead_code)]
mod common;

use std::path::Path;

use corral_fastcgi::params::Pair;
use corral_fastcgi::record::{RecordDecoder, RecordType};
use corral_fastcgi::{cgi_env_from_params, Connection, ConnectionConfig, DropReason, Event, Role};

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Runs `wire` through a fresh connection in pieces of `step` bytes.
fn events(wire: &[u8], step: usize) -> Vec<Event> {
    let mut connection = Connection::new(ConnectionConfig::default());
    let (mut events, mut replies) = (Vec::new(), Vec::new());
    for chunk in wire.chunks(step) {
        connection
            .process(chunk, &mut replies, &mut events)
            .unwrap();
    }
    connection.finish_input().unwrap();
    assert!(
        replies.is_empty(),
        "nginx traffic needs no protocol-level reply"
    );
    events
}

fn param<'p>(params: &'p [Pair], name: &str) -> Option<&'p [u8]> {
    params
        .iter()
        .find(|(n, _)| n == name.as_bytes())
        .map(|(_, v)| v.as_slice())
}

/// Checks the event sequence of one nginx request and returns its params
/// and body.
fn request(wire: &[u8]) -> (Vec<Pair>, Vec<u8>) {
    let whole = events(wire, wire.len());
    for step in [1, 2, 7, 8, 13, 64, 1000] {
        assert_eq!(events(wire, step), whole, "read size {step}");
    }
    let mut events = whole.into_iter();
    // nginx uses request id 1 and, without fastcgi_keep_conn, clears
    // FCGI_KEEP_CONN.
    assert_eq!(
        events.next(),
        Some(Event::Begin {
            id: 1,
            role: Role::Responder,
            keep_conn: false
        })
    );
    let Some(Event::Params { id: 1, params }) = events.next() else {
        panic!("expected the params after FCGI_BEGIN_REQUEST");
    };
    let mut body = Vec::new();
    for event in events {
        match event {
            Event::Stdin { id: 1, data } => body.extend_from_slice(&data),
            Event::StdinEnd { id: 1 } => return (params, body),
            other => panic!("unexpected {other:?}"),
        }
    }
    panic!("no end of FCGI_STDIN");
}

#[test]
fn nginx_records_are_well_formed() {
    for name in [common::GET_FIXTURE, common::POST_FIXTURE] {
        let wire = fixture(name);
        let mut decoder = RecordDecoder::new();
        let kinds: Vec<RecordType> = decoder
            .records(&wire)
            .map(|record| record.unwrap().kind)
            .collect();
        decoder.finish().unwrap();
        assert_eq!(kinds.first(), Some(&RecordType::BeginRequest), "{name}");
        assert_eq!(kinds.last(), Some(&RecordType::Stdin), "{name}");
        // nginx pads every record to 8 bytes, as §3.3 recommends.
        assert_eq!(wire.len() % 8, 0, "{name}");
    }
}

#[test]
fn nginx_get_with_query() {
    let (params, body) = request(&fixture(common::GET_FIXTURE));
    assert!(body.is_empty());
    let expect = |name: &str, value: &str| {
        assert_eq!(param(&params, name), Some(value.as_bytes()), "{name}");
    };
    expect("REQUEST_METHOD", "GET");
    expect("QUERY_STRING", common::GET_QUERY);
    expect(
        "REQUEST_URI",
        &format!("{}?{}", common::SCRIPT_PATH, common::GET_QUERY),
    );
    expect("SCRIPT_NAME", common::SCRIPT_PATH);
    expect("GATEWAY_INTERFACE", "CGI/1.1");
    expect("SERVER_PROTOCOL", "HTTP/1.1");
    expect("HTTP_HOST", "fixture.test");
    expect("HTTP_USER_AGENT", "corral-fixture/1");
    expect("CONTENT_LENGTH", "");
    // Over 127 bytes: nginx sent this value length in the 4-byte form.
    expect("HTTP_COOKIE", &common::cookie_header());
    expect("HTTP_PROXY", common::PROXY_HEADER);
    let script = param(&params, "SCRIPT_FILENAME").unwrap();
    assert!(script.ends_with(common::SCRIPT_PATH.as_bytes()));
    assert!(param(&params, "SERVER_SOFTWARE")
        .unwrap()
        .starts_with(b"nginx/"));

    // The CGI environment keeps everything but the httpoxy header.
    let env = cgi_env_from_params(&params);
    assert_eq!(env.dropped.len(), 1, "{:?}", env.dropped);
    assert_eq!(env.dropped[0].name, b"HTTP_PROXY");
    assert_eq!(env.dropped[0].reason, DropReason::Httpoxy);
    assert_eq!(env.vars.len(), params.len() - 1);
    assert_eq!(env.get("QUERY_STRING"), Some(common::GET_QUERY.as_bytes()));
    assert!(env.get("HTTP_PROXY").is_none());
}

#[test]
fn nginx_post_with_body() {
    let (params, body) = request(&fixture(common::POST_FIXTURE));
    assert_eq!(body, common::post_body());
    let expect = |name: &str, value: &str| {
        assert_eq!(param(&params, name), Some(value.as_bytes()), "{name}");
    };
    expect("REQUEST_METHOD", "POST");
    expect("QUERY_STRING", common::POST_QUERY);
    expect("CONTENT_TYPE", common::POST_CONTENT_TYPE);
    expect("CONTENT_LENGTH", &common::post_body().len().to_string());
    let env = cgi_env_from_params(&params);
    assert!(env.dropped.is_empty(), "{:?}", env.dropped);
}
