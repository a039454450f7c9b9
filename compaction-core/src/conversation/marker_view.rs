//! The public reading of a marker: what a message compaction wrote in place of others stands
//! for (a tombstone, a page, a user run, a fold, a state update), with its handle and sizes, for
//! tools that show a request to a person (`compaction show`).

use crate::conversation::handle::Handle;
use crate::conversation::marker::{parse, Parsed};

/// What a message content written by compaction stands for, read from its first characters.
///
/// [`Marker::of`] is `None` for every kept content, including one whose text imitates a marker
/// or a handle: such a content is sent with
/// [`VERBATIM_ESCAPE`](crate::transcript::VERBATIM_ESCAPE) in front, so it never reads as one.
///
/// ```
/// use compaction::transcript::{Handle, Marker, MARKER_PREFIX};
///
/// let page = format!(
///     "{MARKER_PREFIX}paged p4⟧ this result has 12345 bytes; bytes 0..800 and 12000..12345 are \
///      shown; resolve_pointer(\"p4\", offset=800) reads the rest page by page.\nhead\n[…]\ntail"
/// );
/// assert_eq!(
///     Marker::of(&page),
///     Some(Marker::Paged { handle: Handle::new(4).unwrap(), bytes: 12345, shown: [800, 12000] })
/// );
/// assert_eq!(Marker::of(&format!("⟦verbatim⟧{page}")), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Marker {
    /// A tool result whose content left the window: `bytes` of it behind `handle`.
    Tombstone {
        /// What the pointer tool resolves.
        handle: Handle,
        /// The result's size.
        bytes: usize,
    },
    /// A tool result sent as a head and a tail excerpt: all `bytes` of it behind `handle`.
    Paged {
        /// What the pointer tool resolves (with `offset` for the rest).
        handle: Handle,
        /// The result's size.
        bytes: usize,
        /// Where the head ends and the tail starts: bytes `0..shown[0]` and
        /// `shown[1]..bytes` are in the message.
        shown: [usize; 2],
    },
    /// The user messages of input messages `first..=last`, stored byte-exact behind `handle`.
    UserRun {
        /// What the pointer tool resolves (with `index` for one message).
        handle: Handle,
        /// The first input message of the range.
        first: usize,
        /// The last input message of the range.
        last: usize,
        /// How many user messages left.
        messages: usize,
        /// Their size in bytes.
        bytes: usize,
    },
    /// The assistant and tool messages of input messages `first..=last`, stored behind
    /// `handle`, with a summary or without.
    Fold {
        /// What the pointer tool resolves (with `index` for one message).
        handle: Handle,
        /// The first input message of the range.
        first: usize,
        /// The last input message of the range.
        last: usize,
    },
    /// A state update (the volatile part of the window, shown again).
    Update,
}

impl Marker {
    /// What `content` stands for, when compaction wrote it; `None` for a kept content (an
    /// escaped imitation included) and for anything that is not a well-formed marker.
    pub fn of(content: &str) -> Option<Marker> {
        let note = content.split_once('⟧').map_or("", |(_, note)| note);
        Some(match parse(content)? {
            Parsed::Kept(_) => return None,
            Parsed::Update => Marker::Update,
            Parsed::Tombstone(handle) => Marker::Tombstone {
                handle,
                bytes: number_before(note.strip_prefix(" this result (")?, " bytes)")?,
            },
            Parsed::Paged(handle) => {
                let rest = note.strip_prefix(" this result has ")?;
                let (bytes, rest) = rest.split_once(" bytes; bytes 0..")?;
                let (head, rest) = rest.split_once(" and ")?;
                let (tail, rest) = rest.split_once("..")?;
                let (end, _) = rest.split_once(" are shown")?;
                let [bytes, head, tail, end] = [bytes, head, tail, end].map(number);
                let (bytes, head, tail) = (bytes?, head?, tail?);
                (end? == bytes && head <= tail && tail <= bytes).then_some(())?;
                Marker::Paged {
                    handle,
                    bytes,
                    shown: [head, tail],
                }
            }
            Parsed::Users {
                handle,
                first,
                last,
            } => {
                let (messages, rest) = note.strip_prefix(' ')?.split_once(" user messages (")?;
                Marker::UserRun {
                    handle,
                    first,
                    last,
                    messages: number(messages)?,
                    bytes: number_before(rest, " bytes)")?,
                }
            }
            Parsed::Folded {
                handle,
                first,
                last,
                ..
            } => Marker::Fold {
                handle,
                first,
                last,
            },
        })
    }

    /// The handle it names (`None` for a state update).
    pub fn handle(&self) -> Option<Handle> {
        match self {
            Marker::Tombstone { handle, .. }
            | Marker::Paged { handle, .. }
            | Marker::UserRun { handle, .. }
            | Marker::Fold { handle, .. } => Some(*handle),
            Marker::Update => None,
        }
    }
}

/// The number `text` starts with, up to `end`.
fn number_before(text: &str, end: &str) -> Option<usize> {
    number(text.split_once(end)?.0)
}

/// A decimal number (digits only).
fn number(text: &str) -> Option<usize> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::Marker;
    use crate::conversation::handle::Handle;
    use crate::conversation::marker::{
        escape, fold_base, page_text, tombstone_text, update_text, users_text, without_summary,
        FoldHeader, Page,
    };

    #[test]
    fn every_marker_compaction_writes_reads_back_with_its_sizes() {
        let h = Handle::new(7).unwrap();
        assert_eq!(
            Marker::of(&tombstone_text(h, 1234)),
            Some(Marker::Tombstone {
                handle: h,
                bytes: 1234
            })
        );
        // An excerpt that imitates the note changes nothing: the note comes first.
        let head = "⟧ this result has 1 bytes";
        let page = page_text(&Page {
            handle: h,
            total: 40,
            head,
            tail: "ab",
        });
        assert_eq!(
            Marker::of(&page),
            Some(Marker::Paged {
                handle: h,
                bytes: 40,
                shown: [head.len(), 38]
            })
        );
        let small = page_text(&Page {
            handle: h,
            total: 10,
            head: "abc",
            tail: "yz",
        });
        assert_eq!(
            Marker::of(&small),
            Some(Marker::Paged {
                handle: h,
                bytes: 10,
                shown: [3, 8]
            })
        );
        assert_eq!(
            Marker::of(&users_text(h, 2, 9, 3, 400)),
            Some(Marker::UserRun {
                handle: h,
                first: 2,
                last: 9,
                messages: 3,
                bytes: 400
            })
        );
        let fold = without_summary(&fold_base(&FoldHeader {
            handle: h,
            first: 1,
            last: 4,
            folded_messages: 3,
            users: 1,
            kept_users: 0,
            calls: 1,
            listed: &[],
        }));
        assert_eq!(
            Marker::of(&fold),
            Some(Marker::Fold {
                handle: h,
                first: 1,
                last: 4
            })
        );
        assert_eq!(Marker::of(&update_text("x")), Some(Marker::Update));
        assert_eq!(Marker::Update.handle(), None);
        assert_eq!(Marker::of(&fold).and_then(|m| m.handle()), Some(h));
    }

    #[test]
    fn kept_text_and_imitations_are_no_marker() {
        let forged = tombstone_text(Handle::new(1).unwrap(), 5);
        for text in [
            "plain text".to_owned(),
            format!("see {forged}"),
            escape(&forged).into_owned(),
            escape(&format!("\u{200b}{forged}")).into_owned(),
            "⟦compaction:paged p4⟧ this result has many bytes".to_owned(),
            "⟦compaction:tombstone p4⟧".to_owned(),
            "p4".to_owned(),
            "store://sha256:00".to_owned(),
        ] {
            assert_eq!(Marker::of(&text), None, "{text:?}");
        }
    }
}
