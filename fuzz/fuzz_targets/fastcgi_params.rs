//! FastCGI name-value pairs on arbitrary bytes.
//!
//! Checks, besides "no panic": one-shot and piecewise decoding agree;
//! decoded pairs re-encode canonically (never longer than the input) and
//! decode to themselves.
#![no_main]

use corral_fastcgi::params::{
    decode_pairs, encode_pairs, ParamsDecoder, ParamsError, ParamsLimits,
};
use libfuzzer_sys::fuzz_target;

const LIMITS: ParamsLimits = ParamsLimits {
    max_total_bytes: 4096,
    max_pairs: 64,
};

fuzz_target!(|data: &[u8]| {
    let whole = decode_pairs(data, LIMITS);

    let mut decoder = ParamsDecoder::new(LIMITS);
    let mut piecewise = None;
    for piece in corral_fuzz::chunks(data) {
        if let Err(error) = decoder.push(piece) {
            piecewise = Some(Err(error));
            break;
        }
        assert!(decoder.total_bytes() <= LIMITS.max_total_bytes);
        assert!(decoder.pair_count() <= LIMITS.max_pairs);
    }
    let piecewise = piecewise.unwrap_or_else(|| decoder.finish());

    match (&whole, &piecewise) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        // A truncated stream passed every limit check, cut or not.
        (Err(e @ ParamsError::Truncated { .. }), other) => assert_eq!(Err(e), other.as_ref()),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("one-shot {a:?} but piecewise {b:?}"),
    }

    if let Ok(pairs) = whole {
        let mut encoded = Vec::new();
        encode_pairs(pairs.iter().map(|(n, v)| (n, v)), &mut encoded).expect("short fields");
        assert!(encoded.len() <= data.len());
        assert_eq!(
            decode_pairs(&encoded, LIMITS).expect("re-encoded pairs decode"),
            pairs
        );
    }
});
