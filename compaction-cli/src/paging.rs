//! `resolve --offset/--max-bytes`: one part of a text cut as the pointer tool cuts it (the same
//! offsets reach the same bytes, a part never ends inside a character), and where the next
//! part starts.

use compaction::pointer_tool::DEFAULT_MAX_BYTES;

/// The part asked for: from `offset`, at most `max_bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// The first byte asked for (rounded down to a character's start).
    pub offset: usize,
    /// The most bytes of the part.
    pub max_bytes: usize,
}

impl Part {
    /// The part the flags ask for; `None` (the whole content) when neither was given.
    pub fn asked(offset: Option<usize>, max_bytes: Option<usize>) -> Option<Part> {
        (offset.is_some() || max_bytes.is_some()).then(|| Part {
            offset: offset.unwrap_or(0),
            max_bytes: max_bytes.unwrap_or(DEFAULT_MAX_BYTES),
        })
    }
}

/// The bytes `start..end` of a text of `total` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First byte of the part.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// The whole text's size.
    pub total: usize,
}

impl Window {
    /// Where the next part starts; `None` at the end.
    pub fn next_offset(&self) -> Option<usize> {
        (self.end < self.total).then_some(self.end)
    }
}

/// The offset is at or past the end of the text (an empty text has its one part at 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PastEnd;

/// The window of `text` that `part` asks for: the pointer tool's cut (`start` is the offset
/// rounded down to a character's start, `end` the last character's end that fits, at least one
/// character).
pub fn cut(text: &str, part: Part) -> Result<Window, PastEnd> {
    let total = text.len();
    if part.offset >= total && !(part.offset == 0 && total == 0) {
        return Err(PastEnd);
    }
    let start = floor_char_boundary(text, part.offset);
    let end = floor_char_boundary(text, start.saturating_add(part.max_bytes));
    // A limit below one character never returns nothing for a text that has something.
    let end = if end == start && start < total {
        ceil_char_boundary(text, start + 1)
    } else {
        end
    };
    Ok(Window { start, end, total })
}

/// The largest char boundary at or below `index` (the length when past it).
fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The smallest char boundary at or above `index` (the length when past it).
fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(offset: usize, max_bytes: usize) -> Part {
        Part { offset, max_bytes }
    }

    #[test]
    fn parts_join_back_and_never_split_a_character() {
        let text = "aé日🚀".repeat(7);
        for max in 4..12 {
            let mut joined = String::new();
            let mut offset = Some(0);
            while let Some(at) = offset {
                let window = cut(&text, part(at, max)).unwrap();
                assert!(window.end - window.start <= max);
                assert!(window.end > window.start);
                joined.push_str(&text[window.start..window.end]);
                offset = window.next_offset();
            }
            assert_eq!(joined, text);
        }
    }

    #[test]
    fn an_offset_inside_a_character_starts_at_it_and_past_the_end_is_refused() {
        let text = "a🚀b";
        assert_eq!(
            cut(text, part(3, 4)),
            Ok(Window {
                start: 1,
                end: 5,
                total: 6
            })
        );
        assert_eq!(cut(text, part(6, 4)), Err(PastEnd));
        assert_eq!(cut(text, part(usize::MAX, usize::MAX)), Err(PastEnd));
        assert_eq!(cut(text, part(5, usize::MAX)).map(|w| w.end), Ok(6));
        assert_eq!(
            cut("", part(0, 4)),
            Ok(Window {
                start: 0,
                end: 0,
                total: 0
            })
        );
        assert_eq!(Part::asked(None, None), None);
        assert_eq!(Part::asked(Some(9), None), Some(part(9, 16 * 1024)));
    }
}
