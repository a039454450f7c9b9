//! Transcripts: the conversation with the model as typed, pair-safe, lossless state.
//!
//! A [`Transcript`] is the list of [`Message`]s an agent sends to a chat API. Compaction makes
//! it fit a token budget without ever breaking what the API and the agent rely on.
//!
//! # The rules
//!
//! 1. System and developer messages are pinned: always kept verbatim.
//! 2. User messages are protected: never summarized. The last `keep_recent` user turns and
//!    everything after them stay verbatim. Older user messages stay verbatim while they fit;
//!    otherwise each is spilled byte-for-byte behind a content-addressed pointer and leaves a
//!    stub in its place (its index, its size, the pointer). With `pin_user` compaction refuses
//!    instead of spilling.
//! 3. A tool call and its result are one unit on the wire: compaction never emits a call
//!    without its result or a result without its call. The first thing to go is the *content*
//!    of old tool results, oldest first: stored verbatim and replaced, inside a tool message
//!    with the same `tool_call_id`, by a tombstone naming the tool, its arguments, the size and
//!    the pointer. The call itself (name and arguments) stays verbatim.
//! 4. Then whole old turns are folded, oldest first, into one message per run of consecutive
//!    turns: a summary when a summarizer is configured, else a stub. A run starts at a user
//!    turn (or right after a message that must stay); its calls and results leave together;
//!    the fold message carries a pointer to the stored span and lists the calls it folded. A
//!    call whose `effect` is live in its ledger (`not_started` or `unknown`), or that still
//!    waits for its result, is never folded: it stays in place as a verbatim pair, and the
//!    turn folds around it. User messages of a folded run are not summarized: they stay in
//!    place (kept or stubbed per rule 2), just above the fold message. A fold that would cost
//!    more than what it replaces is not made.
//! 5. Newer is kept before older: each step takes the oldest candidates first.
//! 6. The budget covers the whole request, counted the way chat APIs count it (see
//!    [`chat_tokens`] for the formula).
//! 7. Rehydration gives the transcript back byte-identical: kept messages as they are, spilled
//!    messages, tool-result contents and folded spans from the store, verified.
//! 8. Appending is the common case: the planner caches token counts and hashes by content, so
//!    re-planning a transcript that grew by one message does not count the prefix again.
//!
//! The steps run in this order until the transcript fits: tombstone old tool results, fold old
//! turns (with summaries), drop the summaries of folds (oldest first), stub old user messages.
//! When even then it does not fit, planning fails with [`TranscriptPlanError::OverBudget`]
//! and nothing was changed.
//!
//! # Markers
//!
//! Stubs, tombstones and folds are messages whose content starts with [`MARKER_PREFIX`]. A
//! kept message whose content starts like that (or with [`VERBATIM_ESCAPE`]) is sent with
//! [`VERBATIM_ESCAPE`] in front, so text that imitates a marker is never read as one, by the
//! model or by rehydration.

mod count;
mod layout;
mod marker;
mod message;
mod plan;
mod rehydrate;
mod steps;
mod validate;

#[cfg(test)]
mod tests_plan;

pub use count::{
    chat_tokens, message_tokens, MESSAGE_OVERHEAD_TOKENS, NAME_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS, TOOL_CALL_OVERHEAD_TOKENS,
};
pub use marker::{FOLD_LISTED_CALLS, MARKER_PREFIX, VERBATIM_ESCAPE};
pub use message::{Message, Role, ToolCall};
pub use plan::{
    FoldSummaryRequest, MessageOutcome, PlannedTranscript, TranscriptPlan, TranscriptPlanError,
    TranscriptPlanner, TranscriptPolicy,
};
pub use rehydrate::{
    rehydrate_from_store, rehydrate_transcript, required_blobs, TranscriptRehydrateError,
};
pub use validate::TranscriptError;

use serde::{Deserialize, Serialize};

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
        validate::validate_messages(&self.messages)
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
