//! A fold's summary source, bounded: its messages as JSON lines, newest first, within
//! [`SUMMARY_SOURCE_BYTES`]; a message larger than the room left is cut (at a char boundary) to
//! fill it and older ones left out, each with a note naming the fold's handle, which reads
//! them whole.
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

/// The least room left worth filling with the start of a message that does not fit whole.
const MIN_CUT: usize = 1024;

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
    /// the source is full, so this message and the older ones are left out (the note says so).
    /// A message over the room left fills it with its start when that room is worth reading
    /// ([`MIN_CUT`]) or nothing was shown yet, with a note naming where the rest is: a summary
    /// of a fold whose one large result is not its newest message still reads that result's
    /// start, not only the short messages after it.
    pub(crate) fn push(&mut self, index: usize, line: String) -> bool {
        if self.used + line.len() < self.room {
            self.used += line.len() + 1;
            self.lines.push(line + "\n");
            return true;
        }
        let left = self.room.saturating_sub(self.used);
        if !self.lines.is_empty() && left < MIN_CUT {
            self.left_out = Some(index);
            return false;
        }
        let handle = self.handle;
        let keep = floor_char_boundary(&line, left);
        let note = format!(
            "[compaction: message #{index} is cut here: {keep} of its {} bytes (as JSON) are \
             shown; resolve_pointer(\"{handle}\", index={index}) reads it whole]",
            line.len()
        );
        self.lines.push(format!("{}\n{note}\n", &line[..keep]));
        // Full: the next older message is left out, and the note names it.
        self.used = self.room;
        true
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

    /// The source's text.
    fn finished(source: Source) -> String {
        let mut text = String::new();
        source.finish(&mut text);
        text
    }

    #[test]
    fn an_oversized_newest_message_is_cut_at_a_char_boundary_and_named() {
        let handle = Handle::new(7).unwrap();
        let mut source = Source::new(handle, 0);
        let huge = format!("{{\"content\":\"{}\"}}", "é".repeat(SUMMARY_SOURCE_BYTES));
        assert!(source.push(3, huge.clone()));
        // Full: the next older message is left out and named.
        assert!(!source.push(2, "{\"content\":\"older\"}".into()));
        let text = finished(source);
        assert!(text.len() <= SUMMARY_SOURCE_BYTES, "{}", text.len());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            3,
            "{:?}",
            lines.iter().map(|l| l.len()).collect::<Vec<_>>()
        );
        assert!(lines[0].contains("up to #2") && lines[0].contains("resolve_pointer(\"p7\""));
        assert!(huge.starts_with(lines[1]));
        assert!(
            lines[2].contains("message #3 is cut") && lines[2].contains("resolve_pointer(\"p7\"")
        );
    }

    #[test]
    fn a_large_older_message_fills_the_room_the_newer_ones_left() {
        let mut source = Source::new(Handle::new(4).unwrap(), 0);
        let newest = "{\"content\":\"done 3\"}".to_owned();
        assert!(source.push(15, newest.clone()));
        let huge = format!("{{\"content\":\"{}\"}}", "log line ".repeat(100_000));
        assert!(source.push(14, huge.clone()));
        assert!(!source.push(13, "{\"content\":\"reading the log\"}".into()));
        let text = finished(source);
        assert!(text.len() <= SUMMARY_SOURCE_BYTES, "{}", text.len());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            4,
            "{:?}",
            lines.iter().map(|l| l.len()).collect::<Vec<_>>()
        );
        assert!(lines[0].contains("up to #13"), "{}", lines[0]);
        // Most of the source is the large result's start, not only the short message after it.
        assert!(
            huge.starts_with(lines[1]) && lines[1].len() > SUMMARY_SOURCE_BYTES - 2 * NOTE_ROOM
        );
        assert!(lines[2].contains("message #14 is cut"), "{}", lines[2]);
        assert_eq!(lines[3], newest);
    }

    #[test]
    fn a_room_under_min_cut_leaves_the_message_out_and_names_it() {
        let newest = format!("{{{}}}", "a".repeat(60));
        // After the newest line (and its newline), exactly `left` bytes of room.
        let source_with = |left: usize| {
            let taken = SUMMARY_SOURCE_BYTES - NOTE_ROOM - (newest.len() + 1) - left;
            let mut source = Source::new(Handle::new(2).unwrap(), taken);
            assert!(source.push(9, newest.clone()));
            source
        };
        let older = format!("{{{}}}", "b".repeat(2 * MIN_CUT));
        for left in [0, 100, MIN_CUT - 1] {
            let mut source = source_with(left);
            assert!(!source.push(8, older.clone()), "{left} bytes left");
            let text = finished(source);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 2, "{text}");
            assert!(lines[0].contains("up to #8") && lines[0].contains("resolve_pointer(\"p2\""));
            assert_eq!(lines[1], newest);
        }
        // At `MIN_CUT`, the room is worth reading: the older message's start fills it.
        let mut source = source_with(MIN_CUT);
        assert!(source.push(8, older.clone()));
        let text = finished(source);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0].len(), MIN_CUT);
        assert!(older.starts_with(lines[0]) && lines[1].contains("message #8 is cut"));
    }
}
