//! Fixed-layout record bodies: `FCGI_BeginRequestBody` (§5.1) and
//! `FCGI_EndRequestBody` (§5.5), with the role and protocol-status values
//! of §8.

use std::fmt;

use super::{DecodeError, RecordType};

/// `FCGI_KEEP_CONN`, the only flag of `FCGI_BeginRequestBody` (§5.1): when
/// clear, the application closes the connection after responding.
pub const FCGI_KEEP_CONN: u8 = 1;

/// The role the web server asks the application to play (§5.1, §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// `FCGI_RESPONDER` (1): the CGI/1.1 role, the only one corral serves.
    Responder,
    /// `FCGI_AUTHORIZER` (2).
    Authorizer,
    /// `FCGI_FILTER` (3).
    Filter,
    /// Any other role value; never `1..=3` when made by [`Role::from_u16`].
    Other(u16),
}

impl Role {
    /// Maps the 16-bit wire value to a [`Role`].
    pub const fn from_u16(value: u16) -> Self {
        match value {
            1 => Self::Responder,
            2 => Self::Authorizer,
            3 => Self::Filter,
            other => Self::Other(other),
        }
    }

    /// The 16-bit wire value.
    pub const fn as_u16(self) -> u16 {
        match self {
            Self::Responder => 1,
            Self::Authorizer => 2,
            Self::Filter => 3,
            Self::Other(value) => value,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Responder => f.write_str("FCGI_RESPONDER"),
            Self::Authorizer => f.write_str("FCGI_AUTHORIZER"),
            Self::Filter => f.write_str("FCGI_FILTER"),
            Self::Other(value) => write!(f, "role {value}"),
        }
    }
}

/// `protocolStatus` of `FCGI_EndRequestBody` (§5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolStatus {
    /// `FCGI_REQUEST_COMPLETE` (0): normal end of request.
    RequestComplete,
    /// `FCGI_CANT_MPX_CONN` (1): a second concurrent request on a
    /// connection of an application that does not multiplex.
    CantMpxConn,
    /// `FCGI_OVERLOADED` (2): the application ran out of some resource.
    Overloaded,
    /// `FCGI_UNKNOWN_ROLE` (3): the requested role is not served.
    UnknownRole,
    /// Any other value; never `0..=3` when made by [`ProtocolStatus::from_u8`].
    Other(u8),
}

impl ProtocolStatus {
    /// Maps the wire byte to a [`ProtocolStatus`].
    pub const fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::RequestComplete,
            1 => Self::CantMpxConn,
            2 => Self::Overloaded,
            3 => Self::UnknownRole,
            other => Self::Other(other),
        }
    }

    /// The wire byte.
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::RequestComplete => 0,
            Self::CantMpxConn => 1,
            Self::Overloaded => 2,
            Self::UnknownRole => 3,
            Self::Other(value) => value,
        }
    }
}

impl fmt::Display for ProtocolStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RequestComplete => f.write_str("FCGI_REQUEST_COMPLETE"),
            Self::CantMpxConn => f.write_str("FCGI_CANT_MPX_CONN"),
            Self::Overloaded => f.write_str("FCGI_OVERLOADED"),
            Self::UnknownRole => f.write_str("FCGI_UNKNOWN_ROLE"),
            Self::Other(value) => write!(f, "protocol status {value}"),
        }
    }
}

/// `FCGI_BeginRequestBody` (§5.1): `roleB1 roleB0 flags reserved[5]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeginRequestBody {
    /// Requested role.
    pub role: Role,
    /// Raw flags byte; see [`BeginRequestBody::keep_conn`].
    pub flags: u8,
}

impl BeginRequestBody {
    /// Parses the 8-byte body; other lengths are a [`DecodeError::BadLength`].
    pub fn parse(content: &[u8]) -> Result<Self, DecodeError> {
        match content {
            [role_b1, role_b0, flags, _, _, _, _, _] => Ok(Self {
                role: Role::from_u16(u16::from_be_bytes([*role_b1, *role_b0])),
                flags: *flags,
            }),
            _ => Err(DecodeError::BadLength {
                kind: RecordType::BeginRequest,
                found: u16::try_from(content.len()).unwrap_or(u16::MAX),
                expected: 8,
            }),
        }
    }

    /// Whether `FCGI_KEEP_CONN` is set.
    pub fn keep_conn(&self) -> bool {
        self.flags & FCGI_KEEP_CONN != 0
    }

    /// The 8 body bytes (reserved bytes zero).
    pub fn to_bytes(&self) -> [u8; 8] {
        let role = self.role.as_u16().to_be_bytes();
        [role[0], role[1], self.flags, 0, 0, 0, 0, 0]
    }
}

/// `FCGI_EndRequestBody` (§5.5): `appStatusB3..B0 protocolStatus reserved[3]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndRequestBody {
    /// Application-level status code (the CGI script's exit status).
    pub app_status: u32,
    /// Protocol-level status.
    pub protocol_status: ProtocolStatus,
}

impl EndRequestBody {
    /// Parses the 8-byte body; other lengths are a [`DecodeError::BadLength`].
    pub fn parse(content: &[u8]) -> Result<Self, DecodeError> {
        match content {
            [b3, b2, b1, b0, status, _, _, _] => Ok(Self {
                app_status: u32::from_be_bytes([*b3, *b2, *b1, *b0]),
                protocol_status: ProtocolStatus::from_u8(*status),
            }),
            _ => Err(DecodeError::BadLength {
                kind: RecordType::EndRequest,
                found: u16::try_from(content.len()).unwrap_or(u16::MAX),
                expected: 8,
            }),
        }
    }

    /// The 8 body bytes (reserved bytes zero).
    pub fn to_bytes(&self) -> [u8; 8] {
        let app = self.app_status.to_be_bytes();
        [
            app[0],
            app[1],
            app[2],
            app[3],
            self.protocol_status.as_u8(),
            0,
            0,
            0,
        ]
    }
}
