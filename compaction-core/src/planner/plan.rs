//! What a plan is made of: the budget it works to ([`TranscriptBudget`]), the plan before its
//! summaries ([`TranscriptPlan`]), and the planned request ([`PlannedTranscript`]) with what
//! became of every input message ([`MessageOutcome`]).

use crate::conversation::handle::HandleTable;
use crate::conversation::transcript::{Link, Message, Role, Transcript};
use crate::planner::effects::EffectStatuses;
use crate::planner::memory::{Slot, TranscriptMemory};
use crate::planner::policy::TranscriptPolicy;
use crate::report::PagedResult;
use crate::store::{ContentHash, Pointer};

/// What became of one input message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageOutcome {
    /// Sent as it is (with [`VERBATIM_ESCAPE`](crate::transcript::VERBATIM_ESCAPE) in front
    /// when its first visible character is `⟦`).
    Kept,
    /// A user message in a user run: its exact text is in the store, by index.
    Spilled,
    /// A tool result whose content was replaced by a tombstone; the content is in the store.
    Tombstoned,
    /// A tool result sent as a head and a tail excerpt; the whole content is in the store.
    Paged,
    /// An assistant or tool message of a folded range; the range is in the store.
    Folded,
}

/// The token limits a plan works to, in tokens of the transcript's messages (chat formula,
/// without the reply priming).
///
/// - `limit` is hard: a plan never exceeds it, and planning refuses when even the smallest
///   form does not fit.
/// - Hysteresis: a request that has grown by appends stays as it is (the previous request is
///   an exact prefix of the next) while it is at most `high_water`; past it, one compaction
///   point brings it down to about `low_water` (oldest first), so the next appends again find
///   room. `TranscriptBudget::hard(limit)` (what a plain `usize` converts to) sets both marks to
///   the limit: compact only when over, and then just enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptBudget {
    /// The most tokens the messages may take.
    pub limit: usize,
    /// Appends stay appends while the messages take at most this.
    pub high_water: usize,
    /// What a compaction point aims for.
    pub low_water: usize,
}

impl TranscriptBudget {
    /// No hysteresis: both marks at `limit`.
    pub fn hard(limit: usize) -> Self {
        TranscriptBudget {
            limit,
            high_water: limit,
            low_water: limit,
        }
    }

    /// Marks as shares of `limit` (`high` and `low` in `0.0..=1.0`, `low <= high`; out of range
    /// values are clamped).
    pub fn with_marks(limit: usize, high: f64, low: f64) -> Self {
        let share = |r: f64| ((limit as f64) * r.clamp(0.0, 1.0)).floor() as usize;
        let high_water = share(high).min(limit);
        TranscriptBudget {
            limit,
            high_water,
            low_water: share(low).min(high_water),
        }
    }
}

impl From<usize> for TranscriptBudget {
    fn from(limit: usize) -> Self {
        TranscriptBudget::hard(limit)
    }
}

/// How many input messages ended in each form (each input message counted once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    /// Sent verbatim (anchors and hoisted user messages inside folds included).
    pub kept: usize,
    /// User messages in user runs.
    pub spilled: usize,
    /// Tool results replaced by tombstones.
    pub tombstoned: usize,
    /// Tool results sent in excerpts.
    pub paged: usize,
    /// Assistant and tool messages folded.
    pub folded: usize,
}

/// Everything one plan reads besides the transcript.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) policy: TranscriptPolicy,
    pub(crate) budget: TranscriptBudget,
    pub(crate) effects: &'a EffectStatuses,
    pub(crate) summary_tokens: Option<usize>,
    /// The volatile part of the window to append, rendered (without its marker line).
    pub(crate) update: Option<&'a str>,
    /// Make a compaction point even when appending would fit.
    pub(crate) compact: bool,
    /// A new tool result that would cost more tokens than this is paged to at most this.
    pub(crate) page_over: Option<usize>,
    /// Lift `page_over` while the newest turn fits the request (`planner::arrival`).
    pub(crate) verbatim_first: bool,
    /// The transcript's first messages kept in place while a point can keep them softly
    /// (`planner::opening`).
    pub(crate) keep_first: usize,
}

/// A fold that wants a summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldSummaryRequest {
    /// First input message of the folded range.
    pub first: usize,
    /// Last input message of the folded range.
    pub last: usize,
    /// What to summarize: the range's assistant and tool messages, one JSON message per line,
    /// without effect keys (a fold that consolidates older folds gets their summaries instead).
    /// User messages are never in it. Bounded: the newest messages within 256 KiB; a message
    /// larger than the room left is cut, and older ones left out, each with a note on a line of
    /// its own naming the fold's handle (`resolve_pointer("p7", index=N)` reads message #N).
    pub text: String,
    /// The most tokens the summary may have.
    pub target_tokens: usize,
}

/// A plan before its summaries: [`TranscriptPlanner::finish`](crate::transcript::TranscriptPlanner::finish) completes it.
#[derive(Debug, Clone)]
pub struct TranscriptPlan {
    pub(crate) planned: PlannedTranscript,
    pub(crate) pending: Vec<PendingSummary>,
}

/// A fold waiting for its summary.
#[derive(Debug, Clone)]
pub(crate) struct PendingSummary {
    pub(crate) request: FoldSummaryRequest,
    /// Position of the fold message in the output.
    pub(crate) position: usize,
    /// Its block (the summary is remembered there).
    pub(crate) block: usize,
    /// The fold's header (its content without summary is `without_summary(base)`).
    pub(crate) base: String,
    /// Tokens the plan counted for the fold message with its summary.
    pub(crate) reserved: usize,
    /// Tokens of the fold message without summary (the fallback, never more than `reserved`).
    pub(crate) plain: usize,
}

impl TranscriptPlan {
    /// Tokens of the planned messages, counting each summary at its full target.
    pub fn tokens(&self) -> usize {
        self.planned.tokens()
    }

    /// The summaries this plan needs, in order (none without a summarizer, and none when the
    /// request only appended).
    pub fn summary_requests(&self) -> impl Iterator<Item = &FoldSummaryRequest> {
        self.pending.iter().map(|p| &p.request)
    }
}

/// A planned request: the messages to send, the blobs to store first, and the planner's memory
/// of it (install it with [`TranscriptPlanner::commit`](crate::transcript::TranscriptPlanner::commit)
/// once the request is final, so the next plan only appends to it).
#[derive(Debug, Clone)]
pub struct PlannedTranscript {
    pub(crate) memory: TranscriptMemory,
    pub(crate) blobs: Vec<(ContentHash, Vec<u8>)>,
    /// Whether the state update asked for is in the messages (it waits when the request ends
    /// inside a unit already sent whose calls are still in flight).
    pub(crate) update_sent: bool,
    /// The memory this request was planned from (its length and chain link): committing this
    /// request replaces it, since the transcript grew from it.
    pub(crate) grew_from: (usize, Link),
}

impl PlannedTranscript {
    /// The messages to send, in order; they always pass
    /// [`Transcript::validate`](crate::Transcript::validate).
    pub fn messages(&self) -> &[Message] {
        &self.memory.messages
    }

    /// The messages, owned.
    pub fn into_messages(self) -> Vec<Message> {
        self.memory.messages
    }

    /// The handles the markers show, with the full address of each.
    pub fn handles(&self) -> &HandleTable {
        &self.memory.record.handles
    }

    /// What became of each message of `transcript` (the one this plan was made from), in input
    /// order.
    pub fn outcomes(&self, transcript: &Transcript) -> Vec<MessageOutcome> {
        let record = &self.memory.record;
        let messages = transcript.messages();
        let mut outcomes = vec![MessageOutcome::Kept; record.len.min(messages.len())];
        for block in &record.blocks {
            for index in block.first..block.end.min(outcomes.len()) {
                outcomes[index] = if messages[index].role == Role::User {
                    MessageOutcome::Spilled
                } else {
                    MessageOutcome::Folded
                };
            }
        }
        for slot in &record.slots {
            let (index, outcome) = match &slot.slot {
                Slot::Kept { index } => (*index, MessageOutcome::Kept),
                Slot::Tombstoned { index, .. } => (*index, MessageOutcome::Tombstoned),
                Slot::Paged { index, .. } => (*index, MessageOutcome::Paged),
                Slot::Users { .. } | Slot::Folded { .. } | Slot::Update => continue,
            };
            if let Some(entry) = outcomes.get_mut(index) {
                *entry = outcome;
            }
        }
        outcomes
    }

    /// The tool results this request sends in excerpts, by index and call (the report names
    /// them).
    pub fn paged_results(&self, transcript: &Transcript) -> Vec<PagedResult> {
        self.memory
            .record
            .slots
            .iter()
            .filter_map(|slot| match slot.slot {
                Slot::Paged { index, .. } => {
                    transcript.messages().get(index).map(|m| PagedResult {
                        index,
                        tool_call_id: m.tool_call_id.clone().unwrap_or_default(),
                        bytes: m.content.len(),
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// How many input messages ended in each form: (kept, spilled, tombstoned, paged, folded),
    /// from the planner's memory (no pass over the input).
    pub fn counts(&self) -> OutcomeCounts {
        let record = &self.memory.record;
        let mut counts = OutcomeCounts::default();
        for block in &record.blocks {
            counts.spilled += block.spilled_users;
            counts.folded += block.folded;
        }
        for slot in &record.slots {
            match slot.slot {
                Slot::Kept { .. } => counts.kept += 1,
                Slot::Tombstoned { .. } => counts.tombstoned += 1,
                Slot::Paged { .. } => counts.paged += 1,
                Slot::Users { .. } | Slot::Folded { .. } | Slot::Update => {}
            }
        }
        counts
    }

    /// Every blob a marker points to that this plan wrote (content of tombstones and pages,
    /// chunks and manifests of new spans): store them before sending.
    pub fn blobs(&self) -> &[(ContentHash, Vec<u8>)] {
        &self.blobs
    }

    /// Every store pointer the messages depend on (the handles' addresses and the chunks of
    /// every span).
    pub fn pointers(&self) -> Vec<Pointer> {
        self.memory.pointers()
    }

    /// Tokens of the messages by the chat formula (without the reply priming).
    pub fn tokens(&self) -> usize {
        self.memory.tokens()
    }

    /// The planner's memory of this request.
    pub fn memory(&self) -> &TranscriptMemory {
        &self.memory
    }

    /// Fold messages in [`messages`](Self::messages).
    pub fn fold_messages(&self) -> usize {
        self.count_slots(|s| matches!(s, Slot::Folded { .. }))
    }

    /// User-run markers in [`messages`](Self::messages).
    pub fn user_runs(&self) -> usize {
        self.count_slots(|s| matches!(s, Slot::Users { .. }))
    }

    /// Fold messages in the request that carry a summary (made now or at an earlier
    /// compaction point; a summary that did not fit its reserve fell back to the fold without
    /// one).
    pub fn summarized_folds(&self) -> usize {
        self.memory
            .record
            .blocks
            .iter()
            .filter(|b| b.summary.is_some())
            .count()
    }

    /// Whether the state update the compactor asked to append is in the messages.
    pub fn update_sent(&self) -> bool {
        self.update_sent
    }

    /// Whether this request was a compaction point (else it only appended to the last one).
    pub fn compacted(&self) -> bool {
        self.memory.record.compacted
    }

    /// Leading messages identical to the previous request's (what a provider's prompt cache can
    /// serve): all of them when the request only appended.
    pub fn reused_prefix(&self) -> usize {
        self.memory.record.reused
    }

    /// Leading messages the planner keeps byte-identical across compaction points as far as it
    /// can: the compacted blocks (they change only when consolidated) and the opening still in
    /// the open zone (`keep_first`). Everything after them stays identical until the next
    /// compaction point.
    pub fn stable_prefix(&self) -> usize {
        self.memory.record.stable_slots()
    }

    fn count_slots(&self, wanted: impl Fn(&Slot) -> bool) -> usize {
        self.memory
            .record
            .slots
            .iter()
            .filter(|s| wanted(&s.slot))
            .count()
    }
}
