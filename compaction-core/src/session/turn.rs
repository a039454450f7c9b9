//! The conversation side of a turn: the model's response in any form a session takes
//! ([`ModelResponse`]), and which calls of its last message still wait for a result.

use crate::conversation::message::{Message, Role, ToolCall};
use crate::conversation::transcript::Transcript;
use crate::session::error::{ResponseProblem, SessionError};
use std::collections::HashSet;

/// What [`Session::push_response`](crate::session::Session::push_response) takes: the model's
/// response as our [`Message`], or, with the `openai-types` feature, async-openai's chat
/// completion (`CreateChatCompletionResponse`: its first choice) or its message
/// (`ChatCompletionResponseMessage`), with `openai-responses` a Responses API reply
/// (`async_openai::types::responses::Response`: its `output`), and with `anthropic-types` a
/// Messages API reply (`compaction::anthropic::AnthropicResponse`), by value or by reference.
pub trait ModelResponse {
    /// The response as our message (what our messages cannot carry is
    /// [`SessionError::Response`]).
    fn into_message(self) -> Result<Message, SessionError>;

    /// The response as our messages, in order: one, but for a reply whose items make several
    /// assistant turns (a Responses API output with text or reasoning after its calls).
    fn into_messages(self) -> Result<Vec<Message>, SessionError>
    where
        Self: Sized,
    {
        Ok(vec![self.into_message()?])
    }
}

impl ModelResponse for Message {
    fn into_message(self) -> Result<Message, SessionError> {
        Ok(self)
    }
}

impl ModelResponse for &Message {
    fn into_message(self) -> Result<Message, SessionError> {
        Ok(self.clone())
    }
}

/// Whether `transcript` can take the reply `messages` whole (checked before any is pushed):
/// at least one message, every one the model's and valid after the transcript
/// ([`check_response`]), and only the last calling tools (the calls of an earlier one would wait
/// for results the reply itself does not hold).
pub(crate) fn check_reply(
    transcript: &Transcript,
    messages: &[Message],
) -> Result<(), SessionError> {
    if messages.is_empty() {
        return Err(SessionError::Response(
            "a reply with no message in it".into(),
        ));
    }
    let last = messages.len() - 1;
    for (at, message) in messages.iter().enumerate() {
        if message.role != Role::Assistant {
            return Err(SessionError::NotAResponse { role: message.role });
        }
        check_response(transcript, message)
            .map_err(|problem| SessionError::InvalidResponse { problem })?;
        if at < last && !message.tool_calls.is_empty() {
            let problem = ResponseProblem::CallsBeforeMore {
                call_ids: message.tool_calls.iter().map(|c| c.id.clone()).collect(),
            };
            return Err(SessionError::InvalidResponse { problem });
        }
    }
    Ok(())
}

/// Whether `transcript` can take `reply` (the model's message) and stay valid: the calls of its
/// last message all answered, no result id on the reply, every call id present, and new (in the
/// reply and in the conversation). Checked before anything is pushed: a transcript only grows
/// by appending, so a reply that broke a pairing rule would fail every later request.
pub(crate) fn check_response(
    transcript: &Transcript,
    reply: &Message,
) -> Result<(), ResponseProblem> {
    let pending = pending_calls(transcript.messages());
    if !pending.is_empty() {
        return Err(ResponseProblem::CallsPending {
            call_ids: pending.into_iter().map(|c| c.id).collect(),
        });
    }
    if reply.tool_call_id.is_some() {
        return Err(ResponseProblem::CallIdOnReply);
    }
    let mut seen = HashSet::with_capacity(reply.tool_calls.len());
    for (position, call) in reply.tool_calls.iter().enumerate() {
        if call.id.trim().is_empty() {
            return Err(ResponseProblem::EmptyCallId {
                position,
                tool: call.name.clone(),
            });
        }
        if !seen.insert(call.id.as_str()) {
            return Err(ResponseProblem::RepeatedCallId {
                call_id: call.id.clone(),
            });
        }
        if transcript.has_call_id(&call.id) {
            return Err(ResponseProblem::CallIdUsed {
                call_id: call.id.clone(),
            });
        }
    }
    Ok(())
}

/// The calls of the last assistant message of `messages` that no tool message after it
/// answers, in order; empty when the conversation does not end with a message that calls tools
/// (and its results so far).
/// Whether `messages` end with the model's answer to the user: an assistant message without
/// tool calls.
pub(crate) fn awaiting_user(messages: &[Message]) -> bool {
    messages
        .last()
        .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
}

pub(crate) fn pending_calls(messages: &[Message]) -> Vec<ToolCall> {
    let Some(at) = messages.iter().rposition(|m| m.role != Role::Tool) else {
        return Vec::new();
    };
    if messages[at].role != Role::Assistant {
        return Vec::new();
    }
    let answered: HashSet<&str> = messages[at + 1..]
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    messages[at]
        .tool_calls
        .iter()
        .filter(|call| !answered.contains(call.id.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "deploy", json!({"service": id}))
    }

    #[test]
    fn pending_calls_are_the_last_calls_without_results() {
        let mut messages = vec![Message::user("go")];
        assert!(pending_calls(&messages).is_empty());
        messages.push(Message::assistant_with_tools(
            "",
            vec![call("a"), call("b")],
        ));
        let ids = |m: &[Message]| {
            pending_calls(m)
                .into_iter()
                .map(|c| c.id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&messages), ["a", "b"]);
        messages.push(Message::tool_result("b", "ok"));
        assert_eq!(ids(&messages), ["a"]);
        messages.push(Message::tool_result("a", "ok"));
        assert!(ids(&messages).is_empty());
        messages.push(Message::assistant("done"));
        assert!(ids(&messages).is_empty());
    }
}
