//! Transcripts: the conversation with the model as typed, pair-safe, lossless state.
//!
//! A [`Transcript`] is the list of [`Message`]s an agent sends to a chat API. Compaction makes
//! it fit a token budget without ever breaking what the API and the agent rely on.
//!
//! # The rules
//!
//! 1. System and developer messages are pinned: always kept verbatim.
//! 2. User messages are protected: never summarized. The last `keep_recent` user turns and
//!    everything after them stay verbatim. Older user messages stay verbatim while they fit;
//!    otherwise each is spilled byte-for-byte behind a content-addressed pointer and leaves a
//!    stub in its place (its index, its size, the pointer). With `pin_user` compaction refuses
//!    instead of spilling.
//! 3. A tool call and its result are one unit on the wire: compaction never emits a call
//!    without its result or a result without its call. The first thing to go is the *content*
//!    of old tool results, oldest first: stored verbatim and replaced, inside a tool message
//!    with the same `tool_call_id`, by a tombstone naming the tool, its arguments, the size and
//!    the pointer. The call itself (name and arguments) stays verbatim.
//! 4. Then whole old turns are folded, oldest first, into one message per run of consecutive
//!    turns: a summary when a summarizer is configured, else a stub. A run starts at a user
//!    turn (or right after a message that must stay); its calls and results leave together;
//!    the fold message carries a pointer to the stored span and lists the calls it folded. A
//!    call whose `effect` is live in its ledger (`not_started` or `unknown`), or that still
//!    waits for its result, is never folded: it stays in place as a verbatim pair, and the
//!    turn folds around it. User messages of a folded run are not summarized: they stay in
//!    place (kept or stubbed per rule 2), just above the fold message. A fold that would cost
//!    more than what it replaces is not made.
//! 5. Newer is kept before older: each step takes the oldest candidates first.
//! 6. The budget covers the whole request, counted the way chat APIs count it (see
//!    [`chat_tokens`] for the formula).
//! 7. Rehydration gives the transcript back byte-identical: kept messages as they are, spilled
//!    messages, tool-result contents and folded spans from the store, verified.
//! 8. Appending is the common case: the planner caches token counts and hashes by content, so
//!    re-planning a transcript that grew by one message does not count the prefix again.
//! 9. Provider-opaque parts of an assistant turn (thinking, encrypted reasoning) are counted,
//!    replayed byte-for-byte, never shown to a summarizer, and folded only with their whole
//!    turn (see [`OpaquePart`]). Tool-call arguments are the model's exact text
//!    ([`ToolArguments`]): sent and counted as written.
//!
//! The steps run in this order until the transcript fits: tombstone old tool results, fold old
//! turns (with summaries), drop the summaries of folds (oldest first), stub old user messages.
//! When even then it does not fit, planning fails with [`TranscriptPlanError::OverBudget`]
//! and nothing was changed.
//!
//! # Markers
//!
//! Stubs, tombstones and folds are messages whose content starts with [`MARKER_PREFIX`]. A
//! kept message whose content starts like that (or with [`VERBATIM_ESCAPE`]) is sent with
//! [`VERBATIM_ESCAPE`] in front, so text that imitates a marker is never read as one, by the
//! model or by rehydration.

pub(crate) mod arguments;
pub(crate) mod conversation;
pub(crate) mod count;
pub(crate) mod error;
pub(crate) mod layout;
pub(crate) mod marker;
pub(crate) mod message;
pub(crate) mod opaque;
pub(crate) mod plan;
pub(crate) mod rehydrate;
mod steps;

#[cfg(test)]
mod tests_conversation;
#[cfg(test)]
mod tests_plan;

pub use conversation::{Transcript, TranscriptError};
pub use count::{
    chat_tokens, message_tokens, TranscriptPlanner, MESSAGE_OVERHEAD_TOKENS, NAME_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS, TOOL_CALL_OVERHEAD_TOKENS,
};
pub use error::TranscriptPlanError;
pub use layout::TranscriptPolicy;
pub use marker::{FOLD_LISTED_CALLS, MARKER_PREFIX, VERBATIM_ESCAPE};
pub use message::{
    Message, OpaqueKind, OpaquePart, OpaquePartError, Role, ToolArguments, ToolArgumentsError,
    ToolCall,
};
pub use plan::{FoldSummaryRequest, MessageOutcome, PlannedTranscript, TranscriptPlan};
pub use rehydrate::{
    rehydrate_from_store, rehydrate_transcript, required_blobs, TranscriptRehydrateError,
};
