//! Conversions both ways between our `Message`/`Transcript` and async-openai's chat request
//! messages; what cannot be represented is a typed error, never dropped.

use crate::checkpoint::Compacted;
use crate::conversation::message::ToolArguments;
use crate::conversation::transcript::{Message, Role, ToolCall, Transcript, TranscriptError};
use crate::pointer_tool::definition::{
    resolve_pointer_parameters, RESOLVE_POINTER, RESOLVE_POINTER_DESCRIPTION,
};
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestAssistantMessageContentPart, ChatCompletionRequestDeveloperMessage,
    ChatCompletionRequestDeveloperMessageContent, ChatCompletionRequestDeveloperMessageContentPart,
    ChatCompletionRequestMessage, ChatCompletionRequestMessageContentPartText,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestSystemMessageContent,
    ChatCompletionRequestSystemMessageContentPart, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestToolMessageContentPart,
    ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent,
    ChatCompletionRequestUserMessageContentPart, ChatCompletionResponseMessage, ChatCompletionTool,
    ChatCompletionTools, FunctionCall, FunctionObject, Role as OpenAiRole,
};

/// Why a message could not be converted. `index` is the message's position in the list
/// converted (0 for a single message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenAiMessageError {
    /// The async-openai message holds something our `Message` cannot carry (image, audio or
    /// file parts, several content parts, a refusal, a custom tool call, the deprecated function
    /// message or `function_call`, a prompt cache breakpoint, response annotations). Refused
    /// rather than dropped.
    #[error("message {index}: a {role} message with {what} cannot be represented")]
    Unsupported {
        /// The message.
        index: usize,
        /// Its role.
        role: &'static str,
        /// What it holds.
        what: &'static str,
    },
    /// A tool call's `arguments` text is not one JSON value (ours are JSON text, kept byte for
    /// byte: see [`ToolArguments`]).
    #[error("message {index}: the arguments of call `{call_id}` are not JSON: {reason}")]
    ArgumentsNotJson {
        /// The assistant message.
        index: usize,
        /// The call.
        call_id: String,
        /// The parser's message.
        reason: String,
    },
    /// Our message cannot be sent: a tool message without `tool_call_id`.
    #[error("message {index}: tool message without a tool_call_id")]
    ToolMessageWithoutCallId {
        /// The message.
        index: usize,
    },
    /// Our message cannot be sent: tool calls on a message that is not an assistant message,
    /// a `tool_call_id` on one that is not a tool message, or a name on a tool message.
    #[error("message {index}: a {role} message cannot carry {what} on the wire")]
    NotSendable {
        /// The message.
        index: usize,
        /// Its role.
        role: &'static str,
        /// The field (`tool_calls`, `tool_call_id`, `name`, `opaque parts`).
        what: &'static str,
    },
    /// The messages break a pairing rule of [`Transcript::validate`].
    #[error("invalid transcript: {0}")]
    Invalid(#[from] TranscriptError),
}

/// Our message as an async-openai request message. An assistant message with tool calls and
/// empty text is sent without content, as the API expects. `ToolCall::effect` is our own
/// bookkeeping (the effect record a call performs) and is not sent. Provider-opaque parts
/// (Anthropic thinking, Responses reasoning) have no place in a chat completions request: a
/// message with any is `NotSendable` (`what: "opaque parts"`), never sent without them.
pub fn to_openai_message(
    message: &Message,
) -> Result<ChatCompletionRequestMessage, OpenAiMessageError> {
    message_to_openai(message, 0, Opaque::Refuse)
}

/// Our messages as async-openai request messages, one by one (pairing is not checked: use
/// [`Transcript::to_openai_messages`] for a whole conversation).
pub fn to_openai_messages(
    messages: &[Message],
) -> Result<Vec<ChatCompletionRequestMessage>, OpenAiMessageError> {
    messages
        .iter()
        .enumerate()
        .map(|(index, message)| message_to_openai(message, index, Opaque::Refuse))
        .collect()
}

/// An async-openai request message as ours; what ours cannot carry is `Unsupported`.
pub fn from_openai_message(
    message: &ChatCompletionRequestMessage,
) -> Result<Message, OpenAiMessageError> {
    message_from_openai(message, 0)
}

/// async-openai request messages as ours, one by one (pairing is not checked: use
/// [`Transcript::from_openai_messages`] for a whole conversation).
pub fn from_openai_messages(
    messages: &[ChatCompletionRequestMessage],
) -> Result<Vec<Message>, OpenAiMessageError> {
    messages
        .iter()
        .enumerate()
        .map(|(index, message)| message_from_openai(message, index))
        .collect()
}

/// The model's reply (`choices[0].message` of a chat completion) as our assistant message, to
/// push onto the transcript. A refusal, audio, annotations or a custom tool call are
/// `Unsupported`.
#[allow(deprecated)] // `function_call` is read only to refuse it.
pub fn from_openai_response_message(
    message: &ChatCompletionResponseMessage,
) -> Result<Message, OpenAiMessageError> {
    let unsupported = |what| unsupported(0, Role::Assistant, what);
    if message.role != OpenAiRole::Assistant {
        return Err(unsupported("a role other than assistant"));
    }
    if message.refusal.is_some() {
        return Err(unsupported("a refusal"));
    }
    if message.audio.is_some() {
        return Err(unsupported("audio"));
    }
    if message.function_call.is_some() {
        return Err(unsupported("a function_call (deprecated)"));
    }
    if message.annotations.as_ref().is_some_and(|a| !a.is_empty()) {
        return Err(unsupported("annotations"));
    }
    let calls = calls_from_openai(message.tool_calls.as_deref(), 0)?;
    Ok(Message::assistant_with_tools(
        message.content.clone().unwrap_or_default(),
        calls,
    ))
}

/// Our tool call as async-openai's: a function call whose arguments are the exact text the
/// model wrote ([`ToolCall::arguments_text`]), byte for byte.
pub fn tool_call_to_openai(call: &ToolCall) -> ChatCompletionMessageToolCalls {
    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
        id: call.id.clone(),
        function: FunctionCall {
            name: call.name.clone(),
            arguments: call.arguments_text().to_owned(),
        },
    })
}

/// async-openai's tool call as ours: a function call whose arguments are JSON, kept as the exact
/// text (see [`ToolArguments`]). A custom tool call is `Unsupported`; arguments that are not
/// one JSON value (a reply cut at its token limit, say) are `ArgumentsNotJson`: they are never
/// carried, since no format we send has a place for them.
pub fn tool_call_from_openai(
    call: &ChatCompletionMessageToolCalls,
) -> Result<ToolCall, OpenAiMessageError> {
    call_from_openai(call, 0)
}

/// The `resolve_pointer` tool (see [`crate::pointer_tool`]) as async-openai's tool type, for the
/// `tools` of a request.
pub fn resolve_pointer_chat_tool() -> ChatCompletionTools {
    ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: RESOLVE_POINTER.to_owned(),
            description: Some(RESOLVE_POINTER_DESCRIPTION.to_owned()),
            parameters: Some(resolve_pointer_parameters()),
            strict: None,
        },
    })
}

impl Transcript {
    /// The transcript as async-openai request messages, after checking it
    /// ([`validate`](Transcript::validate)): a request that would be rejected for an orphaned
    /// call or result is refused here.
    pub fn to_openai_messages(
        &self,
    ) -> Result<Vec<ChatCompletionRequestMessage>, OpenAiMessageError> {
        self.validate()?;
        to_openai_messages(self.messages())
    }

    /// A transcript from async-openai request messages, converted and validated.
    pub fn from_openai_messages(
        messages: &[ChatCompletionRequestMessage],
    ) -> Result<Transcript, OpenAiMessageError> {
        Ok(Transcript::from_messages(from_openai_messages(messages)?)?)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "openai-types")))]
impl<S> Compacted<S> {
    /// [`messages`](Compacted::messages) as async-openai request messages: the window's system
    /// message, then the transcript's kept, stubbed, tombstoned and folded messages. The list
    /// is infallible: a `Compacted`'s messages were checked like [`Transcript::validate`] when
    /// it was made or loaded (no orphaned call or result, no field the wire has no place for).
    ///
    /// Provider-opaque parts ([`Message::opaque`]: another API's thinking or encrypted
    /// reasoning) are left out of this request, since chat completions has no field for them;
    /// they stay in the checkpoint and the transcript. [`to_openai_messages`] refuses them
    /// instead.
    ///
    /// ```
    /// use compaction::openai::async_openai::types::chat::ChatCompletionRequestMessage;
    /// use compaction::{Compactable, Compactor, Message, Transcript};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize)]
    /// struct Agent {
    ///     #[protected]
    ///     customer: String,
    ///     #[transcript]
    ///     chat: Transcript,
    /// }
    ///
    /// let mut chat = Transcript::new();
    /// chat.push(Message::user("refund order 42"));
    /// let agent = Agent { customer: "cus_9".into(), chat };
    /// let compactor = Compactor::builder().budget(2_000).build()?;
    /// let request: Vec<ChatCompletionRequestMessage> =
    ///     compactor.compact_blocking(&agent)?.openai_messages();
    /// assert!(matches!(request[0], ChatCompletionRequestMessage::System(_)));
    /// assert!(matches!(request[1], ChatCompletionRequestMessage::User(_)));
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn openai_messages(&self) -> Vec<ChatCompletionRequestMessage> {
        let window = Message::system(self.render());
        let messages = std::iter::once(&window).chain(self.transcript_messages());
        // Every message converts: the window's is a plain system message, and the transcript's
        // passed `validate_messages` (compaction output, or `CompactedTranscript`'s
        // deserialization), which refuses each shape `message_to_openai` cannot send. The
        // messages are converted where they are, not through a copy from `messages()`.
        let request: Vec<ChatCompletionRequestMessage> = messages
            .enumerate()
            .filter_map(|(index, message)| message_to_openai(message, index, Opaque::LeaveOut).ok())
            .collect();
        debug_assert_eq!(
            request.len(),
            1 + self.transcript_messages().len(),
            "a checked message did not convert"
        );
        request
    }
}

fn unsupported(index: usize, role: Role, what: &'static str) -> OpenAiMessageError {
    OpenAiMessageError::Unsupported {
        index,
        role: role.as_str(),
        what,
    }
}

fn not_sendable(index: usize, role: Role, what: &'static str) -> OpenAiMessageError {
    OpenAiMessageError::NotSendable {
        index,
        role: role.as_str(),
        what,
    }
}

/// What a conversion does with a message's provider-opaque parts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Opaque {
    /// `NotSendable`: the caller asked for this message as it is.
    Refuse,
    /// Not sent (documented on `Compacted::openai_messages`).
    LeaveOut,
}

pub(super) fn message_to_openai(
    message: &Message,
    index: usize,
    opaque: Opaque,
) -> Result<ChatCompletionRequestMessage, OpenAiMessageError> {
    let role = message.role;
    if opaque == Opaque::Refuse && !message.opaque.is_empty() {
        return Err(not_sendable(index, role, "opaque parts"));
    }
    if role != Role::Assistant && !message.tool_calls.is_empty() {
        return Err(not_sendable(index, role, "tool_calls"));
    }
    if role != Role::Tool && message.tool_call_id.is_some() {
        return Err(not_sendable(index, role, "tool_call_id"));
    }
    let text = message.content.clone();
    let name = message.name.clone();
    Ok(match role {
        Role::System => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(text),
            name,
        }),
        Role::Developer => {
            ChatCompletionRequestMessage::Developer(ChatCompletionRequestDeveloperMessage {
                content: ChatCompletionRequestDeveloperMessageContent::Text(text),
                name,
            })
        }
        Role::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(text),
            name,
        }),
        Role::Assistant => {
            let calls = &message.tool_calls;
            // The API wants no content (not "") on a message that only calls tools.
            let content = (!text.is_empty() || calls.is_empty())
                .then_some(ChatCompletionRequestAssistantMessageContent::Text(text));
            let tool_calls =
                (!calls.is_empty()).then(|| calls.iter().map(tool_call_to_openai).collect());
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content,
                name,
                tool_calls,
                ..Default::default()
            })
        }
        Role::Tool => {
            if name.is_some() {
                return Err(not_sendable(index, role, "name"));
            }
            let Some(call_id) = message.tool_call_id.clone() else {
                return Err(OpenAiMessageError::ToolMessageWithoutCallId { index });
            };
            ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
                content: ChatCompletionRequestToolMessageContent::Text(text),
                tool_call_id: call_id,
            })
        }
    })
}

/// The text of array content. One plain text part (no cache breakpoint) is the only array ours
/// can carry without changing what the model reads; a part that is not text is `Err(what)`.
fn array_text<'a>(
    parts: impl IntoIterator<
        Item = Result<&'a ChatCompletionRequestMessageContentPartText, &'static str>,
    >,
    index: usize,
    role: Role,
) -> Result<String, OpenAiMessageError> {
    let mut texts = Vec::new();
    for part in parts {
        texts.push(part.map_err(|what| unsupported(index, role, what))?);
    }
    match texts.as_slice() {
        [] => Ok(String::new()),
        [part] if part.prompt_cache_breakpoint.is_none() => Ok(part.text.clone()),
        [_] => Err(unsupported(index, role, "a prompt cache breakpoint")),
        _ => Err(unsupported(index, role, "several content parts")),
    }
}

#[allow(deprecated)] // `function_call` is read only to refuse it.
fn message_from_openai(
    message: &ChatCompletionRequestMessage,
    index: usize,
) -> Result<Message, OpenAiMessageError> {
    use ChatCompletionRequestUserMessageContentPart as UserPart;
    Ok(match message {
        ChatCompletionRequestMessage::System(m) => {
            let content = match &m.content {
                ChatCompletionRequestSystemMessageContent::Text(text) => text.clone(),
                ChatCompletionRequestSystemMessageContent::Array(parts) => array_text(
                    parts
                        .iter()
                        .map(|ChatCompletionRequestSystemMessageContentPart::Text(t)| Ok(t)),
                    index,
                    Role::System,
                )?,
            };
            with_name(Message::system(content), &m.name)
        }
        ChatCompletionRequestMessage::Developer(m) => {
            let content = match &m.content {
                ChatCompletionRequestDeveloperMessageContent::Text(text) => text.clone(),
                ChatCompletionRequestDeveloperMessageContent::Array(parts) => array_text(
                    parts
                        .iter()
                        .map(|ChatCompletionRequestDeveloperMessageContentPart::Text(t)| Ok(t)),
                    index,
                    Role::Developer,
                )?,
            };
            with_name(Message::developer(content), &m.name)
        }
        ChatCompletionRequestMessage::User(m) => {
            let content = match &m.content {
                ChatCompletionRequestUserMessageContent::Text(text) => text.clone(),
                ChatCompletionRequestUserMessageContent::Array(parts) => array_text(
                    parts.iter().map(|part| match part {
                        UserPart::Text(t) => Ok(t),
                        UserPart::ImageUrl(_) => Err("an image part"),
                        UserPart::InputAudio(_) => Err("an audio part"),
                        UserPart::File(_) => Err("a file part"),
                    }),
                    index,
                    Role::User,
                )?,
            };
            with_name(Message::user(content), &m.name)
        }
        ChatCompletionRequestMessage::Assistant(m) => {
            let role = Role::Assistant;
            if m.refusal.is_some() {
                return Err(unsupported(index, role, "a refusal"));
            }
            if m.audio.is_some() {
                return Err(unsupported(index, role, "audio"));
            }
            if m.function_call.is_some() {
                return Err(unsupported(index, role, "a function_call (deprecated)"));
            }
            let content = match &m.content {
                None => String::new(),
                Some(ChatCompletionRequestAssistantMessageContent::Text(text)) => text.clone(),
                Some(ChatCompletionRequestAssistantMessageContent::Array(parts)) => array_text(
                    parts.iter().map(|part| match part {
                        ChatCompletionRequestAssistantMessageContentPart::Text(t) => Ok(t),
                        ChatCompletionRequestAssistantMessageContentPart::Refusal(_) => {
                            Err("a refusal part")
                        }
                    }),
                    index,
                    role,
                )?,
            };
            let calls = calls_from_openai(m.tool_calls.as_deref(), index)?;
            with_name(Message::assistant_with_tools(content, calls), &m.name)
        }
        ChatCompletionRequestMessage::Tool(m) => {
            let content = match &m.content {
                ChatCompletionRequestToolMessageContent::Text(text) => text.clone(),
                ChatCompletionRequestToolMessageContent::Array(parts) => array_text(
                    parts
                        .iter()
                        .map(|ChatCompletionRequestToolMessageContentPart::Text(t)| Ok(t)),
                    index,
                    Role::Tool,
                )?,
            };
            Message::tool_result(m.tool_call_id.clone(), content)
        }
        ChatCompletionRequestMessage::Function(_) => {
            return Err(OpenAiMessageError::Unsupported {
                index,
                role: "function",
                what: "the deprecated function role",
            })
        }
    })
}

fn with_name(message: Message, name: &Option<String>) -> Message {
    match name {
        Some(name) => message.with_name(name.clone()),
        None => message,
    }
}

fn calls_from_openai(
    calls: Option<&[ChatCompletionMessageToolCalls]>,
    index: usize,
) -> Result<Vec<ToolCall>, OpenAiMessageError> {
    calls
        .unwrap_or_default()
        .iter()
        .map(|call| call_from_openai(call, index))
        .collect()
}

fn call_from_openai(
    call: &ChatCompletionMessageToolCalls,
    index: usize,
) -> Result<ToolCall, OpenAiMessageError> {
    match call {
        ChatCompletionMessageToolCalls::Function(call) => {
            // Kept as the model wrote it: no parse-and-print round trip (which turns a huge
            // integer into a float and collapses a repeated key).
            let arguments =
                ToolArguments::from_text(call.function.arguments.as_str()).map_err(|e| {
                    OpenAiMessageError::ArgumentsNotJson {
                        index,
                        call_id: call.id.clone(),
                        reason: e.to_string(),
                    }
                })?;
            Ok(ToolCall::new(
                call.id.clone(),
                call.function.name.clone(),
                arguments,
            ))
        }
        ChatCompletionMessageToolCalls::Custom(_) => {
            Err(unsupported(index, Role::Assistant, "a custom tool call"))
        }
    }
}
