//! [`TranscriptPlanner`]: a token counter, a wire format and the planner's memories of the last
//! requests it planned (up to [`REMEMBERED`] agents), each found again by the transcript's hash
//! chain, or installed from a checkpoint. The planning itself is in `next_request.rs`; what one
//! memory holds is in `memory.rs`.

use crate::conversation::format::{counts_key, ChatFormat, OpenAiChat};
use crate::conversation::transcript::{Link, Message, Role, Transcript};
use crate::planner::memory::{message_digest, MemoryRecord, Slot, SlotMeta, TranscriptMemory};
use crate::store::ContentHash;
use crate::tokens::TokenCounter;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// How many transcripts' memories a planner keeps (the most recently planned ones).
pub const REMEMBERED: usize = 16;

/// Plans the requests of agents' transcripts for one token counter and one wire format
/// ([`OpenAiChat`] unless [`with_format`](Self::with_format) names another), remembering the last
/// request of each (up to [`REMEMBERED`] agents) so the next plan only appends to it.
///
/// ```
/// use compaction::transcript::{EffectStatuses, TranscriptBudget, TranscriptPlanner, TranscriptPolicy};
/// use compaction::{Message, Tokenizer, Transcript};
/// use std::sync::Arc;
///
/// let planner = TranscriptPlanner::new(Arc::new(Tokenizer::O200kBase));
/// let mut chat = Transcript::new();
/// let budget = TranscriptBudget::with_marks(2_000, 0.9, 0.6);
/// let (policy, effects) = (TranscriptPolicy::default(), EffectStatuses::new());
/// let mut previous: Vec<Message> = Vec::new();
/// for turn in 0..200 {
///     chat.push(Message::user(format!("turn {turn}: what next?")));
///     chat.push(Message::assistant("Some work done. ".repeat(10)));
///     let planned = planner.plan_without_summaries(&chat, &policy, budget, &effects)?;
///     assert!(planned.tokens() <= 2_000);
///     if !planned.compacted() {
///         // Between compaction points a request only appends to the previous one.
///         assert!(planned.messages().starts_with(&previous));
///     }
///     previous = planned.messages().to_vec();
///     planner.commit(&planned);
/// }
/// # Ok::<(), compaction::transcript::TranscriptPlanError>(())
/// ```
pub struct TranscriptPlanner {
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) format: Arc<dyn ChatFormat>,
    /// What the memories of this planner's counts record (see `format::counts_key`).
    key: String,
    memories: Mutex<VecDeque<Arc<Remembered>>>,
    /// The counts of the last append that did not fit, so the compaction point that follows
    /// does not count the same new messages again.
    recent: Mutex<Vec<RecentCount>>,
}

/// A planner's memories at one moment ([`TranscriptPlanner::snapshot`]): the memories are
/// shared, never changed in place, so a snapshot costs one `Arc` per transcript remembered.
#[derive(Debug)]
pub(crate) struct PlannerSnapshot {
    memories: VecDeque<Arc<Remembered>>,
    recent: Vec<RecentCount>,
}

/// The kept cost of input message `index` (chat formula, escaped as sent), counted by an
/// append: `Ok(tokens)`, or `Err(limit)` when it passed `limit`. `link` is the transcript's
/// chain link after the message, so a count is only used for that very message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecentCount {
    pub(crate) index: usize,
    pub(crate) link: Link,
    pub(crate) tokens: Result<usize, usize>,
}

impl std::fmt::Debug for TranscriptPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptPlanner")
            .field("counter", &self.counter.name())
            .field("format", &self.format.name())
            .finish_non_exhaustive()
    }
}

impl TranscriptPlanner {
    /// A planner counting with `counter` in the default format ([`OpenAiChat`]), remembering
    /// nothing yet.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        Self::with_format(counter, Arc::new(OpenAiChat))
    }

    /// A planner counting with `counter` in `format`, remembering nothing yet.
    pub fn with_format(counter: Arc<dyn TokenCounter>, format: Arc<dyn ChatFormat>) -> Self {
        TranscriptPlanner {
            key: counts_key(&*counter, &*format),
            counter,
            format,
            memories: Mutex::new(VecDeque::new()),
            recent: Mutex::new(Vec::new()),
        }
    }

    /// The wire format whose formula prices the messages.
    pub fn format(&self) -> &dyn ChatFormat {
        &*self.format
    }

    /// What this planner's memories record as their counter: the counter's name, with the
    /// format's when that is not the default.
    pub(crate) fn counts_key(&self) -> &str {
        &self.key
    }

    /// The token counter.
    pub fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    /// Installs a memory read back from a checkpoint, so this process plans the next request
    /// exactly as the one that wrote the checkpoint would have.
    pub fn resume(&self, memory: TranscriptMemory) {
        let digests = memory.messages.iter().map(message_digest).collect();
        self.remember(Arc::new(Remembered::of(&memory, digests)));
    }

    /// The memory of the request of `key` (its length and chain link), if it is kept.
    pub(crate) fn memory_with_key(&self, key: (usize, Link)) -> Option<Arc<Remembered>> {
        let memories = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        memories.iter().find(|m| m.key() == key).cloned()
    }

    /// Forgets every memory: the next plan of any transcript starts from nothing.
    pub fn forget_all(&self) {
        self.memories
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub(crate) fn remember(&self, memory: Arc<Remembered>) {
        let mut memories = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        memories.retain(|m| {
            !(m.record.len == memory.record.len && m.record.link == memory.record.link)
        });
        memories.push_front(memory);
        memories.truncate(REMEMBERED);
    }

    /// Everything this planner remembers now, to [`restore`](Self::restore) when what was
    /// planned since is not used (its checkpoint was not saved).
    pub(crate) fn snapshot(&self) -> PlannerSnapshot {
        PlannerSnapshot {
            memories: self
                .memories
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            recent: self
                .recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Puts back what [`snapshot`](Self::snapshot) took: the next plan is the one it would
    /// have been then.
    pub(crate) fn restore(&self, snapshot: PlannerSnapshot) {
        *self.memories.lock().unwrap_or_else(|e| e.into_inner()) = snapshot.memories;
        *self.recent.lock().unwrap_or_else(|e| e.into_inner()) = snapshot.recent;
    }

    /// Keeps the counts of an append that did not fit (see [`RecentCount`]).
    pub(crate) fn keep_recent_counts(&self, counts: Vec<RecentCount>) {
        *self.recent.lock().unwrap_or_else(|e| e.into_inner()) = counts;
    }

    /// The counts kept by the last append that did not fit, those of `transcript`'s messages.
    pub(crate) fn recent_counts(&self, transcript: &Transcript) -> Vec<RecentCount> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent
            .iter()
            .filter(|r| transcript.link(r.index + 1) == Some(r.link))
            .copied()
            .collect()
    }

    /// Forgets the memory of the request of `key` (its length and chain link), when it is not
    /// the newest one.
    pub(crate) fn forget(&self, key: (usize, Link)) {
        let mut memories = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        let mut newest = true;
        memories.retain(|m| std::mem::take(&mut newest) || m.key() != key);
    }

    /// The memory `transcript` grew from (the longest one), or the empty memory.
    pub(crate) fn memory_for(&self, transcript: &Transcript) -> Arc<Remembered> {
        let memories = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        memories
            .iter()
            .filter(|m| {
                m.record.counter == self.key && transcript.link(m.record.len) == Some(m.record.link)
            })
            .max_by_key(|m| m.record.len)
            .cloned()
            .unwrap_or_else(|| Arc::new(Remembered::empty(&self.key)))
    }
}

/// A request as the planner keeps it between plans: its record, and only the messages that are
/// not input messages sent as they are (markers, tombstones, pages, state updates). A kept
/// message is read again from the transcript when the next plan needs it: the transcript's
/// chain link at the memory's length proves it unchanged. So a memory costs its markers and
/// slots, not a second copy of the window (issue 20's "planner state per message").
#[derive(Debug)]
pub(crate) struct Remembered {
    pub(crate) record: MemoryRecord,
    /// By position: `None` for a [`Slot::Kept`] message, else the message sent.
    own: Vec<Option<Box<Message>>>,
    /// By position: each message's [`message_digest`].
    digests: Vec<ContentHash>,
}

impl Remembered {
    /// What the planner keeps of `memory`, whose messages have `digests`.
    pub(crate) fn of(memory: &TranscriptMemory, digests: Vec<ContentHash>) -> Self {
        let own = memory
            .record
            .slots
            .iter()
            .zip(&memory.messages)
            .map(|(meta, message)| match meta.slot {
                Slot::Kept { .. } => None,
                _ => Some(Box::new(message.clone())),
            })
            .collect();
        Remembered {
            record: memory.record.clone(),
            own,
            digests,
        }
    }

    /// The memory of nothing planned yet, for counts by `counter`.
    pub(crate) fn empty(counter: &str) -> Self {
        Remembered {
            record: TranscriptMemory::empty(counter).record,
            own: Vec::new(),
            digests: Vec::new(),
        }
    }

    /// The [`message_digest`] of the message at `position`.
    pub(crate) fn digest(&self, position: usize) -> Option<ContentHash> {
        self.digests.get(position).copied()
    }

    /// The message at `position` of the request when it is not an input message sent as it
    /// is (`None`: a kept message, to read from the transcript at its slot's index).
    pub(crate) fn own(&self, position: usize) -> Option<&Message> {
        self.own[position].as_deref()
    }

    /// Whether `slot` at `position` with `message` is what this request had there (a kept
    /// message is the same when its slot is: both are read from the same transcript).
    pub(crate) fn same_at(&self, position: usize, meta: &SlotMeta, message: &Message) -> bool {
        self.record.slots.get(position) == Some(meta)
            && match &self.own[position] {
                Some(own) => **own == *message,
                None => true,
            }
    }

    /// Input messages this memory planned.
    pub(crate) fn planned_len(&self) -> usize {
        self.record.len
    }

    /// What identifies it: the input messages planned and the transcript's chain link after
    /// them.
    pub(crate) fn key(&self) -> (usize, Link) {
        (self.record.len, self.record.link)
    }

    /// Tokens of its messages (chat formula, without the reply priming).
    pub(crate) fn tokens(&self) -> usize {
        self.record.slots.iter().map(|s| s.tokens).sum()
    }

    /// Output slots the blocks take.
    pub(crate) fn block_slots(&self) -> usize {
        self.record.block_slots()
    }

    /// Tokens of the request's part that stays byte-identical across compaction points: the
    /// blocks and the opening, and the system messages leading the request (`messages`: the
    /// transcript's).
    pub(crate) fn stable_tokens(&self, messages: &[Message]) -> usize {
        let blocks = self.record.stable_slots();
        let is_system = |position: usize, meta: &SlotMeta| match (self.own(position), &meta.slot) {
            (Some(own), _) => own.role == Role::System,
            (None, Slot::Kept { index }) => {
                messages.get(*index).is_some_and(|m| m.role == Role::System)
            }
            (None, _) => false,
        };
        self.record
            .slots
            .iter()
            .enumerate()
            .take_while(|(position, meta)| *position < blocks || is_system(*position, meta))
            .map(|(_, meta)| meta.tokens)
            .sum()
    }

    /// Input index where the open zone starts (the end of the last block).
    pub(crate) fn open_input(&self) -> usize {
        self.record.blocks.last().map_or(0, |b| b.end)
    }
}
