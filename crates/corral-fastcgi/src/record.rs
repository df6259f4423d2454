//! FastCGI 1.0 records (specification §3.3 and §8): the fixed 8-byte header,
//! the record types, and an incremental, bounded-memory [`RecordDecoder`].
//!
//! Wire layout of every record (§3.3):
//!
//! ```text
//! version(1) type(1) requestIdB1 requestIdB0 contentLengthB1 contentLengthB0
//! paddingLength(1) reserved(1) contentData[contentLength] paddingData[paddingLength]
//! ```
//!
//! The fixed-layout bodies ([`BeginRequestBody`], [`EndRequestBody`]) and
//! the encoders — for the application side, and for tests acting as the web
//! server — are defined in submodules and re-exported here.

mod body;
mod encode;
#[cfg(test)]
mod tests;

use std::fmt;

pub use body::{BeginRequestBody, EndRequestBody, ProtocolStatus, Role, FCGI_KEEP_CONN};
pub use encode::{
    encode_abort_request, encode_begin_request, encode_end_request, encode_get_values,
    encode_get_values_result, encode_record, encode_stderr, encode_stderr_end, encode_stdout,
    encode_stdout_end, encode_stream, encode_stream_end, encode_unknown_type, padding_for,
    EncodeError, Stream, MAX_STREAM_CHUNK,
};

/// `FCGI_VERSION_1`, the only protocol version defined (§8).
pub const FCGI_VERSION_1: u8 = 1;
/// `FCGI_HEADER_LEN`: every record starts with an 8-byte header (§8).
pub const FCGI_HEADER_LEN: usize = 8;
/// `FCGI_NULL_REQUEST_ID`: request id of management records (§3.3, §4).
pub const FCGI_NULL_REQUEST_ID: u16 = 0;
/// Largest content a single record can carry (`contentLength` is 16 bits).
pub const MAX_CONTENT_LEN: usize = u16::MAX as usize;

/// The `type` byte of a record (§8, `FCGI_BEGIN_REQUEST` .. `FCGI_UNKNOWN_TYPE`).
///
/// Type bytes outside `1..=11` decode to [`RecordType::Other`] so that
/// management records of unknown types can be answered with
/// `FCGI_UNKNOWN_TYPE` (§4.2) instead of failing the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// `FCGI_BEGIN_REQUEST` (1).
    BeginRequest,
    /// `FCGI_ABORT_REQUEST` (2).
    AbortRequest,
    /// `FCGI_END_REQUEST` (3).
    EndRequest,
    /// `FCGI_PARAMS` (4), a stream.
    Params,
    /// `FCGI_STDIN` (5), a stream.
    Stdin,
    /// `FCGI_STDOUT` (6), a stream.
    Stdout,
    /// `FCGI_STDERR` (7), a stream.
    Stderr,
    /// `FCGI_DATA` (8), a stream.
    Data,
    /// `FCGI_GET_VALUES` (9), management.
    GetValues,
    /// `FCGI_GET_VALUES_RESULT` (10), management.
    GetValuesResult,
    /// `FCGI_UNKNOWN_TYPE` (11), management.
    UnknownType,
    /// Any other type byte (0 or 12..=255); never holds a value in `1..=11`
    /// when produced by [`RecordType::from_u8`].
    Other(u8),
}

impl RecordType {
    /// Maps a wire type byte to a [`RecordType`].
    pub const fn from_u8(byte: u8) -> Self {
        match byte {
            1 => Self::BeginRequest,
            2 => Self::AbortRequest,
            3 => Self::EndRequest,
            4 => Self::Params,
            5 => Self::Stdin,
            6 => Self::Stdout,
            7 => Self::Stderr,
            8 => Self::Data,
            9 => Self::GetValues,
            10 => Self::GetValuesResult,
            11 => Self::UnknownType,
            other => Self::Other(other),
        }
    }

    /// The wire type byte.
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::BeginRequest => 1,
            Self::AbortRequest => 2,
            Self::EndRequest => 3,
            Self::Params => 4,
            Self::Stdin => 5,
            Self::Stdout => 6,
            Self::Stderr => 7,
            Self::Data => 8,
            Self::GetValues => 9,
            Self::GetValuesResult => 10,
            Self::UnknownType => 11,
            Self::Other(byte) => byte,
        }
    }

    /// Whether this is a stream record type, whose end is marked by an
    /// empty record (§3.3): `FCGI_PARAMS`, `FCGI_STDIN`, `FCGI_STDOUT`,
    /// `FCGI_STDERR`, `FCGI_DATA`.
    pub const fn is_stream(self) -> bool {
        matches!(
            self,
            Self::Params | Self::Stdin | Self::Stdout | Self::Stderr | Self::Data
        )
    }

    /// The content length the specification fixes for this type, if any:
    /// `FCGI_BeginRequestBody`, `FCGI_EndRequestBody` and
    /// `FCGI_UnknownTypeBody` are 8 bytes (§5.1, §5.5, §4.2); an
    /// `FCGI_ABORT_REQUEST` has no content (§5.4).
    pub const fn fixed_content_len(self) -> Option<u16> {
        match self {
            Self::BeginRequest | Self::EndRequest | Self::UnknownType => Some(8),
            Self::AbortRequest => Some(0),
            _ => None,
        }
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::BeginRequest => "FCGI_BEGIN_REQUEST",
            Self::AbortRequest => "FCGI_ABORT_REQUEST",
            Self::EndRequest => "FCGI_END_REQUEST",
            Self::Params => "FCGI_PARAMS",
            Self::Stdin => "FCGI_STDIN",
            Self::Stdout => "FCGI_STDOUT",
            Self::Stderr => "FCGI_STDERR",
            Self::Data => "FCGI_DATA",
            Self::GetValues => "FCGI_GET_VALUES",
            Self::GetValuesResult => "FCGI_GET_VALUES_RESULT",
            Self::UnknownType => "FCGI_UNKNOWN_TYPE",
            Self::Other(byte) => return write!(f, "record type {byte}"),
        };
        f.write_str(name)
    }
}

/// A decoded record header (§3.3). The reserved byte is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Record type.
    pub kind: RecordType,
    /// Request id; [`FCGI_NULL_REQUEST_ID`] for management records.
    pub request_id: u16,
    /// Number of content bytes that follow the header.
    pub content_length: u16,
    /// Number of padding bytes that follow the content.
    pub padding_length: u8,
}

impl RecordHeader {
    /// Parses and validates an 8-byte header: the version must be
    /// [`FCGI_VERSION_1`], and types with a fixed body size must declare it.
    pub fn parse(bytes: &[u8; FCGI_HEADER_LEN]) -> Result<Self, DecodeError> {
        if bytes[0] != FCGI_VERSION_1 {
            return Err(DecodeError::BadVersion {
                found: bytes[0],
                expected: FCGI_VERSION_1,
            });
        }
        let header = Self {
            kind: RecordType::from_u8(bytes[1]),
            request_id: u16::from_be_bytes([bytes[2], bytes[3]]),
            content_length: u16::from_be_bytes([bytes[4], bytes[5]]),
            padding_length: bytes[6],
        };
        if let Some(expected) = header.kind.fixed_content_len() {
            if header.content_length != expected {
                return Err(DecodeError::BadLength {
                    kind: header.kind,
                    found: header.content_length,
                    expected,
                });
            }
        }
        Ok(header)
    }

    /// The 8 header bytes, version 1, reserved byte zero.
    pub fn to_bytes(&self) -> [u8; FCGI_HEADER_LEN] {
        let id = self.request_id.to_be_bytes();
        let len = self.content_length.to_be_bytes();
        [
            FCGI_VERSION_1,
            self.kind.as_u8(),
            id[0],
            id[1],
            len[0],
            len[1],
            self.padding_length,
            0,
        ]
    }

    /// Total size of the record on the wire: header, content and padding.
    pub fn record_len(&self) -> usize {
        FCGI_HEADER_LEN + usize::from(self.content_length) + usize::from(self.padding_length)
    }
}

/// One complete record, padding removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Record type.
    pub kind: RecordType,
    /// Request id; [`FCGI_NULL_REQUEST_ID`] for management records.
    pub request_id: u16,
    /// The content bytes, at most [`MAX_CONTENT_LEN`] of them.
    pub content: Vec<u8>,
}

impl Record {
    /// Whether this is a management record (`requestId == 0`, §3.3).
    pub fn is_management(&self) -> bool {
        self.request_id == FCGI_NULL_REQUEST_ID
    }
}

/// Why a byte stream is not a valid sequence of FastCGI records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The header's version byte is not 1.
    #[error("unsupported FastCGI record version {found} (expected {expected})")]
    BadVersion {
        /// Version byte received.
        found: u8,
        /// The only supported version, [`FCGI_VERSION_1`].
        expected: u8,
    },
    /// A record type with a fixed body size declared another content length.
    #[error("{kind} record declares {found} content bytes (expected exactly {expected})")]
    BadLength {
        /// Record type.
        kind: RecordType,
        /// Declared content length.
        found: u16,
        /// Length fixed by the specification for this type.
        expected: u16,
    },
    /// The input ended in the middle of a record.
    #[error("input ended inside a FastCGI record: {received} of {expected} bytes received")]
    Truncated {
        /// Bytes of the incomplete record received so far (header included).
        received: usize,
        /// Bytes the record needs (8 while the header itself is incomplete).
        expected: usize,
    },
}

/// Where the decoder is inside the current record.
#[derive(Debug)]
enum State {
    /// Collecting the 8 header bytes.
    Header {
        bytes: [u8; FCGI_HEADER_LEN],
        filled: usize,
    },
    /// Collecting content (capacity fixed by the header), then skipping padding.
    Body {
        header: RecordHeader,
        content: Vec<u8>,
        padding_left: u8,
    },
}

impl State {
    const fn empty() -> Self {
        Self::Header {
            bytes: [0; FCGI_HEADER_LEN],
            filled: 0,
        }
    }
}

/// Incremental record decoder: feed it bytes in pieces of any size and take
/// complete [`Record`]s out.
///
/// Memory is bounded by construction: the decoder holds at most one partial
/// record, whose content cannot exceed [`MAX_CONTENT_LEN`] bytes; padding is
/// skipped, never stored. A record is returned once its padding has been
/// consumed too. After an error the decoder stays failed (framing is lost)
/// and returns the same error on every later call.
///
/// With a `BytesMut`-like buffer, decode from a slice of it and advance the
/// buffer by the bytes consumed:
///
/// ```
/// # use corral_fastcgi::record::{RecordDecoder, encode_stdout};
/// let mut buf = Vec::new();
/// encode_stdout(1, b"hello", &mut buf);
/// let mut decoder = RecordDecoder::new();
/// let mut input = &buf[..];
/// let record = decoder.decode(&mut input).unwrap().unwrap();
/// let consumed = buf.len() - input.len(); // buf.advance(consumed) for BytesMut
/// assert_eq!((record.content.as_slice(), consumed), (&b"hello"[..], 16));
/// ```
#[derive(Debug)]
pub struct RecordDecoder {
    state: State,
    failed: Option<DecodeError>,
}

impl Default for RecordDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordDecoder {
    /// A decoder positioned at the start of a record.
    pub const fn new() -> Self {
        Self {
            state: State::empty(),
            failed: None,
        }
    }

    /// Consumes bytes from the front of `input` until one record is complete
    /// (returned, with the rest of `input` left untouched) or `input` is
    /// exhausted (`Ok(None)`; the partial record is kept for the next call).
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Record>, DecodeError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        loop {
            match &mut self.state {
                State::Header { bytes, filled } => {
                    let take = (FCGI_HEADER_LEN - *filled).min(input.len());
                    bytes[*filled..*filled + take].copy_from_slice(&input[..take]);
                    *filled += take;
                    *input = &input[take..];
                    if *filled < FCGI_HEADER_LEN {
                        return Ok(None);
                    }
                    let header = match RecordHeader::parse(bytes) {
                        Ok(header) => header,
                        Err(error) => {
                            self.failed = Some(error.clone());
                            return Err(error);
                        }
                    };
                    self.state = State::Body {
                        header,
                        content: Vec::with_capacity(usize::from(header.content_length)),
                        padding_left: header.padding_length,
                    };
                }
                State::Body {
                    header,
                    content,
                    padding_left,
                } => {
                    let missing = usize::from(header.content_length) - content.len();
                    let take = missing.min(input.len());
                    content.extend_from_slice(&input[..take]);
                    *input = &input[take..];
                    if content.len() < usize::from(header.content_length) {
                        return Ok(None);
                    }
                    let skip = usize::from(*padding_left).min(input.len());
                    *input = &input[skip..];
                    // `skip <= padding_left`, which fits in a u8.
                    *padding_left -= skip as u8;
                    if *padding_left > 0 {
                        return Ok(None);
                    }
                    let (kind, request_id) = (header.kind, header.request_id);
                    let content = std::mem::take(content);
                    self.state = State::empty();
                    return Ok(Some(Record {
                        kind,
                        request_id,
                        content,
                    }));
                }
            }
        }
    }

    /// Iterates over the records completed by `input`. The iterator stops
    /// when `input` is exhausted or after yielding an error.
    pub fn records<'d, 'i>(&'d mut self, input: &'i [u8]) -> Records<'d, 'i> {
        Records {
            decoder: self,
            input,
            done: false,
        }
    }

    /// Whether the decoder sits between records (nothing partial buffered).
    pub fn is_idle(&self) -> bool {
        self.failed.is_none() && matches!(self.state, State::Header { filled: 0, .. })
    }

    /// Checks, once the input has ended, that it did not end inside a
    /// record.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        match &self.state {
            State::Header { filled: 0, .. } => Ok(()),
            State::Header { filled, .. } => Err(DecodeError::Truncated {
                received: *filled,
                expected: FCGI_HEADER_LEN,
            }),
            State::Body {
                header,
                content,
                padding_left,
            } => Err(DecodeError::Truncated {
                received: FCGI_HEADER_LEN
                    + content.len()
                    + usize::from(header.padding_length - *padding_left),
                expected: header.record_len(),
            }),
        }
    }
}

/// Iterator returned by [`RecordDecoder::records`].
#[derive(Debug)]
pub struct Records<'d, 'i> {
    decoder: &'d mut RecordDecoder,
    input: &'i [u8],
    done: bool,
}

impl Records<'_, '_> {
    /// The input not consumed yet (empty once the iterator has finished
    /// without error).
    pub fn remaining(&self) -> &[u8] {
        self.input
    }
}

impl Iterator for Records<'_, '_> {
    type Item = Result<Record, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.decoder.decode(&mut self.input) {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}
