use super::*;
use crate::params::encode_pairs;
use crate::record::{
    encode_abort_request, encode_begin_request, encode_get_values, encode_record, encode_stream,
    encode_stream_end, EndRequestBody, Stream,
};

/// Builds web-server traffic.
#[derive(Default)]
struct Wire(Vec<u8>);

impl Wire {
    fn begin(mut self, id: u16, role: Role, keep_conn: bool) -> Self {
        encode_begin_request(id, role, keep_conn, &mut self.0);
        self
    }
    fn params(mut self, id: u16, pairs: &[(&str, &str)]) -> Self {
        let mut content = Vec::new();
        encode_pairs(pairs.iter().copied(), &mut content).unwrap();
        encode_stream(Stream::Params, id, &content, &mut self.0);
        self
    }
    fn raw_params(mut self, id: u16, content: &[u8]) -> Self {
        encode_stream(Stream::Params, id, content, &mut self.0);
        self
    }
    fn params_end(mut self, id: u16) -> Self {
        encode_stream_end(Stream::Params, id, &mut self.0);
        self
    }
    fn stdin(mut self, id: u16, data: &[u8]) -> Self {
        encode_stream(Stream::Stdin, id, data, &mut self.0);
        self
    }
    fn stdin_end(mut self, id: u16) -> Self {
        encode_stream_end(Stream::Stdin, id, &mut self.0);
        self
    }
    fn abort(mut self, id: u16) -> Self {
        encode_abort_request(id, &mut self.0);
        self
    }
    fn record(mut self, kind: RecordType, id: u16, content: &[u8]) -> Self {
        encode_record(kind, id, content, &mut self.0).unwrap();
        self
    }
}

fn run(connection: &mut Connection, wire: &Wire) -> (Vec<Event>, Vec<u8>) {
    let mut events = Vec::new();
    let mut out = Vec::new();
    connection.process(&wire.0, &mut out, &mut events).unwrap();
    (events, out)
}

fn run_err(connection: &mut Connection, wire: &Wire) -> ConnectionError {
    let (mut events, mut out) = (Vec::new(), Vec::new());
    connection
        .process(&wire.0, &mut out, &mut events)
        .unwrap_err()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<Pair> {
    pairs
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Decodes `bytes` written by the connection into records.
fn replies(bytes: &[u8]) -> Vec<Record> {
    let mut decoder = RecordDecoder::new();
    let records = decoder
        .records(bytes)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    decoder.finish().unwrap();
    records
}

fn end_body(record: &Record) -> EndRequestBody {
    assert_eq!(record.kind, RecordType::EndRequest);
    EndRequestBody::parse(&record.content).unwrap()
}

const PARAMS: &[(&str, &str)] = &[
    ("REQUEST_METHOD", "POST"),
    ("SCRIPT_FILENAME", "/srv/t/cgi-bin/a.cgi"),
    ("CONTENT_LENGTH", "5"),
];

fn full_request(id: u16, keep_conn: bool, body: &[u8]) -> Wire {
    Wire::default()
        .begin(id, Role::Responder, keep_conn)
        .params(id, &PARAMS[..1])
        .params(id, &PARAMS[1..])
        .params_end(id)
        .stdin(id, body)
        .stdin_end(id)
}

#[test]
fn responder_request_lifecycle() {
    let mut connection = Connection::new(ConnectionConfig::default());
    let (events, out) = run(&mut connection, &full_request(1, false, b"hello"));
    assert!(out.is_empty(), "nothing to answer at the protocol level");
    assert_eq!(
        events,
        [
            Event::Begin {
                id: 1,
                role: Role::Responder,
                keep_conn: false
            },
            Event::Params {
                id: 1,
                params: owned(PARAMS)
            },
            Event::Stdin {
                id: 1,
                data: b"hello".to_vec()
            },
            Event::StdinEnd { id: 1 },
        ]
    );
    assert!(connection.is_active(1));
    let mut out = Vec::new();
    let ended = connection.end_request(1, 3, &mut out).unwrap();
    assert_eq!(ended, RequestEnded { keep_conn: false });
    assert_eq!(out, [1, 3, 0, 1, 0, 8, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0]);
    assert!(!connection.is_active(1));
    assert_eq!(
        connection.end_request(1, 0, &mut out),
        Err(ConnectionError::NotActive { id: 1 })
    );
}

#[test]
fn pairs_straddling_params_records() {
    let mut content = Vec::new();
    encode_pairs(PARAMS.iter().copied(), &mut content).unwrap();
    for split in 0..=content.len() {
        let wire = Wire::default()
            .begin(9, Role::Responder, true)
            .raw_params(9, &content[..split])
            .raw_params(9, &content[split..])
            .params_end(9);
        let mut connection = Connection::new(ConnectionConfig::default());
        let (events, _) = run(&mut connection, &wire);
        assert_eq!(
            events[1],
            Event::Params {
                id: 9,
                params: owned(PARAMS)
            },
            "split {split}"
        );
    }
}

#[test]
fn request_without_body_and_without_params() {
    let wire = Wire::default()
        .begin(4, Role::Responder, true)
        .params_end(4)
        .stdin_end(4);
    let mut connection = Connection::new(ConnectionConfig::default());
    let (events, _) = run(&mut connection, &wire);
    assert_eq!(
        events,
        [
            Event::Begin {
                id: 4,
                role: Role::Responder,
                keep_conn: true
            },
            Event::Params {
                id: 4,
                params: vec![]
            },
            Event::StdinEnd { id: 4 },
        ]
    );
    let ended = connection.end_request(4, 0, &mut Vec::new()).unwrap();
    assert!(ended.keep_conn);
}

#[test]
fn multiplexed_requests_are_kept_apart() {
    let wire = Wire::default()
        .begin(1, Role::Responder, true)
        .begin(2, Role::Responder, true)
        .params(2, &[("REQUEST_METHOD", "GET")])
        .params(1, &[("REQUEST_METHOD", "POST")])
        .params_end(1)
        .stdin(1, b"one")
        .params_end(2)
        .stdin_end(2)
        .stdin(1, b"more")
        .begin(3, Role::Responder, true)
        .abort(3)
        .stdin_end(1);
    let mut connection = Connection::new(ConnectionConfig::default());
    let (events, out) = run(&mut connection, &wire);
    assert!(out.is_empty());
    assert_eq!(
        events,
        [
            Event::Begin {
                id: 1,
                role: Role::Responder,
                keep_conn: true
            },
            Event::Begin {
                id: 2,
                role: Role::Responder,
                keep_conn: true
            },
            Event::Params {
                id: 1,
                params: owned(&[("REQUEST_METHOD", "POST")])
            },
            Event::Stdin {
                id: 1,
                data: b"one".to_vec()
            },
            Event::Params {
                id: 2,
                params: owned(&[("REQUEST_METHOD", "GET")])
            },
            Event::StdinEnd { id: 2 },
            Event::Stdin {
                id: 1,
                data: b"more".to_vec()
            },
            Event::Begin {
                id: 3,
                role: Role::Responder,
                keep_conn: true
            },
            Event::Abort { id: 3 },
            Event::StdinEnd { id: 1 },
        ]
    );
    assert_eq!(connection.active_count(), 3);
    let mut out = Vec::new();
    connection.end_request(2, 0, &mut out).unwrap();
    connection.end_request(3, 0, &mut out).unwrap();
    connection.end_request(1, 0, &mut out).unwrap();
    let ids: Vec<u16> = replies(&out).iter().map(|r| r.request_id).collect();
    assert_eq!(ids, [2, 3, 1]);
    assert_eq!(connection.active_count(), 0);
}

#[test]
fn same_events_whatever_the_read_sizes() {
    let mut wire = full_request(1, true, &[7; 70_000]);
    wire = Wire(wire.0).begin(2, Role::Filter, false).abort(1);
    let mut whole = Connection::new(ConnectionConfig::default());
    let (expected, expected_out) = run(&mut whole, &wire);
    for step in [1, 3, 8, 1000, 65_537] {
        let mut connection = Connection::new(ConnectionConfig::default());
        let (mut events, mut out) = (Vec::new(), Vec::new());
        for chunk in wire.0.chunks(step) {
            connection.process(chunk, &mut out, &mut events).unwrap();
        }
        connection.finish_input().unwrap();
        let body: Vec<u8> = events
            .iter()
            .filter_map(|e| match e {
                Event::Stdin { data, .. } => Some(data.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(body.len(), 70_000, "step {step}");
        assert_eq!(events, expected, "step {step}");
        assert_eq!(out, expected_out, "step {step}");
    }
}

#[test]
fn unknown_roles_are_refused_with_unknown_role() {
    for role in [
        Role::Authorizer,
        Role::Filter,
        Role::Other(0),
        Role::Other(77),
    ] {
        let wire = Wire::default()
            .begin(5, role, false)
            .params(5, PARAMS)
            .params_end(5)
            .stdin_end(5);
        let mut connection = Connection::new(ConnectionConfig::default());
        let (events, out) = run(&mut connection, &wire);
        assert_eq!(
            events,
            [Event::Rejected {
                id: 5,
                role,
                status: ProtocolStatus::UnknownRole,
                keep_conn: false
            }]
        );
        assert_eq!(
            out,
            [1, 3, 0, 5, 0, 8, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0],
            "{role}"
        );
        assert!(!connection.is_active(5));
    }
}

#[test]
fn no_multiplexing_refuses_a_second_request() {
    let config = ConnectionConfig {
        mpxs_conns: false,
        ..ConnectionConfig::default()
    };
    let mut connection = Connection::new(config);
    let wire = Wire::default()
        .begin(1, Role::Responder, true)
        .begin(2, Role::Responder, true);
    let (events, out) = run(&mut connection, &wire);
    assert_eq!(
        events[1],
        Event::Rejected {
            id: 2,
            role: Role::Responder,
            status: ProtocolStatus::CantMpxConn,
            keep_conn: true
        }
    );
    let replies = replies(&out);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].request_id, 2);
    assert_eq!(
        end_body(&replies[0]).protocol_status,
        ProtocolStatus::CantMpxConn
    );
    // Once request 1 ends, a new one is accepted.
    connection.end_request(1, 0, &mut Vec::new()).unwrap();
    let (events, _) = run(
        &mut connection,
        &Wire::default().begin(2, Role::Responder, true),
    );
    assert_eq!(
        events,
        [Event::Begin {
            id: 2,
            role: Role::Responder,
            keep_conn: true
        }]
    );
}

#[test]
fn max_reqs_refuses_with_overloaded() {
    let config = ConnectionConfig {
        max_reqs: 2,
        ..ConnectionConfig::default()
    };
    let mut connection = Connection::new(config);
    let wire = Wire::default()
        .begin(1, Role::Responder, true)
        .begin(2, Role::Responder, true)
        .begin(3, Role::Responder, true);
    let (events, out) = run(&mut connection, &wire);
    assert!(matches!(
        events[2],
        Event::Rejected {
            id: 3,
            status: ProtocolStatus::Overloaded,
            ..
        }
    ));
    assert_eq!(
        end_body(&replies(&out)[0]).protocol_status,
        ProtocolStatus::Overloaded
    );
    assert_eq!(connection.active_count(), 2);
}

#[test]
fn get_values_is_answered_from_the_config() {
    let config = ConnectionConfig {
        max_conns: 10,
        max_reqs: 250,
        mpxs_conns: false,
        ..ConnectionConfig::default()
    };
    let mut connection = Connection::new(config);
    let mut wire = Wire::default();
    encode_get_values(
        [
            "FCGI_MAX_CONNS",
            "FCGI_MAX_REQS",
            "FCGI_MPXS_CONNS",
            "X_UNKNOWN",
            "FCGI_MAX_CONNS",
        ],
        &mut wire.0,
    )
    .unwrap();
    let (events, out) = run(&mut connection, &wire);
    assert_eq!(
        events,
        [Event::GetValues {
            names: [
                "FCGI_MAX_CONNS",
                "FCGI_MAX_REQS",
                "FCGI_MPXS_CONNS",
                "X_UNKNOWN",
                "FCGI_MAX_CONNS"
            ]
            .iter()
            .map(|n| n.as_bytes().to_vec())
            .collect()
        }]
    );
    // Known names answered once each, unknown names omitted (§4.1).
    let mut content = vec![14, 2];
    content.extend_from_slice(b"FCGI_MAX_CONNS10");
    content.extend_from_slice(&[13, 3]);
    content.extend_from_slice(b"FCGI_MAX_REQS250");
    content.extend_from_slice(&[15, 1]);
    content.extend_from_slice(b"FCGI_MPXS_CONNS0");
    let mut expected = vec![1, 10, 0, 0, 0, content.len() as u8, 0, 0];
    expected.extend_from_slice(&content);
    expected.resize(expected.len().next_multiple_of(8), 0);
    expected[6] = (expected.len() - 8 - content.len()) as u8;
    assert_eq!(out, expected);
    assert_eq!(
        connection.management_value(b"FCGI_MPXS_CONNS").as_deref(),
        Some("0")
    );
    assert_eq!(connection.config().max_reqs, 250);
}

#[test]
fn other_management_records_get_unknown_type() {
    let wire = Wire::default()
        .record(RecordType::Other(42), 0, b"whatever")
        .begin(0, Role::Responder, true)
        .record(RecordType::Stdin, 0, b"x")
        .record(RecordType::GetValuesResult, 0, b"");
    let mut connection = Connection::new(ConnectionConfig::default());
    let (events, out) = run(&mut connection, &wire);
    assert!(events.is_empty());
    let types: Vec<u8> = replies(&out)
        .iter()
        .map(|r| {
            assert_eq!(
                (r.kind, r.request_id, &r.content[1..]),
                (RecordType::UnknownType, 0, &[0u8; 7][..])
            );
            r.content[0]
        })
        .collect();
    assert_eq!(types, [42, 1, 5, 10]);
    assert_eq!(connection.active_count(), 0);
}

#[test]
fn records_for_inactive_ids_are_ignored() {
    let wire = Wire::default()
        .params(8, PARAMS)
        .params_end(8)
        .stdin(8, b"x")
        .stdin_end(8)
        .abort(8)
        .record(RecordType::Data, 8, b"d")
        .record(RecordType::Stdout, 8, b"o");
    let mut connection = Connection::new(ConnectionConfig::default());
    let (events, out) = run(&mut connection, &wire);
    assert!(events.is_empty() && out.is_empty());
}

#[test]
fn abort_then_ignore_until_ended() {
    let wire = Wire::default()
        .begin(1, Role::Responder, true)
        .params(1, PARAMS)
        .abort(1)
        .params_end(1)
        .stdin(1, b"late")
        .abort(1);
    let mut connection = Connection::new(ConnectionConfig::default());
    let (events, _) = run(&mut connection, &wire);
    assert_eq!(
        events,
        [
            Event::Begin {
                id: 1,
                role: Role::Responder,
                keep_conn: true
            },
            Event::Abort { id: 1 }
        ]
    );
    assert!(
        connection.is_active(1),
        "active until the application answers"
    );
    connection.end_request(1, 1, &mut Vec::new()).unwrap();
    // The id can be reused afterwards.
    let (events, _) = run(&mut connection, &full_request(1, true, b""));
    assert_eq!(events.len(), 3);
}

#[test]
fn abort_after_input_is_reported() {
    let wire = full_request(2, true, b"x").abort(2);
    let mut connection = Connection::new(ConnectionConfig::default());
    let (events, _) = run(&mut connection, &wire);
    assert_eq!(events.last(), Some(&Event::Abort { id: 2 }));
}

#[test]
fn protocol_violations() {
    let begun = || Wire::default().begin(1, Role::Responder, true);
    let cases: Vec<(Wire, ConnectionError)> = vec![
        (
            begun().stdin(1, b"early"),
            ConnectionError::Unexpected {
                id: 1,
                kind: RecordType::Stdin,
                expected: "FCGI_PARAMS or FCGI_ABORT_REQUEST",
            },
        ),
        (
            begun().begin(1, Role::Responder, true),
            ConnectionError::AlreadyActive { id: 1 },
        ),
        (
            begun().params_end(1).params(1, PARAMS),
            ConnectionError::Unexpected {
                id: 1,
                kind: RecordType::Params,
                expected: "FCGI_STDIN or FCGI_ABORT_REQUEST",
            },
        ),
        (
            begun()
                .params_end(1)
                .record(RecordType::Data, 1, b"filter data"),
            ConnectionError::Unexpected {
                id: 1,
                kind: RecordType::Data,
                expected: "FCGI_STDIN or FCGI_ABORT_REQUEST",
            },
        ),
        (
            begun().params_end(1).stdin_end(1).stdin(1, b"after end"),
            ConnectionError::Unexpected {
                id: 1,
                kind: RecordType::Stdin,
                expected: "only FCGI_ABORT_REQUEST once the input streams have ended",
            },
        ),
        (
            begun().record(RecordType::Stdout, 1, b"wrong direction"),
            ConnectionError::Unexpected {
                id: 1,
                kind: RecordType::Stdout,
                expected: "FCGI_PARAMS or FCGI_ABORT_REQUEST",
            },
        ),
        (
            begun().raw_params(1, &[4, 0, b'A']).params_end(1),
            ConnectionError::Params {
                id: 1,
                source: ParamsError::Truncated {
                    available: 3,
                    expected: 6,
                },
            },
        ),
        (
            Wire::default().record(RecordType::GetValues, 0, &[0x80]),
            ConnectionError::GetValues(ParamsError::Truncated {
                available: 1,
                expected: 5,
            }),
        ),
    ];
    for (wire, expected) in cases {
        let mut connection = Connection::new(ConnectionConfig::default());
        assert_eq!(run_err(&mut connection, &wire), expected);
    }
    let error = ConnectionError::Unexpected {
        id: 1,
        kind: RecordType::Stdin,
        expected: "FCGI_PARAMS or FCGI_ABORT_REQUEST",
    };
    assert_eq!(
        error.to_string(),
        "request 1: unexpected FCGI_STDIN record (expected FCGI_PARAMS or FCGI_ABORT_REQUEST)"
    );
}

#[test]
fn params_limit_is_enforced_per_request() {
    let limits = ParamsLimits {
        max_total_bytes: 64,
        max_pairs: 100,
    };
    let config = ConnectionConfig {
        params_limits: limits,
        ..ConnectionConfig::default()
    };
    let mut connection = Connection::new(config);
    let big = "v".repeat(100);
    let wire = Wire::default()
        .begin(1, Role::Responder, true)
        .params(1, &[("X", &big)]);
    assert!(matches!(
        run_err(&mut connection, &wire),
        ConnectionError::Params {
            id: 1,
            source: ParamsError::TooLarge { limit: 64, .. }
        }
    ));
}

#[test]
fn decode_errors_and_truncation_surface() {
    let mut connection = Connection::new(ConnectionConfig::default());
    let (mut events, mut out) = (Vec::new(), Vec::new());
    connection
        .process(&[1, 1, 0, 1, 0, 8], &mut out, &mut events)
        .unwrap();
    assert_eq!(
        connection.finish_input(),
        Err(ConnectionError::Decode(DecodeError::Truncated {
            received: 6,
            expected: 8
        }))
    );
    let mut connection = Connection::new(ConnectionConfig::default());
    assert_eq!(
        connection.process(&[9; 8], &mut out, &mut events),
        Err(ConnectionError::Decode(DecodeError::BadVersion {
            found: 9,
            expected: 1
        }))
    );
}

#[test]
fn handle_checks_begin_bodies_built_by_callers() {
    let mut connection = Connection::new(ConnectionConfig::default());
    let record = Record {
        kind: RecordType::BeginRequest,
        request_id: 1,
        content: vec![0, 1],
    };
    assert_eq!(
        connection.handle(record, &mut Vec::new()),
        Err(ConnectionError::Decode(DecodeError::BadLength {
            kind: RecordType::BeginRequest,
            found: 2,
            expected: 8
        }))
    );
}
