//! `AnthropicStreamError`: why a stream of Messages API events did not make a reply.

/// Why a stream of Anthropic Messages API events did not assemble into an
/// [`AnthropicResponse`](crate::anthropic::AnthropicResponse). Once an assembler returned one,
/// it returns the same error for every later call: a stream is never half-read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnthropicStreamError {
    /// The stream's bytes are not UTF-8 text.
    #[error("the event stream is not UTF-8 text")]
    NotUtf8,
    /// An event that is not what its type says: not JSON, a field missing or of the wrong
    /// kind, or an `event:` name other than its data's `type`.
    #[error("a `{event}` event that does not read: {reason}")]
    BadEvent {
        /// The event's type (or `event:` name).
        event: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The provider ended the stream with an `error` event (`overloaded_error` is the
    /// streamed form of HTTP 529).
    #[error("the provider sent an error event: {error_type}: {message}")]
    Provider {
        /// The error's `type` (`overloaded_error`, `api_error`, ...).
        error_type: String,
        /// Its `message` (at most 200 characters).
        message: String,
    },
    /// An event before `message_start`.
    #[error("a `{event}` event arrived before `message_start`")]
    BeforeStart {
        /// The event's type.
        event: String,
    },
    /// A second `message_start`.
    #[error("a second `message_start` event")]
    DuplicateStart,
    /// A `content_block_start` out of order: blocks start at index 0, one after the other,
    /// without gaps or repeats.
    #[error("block {found} started where block {expected} was due (blocks start in order, without gaps)")]
    OutOfOrder {
        /// The index due.
        expected: usize,
        /// The index that came.
        found: usize,
    },
    /// A delta or stop for a block never started.
    #[error("a `{event}` event for block {index}, which was never started")]
    UnknownBlock {
        /// The event's type.
        event: String,
        /// The block's index.
        index: usize,
    },
    /// A delta or stop for a block that already stopped.
    #[error("a `{event}` event for block {index}, which already stopped")]
    BlockStopped {
        /// The event's type.
        event: String,
        /// The block's index.
        index: usize,
    },
    /// A delta the block cannot take (a `text_delta` on a `tool_use` block, say).
    #[error("block {index} (`{block}`) cannot take a `{delta}`")]
    DeltaMismatch {
        /// The block's index.
        index: usize,
        /// The block's type.
        block: String,
        /// The delta's type.
        delta: String,
    },
    /// A delta type this library does not know: applying it blindly could change the reply,
    /// so the stream is refused rather than assembled wrong.
    #[error("block {index}: unknown delta type `{delta}`")]
    UnknownDelta {
        /// The block's index.
        index: usize,
        /// The delta's type.
        delta: String,
    },
    /// The `input_json_delta` fragments of a block, joined, are not one JSON object.
    #[error("block {index}: the streamed tool input is not one JSON object: {reason}")]
    ToolInput {
        /// The block's index.
        index: usize,
        /// Why.
        reason: String,
    },
    /// A block, once whole, is not a valid content block (a thinking block without its
    /// signature, say).
    #[error("block {index} is not a valid content block: {reason}")]
    Block {
        /// The block's index.
        index: usize,
        /// Why.
        reason: String,
    },
    /// An event after `message_stop` (other than `ping`).
    #[error("a `{event}` event after `message_stop`")]
    AfterStop {
        /// The event's type.
        event: String,
    },
    /// The stream ended early: before `message_stop`, with a block not stopped, or in the
    /// middle of an event.
    #[error("the stream ended before {missing}")]
    Incomplete {
        /// What never came.
        missing: String,
    },
    /// The message the events describe is not a Messages API reply (no `id`, say).
    #[error("the streamed message is not a Messages API reply: {reason}")]
    Message {
        /// Why.
        reason: String,
    },
}

/// The start of a provider's text, at most 200 characters, for an error value.
pub(super) fn short(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
