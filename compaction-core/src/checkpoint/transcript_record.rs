//! The transcript part of a checkpoint: the messages a compaction sends after the window, the
//! planner's memory of them and how the window was planned ([`CompactedTranscript`]), what the
//! seals cover of it ([`SealedTranscript`]), and the checks a stored one passes on load.

use crate::conversation::transcript::{validate_messages, Message, TranscriptError};
use crate::planner::memory::{message_digest, MemoryRecord, SealedRecord, TranscriptMemory};
use crate::store::ContentHash;
use crate::window::field::Entry;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A transcript as the seals cover it: every field, the messages through the SHA-256 of each
/// one's JSON, each block's chunks through its manifest's hash ([`SealedRecord`]). The seal is
/// as strong (a changed message changes its digest, changed chunks no longer match their
/// manifest on load), and a compaction that sends most messages again hashes only the new ones
/// (the planner keeps the digests of the last request), whatever the history's length;
/// verification always computes every digest again.
#[derive(Serialize)]
pub(super) struct SealedTranscript<'a> {
    path: &'a str,
    message_digests: Cow<'a, [ContentHash]>,
    tokens: usize,
    request_tokens: usize,
    reused: usize,
    memory: SealedRecord<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<&'a WindowRecord>,
}

/// The digests of a transcript's messages, as its compaction computed them: a cache of what
/// the messages determine, so it is never serialized and never tells two transcripts apart.
#[derive(Debug, Clone, Default)]
pub(crate) struct MessageDigests(pub(crate) Vec<ContentHash>);

impl PartialEq for MessageDigests {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// A transcript as compacted: the messages to send after the window's system message.
///
/// Deserialized through [`validate_messages`]: a checkpoint edited into an orphaned call or
/// result, or into a shape no chat API takes, is refused on load, so every `Compacted` that
/// exists holds sendable messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "UncheckedTranscript")]
pub(crate) struct CompactedTranscript {
    /// The field's path.
    pub(crate) path: String,
    /// Kept, stubbed, tombstoned and folded messages, in order.
    pub(crate) messages: Vec<Message>,
    /// Their tokens by the chat formula.
    pub(crate) tokens: usize,
    /// Tokens of the whole request `messages()` returns, reply priming included.
    pub(crate) request_tokens: usize,
    /// Leading messages of `messages()` identical to the previous request's, for this agent.
    #[serde(default)]
    pub(crate) reused: usize,
    /// The planner's memory of this request: what each message stands for, the compacted
    /// blocks and their chunks, the handle table. A restarted process installs it to plan the
    /// next request exactly as this one would have.
    pub(crate) memory: MemoryRecord,
    /// How the window at the front was planned, so the next request keeps it (absent: the next
    /// request renders the window again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) window: Option<WindowRecord>,
    /// The digest of each message when this process made it (empty when read back). Sealing and
    /// verifying use it: a checkpoint's fields cannot change after it is made, and one read
    /// back (the only way content can differ from what was sealed) has none, so its digests
    /// are computed from its messages (so a checkpoint saved and read back checks the digests
    /// it was sealed with: every round-trip test of a transcript's checkpoint does).
    #[serde(skip)]
    pub(crate) digests: MessageDigests,
}

/// How the window at the front of a transcript's request was planned (see
/// `compactor/request.rs`): the next request plans its fields the same way, so an unchanged
/// state renders the same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WindowRecord {
    /// The window text's budget.
    pub(crate) budget: usize,
    /// Whether the window is in the compact form.
    pub(crate) compact: bool,
    /// The fields as the model was last shown them, when that is not `entries` (a state update
    /// was held back behind a call still in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shown: Option<Vec<Entry>>,
    /// The fields the window at the front was rendered from (absent in checkpoints from
    /// before fronts were kept across compaction points, whose bytes and seals stay as they
    /// were).
    #[serde(default, skip_serializing_if = "FrontFields::is_unknown")]
    pub(crate) front: FrontFields,
}

/// The fields the window at the front of a request was rendered from: a compaction point keeps
/// the front when the fields that changed since fit in a state update after the conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FrontFields {
    /// Not recorded (a checkpoint from before fronts were kept): the next compaction point
    /// renders the front again.
    #[default]
    Unknown,
    /// The checkpoint's own entries.
    Entries,
    /// Earlier values of the fields, whose changes the updates after the front carry.
    Fields(Vec<Entry>),
}

impl FrontFields {
    fn is_unknown(&self) -> bool {
        *self == FrontFields::Unknown
    }
}

impl CompactedTranscript {
    /// What the seals cover of it (see [`SealedTranscript`]).
    pub(super) fn sealed(&self) -> SealedTranscript<'_> {
        let message_digests = if self.digests.0.len() == self.messages.len() {
            Cow::Borrowed(&self.digests.0[..])
        } else {
            Cow::Owned(self.messages.iter().map(message_digest).collect())
        };
        SealedTranscript {
            path: &self.path,
            message_digests,
            tokens: self.tokens,
            request_tokens: self.request_tokens,
            reused: self.reused,
            memory: SealedRecord::of(&self.memory),
            window: self.window.as_ref(),
        }
    }

    /// The planner memory this checkpoint carries.
    pub(crate) fn planner_memory(&self) -> TranscriptMemory {
        TranscriptMemory::from_record(self.memory.clone(), self.messages.clone())
            .expect("checked when it was made or loaded")
    }
}

/// [`CompactedTranscript`] as read, before its messages are checked.
#[derive(Deserialize)]
struct UncheckedTranscript {
    path: String,
    messages: Vec<Message>,
    tokens: usize,
    request_tokens: usize,
    #[serde(default)]
    reused: usize,
    memory: MemoryRecord,
    #[serde(default)]
    window: Option<WindowRecord>,
}

/// Why a stored transcript was refused.
#[derive(Debug, thiserror::Error)]
enum StoredTranscriptError {
    #[error("{0}")]
    Invalid(#[from] TranscriptError),
    #[error("{0}")]
    Memory(String),
}

impl TryFrom<UncheckedTranscript> for CompactedTranscript {
    type Error = StoredTranscriptError;

    fn try_from(read: UncheckedTranscript) -> Result<Self, StoredTranscriptError> {
        validate_messages(&read.messages)?;
        read.memory
            .check(read.messages.len())
            .map_err(StoredTranscriptError::Memory)?;
        Ok(CompactedTranscript {
            path: read.path,
            messages: read.messages,
            tokens: read.tokens,
            request_tokens: read.request_tokens,
            reused: read.reused,
            memory: read.memory,
            window: read.window,
            digests: MessageDigests::default(),
        })
    }
}
