//! A fold's summary source, bounded: its messages as JSON lines, newest first, within
//! [`SUMMARY_SOURCE_BYTES`]; a message larger than the room left is cut (at a char boundary)
//! and older ones left out, each with a note naming the fold's handle, which reads them whole.
//!
//! A note stands on a line of its own, and every message line starts with `{` (a JSON object;
//! its text's newlines are escaped), so nothing a message says can pass for a note.

use crate::conversation::handle::Handle;
use crate::utf8::floor_char_boundary;

/// The most bytes of a folded range a summarizer reads (the newest ones, notes included): a
/// summary is a convenience, and the range is in the store whatever its size.
pub(crate) const SUMMARY_SOURCE_BYTES: usize = 256 * 1024;

/// Bytes kept for the notes, whatever the messages take.
const NOTE_ROOM: usize = 512;

/// The lines of one source, gathered newest first.
pub(crate) struct Source {
    handle: Handle,
    room: usize,
    used: usize,
    /// Newest first; each ends with `\n`.
    lines: Vec<String>,
    /// The newest message left out, when any was.
    left_out: Option<usize>,
}

impl Source {
    /// A source for the fold under `handle`, within [`SUMMARY_SOURCE_BYTES`] less `taken`
    /// (what goes before it: the summaries a consolidated fold joins).
    pub(crate) fn new(handle: Handle, taken: usize) -> Source {
        Source {
            handle,
            room: SUMMARY_SOURCE_BYTES
                .saturating_sub(taken)
                .saturating_sub(NOTE_ROOM),
            used: 0,
            lines: Vec::new(),
            left_out: None,
        }
    }

    /// Adds input message `index` (older than every one added before) as `line`; `false` when
    /// the source is full, so the older messages are left out (the note says so).
    pub(crate) fn push(&mut self, index: usize, line: String) -> bool {
        if self.used + line.len() < self.room {
            self.used += line.len() + 1;
            self.lines.push(line + "\n");
            return true;
        }
        if !self.lines.is_empty() {
            self.left_out = Some(index);
            return false;
        }
        // The newest message alone is over the room: its start, then where the rest is.
        let handle = self.handle;
        let keep = floor_char_boundary(&line, self.room);
        let note = format!(
            "[compaction: message #{index} is cut here: {keep} of its {} bytes (as JSON) are \
             shown; resolve_pointer(\"{handle}\", index={index}) reads it whole]",
            line.len()
        );
        self.used += keep + 1;
        self.lines.push(format!("{}\n{note}\n", &line[..keep]));
        self.left_out = None;
        false
    }

    /// The text, oldest first.
    pub(crate) fn finish(self, into: &mut String) {
        if let Some(index) = self.left_out {
            let handle = self.handle;
            into.push_str(&format!(
                "[compaction: the older messages of this fold, up to #{index}, are not shown \
                 (a summary source holds at most {SUMMARY_SOURCE_BYTES} bytes); \
                 resolve_pointer(\"{handle}\", index=N) reads message #N exactly]\n"
            ));
        }
        for line in self.lines.into_iter().rev() {
            into.push_str(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_newest_message_is_cut_at_a_char_boundary_and_named() {
        let handle = Handle::new(7).unwrap();
        let mut source = Source::new(handle, 0);
        let huge = format!("{{\"content\":\"{}\"}}", "é".repeat(SUMMARY_SOURCE_BYTES));
        assert!(!source.push(3, huge.clone()));
        let mut text = String::new();
        source.finish(&mut text);
        assert!(text.len() <= SUMMARY_SOURCE_BYTES, "{}", text.len());
        assert!(huge.starts_with(text.lines().next().unwrap()));
        let note = text.lines().nth(1).unwrap();
        assert!(note.contains("message #3 is cut") && note.contains("resolve_pointer(\"p7\""));
    }

    #[test]
    fn older_messages_over_the_room_are_left_out_and_named() {
        let mut source = Source::new(
            Handle::new(2).unwrap(),
            SUMMARY_SOURCE_BYTES - NOTE_ROOM - 100,
        );
        assert!(source.push(9, format!("{{{}}}", "a".repeat(60))));
        assert!(!source.push(8, format!("{{{}}}", "b".repeat(60))));
        let mut text = String::new();
        source.finish(&mut text);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("up to #8") && lines[0].contains("resolve_pointer(\"p2\""));
        assert!(lines[1].starts_with("{a"));
    }
}
