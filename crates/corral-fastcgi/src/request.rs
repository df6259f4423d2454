//! Per-connection FastCGI state machine (specification §3.3, §4, §5, §6.2).
//!
//! [`Connection`] consumes decoded records (or raw bytes, through its own
//! [`RecordDecoder`]) and turns them into [`Event`]s for the gateway. It
//! tracks which request ids are active (§3.3: an id becomes active with
//! `FCGI_BEGIN_REQUEST` and inactive when the application sends
//! `FCGI_END_REQUEST`; records for inactive ids are ignored), supports
//! several concurrent ids on one connection, and writes the replies the
//! protocol itself requires into a caller-provided buffer:
//!
//! * `FCGI_GET_VALUES_RESULT` for `FCGI_GET_VALUES` (§4.1), from the values
//!   in [`ConnectionConfig`];
//! * `FCGI_UNKNOWN_TYPE` for any other management record (§4.2);
//! * `FCGI_END_REQUEST` with `FCGI_UNKNOWN_ROLE` for roles other than
//!   `FCGI_RESPONDER`, `FCGI_CANT_MPX_CONN` for a second request when
//!   multiplexing is off, and `FCGI_OVERLOADED` beyond `max_reqs` (§5.5).
//!
//! Running scripts, and deciding when to close the socket, stays with the
//! caller: [`Connection::end_request`] reports whether `FCGI_KEEP_CONN` was
//! set.

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use crate::params::{self, Pair, ParamsDecoder, ParamsError, ParamsLimits};
use crate::record::{
    encode_end_request, encode_get_values_result, encode_unknown_type, BeginRequestBody,
    DecodeError, EncodeError, ProtocolStatus, Record, RecordDecoder, RecordType, Role,
};

/// `FCGI_MAX_CONNS`: name of the management variable (§4.1).
pub const FCGI_MAX_CONNS: &str = "FCGI_MAX_CONNS";
/// `FCGI_MAX_REQS`: name of the management variable (§4.1).
pub const FCGI_MAX_REQS: &str = "FCGI_MAX_REQS";
/// `FCGI_MPXS_CONNS`: name of the management variable (§4.1).
pub const FCGI_MPXS_CONNS: &str = "FCGI_MPXS_CONNS";

/// What the application announces and enforces on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// `FCGI_MAX_CONNS`: most concurrent connections the gateway accepts.
    /// Only announced; accepting connections is the caller's business.
    pub max_conns: u32,
    /// `FCGI_MAX_REQS`: most concurrent requests. Announced, and enforced
    /// per connection: a `FCGI_BEGIN_REQUEST` beyond it is answered with
    /// `FCGI_OVERLOADED`.
    pub max_reqs: u32,
    /// `FCGI_MPXS_CONNS`: whether several requests may share a connection.
    /// When false, a second concurrent request gets `FCGI_CANT_MPX_CONN`.
    pub mpxs_conns: bool,
    /// Limits on each request's `FCGI_PARAMS` stream (and on the content
    /// of `FCGI_GET_VALUES`).
    pub params_limits: ParamsLimits,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            max_conns: 64,
            max_reqs: 64,
            mpxs_conns: true,
            params_limits: ParamsLimits::default(),
        }
    }
}

/// What a record meant for the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A request id became active with the responder role.
    Begin {
        /// Request id.
        id: u16,
        /// Always [`Role::Responder`]; other roles are [`Event::Rejected`].
        role: Role,
        /// `FCGI_KEEP_CONN`: keep the connection open after this request.
        keep_conn: bool,
    },
    /// The request's `FCGI_PARAMS` stream is complete.
    Params {
        /// Request id.
        id: u16,
        /// The pairs, in the order received.
        params: Vec<Pair>,
    },
    /// A piece of the request body (`FCGI_STDIN`, never empty).
    Stdin {
        /// Request id.
        id: u16,
        /// Body bytes.
        data: Vec<u8>,
    },
    /// The request body is complete (empty `FCGI_STDIN` record).
    StdinEnd {
        /// Request id.
        id: u16,
    },
    /// The web server aborted the request (§5.4). The id stays active until
    /// the caller answers with [`Connection::end_request`].
    Abort {
        /// Request id.
        id: u16,
    },
    /// The web server queried management variables; the
    /// `FCGI_GET_VALUES_RESULT` answer has already been written.
    GetValues {
        /// Names queried, in order.
        names: Vec<Vec<u8>>,
    },
    /// A `FCGI_BEGIN_REQUEST` was refused; its `FCGI_END_REQUEST` has
    /// already been written and the id stays inactive. When `keep_conn` is
    /// false the web server expects the connection to be closed.
    Rejected {
        /// Request id.
        id: u16,
        /// Role asked for.
        role: Role,
        /// Why: `FCGI_UNKNOWN_ROLE`, `FCGI_CANT_MPX_CONN` or `FCGI_OVERLOADED`.
        status: ProtocolStatus,
        /// `FCGI_KEEP_CONN` of the refused request.
        keep_conn: bool,
    },
}

/// The web server broke the protocol; the connection should be closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The byte stream is not a sequence of records.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A request's `FCGI_PARAMS` stream is malformed or over the limits.
    #[error("request {id}: FCGI_PARAMS: {source}")]
    Params {
        /// Request id.
        id: u16,
        /// What is wrong with the stream.
        #[source]
        source: ParamsError,
    },
    /// An `FCGI_GET_VALUES` record's content is malformed.
    #[error("FCGI_GET_VALUES: {0}")]
    GetValues(#[source] ParamsError),
    /// A record arrived that the request's state does not allow.
    #[error("request {id}: unexpected {kind} record (expected {expected})")]
    Unexpected {
        /// Request id.
        id: u16,
        /// Type of the offending record.
        kind: RecordType,
        /// What the request could accept at that point.
        expected: &'static str,
    },
    /// A reply could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// `FCGI_BEGIN_REQUEST` for an id that is already active.
    #[error("request {id}: FCGI_BEGIN_REQUEST for an active request id (expected the id to be ended first)")]
    AlreadyActive {
        /// Request id.
        id: u16,
    },
    /// The caller ended a request id that is not active.
    #[error("request {id} is not active (expected an id announced by an Event::Begin)")]
    NotActive {
        /// Request id.
        id: u16,
    },
}

/// Where an active request is in its input streams.
#[derive(Debug)]
enum Phase {
    /// Receiving `FCGI_PARAMS`.
    Params(ParamsDecoder),
    /// Params complete, receiving `FCGI_STDIN`.
    Stdin,
    /// Both input streams complete; waiting for the application's answer.
    InputDone,
    /// Aborted by the web server; further input is ignored.
    Aborted,
}

#[derive(Debug)]
struct Request {
    keep_conn: bool,
    phase: Phase,
}

/// Returned by [`Connection::end_request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestEnded {
    /// `FCGI_KEEP_CONN` of the ended request: when false, the application
    /// must close the connection once the written records are flushed
    /// (§5.1).
    pub keep_conn: bool,
}

/// The application side of one FastCGI transport connection.
#[derive(Debug)]
pub struct Connection {
    config: ConnectionConfig,
    decoder: RecordDecoder,
    active: HashMap<u16, Request>,
}

impl Connection {
    /// A connection with no active request.
    pub fn new(config: ConnectionConfig) -> Self {
        Self {
            config,
            decoder: RecordDecoder::new(),
            active: HashMap::new(),
        }
    }

    /// The configuration, including the `FCGI_MAX_CONNS`, `FCGI_MAX_REQS`
    /// and `FCGI_MPXS_CONNS` values announced to the web server.
    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    /// The value of a management variable as answered to `FCGI_GET_VALUES`
    /// (§4.1), or `None` for a name the application does not know.
    pub fn management_value(&self, name: &[u8]) -> Option<String> {
        match name {
            n if n == FCGI_MAX_CONNS.as_bytes() => Some(self.config.max_conns.to_string()),
            n if n == FCGI_MAX_REQS.as_bytes() => Some(self.config.max_reqs.to_string()),
            n if n == FCGI_MPXS_CONNS.as_bytes() => {
                Some(if self.config.mpxs_conns { "1" } else { "0" }.to_owned())
            }
            _ => None,
        }
    }

    /// Whether `id` is an active request id.
    pub fn is_active(&self, id: u16) -> bool {
        self.active.contains_key(&id)
    }

    /// Number of active request ids.
    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    /// Decodes `input` and handles every record it completes, appending
    /// events to `events` and protocol replies to `out`. Partial records are
    /// kept for the next call.
    pub fn process(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnectionError> {
        let mut input = input;
        while let Some(record) = self.decoder.decode(&mut input)? {
            if let Some(event) = self.handle(record, out)? {
                events.push(event);
            }
        }
        Ok(())
    }

    /// Checks, when the web server has closed its side, that it did not stop
    /// inside a record.
    pub fn finish_input(&self) -> Result<(), ConnectionError> {
        Ok(self.decoder.finish()?)
    }

    /// Handles one decoded record. Replies required by the protocol are
    /// appended to `out`.
    pub fn handle(
        &mut self,
        record: Record,
        out: &mut Vec<u8>,
    ) -> Result<Option<Event>, ConnectionError> {
        if record.is_management() {
            return self.handle_management(record, out);
        }
        let id = record.request_id;
        if record.kind == RecordType::BeginRequest {
            return self.begin(id, &record.content, out);
        }
        // §3.3: records for an inactive request id are ignored.
        let Some(request) = self.active.get_mut(&id) else {
            return Ok(None);
        };
        match (record.kind, &mut request.phase) {
            (RecordType::AbortRequest, Phase::Aborted) => Ok(None),
            (RecordType::AbortRequest, phase) => {
                *phase = Phase::Aborted;
                Ok(Some(Event::Abort { id }))
            }
            (_, Phase::Aborted) => Ok(None),
            (RecordType::Params, Phase::Params(decoder)) => {
                if !record.content.is_empty() {
                    decoder
                        .push(&record.content)
                        .map_err(|source| ConnectionError::Params { id, source })?;
                    return Ok(None);
                }
                // The empty record ends the stream (§3.3).
                let decoder =
                    std::mem::replace(decoder, ParamsDecoder::new(ParamsLimits::default()));
                request.phase = Phase::Stdin;
                let params = decoder
                    .finish()
                    .map_err(|source| ConnectionError::Params { id, source })?;
                Ok(Some(Event::Params { id, params }))
            }
            (RecordType::Stdin, Phase::Stdin) => {
                if record.content.is_empty() {
                    request.phase = Phase::InputDone;
                    Ok(Some(Event::StdinEnd { id }))
                } else {
                    Ok(Some(Event::Stdin {
                        id,
                        data: record.content,
                    }))
                }
            }
            (kind, phase) => Err(ConnectionError::Unexpected {
                id,
                kind,
                expected: match phase {
                    Phase::Params(_) => "FCGI_PARAMS or FCGI_ABORT_REQUEST",
                    Phase::Stdin => "FCGI_STDIN or FCGI_ABORT_REQUEST",
                    _ => "only FCGI_ABORT_REQUEST once the input streams have ended",
                },
            }),
        }
    }

    /// Ends an active request: appends `{FCGI_END_REQUEST, id,
    /// {app_status, FCGI_REQUEST_COMPLETE}}` and makes `id` inactive. The
    /// caller must already have ended its `FCGI_STDOUT` stream (and
    /// `FCGI_STDERR`, if used) with the `encode_*_end` functions.
    pub fn end_request(
        &mut self,
        id: u16,
        app_status: u32,
        out: &mut Vec<u8>,
    ) -> Result<RequestEnded, ConnectionError> {
        let request = self
            .active
            .remove(&id)
            .ok_or(ConnectionError::NotActive { id })?;
        encode_end_request(id, app_status, ProtocolStatus::RequestComplete, out);
        Ok(RequestEnded {
            keep_conn: request.keep_conn,
        })
    }

    fn begin(
        &mut self,
        id: u16,
        content: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<Event>, ConnectionError> {
        let body = BeginRequestBody::parse(content)?;
        if self.active.contains_key(&id) {
            return Err(ConnectionError::AlreadyActive { id });
        }
        let keep_conn = body.keep_conn();
        let refusal = if body.role != Role::Responder {
            Some(ProtocolStatus::UnknownRole)
        } else if !self.config.mpxs_conns && !self.active.is_empty() {
            Some(ProtocolStatus::CantMpxConn)
        } else if self.active.len() >= usize::try_from(self.config.max_reqs).unwrap_or(usize::MAX) {
            Some(ProtocolStatus::Overloaded)
        } else {
            None
        };
        if let Some(status) = refusal {
            encode_end_request(id, 0, status, out);
            return Ok(Some(Event::Rejected {
                id,
                role: body.role,
                status,
                keep_conn,
            }));
        }
        let decoder = ParamsDecoder::new(self.config.params_limits);
        self.active.insert(
            id,
            Request {
                keep_conn,
                phase: Phase::Params(decoder),
            },
        );
        Ok(Some(Event::Begin {
            id,
            role: body.role,
            keep_conn,
        }))
    }

    fn handle_management(
        &mut self,
        record: Record,
        out: &mut Vec<u8>,
    ) -> Result<Option<Event>, ConnectionError> {
        if record.kind != RecordType::GetValues {
            // §4.2: answer any management type not understood.
            encode_unknown_type(record.kind.as_u8(), out);
            return Ok(None);
        }
        let pairs = params::decode_pairs(&record.content, self.config.params_limits)
            .map_err(ConnectionError::GetValues)?;
        let names: Vec<Vec<u8>> = pairs.into_iter().map(|(name, _)| name).collect();
        // §4.1: answer the known names (each once), omit the others.
        let mut answers: Vec<(&[u8], String)> = Vec::new();
        for name in &names {
            if answers.iter().any(|(known, _)| *known == name.as_slice()) {
                continue;
            }
            if let Some(value) = self.management_value(name) {
                answers.push((name, value));
            }
        }
        // At most three short pairs, so this always fits in one record.
        encode_get_values_result(answers.iter().map(|(n, v)| (*n, v.as_bytes())), out)?;
        Ok(Some(Event::GetValues { names }))
    }
}
