//! `AnthropicStreamError`: why a stream of Messages API events did not make a reply.

use crate::integrations::error_text::ErrorText;

/// Why a stream of Anthropic Messages API events did not assemble into an
/// [`AnthropicResponse`](crate::anthropic::AnthropicResponse). Once an assembler returned one,
/// it returns the same error for every later call: a stream is never half-read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnthropicStreamError {
    /// The stream's bytes are not UTF-8 text.
    #[error("the event stream is not UTF-8 text")]
    NotUtf8,
    /// One server-sent event passed the assembler's size limit
    /// ([`StreamAssembler::max_event_bytes`](crate::anthropic::StreamAssembler::max_event_bytes),
    /// 4 MiB by default): refused before it was held whole.
    #[error("a server-sent event of more than {limit} bytes (the assembler's max_event_bytes)")]
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
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
        /// Its `message` (at most 200 characters, the client's key replaced).
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
    /// An event of a type this library reads (`message_start`, a block or message event) after
    /// `message_stop`; `ping` and event types it does not know are skipped there too.
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

/// The `error` event types of a failure on the provider's side, worth the same call again:
/// `overloaded_error` (HTTP 529), `api_error` (500) and `rate_limit_error` (429), as
/// Anthropic's error reference lists them (<https://docs.claude.com/en/api/errors>; a stream
/// carries the same types in its `error` event once the 200 was sent).
const RETRYABLE_TYPES: [&str; 3] = ["overloaded_error", "api_error", "rate_limit_error"];

impl AnthropicStreamError {
    /// Whether the same request, made again, may well succeed: the provider's `error` event of
    /// an overload, a server error or a rate limit, or a stream that ended early (a cut
    /// connection). Everything else is the stream's content (malformed events, events out of
    /// order, a request the provider refused) and fails the same way again.
    pub fn is_retryable(&self) -> bool {
        match self {
            AnthropicStreamError::Provider { error_type, .. } => {
                RETRYABLE_TYPES.contains(&error_type.as_str())
            }
            AnthropicStreamError::Incomplete { .. } => true,
            _ => false,
        }
    }

    /// This error with every text it holds (all of it from the server's bytes, or quoting
    /// them) through [`ErrorText::excerpt`]: the assembler's secrets replaced, then cut. Every
    /// error leaves the assembler through here, so no variant is built with raw text.
    pub(super) fn scrubbed(self, text: &ErrorText) -> Self {
        let x = |s: String| text.excerpt(&s);
        use AnthropicStreamError as E;
        match self {
            E::BadEvent { event, reason } => E::BadEvent {
                event: x(event),
                reason: x(reason),
            },
            E::Provider {
                error_type,
                message,
            } => E::Provider {
                error_type: x(error_type),
                message: x(message),
            },
            E::BeforeStart { event } => E::BeforeStart { event: x(event) },
            E::UnknownBlock { event, index } => E::UnknownBlock {
                event: x(event),
                index,
            },
            E::BlockStopped { event, index } => E::BlockStopped {
                event: x(event),
                index,
            },
            E::DeltaMismatch {
                index,
                block,
                delta,
            } => E::DeltaMismatch {
                index,
                block: x(block),
                delta: x(delta),
            },
            E::UnknownDelta { index, delta } => E::UnknownDelta {
                index,
                delta: x(delta),
            },
            E::ToolInput { index, reason } => E::ToolInput {
                index,
                reason: x(reason),
            },
            E::Block { index, reason } => E::Block {
                index,
                reason: x(reason),
            },
            E::AfterStop { event } => E::AfterStop { event: x(event) },
            E::Incomplete { missing } => E::Incomplete {
                missing: x(missing),
            },
            E::Message { reason } => E::Message { reason: x(reason) },
            other @ (E::NotUtf8
            | E::EventTooLarge { .. }
            | E::DuplicateStart
            | E::OutOfOrder { .. }) => other,
        }
    }
}
