//! [`TranscriptPlanner`]: a token counter, a wire format and the planner's memories of the last
//! requests it planned (up to [`REMEMBERED`] agents), each found again by the transcript's hash
//! chain, or installed from a checkpoint. The planning itself is in `planner.rs`; what one
//! memory holds is in `memory.rs`.

use crate::tokens::TokenCounter;
use crate::transcript::conversation::Transcript;
use crate::transcript::format::{counts_key, ChatFormat, OpenAiChat};
use crate::transcript::memory::TranscriptMemory;
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
    memories: Mutex<VecDeque<Arc<TranscriptMemory>>>,
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
        self.remember(Arc::new(memory));
    }

    /// Forgets every memory: the next plan of any transcript starts from nothing.
    pub fn forget_all(&self) {
        self.memories
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub(crate) fn remember(&self, memory: Arc<TranscriptMemory>) {
        let mut memories = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        memories.retain(|m| {
            !(m.record.len == memory.record.len && m.record.link == memory.record.link)
        });
        memories.push_front(memory);
        memories.truncate(REMEMBERED);
    }

    /// The memory `transcript` grew from (the longest one), or the empty memory.
    pub(crate) fn memory_for(&self, transcript: &Transcript) -> Arc<TranscriptMemory> {
        let memories = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        memories
            .iter()
            .filter(|m| {
                m.record.counter == self.key && transcript.link(m.record.len) == Some(m.record.link)
            })
            .max_by_key(|m| m.record.len)
            .cloned()
            .unwrap_or_else(|| Arc::new(TranscriptMemory::empty(&self.key)))
    }
}
