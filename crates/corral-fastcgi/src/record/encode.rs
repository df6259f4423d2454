//! Record encoders. They append to a caller-owned `Vec<u8>` so that several
//! records can be batched into one write.
//!
//! Every record is padded to a multiple of 8 bytes, as §3.3 recommends
//! ("We recommend that records be placed on boundaries that are multiples
//! of eight bytes").

use super::{
    BeginRequestBody, EndRequestBody, ProtocolStatus, RecordHeader, RecordType, Role,
    FCGI_HEADER_LEN, FCGI_NULL_REQUEST_ID, MAX_CONTENT_LEN,
};
use crate::params::{self, ParamsError};

/// Largest content put in one stream record by [`encode_stream`]: the
/// largest multiple of 8 that fits in `contentLength`, so that full records
/// need no padding (8 + 65528 = 65536 bytes on the wire).
pub const MAX_STREAM_CHUNK: usize = MAX_CONTENT_LEN - MAX_CONTENT_LEN % 8;

/// Why a record could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The content of a non-stream record does not fit in one record.
    #[error("{kind} content is {len} bytes (expected at most {max})")]
    ContentTooLong {
        /// Record type being encoded.
        kind: RecordType,
        /// Content length requested.
        len: usize,
        /// [`MAX_CONTENT_LEN`].
        max: usize,
    },
    /// A name-value pair could not be encoded.
    #[error(transparent)]
    Params(#[from] ParamsError),
}

/// The stream record types (§3.3), for [`encode_stream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// `FCGI_PARAMS` (web server to application).
    Params,
    /// `FCGI_STDIN` (web server to application).
    Stdin,
    /// `FCGI_STDOUT` (application to web server).
    Stdout,
    /// `FCGI_STDERR` (application to web server).
    Stderr,
    /// `FCGI_DATA` (web server to application, filter role).
    Data,
}

impl Stream {
    /// The record type carrying this stream.
    pub const fn record_type(self) -> RecordType {
        match self {
            Self::Params => RecordType::Params,
            Self::Stdin => RecordType::Stdin,
            Self::Stdout => RecordType::Stdout,
            Self::Stderr => RecordType::Stderr,
            Self::Data => RecordType::Data,
        }
    }
}

/// Padding that brings a record with `content_len` content bytes to a
/// multiple of 8 bytes (the header is 8 bytes itself).
pub const fn padding_for(content_len: usize) -> u8 {
    ((8 - content_len % 8) % 8) as u8
}

/// Appends one record; `content.len()` must not exceed [`MAX_CONTENT_LEN`].
fn push_record(kind: RecordType, request_id: u16, content: &[u8], out: &mut Vec<u8>) {
    debug_assert!(content.len() <= MAX_CONTENT_LEN);
    let padding_length = padding_for(content.len());
    let header = RecordHeader {
        kind,
        request_id,
        content_length: content.len() as u16,
        padding_length,
    };
    out.reserve(FCGI_HEADER_LEN + content.len() + usize::from(padding_length));
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(content);
    out.resize(out.len() + usize::from(padding_length), 0);
}

/// Appends one record of any type with `content`, padded to 8 bytes.
pub fn encode_record(
    kind: RecordType,
    request_id: u16,
    content: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if content.len() > MAX_CONTENT_LEN {
        return Err(EncodeError::ContentTooLong {
            kind,
            len: content.len(),
            max: MAX_CONTENT_LEN,
        });
    }
    push_record(kind, request_id, content, out);
    Ok(())
}

/// Appends `data` as stream records of at most [`MAX_STREAM_CHUNK`] bytes.
/// Empty `data` appends nothing: an empty record would end the stream (use
/// [`encode_stream_end`] for that).
pub fn encode_stream(stream: Stream, request_id: u16, data: &[u8], out: &mut Vec<u8>) {
    for chunk in data.chunks(MAX_STREAM_CHUNK) {
        push_record(stream.record_type(), request_id, chunk, out);
    }
}

/// Appends the empty record that ends a stream (§3.3).
pub fn encode_stream_end(stream: Stream, request_id: u16, out: &mut Vec<u8>) {
    push_record(stream.record_type(), request_id, &[], out);
}

/// Appends `data` as `FCGI_STDOUT` records (see [`encode_stream`]).
pub fn encode_stdout(request_id: u16, data: &[u8], out: &mut Vec<u8>) {
    encode_stream(Stream::Stdout, request_id, data, out);
}

/// Appends the empty `FCGI_STDOUT` record that ends the stdout stream.
pub fn encode_stdout_end(request_id: u16, out: &mut Vec<u8>) {
    encode_stream_end(Stream::Stdout, request_id, out);
}

/// Appends `data` as `FCGI_STDERR` records (see [`encode_stream`]).
pub fn encode_stderr(request_id: u16, data: &[u8], out: &mut Vec<u8>) {
    encode_stream(Stream::Stderr, request_id, data, out);
}

/// Appends the empty `FCGI_STDERR` record that ends the stderr stream.
pub fn encode_stderr_end(request_id: u16, out: &mut Vec<u8>) {
    encode_stream_end(Stream::Stderr, request_id, out);
}

/// Appends `{FCGI_END_REQUEST, request_id, {app_status, protocol_status}}`
/// (§5.5).
pub fn encode_end_request(
    request_id: u16,
    app_status: u32,
    protocol_status: ProtocolStatus,
    out: &mut Vec<u8>,
) {
    let body = EndRequestBody {
        app_status,
        protocol_status,
    };
    push_record(RecordType::EndRequest, request_id, &body.to_bytes(), out);
}

/// Appends `{FCGI_GET_VALUES_RESULT, 0, ...}` (§4.1) carrying `pairs`.
/// The result must fit in one record.
pub fn encode_get_values_result<I, N, V>(pairs: I, out: &mut Vec<u8>) -> Result<(), EncodeError>
where
    I: IntoIterator<Item = (N, V)>,
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut content = Vec::new();
    for (name, value) in pairs {
        params::encode_pair(name.as_ref(), value.as_ref(), &mut content)?;
    }
    encode_record(
        RecordType::GetValuesResult,
        FCGI_NULL_REQUEST_ID,
        &content,
        out,
    )
}

/// Appends `{FCGI_UNKNOWN_TYPE, 0, {unknown_type}}` (§4.2), the answer to a
/// management record whose type the application does not understand.
pub fn encode_unknown_type(unknown_type: u8, out: &mut Vec<u8>) {
    let body = [unknown_type, 0, 0, 0, 0, 0, 0, 0];
    push_record(RecordType::UnknownType, FCGI_NULL_REQUEST_ID, &body, out);
}

/// Appends `{FCGI_BEGIN_REQUEST, request_id, {role, flags}}` (§5.1), as a
/// web server would send it (used by tests, fuzzing and health probes).
pub fn encode_begin_request(request_id: u16, role: Role, keep_conn: bool, out: &mut Vec<u8>) {
    let flags = if keep_conn { super::FCGI_KEEP_CONN } else { 0 };
    let body = BeginRequestBody { role, flags };
    push_record(RecordType::BeginRequest, request_id, &body.to_bytes(), out);
}

/// Appends `{FCGI_ABORT_REQUEST, request_id}` (§5.4), as a web server
/// would send it.
pub fn encode_abort_request(request_id: u16, out: &mut Vec<u8>) {
    push_record(RecordType::AbortRequest, request_id, &[], out);
}

/// Appends `{FCGI_GET_VALUES, 0, ...}` (§4.1) asking for `names` (pairs
/// with empty values), as a web server would send it.
pub fn encode_get_values<I, N>(names: I, out: &mut Vec<u8>) -> Result<(), EncodeError>
where
    I: IntoIterator<Item = N>,
    N: AsRef<[u8]>,
{
    let mut content = Vec::new();
    for name in names {
        params::encode_pair(name.as_ref(), b"", &mut content)?;
    }
    encode_record(RecordType::GetValues, FCGI_NULL_REQUEST_ID, &content, out)
}
