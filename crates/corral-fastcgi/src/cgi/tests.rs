use super::*;

fn parse(output: &[u8]) -> Result<CgiHead, CgiError> {
    let mut parser = CgiHeaderParser::new();
    match parser.feed(output)? {
        Some(head) => Ok(head),
        None => parser
            .finish()
            .map(|()| unreachable!("finish succeeds only once complete")),
    }
}

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

// --- Header block framing. ---

#[test]
fn document_response_with_lf_lines() {
    let output = b"Content-Type: text/html\nX-Tenant: t1\n\n<p>hi</p>";
    let head = parse(output).unwrap();
    assert_eq!(
        head,
        CgiHead {
            status: 200,
            reason: "OK".into(),
            headers: headers(&[("Content-Type", "text/html"), ("X-Tenant", "t1")]),
            redirect: None,
            body_start: 38,
        }
    );
    assert_eq!(&output[head.body_start..], b"<p>hi</p>");
    assert_eq!(head.header("content-type"), Some("text/html"));
}

#[test]
fn crlf_and_mixed_line_endings() {
    for output in [
        &b"Content-Type: text/plain\r\nStatus: 404 Not Found\r\n\r\nbody"[..],
        b"Content-Type: text/plain\nStatus: 404 Not Found\r\n\nbody",
        b"Content-Type: text/plain\r\nStatus: 404 Not Found\n\r\nbody",
    ] {
        let head = parse(output).unwrap();
        assert_eq!((head.status, head.reason.as_str()), (404, "Not Found"));
        assert_eq!(head.headers, headers(&[("Content-Type", "text/plain")]));
        assert_eq!(&output[head.body_start..], b"body");
    }
}

#[test]
fn header_split_at_every_byte_boundary() {
    let output = b"Status: 201 Created\r\nContent-Type: application/json\r\nLocation: https://a.example/x\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n{\"ok\":true}\n";
    let expected = parse(output).unwrap();
    let body = &output[expected.body_start..];
    for split in 0..=output.len() {
        let mut parser = CgiHeaderParser::new();
        let (first, second) = output.split_at(split);
        let (head, rest) = match parser.feed(first).unwrap() {
            Some(head) => {
                let rest = [&first[head.body_start..], second].concat();
                (head, rest)
            }
            None => {
                let head = parser
                    .feed(second)
                    .unwrap()
                    .expect("complete after all bytes");
                (head.clone(), second[head.body_start..].to_vec())
            }
        };
        assert_eq!(
            CgiHead {
                body_start: 0,
                ..head
            },
            CgiHead {
                body_start: 0,
                ..expected.clone()
            }
        );
        assert_eq!(rest, body, "split at {split}");
        assert!(parser.is_complete());
        assert_eq!(parser.finish(), Ok(()));
    }
}

#[test]
fn header_fed_one_byte_at_a_time() {
    let output = b"Content-Type: text/plain\r\n\r\n";
    let mut parser = CgiHeaderParser::new();
    for (i, byte) in output.iter().enumerate() {
        let head = parser.feed(std::slice::from_ref(byte)).unwrap();
        assert_eq!(head.is_some(), i == output.len() - 1);
        if let Some(head) = head {
            assert_eq!(head.body_start, 1);
        }
    }
    assert_eq!(parser.feed(b"more"), Err(CgiError::AlreadyComplete));
}

#[test]
fn output_without_complete_header() {
    for output in [
        &b""[..],
        b"Content-Type: text/plain",
        b"Content-Type: text/plain\r\n",
        b"A: b\r\n\r",
    ] {
        let mut parser = CgiHeaderParser::new();
        assert_eq!(parser.feed(output), Ok(None));
        assert_eq!(
            parser.finish(),
            Err(CgiError::NoHeader {
                received: output.len()
            })
        );
    }
    assert_eq!(parse(b"\r\nbody"), Err(CgiError::EmptyHeader));
    assert_eq!(parse(b"\nbody"), Err(CgiError::EmptyHeader));
}

#[test]
fn header_block_size_limit() {
    let mut output = b"Content-Type: text/plain\r\nX-Fill: ".to_vec();
    let fill = MAX_HEADER_BLOCK - output.len() - 4;
    output.extend_from_slice(&vec![b'x'; fill]);
    output.extend_from_slice(b"\r\n\r\n");
    assert_eq!(output.len(), MAX_HEADER_BLOCK);
    assert_eq!(parse(&output).unwrap().body_start, MAX_HEADER_BLOCK);

    output.insert(30, b'x');
    assert_eq!(
        parse(&output),
        Err(CgiError::TooLarge {
            limit: MAX_HEADER_BLOCK
        })
    );
    // Also when no newline arrives at all, fed in pieces.
    let mut parser = CgiHeaderParser::new();
    let piece = vec![b'a'; 4096];
    let error = loop {
        if let Err(error) = parser.feed(&piece) {
            break error;
        }
    };
    assert_eq!(
        error,
        CgiError::TooLarge {
            limit: MAX_HEADER_BLOCK
        }
    );
    assert_eq!(parser.feed(b"\n\n"), Err(error.clone()), "errors stick");
    assert_eq!(parser.finish(), Err(error));
    assert_eq!(
        CgiHeaderParser::with_limit(7).feed(b"A: b\r\n\r\n"),
        Err(CgiError::TooLarge { limit: 7 })
    );
}

// --- Field syntax. ---

#[test]
fn line_errors() {
    let cases: &[(&[u8], CgiError)] = &[
        (
            b"Content-Type: text/plain\nno colon here\n\n",
            CgiError::MissingColon { line: 2 },
        ),
        (
            b"Content-Type : text/plain\n\n",
            CgiError::InvalidName {
                line: 1,
                name: "Content-Type ".into(),
            },
        ),
        (
            b": value\n\n",
            CgiError::InvalidName {
                line: 1,
                name: String::new(),
            },
        ),
        (
            b"X(y): v\n\n",
            CgiError::InvalidName {
                line: 1,
                name: "X(y)".into(),
            },
        ),
        (
            b"Content-Type: a\n  folded\n\n",
            CgiError::ContinuationLine { line: 2 },
        ),
        (b"\tX: a\n\n", CgiError::ContinuationLine { line: 1 }),
        (
            b"X: a\rInjected: 1\n\n",
            CgiError::InvalidValue {
                line: 1,
                name: "X".into(),
            },
        ),
        (
            b"X: a\0b\n\n",
            CgiError::InvalidValue {
                line: 1,
                name: "X".into(),
            },
        ),
        (
            b"X: \x7f\n\n",
            CgiError::InvalidValue {
                line: 1,
                name: "X".into(),
            },
        ),
        (
            b"X: caf\xe9\n\n",
            CgiError::NonUtf8Value {
                line: 1,
                name: "X".into(),
            },
        ),
        (
            b"Status: 200 OK\nstatus: 404\n\n",
            CgiError::DuplicateField {
                line: 2,
                name: "status".into(),
            },
        ),
        (
            b"Location: /a\nLocation: /b\n\n",
            CgiError::DuplicateField {
                line: 2,
                name: "Location".into(),
            },
        ),
        (
            b"Content-Type: a\nCONTENT-TYPE: b\n\n",
            CgiError::DuplicateField {
                line: 2,
                name: "CONTENT-TYPE".into(),
            },
        ),
    ];
    for (output, expected) in cases {
        assert_eq!(
            &parse(output).unwrap_err(),
            expected,
            "{:?}",
            String::from_utf8_lossy(output)
        );
    }
    let long_name = [vec![b'('; 200], b": v\n\n".to_vec()].concat();
    let CgiError::InvalidName { name, .. } = parse(&long_name).unwrap_err() else {
        panic!()
    };
    assert_eq!(name.chars().count(), 65, "quoted names are shortened");
}

#[test]
fn values_are_trimmed_and_empty_fields_dropped() {
    let head = parse(b"Content-Type:text/plain\nX-A: \t spaced out \t\nX-Empty:\nStatus:   \nX-Tab: a\tb\nX-Utf8: \xc3\xa9t\xc3\xa9\n\n").unwrap();
    assert_eq!(head.status, 200, "an empty Status counts as not sent");
    assert_eq!(
        head.headers,
        headers(&[
            ("Content-Type", "text/plain"),
            ("X-A", "spaced out"),
            ("X-Tab", "a\tb"),
            ("X-Utf8", "été"),
        ])
    );
}

// --- Status and Location. ---

#[test]
fn status_values() {
    let ok: &[(&str, u16, &str)] = &[
        ("200 OK", 200, "OK"),
        ("404 Not Found", 404, "Not Found"),
        ("404", 404, "Not Found"),
        ("418 I'm a teapot", 418, "I'm a teapot"),
        ("299", 299, "Success"),
        ("503\tBusy  now ", 503, "Busy  now"),
        ("508", 508, "Loop Detected"),
        ("599 Custom", 599, "Custom"),
    ];
    for (value, status, reason) in ok {
        let head = parse(format!("Status: {value}\n\n").as_bytes()).unwrap();
        assert_eq!(
            (head.status, head.reason.as_str()),
            (*status, *reason),
            "{value}"
        );
    }
    for value in [
        "20",
        "2000",
        "200OK",
        "abc",
        "099",
        "100 Continue",
        "199",
        "600",
        "999",
        "-20",
        "2 0",
    ] {
        assert_eq!(
            parse(format!("Content-Type: a\nStatus: {value}\n\n").as_bytes()),
            Err(CgiError::InvalidStatus {
                line: 2,
                value: value.into()
            }),
            "{value}"
        );
    }
}

#[test]
fn client_redirect_without_status_is_302() {
    let head = parse(b"Location: https://example.org/a?b#c\n\n").unwrap();
    assert_eq!((head.status, head.reason.as_str()), (302, "Found"));
    assert_eq!(
        head.redirect,
        Some(Redirect::Client("https://example.org/a?b#c".into()))
    );
    assert_eq!(
        head.headers,
        headers(&[("Location", "https://example.org/a?b#c")])
    );
}

#[test]
fn client_redirect_with_document_keeps_status() {
    let head = parse(b"Location: http://x.example/\r\nStatus: 301 Moved Permanently\r\nContent-Type: text/html\r\n\r\n<a>").unwrap();
    assert_eq!(head.status, 301);
    assert_eq!(
        head.redirect,
        Some(Redirect::Client("http://x.example/".into()))
    );
}

#[test]
fn local_redirect_is_reported_distinctly() {
    let head = parse(b"Location: /other/page.cgi?x=1\n\n").unwrap();
    assert_eq!(
        head.redirect,
        Some(Redirect::Local("/other/page.cgi?x=1".into()))
    );
    assert_eq!(head.status, 302);
    // With a Status it is a client redirect to a relative reference.
    let head = parse(b"Status: 303 See Other\nLocation: /done\n\n").unwrap();
    assert_eq!(head.redirect, Some(Redirect::Client("/done".into())));
    assert_eq!(head.status, 303);
}

#[test]
fn non_local_locations_are_client_redirects() {
    for location in [
        "//evil.example/x",
        "relative/path",
        "mailto:a@b.example",
        "a+b-c.d:rest",
    ] {
        let head = parse(format!("Location: {location}\n\n").as_bytes()).unwrap();
        assert_eq!(
            head.redirect,
            Some(Redirect::Client(location.into())),
            "{location}"
        );
        assert_eq!(head.status, 302);
    }
    assert!(has_scheme("https://x"));
    assert!(!has_scheme("/a:b"));
    assert!(!has_scheme("1http://x"));
    assert!(!has_scheme(":x"));
}

// --- Re-serialisation and gateway errors. ---

#[test]
fn head_is_reserialised_normalised() {
    let head = parse(b"content-type: text/html\nStatus: 404\nX-A:  b \n\nbody").unwrap();
    assert_eq!(
        cgi_head_to_fastcgi_stdout(&head),
        b"Status: 404 Not Found\r\ncontent-type: text/html\r\nX-A: b\r\n\r\n"
    );
    let head = parse(b"Location: /x\n\n").unwrap();
    assert_eq!(
        cgi_head_to_fastcgi_stdout(&head),
        b"Status: 302 Found\r\nLocation: /x\r\n\r\n"
    );
    // What was serialised parses back to the same head.
    let again = parse(&cgi_head_to_fastcgi_stdout(&head)).unwrap();
    assert_eq!(again.headers, head.headers);
    assert_eq!(again.status, 302);
}

#[test]
fn reserialisation_rechecks_hand_built_heads() {
    let head = CgiHead {
        status: 42,
        reason: "Evil\r\nX-Injected: 1".into(),
        headers: headers(&[
            ("Good", "yes"),
            ("Bad Name", "v"),
            ("X", "a\r\nSet-Cookie: stolen"),
            ("Status", "200"),
        ]),
        redirect: None,
        body_start: 0,
    };
    assert_eq!(
        cgi_head_to_fastcgi_stdout(&head),
        b"Status: 502 Bad Gateway\r\nGood: yes\r\n\r\n"
    );
    let head = CgiHead {
        status: 200,
        reason: "Fine\r\nX: 1".into(),
        ..head
    };
    assert_eq!(
        cgi_head_to_fastcgi_stdout(&head),
        b"Status: 200 FineX: 1\r\nGood: yes\r\n\r\n"
    );
    let head = CgiHead {
        reason: String::new(),
        ..head
    };
    assert!(cgi_head_to_fastcgi_stdout(&head).starts_with(b"Status: 200 OK\r\n"));
}

#[test]
fn error_response_bytes() {
    let expected = "Status: 502 Bad Gateway\r\n\
                    Content-Type: text/plain; charset=utf-8\r\n\
                    Content-Length: 36\r\n\
                    Cache-Control: no-store\r\n\
                    X-Content-Type-Options: nosniff\r\n\
                    \r\n\
                    502 Bad Gateway\n\
                    script exited early\n";
    assert_eq!(
        String::from_utf8(error_response(502, "script exited early")).unwrap(),
        expected
    );
    for (status, reason) in [
        (403, "Forbidden"),
        (504, "Gateway Timeout"),
        (508, "Loop Detected"),
    ] {
        let response = error_response(status, "");
        let head = parse(&response).unwrap();
        assert_eq!((head.status, head.reason.as_str()), (status, reason));
        let body = &response[head.body_start..];
        assert_eq!(body, format!("{status} {reason}\n").as_bytes());
        assert_eq!(
            head.header("Content-Length"),
            Some(body.len().to_string().as_str())
        );
    }
    let response = error_response(7, "a\r\nb\x1b[31m\tc\n");
    let head = parse(&response).unwrap();
    assert_eq!(head.status, 500);
    assert_eq!(
        &response[head.body_start..],
        "500 Internal Server Error\na\u{fffd}\nb\u{fffd}[31m\tc\n".as_bytes()
    );
}
