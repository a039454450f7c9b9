//! [`ChatStreamAssembler`]: OpenAI's streamed chat completion (`"stream": true`), chunk by
//! chunk (async-openai's `CreateChatCompletionStreamResponse`, its JSON, or the raw
//! server-sent-event bytes ending in `data: [DONE]`), assembled into the
//! `CreateChatCompletionResponse` the non-streamed call returns: content and refusal deltas
//! joined, tool calls gathered by `index` with their argument fragments joined byte for byte,
//! the finish reason and the usage of the last chunk.

use crate::integrations::error_text::ErrorText;
use crate::model_calls::sse::{SseDecoder, SseError, SseEvent};
use async_openai::types::chat::{
    ChatChoice, ChatChoiceLogprobs, ChatChoiceStream, ChatCompletionMessageToolCall,
    ChatCompletionMessageToolCalls, ChatCompletionResponseMessage, CompletionUsage,
    CreateChatCompletionResponse, CreateChatCompletionStreamResponse, FinishReason, FunctionCall,
    Role, ServiceTier,
};
use std::collections::BTreeMap;

/// Why chat completion chunks did not assemble into a completion. Once an assembler returned
/// one, it returns the same error for every later call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChatStreamError {
    /// The stream's bytes are not UTF-8 text.
    #[error("the chunk stream is not UTF-8 text")]
    NotUtf8,
    /// One server-sent event passed the size limit (4 MiB): refused before it was held whole.
    #[error("a server-sent event of more than {limit} bytes")]
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A chunk that is not a chat completion chunk (not JSON, a field missing), or an error
    /// object the server sent in the stream.
    #[error("a chunk that does not read: {reason}")]
    BadChunk {
        /// What is wrong with it.
        reason: String,
    },
    /// A chunk of another completion (its `id` differs from the first chunk's).
    #[error("a chunk of completion `{found}` in the stream of `{expected}`")]
    MixedStreams {
        /// The first chunk's id.
        expected: String,
        /// The stranger's.
        found: String,
    },
    /// A tool call's first chunk came out of order (calls start at index 0, one after the
    /// other, without gaps), or without its `id` and `name`.
    #[error("choice {choice}: tool call {index} {reason}")]
    ToolCall {
        /// The choice's index.
        choice: u32,
        /// The call's index.
        index: u32,
        /// What is wrong.
        reason: String,
    },
    /// A chunk after `data: [DONE]`.
    #[error("a chunk after `[DONE]`")]
    AfterDone,
    /// The stream ended early: no chunk, a choice without its finish reason, or (raw bytes)
    /// no `[DONE]`.
    #[error("the stream ended before {missing}")]
    Incomplete {
        /// What never came.
        missing: String,
    },
}

impl ChatStreamError {
    /// Whether the same request, made again, may well succeed: a stream that ended early (a
    /// cut connection). Everything else is the stream's content and fails the same way again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ChatStreamError::Incomplete { .. })
    }
}

/// Assembles OpenAI chat completion chunks into the completion the same request without
/// `stream` returns, for [`Session::push_response`](crate::Session::push_response).
///
/// ```
/// use compaction::openai::ChatStreamAssembler;
///
/// let chunks = [
///     r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
///     r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}"#,
///     r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": "}}]},"finish_reason":null}]}"#,
///     r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.rs\"}"}}]},"finish_reason":"tool_calls"}]}"#,
/// ];
/// let mut assembler = ChatStreamAssembler::new();
/// for chunk in chunks {
///     assembler.push_json(chunk)?;
/// }
/// let completion = assembler.finish()?;
/// let message = &completion.choices[0].message;
/// let Some(compaction::openai::async_openai::types::chat::ChatCompletionMessageToolCalls::Function(call)) =
///     message.tool_calls.as_ref().and_then(|calls| calls.first())
/// else {
///     panic!("a function call");
/// };
/// assert_eq!(call.function.arguments, r#"{"path": "a.rs"}"#); // the fragments, byte for byte
/// # Ok::<(), compaction::openai::ChatStreamError>(())
/// ```
#[derive(Default)]
pub struct ChatStreamAssembler {
    sse: SseDecoder,
    head: Option<Head>,
    choices: BTreeMap<u32, Choice>,
    usage: Option<CompletionUsage>,
    done: bool,
    /// Raw bytes were pushed: the stream must end with `[DONE]`.
    framed: bool,
    failed: Option<ChatStreamError>,
    /// What every error's text goes through (a client's holds its key).
    text: ErrorText,
}

impl std::fmt::Debug for ChatStreamAssembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStreamAssembler")
            .field("choices", &self.choices.len())
            .field("done", &self.done)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Head {
    id: String,
    created: u32,
    model: String,
    service_tier: Option<ServiceTier>,
    system_fingerprint: Option<String>,
}

#[derive(Debug, Default)]
struct Choice {
    role: Option<Role>,
    content: Option<String>,
    refusal: Option<String>,
    calls: Vec<Call>,
    finish_reason: Option<FinishReason>,
    logprobs: Option<ChatChoiceLogprobs>,
}

#[derive(Debug)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

impl ChatStreamAssembler {
    /// An assembler waiting for the first chunk.
    pub fn new() -> Self {
        ChatStreamAssembler::default()
    }

    /// An assembler whose errors never hold a client's secrets (`OpenAiClient::chat_stream`).
    #[cfg_attr(not(feature = "openai"), allow(dead_code))]
    pub(crate) fn scrubbing(text: ErrorText) -> Self {
        ChatStreamAssembler {
            text,
            ..ChatStreamAssembler::default()
        }
    }

    /// Reads the next bytes of the server-sent-event stream (`data: {chunk}` events, then
    /// `data: [DONE]`), split anywhere, and applies every chunk they complete.
    pub fn push_sse(&mut self, bytes: impl AsRef<[u8]>) -> Result<(), ChatStreamError> {
        self.check()?;
        self.framed = true;
        let mut events: Vec<SseEvent> = Vec::new();
        let framed = self.sse.push(bytes.as_ref(), &mut events);
        for event in events {
            let step = if event.data == "[DONE]" {
                self.end()
            } else {
                self.chunk_json(&event.data)
            };
            step.map_err(|e| self.fail(e))?;
        }
        framed.map_err(|e| {
            self.fail(match e {
                SseError::NotUtf8 => ChatStreamError::NotUtf8,
                SseError::TooLarge { limit } => ChatStreamError::EventTooLarge { limit },
            })
        })
    }

    /// Applies one chunk given as its JSON text.
    pub fn push_json(&mut self, json: &str) -> Result<(), ChatStreamError> {
        self.check()?;
        self.chunk_json(json).map_err(|e| self.fail(e))
    }

    /// Applies one chunk as async-openai reads it (its `create_stream` items).
    pub fn push(
        &mut self,
        chunk: &CreateChatCompletionStreamResponse,
    ) -> Result<(), ChatStreamError> {
        self.check()?;
        self.apply(chunk).map_err(|e| self.fail(e))
    }

    /// The completion, once every choice has its finish reason (and, for raw bytes, once
    /// `[DONE]` came); else [`ChatStreamError::Incomplete`].
    pub fn finish(self) -> Result<CreateChatCompletionResponse, ChatStreamError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let incomplete = |missing: String| Err(ChatStreamError::Incomplete { missing });
        let Some(head) = self.head else {
            return incomplete("its first chunk".to_owned());
        };
        if self.framed && !self.done {
            return incomplete("`data: [DONE]`".to_owned());
        }
        if self.sse.holds_partial_event() {
            return incomplete("the end of its last event".to_owned());
        }
        if let Some((index, _)) = self.choices.iter().find(|(_, c)| c.finish_reason.is_none()) {
            return incomplete(format!("the finish reason of choice {index}"));
        }
        let choices = self
            .choices
            .into_iter()
            .map(|(index, choice)| choice.finish(index));
        #[allow(deprecated)] // `system_fingerprint` is deprecated, and still sent
        let response = CreateChatCompletionResponse {
            id: head.id,
            choices: choices.collect(),
            created: head.created,
            model: head.model,
            service_tier: head.service_tier,
            system_fingerprint: head.system_fingerprint,
            object: "chat.completion".to_owned(),
            usage: self.usage,
            ..CreateChatCompletionResponse::default()
        };
        Ok(response)
    }

    fn check(&self) -> Result<(), ChatStreamError> {
        match &self.failed {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, error: ChatStreamError) -> ChatStreamError {
        self.failed = Some(error.clone());
        error
    }

    fn end(&mut self) -> Result<(), ChatStreamError> {
        if self.done {
            return Err(ChatStreamError::AfterDone);
        }
        self.done = true;
        Ok(())
    }

    fn chunk_json(&mut self, json: &str) -> Result<(), ChatStreamError> {
        let chunk: CreateChatCompletionStreamResponse =
            serde_json::from_str(json).map_err(|e| {
                // A server reports a failure mid-stream as `{"error": {...}}`: say so.
                let error = serde_json::from_str::<serde_json::Value>(json)
                    .ok()
                    .and_then(|v| v.get("error").map(|e| e.to_string()));
                let reason = match error {
                    Some(error) => {
                        format!("the server sent an error: {}", self.text.excerpt(&error))
                    }
                    None => self.text.excerpt(&e.to_string()),
                };
                ChatStreamError::BadChunk { reason }
            })?;
        self.apply(&chunk)
    }

    fn apply(&mut self, chunk: &CreateChatCompletionStreamResponse) -> Result<(), ChatStreamError> {
        if self.done {
            return Err(ChatStreamError::AfterDone);
        }
        match &self.head {
            Some(head) if head.id != chunk.id => {
                return Err(ChatStreamError::MixedStreams {
                    expected: self.text.excerpt(&head.id),
                    found: self.text.excerpt(&chunk.id),
                })
            }
            Some(_) => {}
            None => {
                #[allow(deprecated)] // `system_fingerprint` is deprecated, and still sent
                let fingerprint = chunk.system_fingerprint.clone();
                self.head = Some(Head {
                    id: chunk.id.clone(),
                    created: chunk.created,
                    model: chunk.model.clone(),
                    service_tier: chunk.service_tier.clone(),
                    system_fingerprint: fingerprint,
                });
            }
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.clone());
        }
        for choice in &chunk.choices {
            self.choices
                .entry(choice.index)
                .or_default()
                .apply(choice)?;
        }
        Ok(())
    }
}

impl Choice {
    fn apply(&mut self, chunk: &ChatChoiceStream) -> Result<(), ChatStreamError> {
        let delta = &chunk.delta;
        if let Some(role) = &delta.role {
            self.role = Some(*role);
        }
        if let Some(text) = &delta.content {
            self.content.get_or_insert_with(String::new).push_str(text);
        }
        if let Some(text) = &delta.refusal {
            self.refusal.get_or_insert_with(String::new).push_str(text);
        }
        for call in delta.tool_calls.iter().flatten() {
            let error = |reason: &str| ChatStreamError::ToolCall {
                choice: chunk.index,
                index: call.index,
                reason: reason.to_owned(),
            };
            let function = call.function.as_ref();
            let fragment = function.and_then(|f| f.arguments.as_deref()).unwrap_or("");
            let name = function.and_then(|f| f.name.as_deref());
            let position = usize::try_from(call.index).unwrap_or(usize::MAX);
            if position == self.calls.len() {
                let id = call.id.as_deref().filter(|id| !id.is_empty());
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(error("starts without its id and name"));
                };
                self.calls.push(Call {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: fragment.to_owned(),
                });
                continue;
            }
            let Some(existing) = self.calls.get_mut(position) else {
                let reason = format!("came where call {} was due", self.calls.len());
                return Err(error(&reason));
            };
            if call
                .id
                .as_deref()
                .is_some_and(|id| !id.is_empty() && id != existing.id)
            {
                return Err(error("changed its id"));
            }
            // Names come whole in the first chunk; a server that splits them is joined too.
            if let Some(name) = name {
                existing.name.push_str(name);
            }
            existing.arguments.push_str(fragment);
        }
        if let Some(reason) = &chunk.finish_reason {
            self.finish_reason = Some(*reason);
        }
        if let Some(logprobs) = &chunk.logprobs {
            let all = self
                .logprobs
                .get_or_insert_with(ChatChoiceLogprobs::default);
            if let Some(content) = &logprobs.content {
                all.content
                    .get_or_insert_with(Vec::new)
                    .extend(content.iter().cloned());
            }
            if let Some(refusal) = &logprobs.refusal {
                all.refusal
                    .get_or_insert_with(Vec::new)
                    .extend(refusal.iter().cloned());
            }
        }
        Ok(())
    }

    fn finish(self, index: u32) -> ChatChoice {
        let calls: Vec<ChatCompletionMessageToolCalls> = self
            .calls
            .into_iter()
            .map(|call| {
                ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                    id: call.id,
                    function: FunctionCall {
                        name: call.name,
                        arguments: call.arguments,
                    },
                })
            })
            .collect();
        let message = ChatCompletionResponseMessage {
            content: self.content,
            refusal: self.refusal,
            tool_calls: (!calls.is_empty()).then_some(calls),
            role: self.role.unwrap_or(Role::Assistant),
            ..ChatCompletionResponseMessage::default()
        };
        ChatChoice {
            index,
            message,
            finish_reason: self.finish_reason,
            logprobs: self.logprobs,
        }
    }
}
