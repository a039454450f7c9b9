//! [`StreamAssembler`]: Anthropic's streamed Messages reply (`"stream": true`), event by event,
//! as raw server-sent-event bytes split anywhere or as each event's JSON, assembled into the
//! [`AnthropicResponse`] the non-streamed call returns, byte for byte once serialized.
//!
//! The event flow (Anthropic, "Streaming messages"): `message_start` (the message with empty
//! `content`), per block `content_block_start`, its `content_block_delta`s and
//! `content_block_stop`, then `message_delta`s (top-level changes: `stop_reason`,
//! `stop_sequence`, cumulative `usage`) and `message_stop`; `ping`s anywhere; an `error` event
//! ends the stream. Event types this library does not know are skipped anywhere (after
//! `message_stop` too), as Anthropic's versioning policy asks; delta types it does not know are
//! refused on the blocks it models and kept raw on those it does not (see `block.rs`). Shapes
//! and their sources: <https://docs.anthropic.com/en/docs/build-with-claude/streaming>.

mod block;
mod error;

pub use error::AnthropicStreamError;

use crate::integrations::anthropic::wire::{AnthropicResponse, ContentBlock};
use crate::integrations::error_text::ErrorText;
use crate::model_calls::anthropic_stream::block::{BlockBuilder, Delta, Ordered};
use crate::model_calls::sse::{SseDecoder, SseError, SseEvent};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Assembles a streamed Messages API reply into the [`AnthropicResponse`] the same call
/// without `"stream": true` returns: each block's fields as the start event gave them, text
/// and thinking deltas appended exactly, the signature from its `signature_delta`, a
/// `tool_use` block's `input` the joined `input_json_delta` fragments byte for byte (checked to
/// be one JSON object), citations appended to their text block, the stop reason and the
/// cumulative usage from `message_delta`. Blocks of kinds it does not model (server tool use,
/// search results) are kept raw ([`ContentBlock::Other`]) with the deltas above applied, and
/// with a delta type it does not know applied by its members; on the blocks it models, a delta
/// type it does not know is an error, never skipped.
///
/// ```
/// use compaction::anthropic::{ContentBlock, StreamAssembler};
///
/// let stream = concat!(
///     "event: message_start\n",
///     "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",",
///     "\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,",
///     "\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
///     "event: content_block_start\n",
///     "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
///     "event: content_block_delta\n",
///     "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello!\"}}\n\n",
///     "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
///     "event: message_delta\n",
///     "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
///     "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
/// );
/// let mut assembler = StreamAssembler::new();
/// for chunk in stream.as_bytes().chunks(7) {
///     assembler.push_sse(chunk)?; // bytes as they arrive, split anywhere
/// }
/// let reply = assembler.finish()?;
/// assert_eq!(reply.content, vec![ContentBlock::text("Hello!")]);
/// assert_eq!(reply.stop_reason.as_deref(), Some("end_turn"));
/// assert_eq!((reply.usage.input_tokens, reply.usage.output_tokens), (25, 15));
/// # Ok::<(), compaction::anthropic::AnthropicStreamError>(())
/// ```
#[derive(Default)]
pub struct StreamAssembler {
    sse: SseDecoder,
    /// `message_start`'s message, changed by each `message_delta`.
    message: Option<Map<String, Value>>,
    blocks: Vec<BlockBuilder>,
    stopped: bool,
    events: usize,
    /// The first error: every later call returns it again.
    failed: Option<AnthropicStreamError>,
    /// What every error's text goes through (a client's holds its key).
    text: ErrorText,
}

impl std::fmt::Debug for StreamAssembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamAssembler")
            .field("events", &self.events)
            .field("blocks", &self.blocks.len())
            .field("complete", &self.stopped)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct MessageStart {
    message: Map<String, Value>,
}

#[derive(Deserialize)]
struct BlockStart {
    index: usize,
    content_block: Ordered,
}

#[derive(Deserialize)]
struct BlockDelta {
    index: usize,
    delta: Delta,
}

#[derive(Deserialize)]
struct BlockStop {
    index: usize,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: Map<String, Value>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct ErrorEvent {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

impl StreamAssembler {
    /// An assembler waiting for `message_start`.
    pub fn new() -> Self {
        StreamAssembler::default()
    }

    /// An assembler whose errors never hold `text`'s secrets (a client's key): every error
    /// text is scrubbed before it is cut, whichever event it came from.
    // Only the client (`anthropic`) holds a key; `anthropic-types` alone makes none.
    #[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
    pub(crate) fn scrubbing(text: ErrorText) -> Self {
        StreamAssembler {
            text,
            ..StreamAssembler::default()
        }
    }

    /// Refuses any server-sent event of more than `limit` bytes (default 4 MiB) with
    /// [`AnthropicStreamError::EventTooLarge`], as soon as its bytes pass the limit: the reader
    /// never holds an event of any size a server sends. Set it before the first bytes.
    pub fn max_event_bytes(mut self, limit: usize) -> Self {
        self.sse = SseDecoder::with_limit(limit);
        self
    }

    /// Assembles a whole recorded stream (server-sent-event text).
    pub fn assemble(sse: impl AsRef<[u8]>) -> Result<AnthropicResponse, AnthropicStreamError> {
        let mut assembler = StreamAssembler::new();
        assembler.push_sse(sse)?;
        assembler.finish()
    }

    /// Reads the next bytes of the server-sent-event stream, split anywhere (inside a line, a
    /// UTF-8 character or a `\r\n`), and applies every event they complete.
    pub fn push_sse(&mut self, bytes: impl AsRef<[u8]>) -> Result<(), AnthropicStreamError> {
        self.check()?;
        let mut events: Vec<SseEvent> = Vec::new();
        let framed = self.sse.push(bytes.as_ref(), &mut events);
        // Events completed before bad bytes still count, in order.
        for event in events {
            self.guard(|s| s.apply(event.name.as_deref(), &event.data))?;
        }
        framed.map_err(|e| {
            self.fail(match e {
                SseError::NotUtf8 => AnthropicStreamError::NotUtf8,
                SseError::TooLarge { limit } => AnthropicStreamError::EventTooLarge { limit },
            })
        })
    }

    /// Applies one event given as its JSON (the `data:` of one server-sent event, as an SDK or
    /// a log holds it). The text is read as is, so blocks keep their members' order.
    pub fn push_event(&mut self, json: &str) -> Result<(), AnthropicStreamError> {
        self.check()?;
        self.guard(|s| s.apply(None, json))
    }

    /// Applies one event given as a parsed JSON value. A `Value`'s objects hold their keys
    /// sorted (unless serde_json's `preserve_order` is on), so a raw block (thinking, server
    /// tool use) keeps the value's key order, which may differ from the non-streamed reply's
    /// bytes; [`push_event`](Self::push_event) with the event's text keeps them exact.
    pub fn push_value(&mut self, event: &Value) -> Result<(), AnthropicStreamError> {
        self.push_event(&event.to_string())
    }

    /// How many events were applied, `ping`s included: none means nothing of the reply was
    /// read yet (a client may still retry).
    pub fn events(&self) -> usize {
        self.events
    }

    /// Whether `message_stop` arrived: [`finish`](Self::finish) can give the reply.
    pub fn is_complete(&self) -> bool {
        self.stopped && self.failed.is_none()
    }

    /// The reply, once `message_stop` arrived with every block stopped; else
    /// [`AnthropicStreamError::Incomplete`] (or the error the stream already met).
    pub fn finish(mut self) -> Result<AnthropicResponse, AnthropicStreamError> {
        // Already scrubbed and cut when it was met: returned as it is.
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        let text = std::mem::take(&mut self.text);
        self.assemble_reply().map_err(|error| error.scrubbed(&text))
    }

    /// The reply of a stream that met no error so far.
    fn assemble_reply(self) -> Result<AnthropicResponse, AnthropicStreamError> {
        let incomplete = |missing: &str| AnthropicStreamError::Incomplete {
            missing: missing.to_owned(),
        };
        let Some(mut message) = self.message else {
            return Err(incomplete("`message_start`"));
        };
        if !self.stopped {
            return Err(incomplete("`message_stop`"));
        }
        if self.sse.holds_partial_event() {
            return Err(incomplete("the end of its last event"));
        }
        let mut content: Vec<ContentBlock> = Vec::with_capacity(self.blocks.len());
        for block in self.blocks {
            content.push(block.finish()?);
        }
        message.insert("content".to_owned(), Value::Array(Vec::new()));
        let mut response: AnthropicResponse = serde_json::from_value(Value::Object(message))
            .map_err(|e| AnthropicStreamError::Message {
                reason: e.to_string(),
            })?;
        response.content = content;
        Ok(response)
    }

    fn check(&self) -> Result<(), AnthropicStreamError> {
        match &self.failed {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    fn guard(
        &mut self,
        step: impl FnOnce(&mut Self) -> Result<(), AnthropicStreamError>,
    ) -> Result<(), AnthropicStreamError> {
        step(self).map_err(|error| self.fail(error))
    }

    fn fail(&mut self, error: AnthropicStreamError) -> AnthropicStreamError {
        let error = error.scrubbed(&self.text);
        self.failed = Some(error.clone());
        error
    }

    /// One event: `name` is its `event:` line, if any; `data` its JSON.
    fn apply(&mut self, name: Option<&str>, data: &str) -> Result<(), AnthropicStreamError> {
        let event = name.unwrap_or("event").to_owned();
        let kind = serde_json::from_str::<Head>(data)
            .map_err(|e| AnthropicStreamError::BadEvent {
                event: event.clone(),
                reason: e.to_string(),
            })?
            .kind;
        if let Some(name) = name.filter(|name| *name != kind) {
            return Err(AnthropicStreamError::BadEvent {
                event: name.to_owned(),
                reason: format!("its data is a `{kind}` event"),
            });
        }
        self.events += 1;
        let bad = |e: serde_json::Error| AnthropicStreamError::BadEvent {
            event: kind.clone(),
            reason: e.to_string(),
        };
        match kind.as_str() {
            "ping" => return Ok(()),
            "error" => {
                let body = serde_json::from_str::<ErrorEvent>(data).map_err(bad)?.error;
                return Err(AnthropicStreamError::Provider {
                    error_type: body.kind,
                    message: body.message,
                });
            }
            // "Event types": new event types may be added and are to be handled gracefully
            // (https://docs.anthropic.com/en/docs/build-with-claude/streaming): after
            // `message_stop` as before it, an unknown type is skipped; a known one is an error.
            _ if self.stopped => {
                if is_known(&kind) || kind == "message_start" {
                    return Err(AnthropicStreamError::AfterStop { event: kind });
                }
                return Ok(());
            }
            "message_start" => {
                if self.message.is_some() {
                    return Err(AnthropicStreamError::DuplicateStart);
                }
                let message = serde_json::from_str::<MessageStart>(data)
                    .map_err(bad)?
                    .message;
                let empty = match message.get("content") {
                    None | Some(Value::Null) => true,
                    Some(Value::Array(blocks)) => blocks.is_empty(),
                    Some(_) => false,
                };
                if !empty {
                    let reason = "its message already has content".to_owned();
                    return Err(AnthropicStreamError::BadEvent {
                        event: kind,
                        reason,
                    });
                }
                self.message = Some(message);
                return Ok(());
            }
            _ if self.message.is_none() => {
                // Unknown event types are skipped, even first; known ones need the message.
                if is_known(&kind) {
                    return Err(AnthropicStreamError::BeforeStart { event: kind });
                }
                return Ok(());
            }
            _ => {}
        }
        match kind.as_str() {
            "content_block_start" => {
                let start = serde_json::from_str::<BlockStart>(data).map_err(bad)?;
                if start.index != self.blocks.len() {
                    return Err(AnthropicStreamError::OutOfOrder {
                        expected: self.blocks.len(),
                        found: start.index,
                    });
                }
                let block = BlockBuilder::start(start.index, start.content_block)?;
                self.blocks.push(block);
            }
            "content_block_delta" => {
                let delta = serde_json::from_str::<BlockDelta>(data).map_err(bad)?;
                self.open_block(&kind, delta.index)?.apply(delta.delta)?;
            }
            "content_block_stop" => {
                let stop = serde_json::from_str::<BlockStop>(data).map_err(bad)?;
                self.open_block(&kind, stop.index)?.stopped = true;
            }
            "message_delta" => {
                let delta = serde_json::from_str::<MessageDelta>(data).map_err(bad)?;
                let message = self.message.get_or_insert_with(Map::new);
                for (key, value) in delta.delta {
                    message.insert(key, value);
                }
                if let Some(usage) = delta.usage {
                    // The counts are cumulative: each one given replaces the one before.
                    let entry = message
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if !entry.is_object() {
                        *entry = Value::Object(Map::new());
                    }
                    if let Value::Object(current) = entry {
                        current.extend(usage);
                    }
                }
            }
            "message_stop" => {
                if let Some(open) = self.blocks.iter().position(|b| !b.stopped) {
                    return Err(AnthropicStreamError::Incomplete {
                        missing: format!("the `content_block_stop` of block {open}"),
                    });
                }
                self.stopped = true;
            }
            _ => {} // a new event type: skipped, as the provider's versioning policy asks
        }
        Ok(())
    }

    fn open_block(
        &mut self,
        event: &str,
        index: usize,
    ) -> Result<&mut BlockBuilder, AnthropicStreamError> {
        match self.blocks.get_mut(index) {
            None => Err(AnthropicStreamError::UnknownBlock {
                event: event.to_owned(),
                index,
            }),
            Some(block) if block.stopped => Err(AnthropicStreamError::BlockStopped {
                event: event.to_owned(),
                index,
            }),
            Some(block) => Ok(block),
        }
    }
}

/// The event types this assembler reads.
fn is_known(kind: &str) -> bool {
    matches!(
        kind,
        "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "message_delta"
            | "message_stop"
    )
}
