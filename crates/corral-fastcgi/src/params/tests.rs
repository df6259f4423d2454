use super::*;

fn pair(name: &[u8], value: &[u8]) -> Pair {
    (name.to_vec(), value.to_vec())
}

fn encoded(pairs: &[Pair]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_pairs(pairs.iter().map(|(n, v)| (n, v)), &mut out).unwrap();
    out
}

// --- Byte-exact vectors (§3.4). ---

#[test]
fn one_byte_lengths_vector() {
    // FCGI_NameValuePair11: nameLengthB0, valueLengthB0, name, value.
    let mut out = Vec::new();
    encode_pair(b"SCRIPT_NAME", b"/x.cgi", &mut out).unwrap();
    let mut expected = vec![11, 6];
    expected.extend_from_slice(b"SCRIPT_NAME/x.cgi");
    assert_eq!(out, expected);
}

#[test]
fn four_byte_lengths_vector() {
    // 127 still fits in one byte; 128 needs FCGI_NameValuePair14 with the
    // high bit set: 0x80 0x00 0x00 0x80.
    let value = vec![b'v'; 128];
    let mut out = Vec::new();
    encode_pair(&[b'n'; 127], &value, &mut out).unwrap();
    assert_eq!(&out[..5], &[127, 0x80, 0, 0, 0x80]);
    assert_eq!(out.len(), 5 + 127 + 128);

    // FCGI_NameValuePair41 and FCGI_NameValuePair44.
    let long = vec![b'N'; 0x1_0203];
    let mut out = Vec::new();
    encode_pair(&long, b"", &mut out).unwrap();
    assert_eq!(&out[..5], &[0x80, 0x01, 0x02, 0x03, 0]);
    let mut out = Vec::new();
    encode_pair(&long, &long, &mut out).unwrap();
    assert_eq!(&out[..8], &[0x80, 1, 2, 3, 0x80, 1, 2, 3]);
    assert_eq!(
        decode_pairs(&out, ParamsLimits::default()).unwrap(),
        [pair(&long, &long)]
    );
}

#[test]
fn decodes_handwritten_pairs() {
    let mut wire = vec![0x80, 0, 0, 4, 3]; // 4-byte name length, 1-byte value length
    wire.extend_from_slice(b"HOST");
    wire.extend_from_slice(b"a.b");
    wire.extend_from_slice(&[0, 0]); // empty name, empty value
    wire.extend_from_slice(&[1, 0x80, 0, 0, 2, b'Q', b'x', b'y']);
    assert_eq!(
        decode_pairs(&wire, ParamsLimits::default()).unwrap(),
        [pair(b"HOST", b"a.b"), pair(b"", b""), pair(b"Q", b"xy")]
    );
}

#[test]
fn field_longer_than_31_bits_is_refused() {
    let mut out = Vec::new();
    assert_eq!(
        encode_length(MAX_PAIR_FIELD_LEN + 1, &mut out),
        Err(ParamsError::FieldTooLong {
            len: MAX_PAIR_FIELD_LEN + 1,
            max: MAX_PAIR_FIELD_LEN
        })
    );
    encode_length(MAX_PAIR_FIELD_LEN, &mut out).unwrap();
    assert_eq!(out, [0xff, 0xff, 0xff, 0xff]);
}

// --- Streaming across records. ---

fn sample() -> Vec<Pair> {
    vec![
        pair(b"REQUEST_METHOD", b"POST"),
        pair(b"QUERY_STRING", b""),
        pair(b"HTTP_COOKIE", &[b'c'; 300]),
        pair(&[b'L'; 200], b"long name"),
        pair(b"CONTENT_LENGTH", b"5"),
    ]
}

#[test]
fn pairs_split_at_every_byte_boundary() {
    let pairs = sample();
    let wire = encoded(&pairs);
    for split in 0..=wire.len() {
        let mut decoder = ParamsDecoder::new(ParamsLimits::default());
        decoder.push(&wire[..split]).unwrap();
        decoder.push(&wire[split..]).unwrap();
        assert_eq!(decoder.total_bytes(), wire.len());
        assert_eq!(decoder.finish().unwrap(), pairs, "split at {split}");
    }
}

#[test]
fn pairs_in_three_pieces_and_bytewise() {
    let pairs = sample();
    let wire = encoded(&pairs);
    for first in (0..wire.len()).step_by(7) {
        for second in (first..=wire.len()).step_by(13) {
            let mut decoder = ParamsDecoder::new(ParamsLimits::default());
            for part in [&wire[..first], &wire[first..second], &wire[second..]] {
                decoder.push(part).unwrap();
            }
            assert_eq!(decoder.finish().unwrap(), pairs);
        }
    }
    let mut decoder = ParamsDecoder::new(ParamsLimits::default());
    for byte in &wire {
        decoder.push(std::slice::from_ref(byte)).unwrap();
    }
    assert_eq!(decoder.pair_count(), pairs.len());
    assert_eq!(decoder.finish().unwrap(), pairs);
}

#[test]
fn empty_stream_has_no_pairs() {
    assert_eq!(
        ParamsDecoder::new(ParamsLimits::default())
            .finish()
            .unwrap(),
        []
    );
}

#[test]
fn truncated_pairs() {
    let wire = encoded(&[pair(b"NAME", b"value")]); // 2 + 4 + 5 = 11 bytes
    for cut in 1..wire.len() {
        let expected = if cut < 2 { 2 } else { 11 };
        assert_eq!(
            decode_pairs(&wire[..cut], ParamsLimits::default()),
            Err(ParamsError::Truncated {
                available: cut,
                expected
            }),
            "cut {cut}"
        );
    }
    // An incomplete 4-byte length.
    assert_eq!(
        decode_pairs(&[0x80, 0], ParamsLimits::default()),
        Err(ParamsError::Truncated {
            available: 2,
            expected: 5
        })
    );
    let error = ParamsError::Truncated {
        available: 3,
        expected: 11,
    };
    assert_eq!(
        error.to_string(),
        "name-value stream ended inside a pair: 3 of 11 bytes received"
    );
}

// --- Limits. ---

#[test]
fn total_size_limit_counts_received_bytes() {
    let limits = ParamsLimits::default();
    let value = vec![b'x'; 60_000];
    let mut decoder = ParamsDecoder::new(limits);
    let mut pushed = 0;
    let error = loop {
        let mut chunk = Vec::new();
        encode_pair(b"X", &value, &mut chunk).unwrap();
        match decoder.push(&chunk) {
            Ok(()) => pushed += chunk.len(),
            Err(error) => break error,
        }
    };
    assert!(pushed <= DEFAULT_MAX_TOTAL_BYTES && pushed > DEFAULT_MAX_TOTAL_BYTES - 60_010);
    assert!(matches!(
        error,
        ParamsError::TooLarge { needed, limit: DEFAULT_MAX_TOTAL_BYTES } if needed > DEFAULT_MAX_TOTAL_BYTES
    ));
    // Exactly at the limit is fine.
    let exact = ParamsLimits {
        max_total_bytes: 11,
        max_pairs: 10,
    };
    assert!(decode_pairs(&encoded(&[pair(b"NAME", b"value")]), exact).is_ok());
    let under = ParamsLimits {
        max_total_bytes: 10,
        max_pairs: 10,
    };
    assert_eq!(
        decode_pairs(&encoded(&[pair(b"NAME", b"value")]), under),
        Err(ParamsError::TooLarge {
            needed: 11,
            limit: 10
        })
    );
}

#[test]
fn announced_lengths_fail_before_the_data_arrives() {
    // A pair claiming a 2 GiB value is refused from its 8-byte prefix alone.
    let mut decoder = ParamsDecoder::new(ParamsLimits::default());
    let error = decoder
        .push(&[0x80, 0, 0, 1, 0xff, 0xff, 0xff, 0xff])
        .unwrap_err();
    assert_eq!(
        error,
        ParamsError::TooLarge {
            needed: 8 + 1 + 0x7fff_ffff,
            limit: DEFAULT_MAX_TOTAL_BYTES
        }
    );
    assert_eq!(
        error.to_string(),
        "name-value pairs need 2147483656 bytes (expected at most 1048576)"
    );
}

#[test]
fn pair_count_limit() {
    let limits = ParamsLimits {
        max_total_bytes: 1 << 20,
        max_pairs: 3,
    };
    let three = encoded(&[pair(b"A", b""), pair(b"B", b""), pair(b"C", b"")]);
    assert_eq!(decode_pairs(&three, limits).unwrap().len(), 3);
    let four = encoded(&[
        pair(b"A", b""),
        pair(b"B", b""),
        pair(b"C", b""),
        pair(b"D", b""),
    ]);
    assert_eq!(
        decode_pairs(&four, limits),
        Err(ParamsError::TooManyPairs { limit: 3 })
    );
}
