//! Content-defined chunking of the parts that change a little at a time (the front, the window
//! record, the planner's blocks and handle table): their bytes are cut where a rolling hash of
//! the last bytes says so, so a change rewrites the chunks around it and every other chunk keeps
//! its address. The cut rule is part of the manifest's layout: a gear hash (a table of 256
//! fixed pseudo-random words) over the bytes, a cut after at least [`MIN`] bytes where its low
//! [`MASK`] bits are zero (about every 4 KiB), and at [`MAX`] bytes at the latest.

/// No cut before this many bytes of a chunk.
const MIN: usize = 1024;

/// A cut where the rolling hash's bits under this mask are zero: 1 in 4,096.
const MASK: u64 = (1 << 12) - 1;

/// A cut at this many bytes whatever the hash says.
const MAX: usize = 16 * 1024;

/// The gear table: 256 words from SplitMix64 seeded with 0, fixed forever (changing it changes
/// every chunk's address).
const GEAR: [u64; 256] = gear();

const fn gear() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut state: u64 = 0;
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
}

/// `bytes` cut into chunks (one chunk when it is short): their concatenation is `bytes`.
pub(super) fn cut(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut hash: u64 = 0;
    for (i, byte) in bytes.iter().enumerate() {
        hash = (hash << 1).wrapping_add(GEAR[*byte as usize]);
        let len = i + 1 - start;
        if (len >= MIN && hash & MASK == 0) || len >= MAX {
            out.push(&bytes[start..=i]);
            start = i + 1;
            hash = 0;
        }
    }
    if start < bytes.len() || out.is_empty() {
        out.push(&bytes[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::cut;

    fn text(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b'a' + (state >> 59) as u8
            })
            .collect()
    }

    #[test]
    fn chunks_put_back_together_are_the_bytes() {
        for len in [0, 1, 1023, 1024, 5000, 70_000] {
            let bytes = text(len as u64, len);
            let chunks = cut(&bytes);
            assert_eq!(chunks.concat(), bytes, "{len}");
            assert!(chunks.iter().all(|c| c.len() <= 16 * 1024));
        }
    }

    #[test]
    fn an_insert_changes_only_the_chunks_around_it() {
        let bytes = text(7, 200_000);
        let mut edited = bytes.clone();
        edited.splice(100_000..100_000, b"a field's new value".iter().copied());
        let before: std::collections::HashSet<&[u8]> = cut(&bytes).into_iter().collect();
        let after = cut(&edited);
        let new = after.iter().filter(|c| !before.contains(*c)).count();
        assert!(after.len() > 20, "{}", after.len());
        assert!(new <= 2, "{new} of {} chunks changed", after.len());
    }
}
