//! Transcripts: the conversation with the model as typed, pair-safe, lossless state.
//!
//! A [`Transcript`] is the list of [`Message`]s an agent sends to a chat API. Compaction makes
//! each request fit a token budget without ever breaking what the API and the agent rely on,
//! and keeps consecutive requests identical as far as it can, so a provider's prompt cache
//! serves them.
//!
//! # The rules
//!
//! 1. **Anchors stay verbatim, in place, whatever the budget**: system and developer messages
//!    (pinned); a unit (an assistant message with calls, and their results) whose effect is
//!    live in its ledger (`not_started` or `unknown`: see [`EffectStatuses`], looked up by scope
//!    and key, never by key alone), or whose calls still wait for results; and every *pending*
//!    user message (one no assistant message has followed yet). Nothing ever says a pending
//!    message was answered. A tool result of an anchor may still be paged (rule 5).
//! 2. **User messages are never summarized.** The last `keep_recent` user turns are the last to
//!    be compacted. An older user message leaves, when its turn is folded, into its block's
//!    **user run**: one marker per range of user messages (first and last index, count, bytes,
//!    one handle), every message byte-exact in the store and readable by index through the
//!    pointer tool ([`crate::pointer_tool`]) and `Compactor::resolve_message`. With `pin_user`
//!    they stay verbatim above their fold instead.
//! 3. **A tool call and its result are one unit on the wire**: compaction never sends a call
//!    without its result or a result without its call. The first thing to go is the *content*
//!    of old tool results, oldest first: stored verbatim and replaced, inside a tool message
//!    with the same `tool_call_id`, by a **tombstone** naming its size and handle.
//! 4. **Then whole old turns fold**, oldest first, into a **block**: a contiguous range of input
//!    messages, stored in chunks, shown as its user run (rule 2) and a **fold** (role assistant)
//!    for its assistant and tool messages: a summary when a summarizer is configured (it never
//!    sees user messages, effect keys or scopes), else the handle and the calls it folded.
//!    Anchors inside the range stay in place between the markers. A block's range ends at a
//!    unit boundary, never between a call and its results.
//! 5. **Paging instead of refusing.** A tool result in the recent turns that does not fit is
//!    sent as a head and a tail excerpt sized to what the limit leaves, with its handle and the
//!    byte ranges shown: the model reads the rest page by page through `resolve_pointer` with an
//!    offset. The report names every paged result. With `page_results_over` (a `Session` turns
//!    it on:
//!    [`SESSION_PAGE_RESULTS_OVER`](crate::compactor::SESSION_PAGE_RESULTS_OVER)), a new result over that share of the budget is
//!    paged when it arrives, at an append as at a compaction point, so one large result does
//!    not use up the room between the marks.
//! 6. **Forms only move forward** (issue 22.3): kept, then paged, tombstoned, folded. Once a
//!    message left, later requests keep it that way; new blocks come after the old ones. When
//!    more than [`MAX_BLOCKS`] blocks pile up (or the limit needs it), they are consolidated into
//!    one (their chunks are listed again, never rewritten), so the smallest form has a bounded
//!    number of markers whatever the history's length.
//! 7. **Hysteresis** (see [`TranscriptBudget`]): while the request, grown by the new messages,
//!    stays under the high-water mark, it is the previous request plus the new messages (the
//!    previous request is an exact prefix of it); past the mark, one **compaction point** brings
//!    it down to about the low-water mark. The limit is hard either way.
//! 8. **Newer is kept before older**: each step takes the oldest candidates first.
//! 9. **The budget covers the whole request**, counted the way the wire format counts it
//!    ([`ChatFormat`]; by default [`OpenAiChat`], whose formula [`chat_tokens`] applies),
//!    each message priced as a turn of its own (an upper bound where the format merges turns).
//!    Text is counted newest first and only as far as a decision needs it: a message that
//!    will be folded is hashed and stored, never tokenized.
//! 10. **Refused only when the smallest form does not fit**: pinned messages and anchors, the
//!     blocks' markers (consolidated, without summaries), the newest user message and what
//!     follows it (tool results paged to their note). That form does not depend on the budget,
//!     so a budget that compacts stays working at every larger budget.
//! 11. **Rehydration gives the transcript back byte-identical**: kept messages as they are,
//!     tombstoned and paged contents, user runs and folds from the store, verified.
//! 12. **Appending is the common case**: the planner remembers the request it planned for a
//!     transcript ([`TranscriptMemory`]: what each message of the request stands for, the
//!     blocks, the handles) and recognizes the transcript grown by appends through its hash
//!     chain; the next plan costs the new messages plus the request sent. A checkpoint carries
//!     the memory, so a restarted process plans the next request exactly as the warm one.
//! 13. **Provider-opaque parts** of an assistant turn (thinking, encrypted reasoning) are
//!     counted, replayed byte-for-byte, never shown to a summarizer, never separated from their
//!     assistant message (a tombstone or page only replaces a tool result's content), and
//!     folded only with the whole message, then stored in its block's span (see
//!     [`OpaquePart`]). Tool-call arguments are the model's exact text ([`ToolArguments`]):
//!     sent and counted as written.
//!
//! The steps of a compaction point run in this order until the request fits: (soft, towards
//! the low-water mark) tombstone old tool results, or, when even every old result tombstoned
//! does not fit, fold the oldest turns into a new block; then page the recent turns' tool
//! results the model has already read (sent before, not anchors), oldest first, so the point
//! really reaches the low-water mark and the next steps find room to append; (hard, under the
//! limit) drop the new
//! block's summary; consolidate every block without summaries; tombstone, then fold, the recent
//! turns older than the newest user message; page the tool results still kept. When even then
//! the request does not fit, planning fails with [`TranscriptPlanError::OverBudget`], whose
//! `required_tokens` is the smallest form's size, and nothing was changed.
//!
//! # Markers and handles
//!
//! Tombstones, pages, user runs, folds and state updates are messages whose content starts with
//! [`MARKER_PREFIX`]; they name what they stand for by a short [`Handle`] (`p17`), mapped to its
//! full content address by the [`HandleTable`] a checkpoint keeps. A kept message whose first
//! *visible* character is `⟦` (after whitespace, newlines, a BOM, zero-width and other format
//! characters) is sent with [`VERBATIM_ESCAPE`] in front, so text that imitates a marker is
//! never read as one, by the model or by rehydration.
//!
//! # Public names
//!
//! [`Transcript`], [`Message`], [`Role`], [`ToolCall`] (with [`ToolCall::with_effect_in`]),
//! [`ToolArguments`], [`OpaquePart`], [`TranscriptError`]; the planner [`TranscriptPlanner`] with [`TranscriptPolicy`],
//! [`TranscriptBudget`], [`EffectStatuses`], [`TranscriptPlan`], [`FoldSummaryRequest`],
//! [`PlannedTranscript`], [`MessageOutcome`], [`OutcomeCounts`], [`TranscriptMemory`],
//! [`TranscriptPlanError`]; [`Handle`] and [`HandleTable`]; the way back
//! [`rehydrate_transcript`], [`rehydrate_from_store`], [`required_blobs`],
//! [`TranscriptRehydrateError`]; the wire-format seam [`ChatFormat`] with [`OpenAiChat`] (the
//! default), [`AnthropicMessages`] and [`SystemPlacement`]; the OpenAI chat formula
//! [`chat_tokens`], [`message_tokens`]; [`MARKER_PREFIX`], [`VERBATIM_ESCAPE`],
//! [`FOLD_LISTED_CALLS`], [`MAX_BLOCKS`], [`REMEMBERED`].

pub(crate) mod arguments;
pub(crate) mod build;
pub(crate) mod conversation;
pub(crate) mod count;
pub(crate) mod effects;
pub(crate) mod error;
pub(crate) mod format;
pub(crate) mod layout;
pub(crate) mod marker;
pub(crate) mod memories;
pub(crate) mod memory;
pub(crate) mod message;
pub(crate) mod opaque;
pub(crate) mod page;
pub(crate) mod plan;
pub(crate) mod planner;
pub(crate) mod policy;
pub(crate) mod rehydrate;
pub(crate) mod span;
pub(crate) mod steps;
pub(crate) mod tally;

#[cfg(test)]
mod tests_conversation;
#[cfg(test)]
mod tests_plan;

pub use conversation::{Transcript, TranscriptError};
pub use count::{chat_tokens, message_tokens};
pub use effects::{AmbiguousKey, EffectStatuses};
pub use error::TranscriptPlanError;
pub use format::{AnthropicMessages, ChatFormat, OpenAiChat, SystemPlacement};
pub use marker::{FOLD_LISTED_CALLS, MARKER_PREFIX, VERBATIM_ESCAPE};
pub use memories::{TranscriptPlanner, REMEMBERED};
pub use memory::{Handle, HandleParseError, HandleTable, HandleTableError, TranscriptMemory};
pub use message::{
    Message, OpaqueKind, OpaquePart, OpaquePartError, Role, ToolArguments, ToolArgumentsError,
    ToolCall,
};
pub use plan::{
    FoldSummaryRequest, MessageOutcome, OutcomeCounts, PlannedTranscript, TranscriptBudget,
    TranscriptPlan,
};
pub use policy::TranscriptPolicy;
pub use rehydrate::{
    rehydrate_from_store, rehydrate_transcript, required_blobs, TranscriptRehydrateError,
};
pub use steps::MAX_BLOCKS;
