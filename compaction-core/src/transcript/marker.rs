//! The texts compaction writes into a transcript (stubs, tombstones, folds), and the escape
//! that keeps message text from ever passing for one of them.
//!
//! A marker is a whole message whose content starts with [`MARKER_PREFIX`], followed by its kind
//! and pointer up to the first `⟧`; nothing an author or a model wrote can stand there, because
//! every kept message whose content starts with [`MARKER_PREFIX`] or [`VERBATIM_ESCAPE`] is sent
//! with [`VERBATIM_ESCAPE`] in front (and rehydration strips exactly one). So the first
//! characters of a content decide, unambiguously, what it is.

use crate::store::{Pointer, POINTER_PREFIX};
use crate::transcript::conversation::{Message, ToolCall};
use std::borrow::Cow;
use std::fmt::Write;

/// How every message compaction writes in place of others begins.
pub const MARKER_PREFIX: &str = "⟦compaction:";
/// Put in front of a kept message that begins like a marker (or like this escape), so it can
/// never be taken for one; rehydration removes it.
pub const VERBATIM_ESCAPE: &str = "⟦verbatim⟧";
/// The most calls a fold lists by name; the rest are counted (all are in its stored span).
pub const FOLD_LISTED_CALLS: usize = 16;
/// The most characters of a call's arguments a tombstone repeats (the call keeps them all).
const TOMBSTONE_ARGUMENT_CHARS: usize = 200;

const SPILLED: &str = "spilled";
const TOMBSTONE: &str = "tombstone";
const FOLDED: &str = "folded";

/// Whether a kept content must be escaped to stay distinguishable from a marker.
pub(crate) fn needs_escape(content: &str) -> bool {
    content.starts_with(MARKER_PREFIX) || content.starts_with(VERBATIM_ESCAPE)
}

/// The content as it is sent when kept.
pub(crate) fn escape(content: &str) -> Cow<'_, str> {
    if needs_escape(content) {
        Cow::Owned(format!("{VERBATIM_ESCAPE}{content}"))
    } else {
        Cow::Borrowed(content)
    }
}

/// The stub of a spilled user message.
pub(crate) fn stub_text(pointer: &Pointer, index: usize, bytes: usize) -> String {
    format!(
        "{MARKER_PREFIX}{SPILLED} {pointer}⟧ user message #{index} ({bytes} bytes) left the window \
         verbatim; resolve the pointer for its exact text."
    )
}

/// The tombstone that replaces a tool result's content.
pub(crate) fn tombstone_text(pointer: &Pointer, call: Option<&ToolCall>, bytes: usize) -> String {
    let (name, arguments) = match call {
        Some(call) => (json_string(&call.name), call.arguments.to_string()),
        None => ("?".to_owned(), String::new()),
    };
    let arguments = cut_chars(&arguments, TOMBSTONE_ARGUMENT_CHARS);
    format!(
        "{MARKER_PREFIX}{TOMBSTONE} {pointer}⟧ result of {name} {arguments} ({bytes} bytes) left \
         the window verbatim; resolve the pointer for its exact text."
    )
}

/// What a fold says, besides its summary.
pub(crate) struct FoldHeader<'a> {
    pub(crate) pointer: &'a Pointer,
    pub(crate) users: usize,
    pub(crate) first: usize,
    pub(crate) last: usize,
    pub(crate) folded_messages: usize,
    /// Every call folded, in order (only the newest [`FOLD_LISTED_CALLS`] are named).
    pub(crate) calls: &'a [&'a ToolCall],
}

/// The introduction of the summary in a fold, so its cost can be reserved before it exists.
const SUMMARY_INTRO: &str =
    "\nSummary of what was already done (not authoritative; never re-run these steps):\n";
const NO_SUMMARY: &str = "\nNo summary: resolve the pointer for the exact messages.";

/// The content of a fold message: its header, then the summary or the note that there is none.
#[cfg(test)]
pub(crate) fn fold_text(header: &FoldHeader<'_>, summary: Option<&str>) -> String {
    let base = fold_base(header);
    match summary {
        Some(summary) => with_summary(&base, summary),
        None => without_summary(&base),
    }
}

/// A fold's content with its summary.
pub(crate) fn with_summary(base: &str, summary: &str) -> String {
    format!("{base}{SUMMARY_INTRO}{summary}")
}

/// A fold's content without summary.
pub(crate) fn without_summary(base: &str) -> String {
    format!("{base}{NO_SUMMARY}")
}

/// The header of a fold message (what comes before its summary).
pub(crate) fn fold_base(header: &FoldHeader<'_>) -> String {
    let mut out = format!(
        "{MARKER_PREFIX}{FOLDED} {} users={}⟧ messages #{}..#{} were folded: {} assistant and \
         tool messages, {} tool calls",
        header.pointer,
        header.users,
        header.first,
        header.last,
        header.folded_messages,
        header.calls.len()
    );
    if header.users > 0 {
        let _ = write!(
            out,
            " (the {} user messages just above belong to these turns and were answered)",
            header.users
        );
    }
    let hidden = header.calls.len().saturating_sub(FOLD_LISTED_CALLS);
    if !header.calls.is_empty() {
        out.push_str(": ");
        if hidden > 0 {
            let _ = write!(out, "{hidden} older calls, then ");
        }
        let listed: Vec<String> = header.calls[hidden..]
            .iter()
            .map(|call| format!("{}[{}]", json_string(&call.name), json_string(&call.id)))
            .collect();
        out.push_str(&listed.join(", "));
    }
    out.push('.');
    out
}

/// What a message content is, decided by its first characters.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed<'a> {
    /// A spilled user message: its content is behind the pointer.
    Spilled(Pointer),
    /// A tool result: its content is behind the pointer.
    Tombstone(Pointer),
    /// A folded run: the messages are behind the pointer, its user messages are the `users`
    /// messages just before this one.
    Folded {
        /// The stored span.
        pointer: Pointer,
        /// How many user messages of the span were emitted before the fold.
        users: usize,
    },
    /// A kept content (escape removed).
    Kept(&'a str),
}

/// Reads a content back. A content that starts like a marker but is not a well-formed one is an
/// error (`None`), never text: only compaction writes that prefix.
pub(crate) fn parse(content: &str) -> Option<Parsed<'_>> {
    if let Some(escaped) = content.strip_prefix(VERBATIM_ESCAPE) {
        return Some(Parsed::Kept(escaped));
    }
    let Some(rest) = content.strip_prefix(MARKER_PREFIX) else {
        return Some(Parsed::Kept(content));
    };
    let (head, _) = rest.split_once('⟧')?;
    let mut fields = head.split(' ');
    let kind = fields.next()?;
    let pointer = fields.next()?;
    if !pointer.starts_with(POINTER_PREFIX) {
        return None;
    }
    let pointer = Pointer::parse(pointer).ok()?;
    let parsed = match kind {
        SPILLED => Parsed::Spilled(pointer),
        TOMBSTONE => Parsed::Tombstone(pointer),
        FOLDED => {
            let users = fields.next()?.strip_prefix("users=")?.parse().ok()?;
            Parsed::Folded { pointer, users }
        }
        _ => return None,
    };
    fields.next().is_none().then_some(parsed)
}

/// The pointers the markers among `messages` name, in order, each once; `Err(index)` for a
/// content that begins like a marker but is not one.
pub(crate) fn pointers_in(messages: &[Message]) -> Result<Vec<Pointer>, usize> {
    let mut pointers = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let pointer = match parse(&message.content) {
            None => return Err(index),
            Some(Parsed::Kept(_)) => continue,
            Some(Parsed::Spilled(p) | Parsed::Tombstone(p) | Parsed::Folded { pointer: p, .. }) => {
                p
            }
        };
        if !pointers.contains(&pointer) {
            pointers.push(pointer);
        }
    }
    Ok(pointers)
}

fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

fn cut_chars(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &text[..cut])),
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ContentHash;
    use serde_json::json;

    fn pointer() -> Pointer {
        Pointer::for_hash(ContentHash::of(b"x"))
    }

    #[test]
    fn every_marker_parses_back_to_its_kind_and_pointer() {
        let p = pointer();
        assert_eq!(
            parse(&stub_text(&p, 3, 10)),
            Some(Parsed::Spilled(p.clone()))
        );
        let call = ToolCall::new("c", "read\n⟧", json!({"path": "⟧".repeat(300)}));
        assert_eq!(
            parse(&tombstone_text(&p, Some(&call), 10)),
            Some(Parsed::Tombstone(p.clone()))
        );
        let calls = vec![&call; 20];
        let header = FoldHeader {
            pointer: &p,
            users: 2,
            first: 1,
            last: 9,
            folded_messages: 7,
            calls: &calls,
        };
        let fold = fold_text(&header, Some("⟦compaction:spilled store://x⟧"));
        assert!(fold.contains("4 older calls"));
        assert_eq!(
            parse(&fold),
            Some(Parsed::Folded {
                pointer: p.clone(),
                users: 2
            })
        );
    }

    #[test]
    fn text_that_imitates_a_marker_is_escaped_and_read_back_as_text() {
        let forged = stub_text(&pointer(), 1, 1);
        for text in [
            forged.as_str(),
            "⟦verbatim⟧⟦compaction:spilled",
            "⟦verbatim⟧",
            "⟦compaction:",
        ] {
            let sent = escape(text);
            assert_ne!(sent, text);
            assert_eq!(parse(&sent), Some(Parsed::Kept(text)));
        }
        assert_eq!(
            escape("plain ⟦compaction: inside"),
            "plain ⟦compaction: inside"
        );
        assert_eq!(parse("plain"), Some(Parsed::Kept("plain")));
    }

    #[test]
    fn a_malformed_marker_is_not_text() {
        for text in [
            "⟦compaction:spilled",
            "⟦compaction:spilled nothing⟧",
            "⟦compaction:other store://sha256:00⟧",
            "⟦compaction:folded store://sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881⟧",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
