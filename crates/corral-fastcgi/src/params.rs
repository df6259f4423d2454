//! FastCGI name-value pairs (specification §3.4).
//!
//! Each pair is `nameLength valueLength nameData valueData`. A length below
//! 128 takes one byte whose high bit is clear; a longer one takes four bytes,
//! big-endian, with the high bit of the first byte set (so at most
//! 2^31 - 1). `FCGI_PARAMS` is a stream (§3.3): pairs may straddle record
//! boundaries, and the stream ends with an empty `FCGI_PARAMS` record.
//! [`ParamsDecoder`] accumulates the stream under [`ParamsLimits`].

#[cfg(test)]
mod tests;

/// A decoded name-value pair: raw bytes, as the protocol does not restrict
/// them.
pub type Pair = (Vec<u8>, Vec<u8>);

/// Largest length a name or value can declare (31 bits, §3.4).
pub const MAX_PAIR_FIELD_LEN: usize = 0x7fff_ffff;

/// Default [`ParamsLimits::max_total_bytes`]: 1 MiB.
pub const DEFAULT_MAX_TOTAL_BYTES: usize = 1024 * 1024;
/// Default [`ParamsLimits::max_pairs`].
pub const DEFAULT_MAX_PAIRS: usize = 4096;

/// Bounds on one request's parameter stream. Both protect the gateway's
/// memory from a misbehaving web server (nginx sends a few KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamsLimits {
    /// Most bytes the whole stream may carry, length prefixes included.
    pub max_total_bytes: usize,
    /// Most pairs the stream may carry.
    pub max_pairs: usize,
}

impl Default for ParamsLimits {
    fn default() -> Self {
        Self {
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_pairs: DEFAULT_MAX_PAIRS,
        }
    }
}

/// Why name-value pairs could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// A name or value is longer than a FastCGI length can express.
    #[error("name-value field of {len} bytes (expected at most {max})")]
    FieldTooLong {
        /// Length of the field.
        len: usize,
        /// [`MAX_PAIR_FIELD_LEN`].
        max: usize,
    },
    /// The stream, or a pair it announces, exceeds the byte limit.
    #[error("name-value pairs need {needed} bytes (expected at most {limit})")]
    TooLarge {
        /// Bytes the stream would need (received, or announced by lengths).
        needed: usize,
        /// [`ParamsLimits::max_total_bytes`].
        limit: usize,
    },
    /// The stream carries more pairs than allowed.
    #[error("more than {limit} name-value pairs (expected at most {limit})")]
    TooManyPairs {
        /// [`ParamsLimits::max_pairs`].
        limit: usize,
    },
    /// The stream ended inside a pair.
    #[error("name-value stream ended inside a pair: {available} of {expected} bytes received")]
    Truncated {
        /// Bytes of the incomplete pair received.
        available: usize,
        /// Bytes the pair needs (for an incomplete length prefix, the bytes
        /// needed to read the prefixes).
        expected: usize,
    },
}

/// Appends a §3.4 length: one byte below 128, else four with the high bit set.
fn encode_length(len: usize, out: &mut Vec<u8>) -> Result<(), ParamsError> {
    if len < 0x80 {
        out.push(len as u8);
        Ok(())
    } else if len <= MAX_PAIR_FIELD_LEN {
        out.extend_from_slice(&(len as u32 | 0x8000_0000).to_be_bytes());
        Ok(())
    } else {
        Err(ParamsError::FieldTooLong {
            len,
            max: MAX_PAIR_FIELD_LEN,
        })
    }
}

/// Appends one name-value pair.
pub fn encode_pair(name: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<(), ParamsError> {
    encode_length(name.len(), out)?;
    encode_length(value.len(), out)?;
    out.extend_from_slice(name);
    out.extend_from_slice(value);
    Ok(())
}

/// Appends every pair of `pairs`.
pub fn encode_pairs<I, N, V>(pairs: I, out: &mut Vec<u8>) -> Result<(), ParamsError>
where
    I: IntoIterator<Item = (N, V)>,
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    for (name, value) in pairs {
        encode_pair(name.as_ref(), value.as_ref(), out)?;
    }
    Ok(())
}

/// Reads one §3.4 length at `buf[0..]`: `Some((length, bytes used))`, or
/// `None` if `buf` is too short to hold it.
fn read_length(buf: &[u8]) -> Option<(usize, usize)> {
    match buf {
        [first, ..] if first & 0x80 == 0 => Some((usize::from(*first), 1)),
        [b3, b2, b1, b0, ..] => {
            let len = u32::from_be_bytes([b3 & 0x7f, *b2, *b1, *b0]);
            Some((len as usize, 4))
        }
        _ => None,
    }
}

/// Bytes needed to read both length prefixes of a pair starting at `buf[0]`
/// (used to report truncation).
fn prefix_len(buf: &[u8]) -> usize {
    let name_prefix = match buf.first() {
        Some(first) if first & 0x80 != 0 => 4,
        _ => 1,
    };
    let value_prefix = match buf.get(name_prefix) {
        Some(first) if first & 0x80 != 0 => 4,
        _ => 1,
    };
    name_prefix + value_prefix
}

/// The parsed prefixes of one pair.
struct PairHeader {
    /// Prefix bytes (2 to 8).
    prefix: usize,
    name_len: usize,
    value_len: usize,
}

impl PairHeader {
    fn read(buf: &[u8]) -> Option<Self> {
        let (name_len, name_prefix) = read_length(buf)?;
        let (value_len, value_prefix) = read_length(&buf[name_prefix..])?;
        Some(Self {
            prefix: name_prefix + value_prefix,
            name_len,
            value_len,
        })
    }

    /// Total bytes of the pair (at most 8 + 2 * (2^31 - 1), no overflow).
    fn total(&self) -> usize {
        self.prefix
            .saturating_add(self.name_len)
            .saturating_add(self.value_len)
    }
}

/// Incremental decoder for one request's `FCGI_PARAMS` stream: push each
/// record's content, then call [`finish`](Self::finish) on the empty record.
///
/// Complete pairs are split off as soon as they arrive; only an incomplete
/// pair is buffered. Limits are checked against what is received and against
/// what the length prefixes announce, so a pair claiming 2 GiB fails at once.
#[derive(Debug, Clone)]
pub struct ParamsDecoder {
    limits: ParamsLimits,
    /// Bytes of the incomplete pair at the end of the stream so far.
    pending: Vec<u8>,
    /// Bytes of the stream before `pending`.
    consumed: usize,
    pairs: Vec<Pair>,
}

impl ParamsDecoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: ParamsLimits) -> Self {
        Self {
            limits,
            pending: Vec::new(),
            consumed: 0,
            pairs: Vec::new(),
        }
    }

    /// Bytes of the stream received so far.
    pub fn total_bytes(&self) -> usize {
        self.consumed + self.pending.len()
    }

    /// Number of complete pairs decoded so far.
    pub fn pair_count(&self) -> usize {
        self.pairs.len()
    }

    /// Adds the next piece of the stream (one record's content). On error
    /// the decoder must be discarded.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), ParamsError> {
        let needed = self.total_bytes().saturating_add(chunk.len());
        if needed > self.limits.max_total_bytes {
            return Err(ParamsError::TooLarge {
                needed,
                limit: self.limits.max_total_bytes,
            });
        }
        self.pending.extend_from_slice(chunk);
        let mut at = 0;
        while let Some(header) = PairHeader::read(&self.pending[at..]) {
            let end_of_pair = self
                .consumed
                .saturating_add(at)
                .saturating_add(header.total());
            if end_of_pair > self.limits.max_total_bytes {
                return Err(ParamsError::TooLarge {
                    needed: end_of_pair,
                    limit: self.limits.max_total_bytes,
                });
            }
            if self.pending.len() - at < header.total() {
                break;
            }
            if self.pairs.len() >= self.limits.max_pairs {
                return Err(ParamsError::TooManyPairs {
                    limit: self.limits.max_pairs,
                });
            }
            let name_start = at + header.prefix;
            let value_start = name_start + header.name_len;
            let value_end = value_start + header.value_len;
            self.pairs.push((
                self.pending[name_start..value_start].to_vec(),
                self.pending[value_start..value_end].to_vec(),
            ));
            at = value_end;
        }
        self.pending.drain(..at);
        self.consumed += at;
        Ok(())
    }

    /// Ends the stream: every pair must be complete.
    pub fn finish(self) -> Result<Vec<Pair>, ParamsError> {
        if self.pending.is_empty() {
            return Ok(self.pairs);
        }
        let expected = match PairHeader::read(&self.pending) {
            Some(header) => header.total(),
            None => prefix_len(&self.pending),
        };
        Err(ParamsError::Truncated {
            available: self.pending.len(),
            expected,
        })
    }
}

/// Decodes a complete buffer of pairs (for example the content of an
/// `FCGI_GET_VALUES` record) under `limits`.
pub fn decode_pairs(bytes: &[u8], limits: ParamsLimits) -> Result<Vec<Pair>, ParamsError> {
    let mut decoder = ParamsDecoder::new(limits);
    decoder.push(bytes)?;
    decoder.finish()
}
