//! A conversation's pairing rules: `Transcript`, a list of messages checked the way chat APIs
//! check them (`Transcript::validate`), and `TranscriptError`, which names the message that
//! breaks a rule. The messages themselves are in `message.rs`.

pub use crate::conversation::message::{Message, Role, ToolCall};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::io::Write;

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
    /// A message that is not a tool message carries a `tool_call_id`: it answers nothing, and no
    /// chat API has a place for it.
    #[error("message {index}: a {role} message carries a tool_call_id (only tool messages may)")]
    CallIdOutsideTool {
        /// The message.
        index: usize,
        /// Its role.
        role: &'static str,
    },
    /// A tool message carries a `name`. Chat APIs know a tool result by its `tool_call_id`
    /// only (the tool's name is on the call), so the name could not be sent.
    #[error(
        "message {index}: a tool message carries a name (a result is known by its tool_call_id)"
    )]
    NameOnToolMessage {
        /// The tool message.
        index: usize,
    },
    /// A system or developer message comes after a call and before all of that call's
    /// results. Chat APIs want the results right after the assistant message that made the
    /// calls (OpenAI rejects the request, Anthropic has no place for it), so the transcript is
    /// refused rather than reordered: put the message after the results.
    #[error(
        "message {index}: a {role} message between call `{call_id}` (message {call_index}) \
         and its result"
    )]
    BetweenCallAndResult {
        /// The system or developer message.
        index: usize,
        /// Its role.
        role: &'static str,
        /// The first call still waiting for its result.
        call_id: String,
        /// The assistant message that made it.
        call_index: usize,
    },
    /// A message that is not an assistant message carries provider-opaque parts (thinking,
    /// encrypted reasoning): providers take them only in the model's own turns.
    #[error(
        "message {index}: a {role} message carries opaque parts (only assistant messages may)"
    )]
    OpaqueOutsideAssistant {
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
        if message.tool_call_id.is_some() && message.role != Role::Tool {
            return Err(TranscriptError::CallIdOutsideTool {
                index,
                role: message.role.as_str(),
            });
        }
        if !message.opaque.is_empty() && message.role != Role::Assistant {
            return Err(TranscriptError::OpaqueOutsideAssistant {
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
                if message.name.is_some() {
                    return Err(TranscriptError::NameOnToolMessage { index });
                }
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
            Role::System | Role::Developer => {
                if let Some((call_id, call_index)) = waiting.first() {
                    return Err(TranscriptError::BetweenCallAndResult {
                        index,
                        role: message.role.as_str(),
                        call_id: (*call_id).to_owned(),
                        call_index: *call_index,
                    });
                }
            }
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
/// A transcript only grows by appending. It keeps a hash chain of its messages (16 bytes per
/// message), so a compactor recognizes a transcript it planned before, grown by a few messages,
/// without reading its history again, whether it is the same value, a clone, or a copy loaded
/// in another process.
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
#[derive(Clone, Default)]
pub struct Transcript {
    messages: Vec<Message>,
    lineage: Lineage,
}

impl PartialEq for Transcript {
    fn eq(&self, other: &Self) -> bool {
        self.messages == other.messages
    }
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("messages", &self.messages)
            .finish()
    }
}

impl Serialize for Transcript {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.messages.serialize(serializer)
    }
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// A transcript of `messages`, validated.
    pub fn from_messages(messages: Vec<Message>) -> Result<Self, TranscriptError> {
        validate_messages(&messages)?;
        Ok(messages.into_iter().collect())
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.lineage.push(&message);
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
    /// every call is answered before the next message of any other role (nothing comes between
    /// a call and its results, not even a system or developer message), call ids are unique,
    /// every tool message names its call, only assistant messages call tools or carry opaque
    /// parts.
    ///
    /// The calls of the **last** assistant message may still be in flight (no result yet): the
    /// transcript is valid, so it can be compacted and checkpointed mid-call, and compaction
    /// keeps such a call verbatim, never folded. A request built from it then ends with calls
    /// no result answers, which chat APIs reject: push the results before sending.
    pub fn validate(&self) -> Result<(), TranscriptError> {
        validate_messages(&self.messages)
    }

    /// The chain link after the first `len` messages (see `lineage.rs`).
    pub(crate) fn link(&self, len: usize) -> Option<Link> {
        self.lineage.link(len)
    }

    /// Whether a call of this transcript has id `id`: the lineage's hashes answer "no" without a
    /// pass over the history; a hash seen before is checked against the calls themselves.
    pub(crate) fn has_call_id(&self, id: &str) -> bool {
        self.lineage.may_have_call_id(id)
            && self
                .messages
                .iter()
                .flat_map(|m| &m.tool_calls)
                .any(|call| call.id == id)
    }

    /// Checks the messages from `from` on, given that the first `from` were valid: the same
    /// answer as [`validate`](Self::validate) without a pass over the history (the full check
    /// runs only to name an error exactly).
    pub(crate) fn validate_from(&self, from: usize) -> Result<(), TranscriptError> {
        let from = from.min(self.messages.len());
        if self.lineage.first_reused_call().is_some() {
            return self.validate();
        }
        // Start at the user or assistant message that opened the unit `from` sits in: tool
        // results before `from` answer its calls, and nothing earlier can be answered later.
        let start = self.messages[..from]
            .iter()
            .rposition(|m| matches!(m.role, Role::User | Role::Assistant))
            .unwrap_or(0);
        match validate_messages(&self.messages[start..]) {
            Ok(()) => Ok(()),
            Err(_) => self.validate(),
        }
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
        let mut transcript = Transcript::new();
        transcript.extend(iter);
        transcript
    }
}

impl Extend<Message> for Transcript {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        for message in iter {
            self.push(message);
        }
    }
}

// What a transcript remembers about its own history, so the planner can tell in O(1) that a
// transcript is one it planned, grown by appends (issue 20.6).
//
// Each message extends a hash chain: `link(i + 1) = SHA-256(link(i) ‖ JSON(message i))`, cut to
// 128 bits. Two transcripts with the same link after `n` messages have the same first `n`
// messages (up to a 2^-64 birthday chance), whatever process built them: a clone, a
// deserialized copy, or a transcript rehydrated from a checkpoint. A transcript only grows by
// appending, so the chain is always the chain of its messages. It also remembers the hashes of
// the call ids seen, so a re-plan checks a new call's id against every earlier one without a
// pass over the history.

/// A link of the chain: 128 bits of SHA-256.
pub(crate) type Link = [u8; 16];

/// The link of the empty transcript.
pub(crate) const ROOT: Link = [0; 16];

/// The chain of a transcript's messages, and the call ids it has seen.
#[derive(Clone, Default)]
pub(crate) struct Lineage {
    /// `links[i]` is the link after messages `0..=i`.
    links: Vec<Link>,
    ids: RandomState,
    call_ids: HashSet<u64>,
    /// The first message carrying a call whose id hash was seen before: a duplicate id, or (at
    /// 2^-64) a hash collision that a full validation tells apart.
    first_reused_call: Option<usize>,
}

/// Streams bytes into a SHA-256 (serde_json writes a message straight into the hash).
struct HashWriter<'a>(&'a mut Sha256);

impl Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lineage {
    /// Extends the chain with the next message.
    fn push(&mut self, message: &Message) {
        let index = self.links.len();
        let mut hasher = Sha256::new();
        hasher.update(self.link(index).unwrap_or(ROOT));
        // Serializing plain data into a hash cannot fail.
        let _ = serde_json::to_writer(HashWriter(&mut hasher), message);
        let digest = hasher.finalize();
        let mut link = ROOT;
        link.copy_from_slice(&digest[..16]);
        self.links.push(link);
        for call in &message.tool_calls {
            if !self.call_ids.insert(self.ids.hash_one(call.id.as_str())) {
                self.first_reused_call.get_or_insert(index);
            }
        }
    }

    /// The link after the first `len` messages (`ROOT` for none), if there are that many.
    pub(crate) fn link(&self, len: usize) -> Option<Link> {
        match len {
            0 => Some(ROOT),
            n => self.links.get(n - 1).copied(),
        }
    }

    /// Whether a call id hashing like `id` was seen (`false`: certainly not).
    fn may_have_call_id(&self, id: &str) -> bool {
        self.call_ids.contains(&self.ids.hash_one(id))
    }

    /// The first message whose call may reuse an earlier call's id.
    pub(crate) fn first_reused_call(&self) -> Option<usize> {
        self.first_reused_call
    }
}

impl<'a> IntoIterator for &'a Transcript {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.messages.iter()
    }
}

/// A [`Link`] in JSON: its 32 hex digits.
pub(crate) mod link_hex {
    use super::Link;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(link: &Link, s: S) -> Result<S::Ok, S::Error> {
        let hex: String = link.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&hex)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Link, D::Error> {
        let hex = String::deserialize(d)?;
        let bad = || serde::de::Error::custom("not a 32-digit hex link");
        if hex.len() != 32 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut link = [0u8; 16];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            link[i] = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(link)
    }
}
