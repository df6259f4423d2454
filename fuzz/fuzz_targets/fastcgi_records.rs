//! FastCGI record decoder and per-connection state machine on arbitrary
//! bytes, as if sent by a web server.
//!
//! Checks, besides "no panic": the same events, replies and errors whether
//! the bytes arrive at once or in arbitrary pieces; every decoded record
//! re-encodes and decodes to itself; the request-id bookkeeping stays
//! consistent while the driver answers each request as a gateway would.
#![no_main]

use corral_fastcgi::params::ParamsLimits;
use corral_fastcgi::record::{encode_record, encode_stdout, encode_stdout_end, MAX_CONTENT_LEN};
use corral_fastcgi::{Connection, ConnectionConfig, ConnectionError, Event, Record, RecordDecoder};
use libfuzzer_sys::fuzz_target;

/// Small limits so that fuzzing reaches them.
fn config(data: &[u8]) -> ConnectionConfig {
    ConnectionConfig {
        max_conns: 8,
        max_reqs: 4,
        mpxs_conns: data.len() & 1 == 0,
        params_limits: ParamsLimits {
            max_total_bytes: 2048,
            max_pairs: 32,
        },
    }
}

#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<Event>,
    replies: Vec<u8>,
    error: Option<ConnectionError>,
}

fn check_round_trip(record: &Record) {
    assert!(record.content.len() <= MAX_CONTENT_LEN);
    let mut wire = Vec::new();
    encode_record(record.kind, record.request_id, &record.content, &mut wire).expect("fits");
    let mut decoder = RecordDecoder::new();
    let mut input = &wire[..];
    let again = decoder
        .decode(&mut input)
        .expect("re-encoded record decodes");
    assert_eq!(again.as_ref(), Some(record));
    assert!(input.is_empty() && decoder.is_idle());
}

/// Decodes record by record and reacts like a gateway: answers a request
/// once its input has ended or it was aborted.
fn drive(data: &[u8], pieces: &[&[u8]]) -> Outcome {
    let config = config(data);
    let mut connection = Connection::new(config);
    let mut decoder = RecordDecoder::new();
    let mut outcome = Outcome {
        events: Vec::new(),
        replies: Vec::new(),
        error: None,
    };
    for piece in pieces {
        let mut input = *piece;
        loop {
            let record = match decoder.decode(&mut input) {
                Ok(Some(record)) => record,
                Ok(None) => break,
                Err(error) => {
                    outcome.error = Some(error.into());
                    return outcome;
                }
            };
            check_round_trip(&record);
            let event = match connection.handle(record, &mut outcome.replies) {
                Ok(Some(event)) => event,
                Ok(None) => continue,
                Err(error) => {
                    outcome.error = Some(error);
                    return outcome;
                }
            };
            match &event {
                Event::Begin { id, .. } => assert!(connection.is_active(*id)),
                Event::Rejected { id, .. } => assert!(!connection.is_active(*id)),
                Event::StdinEnd { id } | Event::Abort { id } => {
                    encode_stdout(*id, b"Status: 204 No Content\r\n\r\n", &mut outcome.replies);
                    encode_stdout_end(*id, &mut outcome.replies);
                    connection
                        .end_request(*id, 0, &mut outcome.replies)
                        .expect("id is active");
                    assert!(!connection.is_active(*id));
                }
                Event::Params { id, .. } | Event::Stdin { id, .. } => {
                    assert!(connection.is_active(*id))
                }
                Event::GetValues { .. } => {}
            }
            assert!(connection.active_count() <= config.max_reqs as usize);
            outcome.events.push(event);
        }
    }
    if let Err(error) = connection.finish_input() {
        outcome.error = Some(error);
    }
    outcome
}

/// The convenience path: `Connection::process`, no reactions.
fn process(data: &[u8], pieces: &[&[u8]]) -> Outcome {
    let mut connection = Connection::new(config(data));
    let mut outcome = Outcome {
        events: Vec::new(),
        replies: Vec::new(),
        error: None,
    };
    for piece in pieces {
        if let Err(error) = connection.process(piece, &mut outcome.replies, &mut outcome.events) {
            outcome.error = Some(error);
            return outcome;
        }
    }
    if let Err(error) = connection.finish_input() {
        outcome.error = Some(error);
    }
    outcome
}

fuzz_target!(|data: &[u8]| {
    let pieces = corral_fuzz::chunks(data);
    assert_eq!(drive(data, &[data]), drive(data, &pieces));
    assert_eq!(process(data, &[data]), process(data, &pieces));
});
