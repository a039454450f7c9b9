//! [`ResponsesStreamAssembler`]: OpenAI's streamed Responses API reply (`"stream": true`), as
//! raw server-sent-event bytes split anywhere or event by event, assembled into the `Response`
//! the same request without `stream` returns (OpenAI's streaming events reference:
//! <https://platform.openai.com/docs/api-reference/responses-streaming>):
//!
//! - `response.output_item.added` opens an output item at its `output_index` (a message, a
//!   function call, a reasoning item with its `encrypted_content`, a compaction item, any type
//!   newer than this library, kept as it came); `response.output_text.delta` and
//!   `response.function_call_arguments.delta` append to its text and arguments byte for byte;
//!   `response.output_item.done` replaces it with the finished item;
//! - `response.completed` ends the stream with the whole response (its `output` the items
//!   read, when it carries none); `response.failed` and `response.incomplete` end it with
//!   their reason, as does an `error` event;
//! - every other event (`response.created`, `response.in_progress`, content part and summary
//!   events, types newer than this library) is skipped.

use crate::integrations::error_text::ErrorText;
use crate::model_calls::sse::{SseDecoder, SseError, SseEvent};
use async_openai::types::responses::Response;
use serde_json::Value;
use std::collections::BTreeMap;

/// Why a Responses event stream did not assemble into a response. Once an assembler returned
/// one, it returns the same error for every later call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponsesStreamError {
    /// The stream's bytes are not UTF-8 text.
    #[error("the event stream is not UTF-8 text")]
    NotUtf8,
    /// One server-sent event passed the size limit (4 MiB).
    #[error("a server-sent event of more than {limit} bytes")]
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// An event that does not read (not JSON, no `type`, a field missing).
    #[error("a `{event}` event that does not read: {reason}")]
    BadEvent {
        /// The event's type.
        event: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server ended the reply with an `error` event, `response.failed` or
    /// `response.incomplete`.
    #[error("the response ended with `{event}`: {reason}")]
    Ended {
        /// The event.
        event: String,
        /// The error's `code` (`server_error`, `rate_limit_exceeded`, ...), when it has one.
        code: Option<String>,
        /// Its error or incompleteness, as the server wrote it (cut, the key replaced).
        reason: String,
    },
    /// An event after the response ended.
    #[error("a `{event}` event after the response ended")]
    AfterEnd {
        /// The event's type.
        event: String,
    },
    /// The stream ended before `response.completed`.
    #[error("the stream ended before `response.completed`")]
    Incomplete,
}

impl ResponsesStreamError {
    /// Whether the same request, made again, may well succeed: a stream that ended early, or
    /// one the server ended with a server-side error (`server_error`, `rate_limit_exceeded`).
    pub fn is_retryable(&self) -> bool {
        match self {
            ResponsesStreamError::Incomplete => true,
            // By the code, never by the message's words (which are cut to 200 characters).
            ResponsesStreamError::Ended {
                code: Some(code), ..
            } => ["server_error", "rate_limit_exceeded", "overloaded"].contains(&code.as_str()),
            _ => false,
        }
    }
}

/// Assembles a streamed Responses API reply into the [`Response`] the non-streamed call
/// returns, for [`Session::push_response`](crate::Session::push_response).
#[derive(Default)]
pub struct ResponsesStreamAssembler {
    sse: SseDecoder,
    /// The output items by `output_index`, as far as read.
    items: BTreeMap<u64, Value>,
    /// `response.completed`'s response.
    completed: Option<Value>,
    failed: Option<ResponsesStreamError>,
    /// What every error's text goes through (a client's holds its key).
    text: ErrorText,
}

impl std::fmt::Debug for ResponsesStreamAssembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesStreamAssembler")
            .field("items", &self.items.len())
            .field("completed", &self.completed.is_some())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl ResponsesStreamAssembler {
    /// An assembler waiting for the first event.
    pub fn new() -> Self {
        ResponsesStreamAssembler::default()
    }

    /// An assembler whose errors never hold a client's secrets.
    #[cfg_attr(not(feature = "openai"), allow(dead_code))]
    pub(crate) fn scrubbing(text: ErrorText) -> Self {
        ResponsesStreamAssembler {
            text,
            ..ResponsesStreamAssembler::default()
        }
    }

    /// Reads the next bytes of the event stream, split anywhere, and applies every event they
    /// complete.
    pub fn push_sse(&mut self, bytes: impl AsRef<[u8]>) -> Result<(), ResponsesStreamError> {
        self.check()?;
        let mut events: Vec<SseEvent> = Vec::new();
        let framed = self.sse.push(bytes.as_ref(), &mut events);
        for event in events {
            if event.data.trim().is_empty() || event.data.trim() == "[DONE]" {
                continue;
            }
            self.push_json(&event.data)?;
        }
        framed.map_err(|e| {
            let error = match e {
                SseError::NotUtf8 => ResponsesStreamError::NotUtf8,
                SseError::TooLarge { limit } => ResponsesStreamError::EventTooLarge { limit },
            };
            self.fail(error)
        })
    }

    /// Applies one event, given as its JSON (its `data`).
    pub fn push_json(&mut self, json: &str) -> Result<(), ResponsesStreamError> {
        self.check()?;
        let applied = serde_json::from_str::<Value>(json)
            .map_err(|e| self.bad("?", &e.to_string()))
            .and_then(|event| self.apply(&event));
        applied.map_err(|e| self.fail(e))
    }

    /// The response, once `response.completed` came; else [`ResponsesStreamError::Incomplete`].
    pub fn finish(self) -> Result<Response, ResponsesStreamError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let Some(mut response) = self.completed else {
            return Err(ResponsesStreamError::Incomplete);
        };
        let carried = response["output"].as_array().is_some_and(|o| !o.is_empty());
        if !carried {
            response["output"] = Value::Array(self.items.into_values().collect());
        }
        let read = serde_json::from_value::<Response>(response.clone()).or_else(|e| {
            // A `usage` block in another shape than async-openai's is not a reason to lose the
            // reply (as for the non-streamed call).
            let mut bare = response;
            bare.as_object_mut().and_then(|o| o.remove("usage"));
            serde_json::from_value::<Response>(bare).map_err(|_| e)
        });
        read.map_err(|e| ResponsesStreamError::BadEvent {
            event: "response.completed".into(),
            reason: self.text.excerpt(&e.to_string()),
        })
    }

    fn apply(&mut self, event: &Value) -> Result<(), ResponsesStreamError> {
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        if self.completed.is_some() {
            return Err(ResponsesStreamError::AfterEnd {
                event: self.text.excerpt(&kind),
            });
        }
        let index = || {
            event["output_index"]
                .as_u64()
                .ok_or_else(|| self.bad(&kind, "no output_index"))
        };
        let delta = || {
            event["delta"]
                .as_str()
                .ok_or_else(|| self.bad(&kind, "no delta text"))
        };
        match kind.as_str() {
            "response.output_item.added" | "response.output_item.done" => {
                let item = event.get("item").filter(|i| i.is_object());
                let item = item.ok_or_else(|| self.bad(&kind, "no item"))?;
                self.items.insert(index()?, item.clone());
            }
            "response.output_text.delta" => {
                let (at, text) = (index()?, delta()?);
                let part = event["content_index"].as_u64().unwrap_or(0) as usize;
                let item = self.item(at, &kind)?;
                let content = item["content"].as_array_mut();
                let Some(content) = content else {
                    return Err(self.bad(&kind, "its item has no content"));
                };
                while content.len() <= part {
                    content.push(
                        serde_json::json!({"type": "output_text", "text": "", "annotations": []}),
                    );
                }
                append(&mut content[part]["text"], text);
            }
            "response.function_call_arguments.delta" => {
                let (at, text) = (index()?, delta()?);
                append(&mut self.item(at, &kind)?["arguments"], text);
            }
            "response.completed" => {
                let response = event.get("response").filter(|r| r.is_object());
                let response = response.ok_or_else(|| self.bad(&kind, "no response"))?;
                self.completed = Some(response.clone());
            }
            "response.failed" | "response.incomplete" | "error" => {
                let response = &event["response"];
                let why = match kind.as_str() {
                    "response.failed" => &response["error"],
                    "response.incomplete" => &response["incomplete_details"],
                    _ => event,
                };
                let code = why["code"].as_str().map(|c| self.text.excerpt(c));
                return Err(ResponsesStreamError::Ended {
                    event: kind.clone(),
                    code,
                    reason: self.text.excerpt(&why.to_string()),
                });
            }
            // Created, in progress, content parts, summaries, `.done` of texts and arguments
            // (their text is the deltas'), types newer than this library.
            _ => {}
        }
        Ok(())
    }

    /// The item at `index`, opened by an earlier `output_item.added`.
    fn item(&mut self, index: u64, kind: &str) -> Result<&mut Value, ResponsesStreamError> {
        if !self.items.contains_key(&index) {
            return Err(self.bad(kind, &format!("output item {index} was never added")));
        }
        Ok(self.items.get_mut(&index).expect("checked above"))
    }

    fn bad(&self, event: &str, reason: &str) -> ResponsesStreamError {
        ResponsesStreamError::BadEvent {
            event: self.text.excerpt(event),
            reason: self.text.excerpt(reason),
        }
    }

    fn check(&self) -> Result<(), ResponsesStreamError> {
        match &self.failed {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, error: ResponsesStreamError) -> ResponsesStreamError {
        self.failed = Some(error.clone());
        error
    }
}

/// `text` appended to the string `field` (made one when absent).
fn append(field: &mut Value, text: &str) {
    match field {
        Value::String(held) => held.push_str(text),
        other => *other = Value::String(text.to_owned()),
    }
}
