//! CGI response header parser on arbitrary script output, fed in arbitrary
//! chunk splits.
//!
//! Checks, besides "no panic": one-shot and piecewise parsing agree (body
//! offsets compared in stream coordinates); a parsed head re-serialises to
//! bytes that parse back to the same status and fields; gateway error pages
//! for any status and message parse, with a correct Content-Length.
#![no_main]

use corral_fastcgi::cgi::reason_phrase;
use corral_fastcgi::{
    cgi_head_to_fastcgi_stdout, error_response, CgiError, CgiHead, CgiHeaderParser,
};
use libfuzzer_sys::fuzz_target;

/// Small enough for fuzz inputs to exceed it.
const LIMIT: usize = 1024;

/// Parses `pieces` in order; `body_start` is made relative to the stream.
fn parse(pieces: &[&[u8]]) -> Result<CgiHead, CgiError> {
    let mut parser = CgiHeaderParser::with_limit(LIMIT);
    let mut fed = 0;
    for piece in pieces {
        if let Some(mut head) = parser.feed(piece)? {
            assert!(head.body_start <= piece.len());
            head.body_start += fed;
            assert!(parser.is_complete() && parser.finish().is_ok());
            return Ok(head);
        }
        fed += piece.len();
    }
    let error = parser.finish().expect_err("incomplete head");
    assert_eq!(error, CgiError::NoHeader { received: fed });
    Err(error)
}

fuzz_target!(|data: &[u8]| {
    let whole = parse(&[data]);
    assert_eq!(whole, parse(&corral_fuzz::chunks(data)));

    if let Ok(head) = &whole {
        assert!((200..=599).contains(&head.status));
        assert!(head.body_start <= data.len() && head.body_start <= LIMIT);
        let wire = cgi_head_to_fastcgi_stdout(head);
        // Normalising LF to CRLF and adding the Status line can make the
        // block longer than LIMIT: parse it back under the default limit.
        let again = CgiHeaderParser::new()
            .feed(&wire)
            .expect("re-serialised head parses")
            .expect("re-serialised head is complete");
        assert_eq!(again.status, head.status);
        assert_eq!(again.reason, head.reason);
        assert_eq!(again.headers, head.headers);
        assert_eq!(again.body_start, wire.len());
    }

    if let [hi, lo, message @ ..] = data {
        let status = u16::from_be_bytes([*hi, *lo]);
        let page = error_response(status, &String::from_utf8_lossy(message));
        let mut parser = CgiHeaderParser::with_limit(usize::MAX);
        let head = parser
            .feed(&page)
            .expect("valid page")
            .expect("complete page");
        let expected = if (200..=599).contains(&status) {
            status
        } else {
            500
        };
        assert_eq!(
            (head.status, head.reason.as_str()),
            (expected, reason_phrase(expected))
        );
        let body = &page[head.body_start..];
        assert_eq!(
            head.header("Content-Length"),
            Some(body.len().to_string().as_str())
        );
    }
});
