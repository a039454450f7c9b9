//! What the planner remembers between requests of one agent (issues 20.6 and 22.3): the request
//! it sent, message by message, with what each message stands for; the compacted blocks and
//! where their spans are stored; the handle table. A checkpoint carries the same record, so a
//! restarted process plans the next request exactly as the warm one would have.
//!
//! Forms only move forward: a message is kept, then maybe paged, tombstoned, and finally part
//! of a block (folded, or in a user run). The request is `[blocks…][open zone…]`: blocks are
//! contiguous ranges of input messages from message 0 on, compacted at earlier compaction
//! points; the open zone is every later message in its current form, plus state updates.

use crate::conversation::handle::{Handle, HandleTable};
use crate::conversation::transcript::{Link, Message, ROOT};
use crate::store::{ContentHash, Pointer};
use serde::{Deserialize, Serialize};

// How compacted messages are stored (the writer is `span.rs`): in chunks written once and
// never rewritten, listed by a manifest that a fold's and a user run's handle names.

/// One chunk of a span: input messages `first..first + count`, stored under `hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ChunkRef {
    pub(crate) first: usize,
    pub(crate) count: usize,
    pub(crate) hash: ContentHash,
}

/// A stored span: its chunks, in order and contiguous.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// The format (1).
    pub(crate) span: u32,
    pub(crate) first: usize,
    pub(crate) chunks: Vec<ChunkRef>,
}

impl Manifest {
    /// A manifest of contiguous `chunks` (at least one).
    pub(crate) fn of(chunks: Vec<ChunkRef>) -> Self {
        Manifest {
            span: 1,
            first: chunks.first().map_or(0, |c| c.first),
            chunks,
        }
    }

    /// One past the last message.
    pub(crate) fn end(&self) -> usize {
        self.chunks.last().map_or(self.first, |c| c.first + c.count)
    }

    /// Its bytes and their hash.
    pub(crate) fn stored(&self) -> (ContentHash, Vec<u8>) {
        let bytes = serde_json::to_vec(self).expect("a manifest serializes");
        (ContentHash::of(&bytes), bytes)
    }

    /// Parses and checks a stored manifest: known format, chunks contiguous and non-empty.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, String> {
        let manifest: Manifest =
            serde_json::from_slice(bytes).map_err(|_| "not a span manifest".to_owned())?;
        if manifest.span != 1 || manifest.chunks.is_empty() {
            return Err("not a span manifest".into());
        }
        let mut next = manifest.first;
        for chunk in &manifest.chunks {
            if chunk.first != next || chunk.count == 0 {
                return Err("the manifest's chunks are not contiguous".into());
            }
            next = chunk.first + chunk.count;
        }
        Ok(manifest)
    }

    /// The chunk holding input message `index`.
    pub(crate) fn chunk_of(&self, index: usize) -> Option<&ChunkRef> {
        let at = self.chunks.partition_point(|c| c.first + c.count <= index);
        self.chunks.get(at).filter(|c| c.first <= index)
    }

    /// Every pointer the span needs: its chunks.
    pub(crate) fn chunk_pointers(&self) -> impl Iterator<Item = Pointer> + '_ {
        self.chunks.iter().map(|c| Pointer::for_hash(c.hash))
    }
}

/// What one message of a planned request stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "slot", rename_all = "snake_case")]
pub(crate) enum Slot {
    /// Input message `index`, as it is (escaped when it begins like a marker).
    Kept { index: usize },
    /// Input tool result `index`; its content is behind `handle`.
    Tombstoned { index: usize, handle: Handle },
    /// Input tool result `index`, shown in excerpts; its content is behind `handle`.
    Paged { index: usize, handle: Handle },
    /// The user messages of `first..=last` that left the window (a block's user run).
    Users {
        first: usize,
        last: usize,
        handle: Handle,
    },
    /// The assistant and tool messages of `first..=last` (a block's fold).
    Folded {
        first: usize,
        last: usize,
        handle: Handle,
    },
    /// A state update: the volatile part of the window, not a transcript message.
    Update,
}

impl Slot {
    /// The input message this slot stands for alone, if any.
    pub(crate) fn index(&self) -> Option<usize> {
        match self {
            Slot::Kept { index } | Slot::Tombstoned { index, .. } | Slot::Paged { index, .. } => {
                Some(*index)
            }
            _ => None,
        }
    }

    /// The handle it shows, if any.
    pub(crate) fn handle(&self) -> Option<Handle> {
        match self {
            Slot::Tombstoned { handle, .. }
            | Slot::Paged { handle, .. }
            | Slot::Users { handle, .. }
            | Slot::Folded { handle, .. } => Some(*handle),
            Slot::Kept { .. } | Slot::Update => None,
        }
    }
}

/// One message of the request and its tokens (chat formula).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct SlotMeta {
    #[serde(flatten)]
    pub(crate) slot: Slot,
    pub(crate) tokens: usize,
}

/// A compacted range of input messages `first..end`, stored as one span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Block {
    pub(crate) first: usize,
    pub(crate) end: usize,
    pub(crate) handle: Handle,
    pub(crate) manifest: ContentHash,
    pub(crate) chunks: Manifest,
    /// The summary its last fold carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    /// Output messages it takes (markers, hoisted users, anchors).
    pub(crate) slots: usize,
    /// User messages in its runs.
    pub(crate) spilled_users: usize,
    /// Assistant and tool messages folded.
    pub(crate) folded: usize,
}

/// The SHA-256 of a request message's JSON: what a checkpoint's seals cover for each message
/// (so a message sent again in the next request is not serialized and hashed again).
pub(crate) fn message_digest(message: &Message) -> ContentHash {
    // Serializing plain data into a Vec cannot fail.
    ContentHash::of(&serde_json::to_vec(message).unwrap_or_default())
}

/// The planner's memory of one agent's last request: the request's messages, what each stands
/// for, the compacted blocks and their chunks, the handle table. A checkpoint carries it;
/// [`TranscriptPlanner::resume`](crate::transcript::TranscriptPlanner::resume) installs it. Serializes as the record with its `messages`;
/// deserializing checks that they agree (one slot per message, contiguous blocks whose
/// manifests match their chunks, every handle in the table).
#[derive(Debug, Clone)]
pub struct TranscriptMemory {
    pub(crate) record: MemoryRecord,
    /// The request's transcript messages, one per slot.
    pub(crate) messages: Vec<Message>,
}

/// [`TranscriptMemory`] without its messages: what a checkpoint stores beside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MemoryRecord {
    /// Input messages planned, and the transcript's chain link after them.
    pub(crate) len: usize,
    #[serde(with = "crate::conversation::transcript::link_hex")]
    pub(crate) link: Link,
    pub(crate) slots: Vec<SlotMeta>,
    pub(crate) blocks: Vec<Block>,
    pub(crate) handles: HandleTable,
    /// Leading messages identical to the previous request's.
    pub(crate) reused: usize,
    /// Whether this request was a compaction point (else it only appended).
    pub(crate) compacted: bool,
    /// Slots right after the blocks that stand for the opening (`planner::opening`): the
    /// stable prefix ends after them. Absent (0) in checkpoints from before the opening.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) opening: usize,
    /// The token counter its counts come from ([`TokenCounter::name`](crate::TokenCounter::name)),
    /// followed by ` in ` and the format's name when that is not the default `openai-chat`:
    /// a planner with another counter or format plans from nothing instead.
    pub(crate) counter: String,
}

#[derive(Serialize, Deserialize)]
struct StoredMemory {
    messages: Vec<Message>,
    #[serde(flatten)]
    record: MemoryRecord,
}

impl Serialize for TranscriptMemory {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredMemory {
            messages: self.messages.clone(),
            record: self.record.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TranscriptMemory {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let stored = StoredMemory::deserialize(deserializer)?;
        TranscriptMemory::from_record(stored.record, stored.messages)
            .map_err(serde::de::Error::custom)
    }
}

impl TranscriptMemory {
    /// The memory of nothing planned yet, for counts by `counter`.
    pub(crate) fn empty(counter: &str) -> Self {
        TranscriptMemory {
            record: MemoryRecord {
                len: 0,
                link: ROOT,
                slots: Vec::new(),
                blocks: Vec::new(),
                handles: HandleTable::new(),
                reused: 0,
                compacted: false,
                opening: 0,
                counter: counter.to_owned(),
            },
            messages: Vec::new(),
        }
    }

    /// Input messages this memory planned.
    pub fn planned_len(&self) -> usize {
        self.record.len
    }

    /// Tokens of its messages (chat formula, without the reply priming).
    pub fn tokens(&self) -> usize {
        self.record.slots.iter().map(|s| s.tokens).sum()
    }

    /// Rebuilds a memory from a checkpoint's record and messages, checking that they agree.
    pub(crate) fn from_record(
        record: MemoryRecord,
        messages: Vec<Message>,
    ) -> Result<Self, String> {
        record.check(messages.len())?;
        Ok(TranscriptMemory { record, messages })
    }

    /// Every store pointer the request depends on: the handles' addresses and the blocks'
    /// chunks.
    pub(crate) fn pointers(&self) -> Vec<Pointer> {
        self.record.pointers()
    }
}

impl MemoryRecord {
    /// Output slots the blocks take.
    pub(crate) fn block_slots(&self) -> usize {
        self.blocks.iter().map(|b| b.slots).sum()
    }

    /// Leading slots kept byte-identical across compaction points as far as the planner can:
    /// the blocks', then the opening's.
    pub(crate) fn stable_slots(&self) -> usize {
        self.block_slots() + self.opening
    }

    /// Checks that the record is one the planner could have written for `messages` messages:
    /// one slot per message, contiguous blocks whose manifests match their chunks and whose
    /// handles name them, every handle in the table.
    pub(crate) fn check(&self, messages: usize) -> Result<(), String> {
        let record = self;
        if record.slots.len() != messages {
            return Err("the planner record does not match the messages".into());
        }
        if record.block_slots() > messages {
            return Err("the planner record's blocks take more messages than there are".into());
        }
        if record.stable_slots() > messages {
            return Err("the planner record's opening takes more messages than there are".into());
        }
        let mut next = 0;
        for block in &record.blocks {
            if block.first != next || block.end <= block.first {
                return Err("the planner record's blocks are not contiguous".into());
            }
            if block.chunks.first != block.first || block.chunks.end() != block.end {
                return Err("a block's chunks do not cover it".into());
            }
            if block.chunks.stored().0 != block.manifest {
                return Err("a block's manifest does not match its chunks".into());
            }
            if record.handles.pointer(block.handle) != Some(&Pointer::for_hash(block.manifest)) {
                return Err("a block's handle does not name its manifest".into());
            }
            next = block.end;
        }
        if next > record.len {
            return Err("the planner record's blocks pass its length".into());
        }
        for slot in &record.slots {
            if let Some(handle) = slot.slot.handle() {
                if record.handles.pointer(handle).is_none() {
                    return Err(format!("the handle {handle} is not in the table"));
                }
            }
        }
        Ok(())
    }

    /// Every store pointer the request depends on: the handles' addresses and the blocks'
    /// chunks.
    pub(crate) fn pointers(&self) -> Vec<Pointer> {
        let mut out: Vec<Pointer> = self.handles.iter().map(|(_, p)| p.clone()).collect();
        for block in &self.blocks {
            out.extend(block.chunks.chunk_pointers());
        }
        out
    }
}

/// What a checkpoint's seals cover of a [`MemoryRecord`]: every field, each block's chunks
/// through its manifest's hash ([`MemoryRecord::check`] refuses a block whose chunks do not
/// hash to it), so a request's seal does not grow by a chunk ref per 256 messages compacted.
#[derive(Serialize)]
pub(crate) struct SealedRecord<'a> {
    len: usize,
    #[serde(serialize_with = "crate::conversation::transcript::link_hex::serialize")]
    link: Link,
    slots: &'a [SlotMeta],
    blocks: Vec<SealedBlock<'a>>,
    handles: &'a HandleTable,
    reused: usize,
    compacted: bool,
    #[serde(skip_serializing_if = "is_zero")]
    opening: usize,
    counter: &'a str,
}

/// Whether a count is zero: such a field is left out, so records from before it seal and
/// serialize to the same bytes.
fn is_zero(count: &usize) -> bool {
    *count == 0
}

#[derive(Serialize)]
struct SealedBlock<'a> {
    first: usize,
    end: usize,
    handle: Handle,
    manifest: ContentHash,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    slots: usize,
    spilled_users: usize,
    folded: usize,
}

impl<'a> SealedRecord<'a> {
    pub(crate) fn of(record: &'a MemoryRecord) -> Self {
        // Destructured without `..`: a field added to a record or a block does not compile here
        // until the seal covers it.
        let MemoryRecord {
            len,
            link,
            slots,
            blocks,
            handles,
            reused,
            compacted,
            opening,
            counter,
        } = record;
        let sealed = |block: &'a Block| {
            let Block {
                first,
                end,
                handle,
                manifest,
                chunks: _,
                summary,
                slots,
                spilled_users,
                folded,
            } = block;
            SealedBlock {
                first: *first,
                end: *end,
                handle: *handle,
                manifest: *manifest,
                summary: summary.as_deref(),
                slots: *slots,
                spilled_users: *spilled_users,
                folded: *folded,
            }
        };
        SealedRecord {
            len: *len,
            link: *link,
            slots,
            blocks: blocks.iter().map(sealed).collect(),
            handles,
            reused: *reused,
            compacted: *compacted,
            opening: *opening,
            counter,
        }
    }
}

#[cfg(test)]
mod tests;
