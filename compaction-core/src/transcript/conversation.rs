//! `Transcript`, the conversation as a value, and the pairing rules a chat API enforces,
//! checked before compaction (`Transcript::validate`).

use crate::transcript::message::{Message, Role};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Why a transcript is not a valid conversation. Each variant names the message index, so the
/// author can find the message; compaction refuses such a transcript and never repairs it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptError {
    /// A tool message answers a call that no earlier assistant message made.
    #[error("message {index}: tool result for call `{call_id}`, which no earlier message made")]
    ResultWithoutCall {
        /// The tool message.
        index: usize,
        /// The id it answers.
        call_id: String,
    },
    /// A call has no result before the next user or assistant message (only the calls of the
    /// last assistant message may still be waiting for their results).
    #[error(
        "message {index}: call `{call_id}` has no result before message {next} \
         (a user or assistant message)"
    )]
    CallWithoutResult {
        /// The assistant message that made the call.
        index: usize,
        /// The unanswered call.
        call_id: String,
        /// The user or assistant message that came before any result.
        next: usize,
    },
    /// Two calls share an id, so a result could not say which one it answers.
    #[error("message {index}: call id `{call_id}` was already used by an earlier call")]
    DuplicateCallId {
        /// The assistant message with the second call.
        index: usize,
        /// The repeated id.
        call_id: String,
    },
    /// A call is answered twice.
    #[error("message {index}: call `{call_id}` already has a result")]
    DuplicateResult {
        /// The second tool message.
        index: usize,
        /// The call it answers again.
        call_id: String,
    },
    /// A tool message without `tool_call_id`.
    #[error("message {index}: tool message without a tool_call_id")]
    ToolMessageWithoutCallId {
        /// The tool message.
        index: usize,
    },
    /// A message that is not an assistant message carries tool calls.
    #[error("message {index}: a {role} message carries tool calls (only assistant messages may)")]
    ToolCallsOutsideAssistant {
        /// The message.
        index: usize,
        /// Its role.
        role: &'static str,
    },
}

/// Checks every pairing rule; the first violation, in message order, is the error.
pub(crate) fn validate_messages(messages: &[Message]) -> Result<(), TranscriptError> {
    // call id -> (index of the assistant message that made it, answered yet)
    let mut calls: HashMap<&str, (usize, bool)> = HashMap::new();
    // The calls of the latest assistant message still waiting for a result, in call order.
    let mut waiting: Vec<(&str, usize)> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if !message.tool_calls.is_empty() && message.role != Role::Assistant {
            return Err(TranscriptError::ToolCallsOutsideAssistant {
                index,
                role: message.role.as_str(),
            });
        }
        match message.role {
            Role::User | Role::Assistant => {
                if let Some((call_id, call_index)) = waiting.first() {
                    return Err(TranscriptError::CallWithoutResult {
                        index: *call_index,
                        call_id: (*call_id).to_owned(),
                        next: index,
                    });
                }
                for call in &message.tool_calls {
                    if calls.insert(&call.id, (index, false)).is_some() {
                        return Err(TranscriptError::DuplicateCallId {
                            index,
                            call_id: call.id.clone(),
                        });
                    }
                    waiting.push((&call.id, index));
                }
            }
            Role::Tool => {
                let Some(call_id) = message.tool_call_id.as_deref() else {
                    return Err(TranscriptError::ToolMessageWithoutCallId { index });
                };
                match calls.get_mut(call_id) {
                    None => {
                        return Err(TranscriptError::ResultWithoutCall {
                            index,
                            call_id: call_id.to_owned(),
                        })
                    }
                    Some((_, true)) => {
                        return Err(TranscriptError::DuplicateResult {
                            index,
                            call_id: call_id.to_owned(),
                        })
                    }
                    Some((_, answered)) => *answered = true,
                }
                waiting.retain(|(id, _)| *id != call_id);
            }
            Role::System | Role::Developer => {}
        }
    }
    // Calls of the last assistant message may still be in flight.
    Ok(())
}

/// A conversation: messages in order. Serializes as a JSON array of messages.
///
/// Building it ([`push`](Transcript::push), `collect`) never fails, because a transcript is
/// briefly incomplete between a call and its result; [`validate`](Transcript::validate) checks
/// it and compaction refuses an invalid one. Deserializing validates, so a stored transcript
/// that loads is one that compaction accepts.
///
/// ```
/// use compaction::{Message, ToolCall, Transcript};
/// use serde_json::json;
///
/// let mut chat = Transcript::new();
/// chat.push(Message::user("what is in a.rs?"));
/// let call = ToolCall::new("call_1", "read_file", json!({"path": "a.rs"}));
/// chat.push(Message::assistant_with_tools("", vec![call]));
/// chat.push(Message::tool_result("call_1", "fn main() {}"));
/// assert!(chat.validate().is_ok());
/// assert_eq!(chat.len(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Transcript {
    messages: Vec<Message>,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// A transcript of `messages`, validated.
    pub fn from_messages(messages: Vec<Message>) -> Result<Self, TranscriptError> {
        let transcript = Transcript { messages };
        transcript.validate()?;
        Ok(transcript)
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// The messages, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The messages, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Message> {
        self.messages.iter()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there is no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages, owned.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    /// Checks the pairing rules chat APIs enforce: every tool result answers an earlier call,
    /// every call is answered before the next user or assistant message (the calls of the last
    /// assistant message may still be in flight), call ids are unique, every tool message names
    /// its call, and only assistant messages call tools.
    pub fn validate(&self) -> Result<(), TranscriptError> {
        validate_messages(&self.messages)
    }
}

impl<'de> Deserialize<'de> for Transcript {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let messages = Vec::<Message>::deserialize(deserializer)?;
        Transcript::from_messages(messages).map_err(serde::de::Error::custom)
    }
}

impl FromIterator<Message> for Transcript {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Transcript {
            messages: iter.into_iter().collect(),
        }
    }
}

impl Extend<Message> for Transcript {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        self.messages.extend(iter);
    }
}

impl<'a> IntoIterator for &'a Transcript {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.messages.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::message::ToolCall;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "read_file", json!({"path": "a.rs"}))
    }

    #[test]
    fn a_valid_conversation_with_parallel_calls_and_a_trailing_call_passes() {
        let messages = vec![
            Message::system("be careful"),
            Message::user("fix it"),
            Message::assistant_with_tools("", vec![call("a"), call("b")]),
            Message::tool_result("b", "B"),
            Message::developer("note"),
            Message::tool_result("a", "A"),
            Message::assistant("done"),
            Message::user("more"),
            Message::assistant_with_tools("", vec![call("c")]),
        ];
        assert_eq!(validate_messages(&messages), Ok(()));
        assert_eq!(validate_messages(&[]), Ok(()));
    }

    #[test]
    fn a_result_whose_call_is_not_earlier_is_refused() {
        let messages = vec![
            Message::user("x"),
            Message::tool_result("a", "A"),
            Message::assistant_with_tools("", vec![call("a")]),
        ];
        assert_eq!(
            validate_messages(&messages),
            Err(TranscriptError::ResultWithoutCall {
                index: 1,
                call_id: "a".into()
            })
        );
    }

    #[test]
    fn a_call_without_result_before_the_next_turn_is_refused() {
        let messages = vec![
            Message::user("x"),
            Message::assistant_with_tools("", vec![call("a"), call("b")]),
            Message::tool_result("a", "A"),
            Message::user("y"),
        ];
        assert_eq!(
            validate_messages(&messages),
            Err(TranscriptError::CallWithoutResult {
                index: 1,
                call_id: "b".into(),
                next: 3
            })
        );
        let before_assistant = vec![
            Message::assistant_with_tools("", vec![call("a")]),
            Message::assistant("y"),
        ];
        assert!(matches!(
            validate_messages(&before_assistant),
            Err(TranscriptError::CallWithoutResult {
                index: 0,
                next: 1,
                ..
            })
        ));
    }

    #[test]
    fn duplicate_call_ids_are_refused_within_and_across_messages() {
        let within = vec![Message::assistant_with_tools(
            "",
            vec![call("a"), call("a")],
        )];
        assert_eq!(
            validate_messages(&within),
            Err(TranscriptError::DuplicateCallId {
                index: 0,
                call_id: "a".into()
            })
        );
        let across = vec![
            Message::assistant_with_tools("", vec![call("a")]),
            Message::tool_result("a", "A"),
            Message::assistant_with_tools("", vec![call("a")]),
        ];
        assert!(matches!(
            validate_messages(&across),
            Err(TranscriptError::DuplicateCallId { index: 2, .. })
        ));
    }

    #[test]
    fn a_second_result_for_one_call_is_refused() {
        let messages = vec![
            Message::assistant_with_tools("", vec![call("a")]),
            Message::tool_result("a", "A"),
            Message::tool_result("a", "again"),
        ];
        assert!(matches!(
            validate_messages(&messages),
            Err(TranscriptError::DuplicateResult { index: 2, .. })
        ));
    }

    #[test]
    fn a_tool_message_without_call_id_is_refused() {
        let mut orphan = Message::tool_result("a", "A");
        orphan.tool_call_id = None;
        let messages = vec![Message::user("x"), orphan];
        assert_eq!(
            validate_messages(&messages),
            Err(TranscriptError::ToolMessageWithoutCallId { index: 1 })
        );
    }

    #[test]
    fn tool_calls_on_a_user_message_are_refused() {
        let mut user = Message::user("x");
        user.tool_calls.push(call("a"));
        assert_eq!(
            validate_messages(&[user]),
            Err(TranscriptError::ToolCallsOutsideAssistant {
                index: 0,
                role: "user"
            })
        );
    }

    #[test]
    fn deserializing_validates_and_names_the_message() {
        let ok: Transcript = serde_json::from_str(r#"[{"role":"user","content":"hi"}]"#).unwrap();
        assert_eq!(ok.messages(), &[Message::user("hi")]);
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"[{"role":"user","content":"hi"}]"#
        );
        let err = serde_json::from_str::<Transcript>(
            r#"[{"role":"user","content":"hi"},{"role":"tool","content":"x","tool_call_id":"a"}]"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("message 1"), "{err}");
    }
}
