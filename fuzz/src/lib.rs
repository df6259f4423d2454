//! Helpers shared by the fuzz targets in `fuzz_targets/`.

/// Splits `data` into chunks of pseudo-random sizes (1 to 64 bytes, with an
/// occasional large one) derived from the data itself, so a crash always
/// reproduces from its input file alone. Used to check that incremental
/// parsers give the same result however their input is cut.
pub fn chunks(data: &[u8]) -> Vec<&[u8]> {
    // FNV-1a of the input seeds a xorshift generator.
    let mut state = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let mut rest = data;
    let mut out = Vec::new();
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = if state % 16 == 0 {
            1 + (state >> 8) as usize % 4096
        } else {
            1 + (state >> 8) as usize % 64
        };
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        out.push(chunk);
        rest = tail;
    }
    out
}
