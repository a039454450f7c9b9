//! Cutting text at byte offsets without splitting a character (std's `floor_char_boundary`
//! and `ceil_char_boundary` are stable from Rust 1.91; the workspace supports 1.89).

/// The largest char boundary at or below `index` (the text's length when past it).
pub(crate) fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The smallest char boundary at or above `index` (the text's length when past it).
pub(crate) fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_never_split_a_character_and_clamp_to_the_text() {
        let text = "aé日🚀"; // 1, 2, 3 and 4 bytes
        let floors: Vec<usize> = (0..=12).map(|i| floor_char_boundary(text, i)).collect();
        assert_eq!(floors, [0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10, 10]);
        let ceils: Vec<usize> = (0..=12).map(|i| ceil_char_boundary(text, i)).collect();
        assert_eq!(ceils, [0, 1, 3, 3, 6, 6, 6, 10, 10, 10, 10, 10, 10]);
    }
}
