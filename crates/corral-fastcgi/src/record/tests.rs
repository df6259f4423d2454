use super::*;

/// Decodes all of `bytes` in one call sequence and checks nothing is left.
fn decode_all(bytes: &[u8]) -> Result<Vec<Record>, DecodeError> {
    let mut decoder = RecordDecoder::new();
    let records = decoder.records(bytes).collect::<Result<Vec<_>, _>>()?;
    decoder.finish()?;
    Ok(records)
}

fn record(kind: RecordType, request_id: u16, content: &[u8]) -> Record {
    Record {
        kind,
        request_id,
        content: content.to_vec(),
    }
}

// --- Byte-exact vectors, written from the specification's structs (§8). ---

#[test]
fn begin_request_vector() {
    // FCGI_Header {1, FCGI_BEGIN_REQUEST, id 1, len 8, pad 0}
    // FCGI_BeginRequestBody {FCGI_RESPONDER, FCGI_KEEP_CONN}
    let wire = [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0];
    let mut out = Vec::new();
    encode_begin_request(1, Role::Responder, true, &mut out);
    assert_eq!(out, wire);
    let records = decode_all(&wire).unwrap();
    assert_eq!(records, [record(RecordType::BeginRequest, 1, &wire[8..])]);
    let body = BeginRequestBody::parse(&records[0].content).unwrap();
    assert_eq!(body.role, Role::Responder);
    assert!(body.keep_conn());
}

#[test]
fn end_request_vector() {
    // {FCGI_END_REQUEST, 0x1234, {appStatus 0x01020304, FCGI_UNKNOWN_ROLE}}
    let wire = [1, 3, 0x12, 0x34, 0, 8, 0, 0, 1, 2, 3, 4, 3, 0, 0, 0];
    let mut out = Vec::new();
    encode_end_request(0x1234, 0x0102_0304, ProtocolStatus::UnknownRole, &mut out);
    assert_eq!(out, wire);
    let body = EndRequestBody::parse(&wire[8..]).unwrap();
    assert_eq!(body.app_status, 0x0102_0304);
    assert_eq!(body.protocol_status, ProtocolStatus::UnknownRole);
}

#[test]
fn stdout_vector_is_padded_to_eight_bytes() {
    // "hello" is 5 bytes: 3 padding bytes make the record 16 bytes long.
    let wire = [
        1, 6, 0, 1, 0, 5, 3, 0, b'h', b'e', b'l', b'l', b'o', 0, 0, 0,
    ];
    let mut out = Vec::new();
    encode_stdout(1, b"hello", &mut out);
    assert_eq!(out, wire);
    assert_eq!(
        decode_all(&wire).unwrap(),
        [record(RecordType::Stdout, 1, b"hello")]
    );
}

#[test]
fn stream_terminators_vector() {
    let mut out = Vec::new();
    encode_stdout_end(7, &mut out);
    encode_stderr_end(7, &mut out);
    encode_stream_end(Stream::Params, 7, &mut out);
    encode_stream_end(Stream::Stdin, 7, &mut out);
    assert_eq!(
        out,
        [
            1, 6, 0, 7, 0, 0, 0, 0, //
            1, 7, 0, 7, 0, 0, 0, 0, //
            1, 4, 0, 7, 0, 0, 0, 0, //
            1, 5, 0, 7, 0, 0, 0, 0,
        ]
    );
}

#[test]
fn unknown_type_vector() {
    // {FCGI_UNKNOWN_TYPE, 0, {type 42}}
    let mut out = Vec::new();
    encode_unknown_type(42, &mut out);
    assert_eq!(out, [1, 11, 0, 0, 0, 8, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn get_values_result_vector() {
    // §4.1: one pair, FCGI_MPXS_CONNS = "1": lengths 15 and 1, 18 content
    // bytes, 6 padding bytes.
    let mut expected = vec![1, 10, 0, 0, 0, 18, 6, 0, 15, 1];
    expected.extend_from_slice(b"FCGI_MPXS_CONNS1");
    expected.extend_from_slice(&[0; 6]);
    let mut out = Vec::new();
    encode_get_values_result([("FCGI_MPXS_CONNS", "1")], &mut out).unwrap();
    assert_eq!(out, expected);

    let mut query = Vec::new();
    encode_get_values(["FCGI_MAX_CONNS"], &mut query).unwrap();
    let mut expected = vec![1, 9, 0, 0, 0, 16, 0, 0, 14, 0];
    expected.extend_from_slice(b"FCGI_MAX_CONNS");
    assert_eq!(query, expected);
}

#[test]
fn abort_request_vector() {
    let mut out = Vec::new();
    encode_abort_request(0xffff, &mut out);
    assert_eq!(out, [1, 2, 0xff, 0xff, 0, 0, 0, 0]);
    assert_eq!(
        decode_all(&out).unwrap(),
        [record(RecordType::AbortRequest, 0xffff, b"")]
    );
}

#[test]
fn header_round_trip_and_types() {
    for byte in 0..=255u8 {
        let kind = RecordType::from_u8(byte);
        assert_eq!(kind.as_u8(), byte);
        assert_eq!(
            matches!(kind, RecordType::Other(_)),
            !(1..=11).contains(&byte)
        );
    }
    let header = RecordHeader {
        kind: RecordType::Stdin,
        request_id: 0xabcd,
        content_length: 0x0102,
        padding_length: 6,
    };
    assert_eq!(header.to_bytes(), [1, 5, 0xab, 0xcd, 1, 2, 6, 0]);
    assert_eq!(RecordHeader::parse(&header.to_bytes()), Ok(header));
    assert_eq!(header.record_len(), 8 + 0x102 + 6);
    assert_eq!(RecordType::GetValues.to_string(), "FCGI_GET_VALUES");
    assert_eq!(RecordType::Other(99).to_string(), "record type 99");
}

// --- Decoder behaviour. ---

#[test]
fn decodes_foreign_padding_and_reserved_bytes() {
    // Padding chosen by the web server need not be 8-aligned nor zero, and
    // the reserved byte is ignored.
    let wire = [
        1, 5, 0, 3, 0, 2, 5, 0xee, b'o', b'k', 9, 9, 9, 9, 9, 1, 5, 0, 3, 0, 0, 0, 0,
    ];
    assert_eq!(
        decode_all(&wire).unwrap(),
        [
            record(RecordType::Stdin, 3, b"ok"),
            record(RecordType::Stdin, 3, b"")
        ]
    );
}

#[test]
fn maximum_content_and_padding() {
    let content: Vec<u8> = (0..MAX_CONTENT_LEN).map(|i| i as u8).collect();
    let mut wire = vec![1, 8, 0, 9, 0xff, 0xff, 0xff, 0];
    wire.extend_from_slice(&content);
    wire.extend_from_slice(&[0xaa; 255]);
    let records = decode_all(&wire).unwrap();
    assert_eq!(
        records,
        [Record {
            kind: RecordType::Data,
            request_id: 9,
            content
        }]
    );
}

/// A stream mixing every record type the decoder sees, with odd padding.
fn sample_stream() -> Vec<u8> {
    let mut wire = Vec::new();
    encode_begin_request(1, Role::Responder, false, &mut wire);
    encode_stream(Stream::Params, 1, b"\x0b\x02SCRIPT_NAME/x", &mut wire);
    encode_stream_end(Stream::Params, 1, &mut wire);
    wire.extend_from_slice(&[1, 5, 0, 1, 0, 3, 1, 0, b'a', b'b', b'c', 0]);
    encode_stream_end(Stream::Stdin, 1, &mut wire);
    encode_get_values(["FCGI_MAX_REQS"], &mut wire).unwrap();
    wire.extend_from_slice(&[1, 200, 0, 0, 0, 1, 0, 0, b'?']);
    encode_abort_request(2, &mut wire);
    wire
}

#[test]
fn records_split_at_every_byte_boundary() {
    let wire = sample_stream();
    let expected = decode_all(&wire).unwrap();
    assert_eq!(expected.len(), 8);
    assert_eq!(expected[6], record(RecordType::Other(200), 0, b"?"));
    for split in 0..=wire.len() {
        let mut decoder = RecordDecoder::new();
        let mut got = Vec::new();
        for part in [&wire[..split], &wire[split..]] {
            for record in decoder.records(part) {
                got.push(record.unwrap());
            }
        }
        decoder.finish().unwrap();
        assert_eq!(got, expected, "split at {split}");
    }
}

#[test]
fn records_fed_one_byte_at_a_time() {
    let wire = sample_stream();
    let expected = decode_all(&wire).unwrap();
    let mut decoder = RecordDecoder::new();
    let mut got = Vec::new();
    for byte in &wire {
        let mut input = std::slice::from_ref(byte);
        if let Some(record) = decoder.decode(&mut input).unwrap() {
            got.push(record);
        }
        assert!(input.is_empty());
    }
    assert!(decoder.is_idle());
    assert_eq!(got, expected);
}

#[test]
fn decode_stops_after_one_record() {
    let mut wire = Vec::new();
    encode_stdout(1, b"first", &mut wire);
    encode_stdout(1, b"second", &mut wire);
    let mut decoder = RecordDecoder::new();
    let mut input = &wire[..];
    let first = decoder.decode(&mut input).unwrap().unwrap();
    assert_eq!(first.content, b"first");
    assert_eq!(input.len(), 16);
    let second = decoder.decode(&mut input).unwrap().unwrap();
    assert_eq!(second.content, b"second");
    assert!(input.is_empty());
    assert_eq!(decoder.decode(&mut input), Ok(None));
}

#[test]
fn bad_version_is_an_error_and_sticks() {
    let mut decoder = RecordDecoder::new();
    let error = DecodeError::BadVersion {
        found: 2,
        expected: 1,
    };
    let wire = [2, 6, 0, 1, 0, 0, 0, 0];
    let mut input = &wire[..];
    assert_eq!(decoder.decode(&mut input), Err(error.clone()));
    let mut valid = &[1u8, 6, 0, 1, 0, 0, 0, 0][..];
    assert_eq!(decoder.decode(&mut valid), Err(error.clone()));
    assert_eq!(decoder.finish(), Err(error.clone()));
    assert!(!decoder.is_idle());
    assert_eq!(
        error.to_string(),
        "unsupported FastCGI record version 2 (expected 1)"
    );
    // A version byte of 0 (e.g. stray zeros) is rejected too.
    assert!(matches!(
        decode_all(&[0; 8]),
        Err(DecodeError::BadVersion { found: 0, .. })
    ));
}

#[test]
fn fixed_size_bodies_must_have_their_size() {
    let cases = [
        (RecordType::BeginRequest, 7u16, 8u16),
        (RecordType::BeginRequest, 9, 8),
        (RecordType::AbortRequest, 1, 0),
        (RecordType::EndRequest, 0, 8),
        (RecordType::UnknownType, 65535, 8),
    ];
    for (kind, found, expected) in cases {
        let len = found.to_be_bytes();
        let header = [1, kind.as_u8(), 0, 1, len[0], len[1], 0, 0];
        let mut decoder = RecordDecoder::new();
        assert_eq!(
            decoder.decode(&mut &header[..]),
            Err(DecodeError::BadLength {
                kind,
                found,
                expected
            }),
            "{kind}"
        );
    }
    let error = DecodeError::BadLength {
        kind: RecordType::BeginRequest,
        found: 7,
        expected: 8,
    };
    assert_eq!(
        error.to_string(),
        "FCGI_BEGIN_REQUEST record declares 7 content bytes (expected exactly 8)"
    );
    assert!(BeginRequestBody::parse(&[0; 7]).is_err());
    assert!(EndRequestBody::parse(&[0; 9]).is_err());
}

#[test]
fn truncated_input_is_reported_at_finish() {
    let mut wire = Vec::new();
    encode_stdout(1, b"hello", &mut wire); // 8 + 5 + 3 padding
    for cut in 1..wire.len() {
        let mut decoder = RecordDecoder::new();
        assert_eq!(decoder.records(&wire[..cut]).count(), 0, "cut {cut}");
        let expected = if cut < 8 { 8 } else { 16 };
        assert_eq!(
            decoder.finish(),
            Err(DecodeError::Truncated {
                received: cut,
                expected
            }),
            "cut {cut}"
        );
    }
}

// --- Encoders. ---

#[test]
fn large_stdout_is_split_into_aligned_records() {
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut wire = Vec::new();
    encode_stdout(5, &data, &mut wire);
    let records = decode_all(&wire).unwrap();
    let sizes: Vec<usize> = records.iter().map(|r| r.content.len()).collect();
    assert_eq!(sizes, [65528, 65528, 65528, 3416]);
    assert!(records
        .iter()
        .all(|r| r.kind == RecordType::Stdout && r.request_id == 5));
    assert_eq!(records.concat_content(), data);
    // Full records need no padding; every record is a multiple of 8 bytes.
    assert_eq!(wire.len(), 3 * 65536 + 8 + 3416);
    assert_eq!(wire.len() % 8, 0);
    assert_eq!(&wire[65536..65544], &[1, 6, 0, 5, 0xff, 0xf8, 0, 0]);
}

#[test]
fn stream_chunk_boundaries() {
    for len in [
        1,
        7,
        8,
        9,
        MAX_STREAM_CHUNK - 1,
        MAX_STREAM_CHUNK,
        MAX_STREAM_CHUNK + 1,
    ] {
        let data = vec![b'x'; len];
        let mut wire = Vec::new();
        encode_stderr(1, &data, &mut wire);
        assert_eq!(wire.len() % 8, 0, "len {len}");
        let records = decode_all(&wire).unwrap();
        assert_eq!(records.len(), len.div_ceil(MAX_STREAM_CHUNK), "len {len}");
        assert_eq!(records.concat_content(), data);
    }
    let mut wire = Vec::new();
    encode_stdout(1, b"", &mut wire);
    assert!(wire.is_empty(), "empty data must not end the stream");
}

#[test]
fn padding_rule() {
    let expected = [0, 7, 6, 5, 4, 3, 2, 1, 0, 7];
    for (len, pad) in expected.iter().enumerate() {
        assert_eq!(padding_for(len), *pad);
    }
    assert_eq!(padding_for(MAX_CONTENT_LEN), 1);
}

#[test]
fn oversized_single_records_are_refused() {
    let mut out = Vec::new();
    let content = vec![0; MAX_CONTENT_LEN + 1];
    assert_eq!(
        encode_record(RecordType::GetValuesResult, 0, &content, &mut out),
        Err(EncodeError::ContentTooLong {
            kind: RecordType::GetValuesResult,
            len: MAX_CONTENT_LEN + 1,
            max: MAX_CONTENT_LEN
        })
    );
    let value = vec![b'v'; MAX_CONTENT_LEN];
    assert!(encode_get_values_result([(&b"NAME"[..], &value[..])], &mut out).is_err());
    assert!(out.is_empty());
    encode_record(RecordType::Data, 1, &content[..MAX_CONTENT_LEN], &mut out).unwrap();
    assert_eq!(out.len(), 8 + MAX_CONTENT_LEN + 1);
}

trait ConcatContent {
    fn concat_content(&self) -> Vec<u8>;
}

impl ConcatContent for [Record] {
    fn concat_content(&self) -> Vec<u8> {
        self.iter()
            .flat_map(|r| r.content.iter().copied())
            .collect()
    }
}

impl ConcatContent for Vec<Record> {
    fn concat_content(&self) -> Vec<u8> {
        self.as_slice().concat_content()
    }
}
