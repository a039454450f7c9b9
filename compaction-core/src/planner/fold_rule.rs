//! The one rule that decides what a fold may send to a summarizer ([`fold_answer`]), and the
//! line a summarizer reads for each message of a folded range ([`summary_line`]).
//!
//! The rule reads the transcript alone: a message's role, the call a tool result answers (its
//! name and its effect link) and the text itself. Nothing in memory takes part, so a process
//! restarted from a checkpoint decides exactly as the warm one, and nothing the session or the
//! pointer tool had to remember can be lost. A read-back is summarized only when its text is
//! *provably* text the fold may summarize anyway (fail closed): the pointer tool's class of a
//! reply (`pointer_tool::ReadBackClass`) is what it knew when it answered, for the caller's logs; the fold
//! does not need it, so it need not survive a restart.

use crate::conversation::marker::{MARKER_PREFIX, VERBATIM_ESCAPE};
use crate::conversation::transcript::{Message, Role, ToolCall};
use std::collections::HashMap;

/// The pointer tool's name (`pointer_tool::POINTER_TOOL`; the planner sits below the pointer
/// tool, so it names it again, and a test in `pointer_tool` keeps the two equal).
pub(crate) const POINTER_TOOL: &str = "resolve_pointer";

/// Why a message of a folded range is kept from the summarizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Withheld {
    /// A user message: never summarized (it leaves into its block's user run).
    User,
    /// A system or developer message: pinned, never folded.
    Pinned,
    /// The result of a call linked to an effect: the tool's output or the session's own answer
    /// (not run, failed, outcome unknown), which must never stand in for the ledger.
    Effect,
    /// A `resolve_pointer` result not proven disposable: protected, user, opaque or effect
    /// text read back, or text whose origin cannot be told.
    ReadBack,
    /// A tool result whose call is not in the transcript before it (never in a valid one).
    Orphan,
}

/// What a fold does with one message of its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoldAnswer {
    /// The summarizer reads it: an assistant message without its opaque parts and effect
    /// links, or a tool result as it is.
    Summarize,
    /// The summarizer reads a tombstone in its place (tool results) or nothing (user and pinned
    /// messages); the message stays byte-exact in the fold's stored span.
    Withhold(Withheld),
}

/// The texts that prove a read-back disposable, built once per fold when one needs it: the
/// contents of the transcript's plain tool results and of its assistant messages without
/// opaque parts or effect links, by length.
#[derive(Debug, Default)]
pub(crate) struct Proofs {
    built: bool,
    /// Content length -> indices of plain tool results with that length.
    plain_results: HashMap<usize, Vec<usize>>,
    /// Content length -> indices of summarizable assistant messages with that length.
    model_messages: HashMap<usize, Vec<usize>>,
}

impl Proofs {
    fn build(&mut self, messages: &[Message]) {
        if self.built {
            return;
        }
        self.built = true;
        for (index, message) in messages.iter().enumerate() {
            match message.role {
                Role::Tool => {
                    let plain = call_of(messages, index)
                        .is_some_and(|call| call.effect.is_none() && call.name != POINTER_TOOL);
                    if plain {
                        self.plain_results
                            .entry(message.content.len())
                            .or_default()
                            .push(index);
                    }
                }
                Role::Assistant if is_plain_model_message(message) => self
                    .model_messages
                    .entry(message.content.len())
                    .or_default()
                    .push(index),
                _ => {}
            }
        }
    }
}

/// What a fold may do with message `index` of `messages` (the whole input transcript): **the
/// one rule**, for every way text enters a transcript.
///
/// | message | answer |
/// |---|---|
/// | user message (typed by the user, or pushed by the agent's code as the user) | withheld: never summarized, it leaves into the block's user run |
/// | system or developer message | withheld: pinned (never folded anyway) |
/// | model text, and the model's tool calls (any tool, `resolve_pointer` included) | summarized, without the calls' effect links (key, scope) |
/// | provider-opaque parts of a model message (thinking, encrypted reasoning) | dropped from what is summarized; replayed byte-exact from the span |
/// | plain tool result (a call with no effect link, not `resolve_pointer`), whatever it imitates | summarized |
/// | result of a call linked to an effect: the tool's output, or the session's own answer ("Not run: …", "Failed: …", "Outcome unknown: …") | withheld (effect) |
/// | `resolve_pointer` result: an error or a range notice the tool wrote (`⟦compaction:error⟧`, `⟦compaction:range⟧`) | summarized (disposable) |
/// | `resolve_pointer` result equal to a plain tool result of the transcript, or to part of one (`⟦compaction:part …⟧` and the bytes it names), or to a summarizable model message's JSON (read by index) | summarized (disposable: the summarizer may read that text anyway) |
/// | any other `resolve_pointer` result: a protected value, a user message, an opaque or effect-linked model message, effect records, a read-back of a read-back | withheld (read-back); the handle reads it again |
/// | a tool result whose call is not before it | withheld (orphan) |
/// | state updates and markers (tombstones, pages, user runs, folds) | not input messages: never in a fold's source |
///
/// Text that imitates a marker, a refusal or the session's words decides nothing: the answer
/// comes from the role and the call; the pointer tool escapes stored text that begins like a
/// marker, so an error notice cannot be forged by what it reads back.
pub(crate) fn fold_answer(messages: &[Message], index: usize, proofs: &mut Proofs) -> FoldAnswer {
    let message = &messages[index];
    match message.role {
        Role::User => FoldAnswer::Withhold(Withheld::User),
        Role::System | Role::Developer => FoldAnswer::Withhold(Withheld::Pinned),
        Role::Assistant => FoldAnswer::Summarize,
        Role::Tool => match call_of(messages, index) {
            None => FoldAnswer::Withhold(Withheld::Orphan),
            Some(call) if call.effect.is_some() => FoldAnswer::Withhold(Withheld::Effect),
            Some(call) if call.name == POINTER_TOOL => {
                if read_back_is_disposable(messages, index, proofs) {
                    FoldAnswer::Summarize
                } else {
                    FoldAnswer::Withhold(Withheld::ReadBack)
                }
            }
            Some(_) => FoldAnswer::Summarize,
        },
    }
}

/// The line a summarizer reads for message `index` of a folded range (`None`: nothing, for user
/// and pinned messages): the message's JSON as the rule allows it, or a tombstone in place of a
/// withheld tool result, with its `tool_call_id` so the source stays a whole conversation.
pub(crate) fn summary_line(
    messages: &[Message],
    index: usize,
    proofs: &mut Proofs,
) -> Option<String> {
    let message = &messages[index];
    match fold_answer(messages, index, proofs) {
        FoldAnswer::Withhold(Withheld::User | Withheld::Pinned) => None,
        FoldAnswer::Withhold(why) => {
            let what = match why {
                Withheld::Effect => {
                    "the result of a side-effecting call (the effect log holds its status)"
                }
                Withheld::ReadBack => "content read back with resolve_pointer",
                _ => "a tool result",
            };
            let tombstone = Message::tool_result(
                message.tool_call_id.clone().unwrap_or_default(),
                format!("[withheld from the summary: {what}; it stays in the store behind this fold's handle]"),
            );
            Some(serde_json::to_string(&tombstone).unwrap_or_default())
        }
        FoldAnswer::Summarize => {
            let mut message = message.clone();
            // A summary must never stand in for the ledger: no effect keys or scopes.
            for call in &mut message.tool_calls {
                call.effect = None;
                call.effect_scope = None;
            }
            // Opaque parts (signed thinking, encrypted reasoning) never reach a summarizer; the
            // stored span keeps them verbatim.
            message.opaque.clear();
            // The session's record of what it did is the ledger's, not a summary's.
            message.effect_answer = None;
            Some(serde_json::to_string(&message).unwrap_or_default())
        }
    }
}

/// The call tool result `index` answers: in the nearest assistant message before it (a call's
/// results follow it, parallel calls' results each other).
fn call_of(messages: &[Message], index: usize) -> Option<&ToolCall> {
    let id = messages[index].tool_call_id.as_deref()?;
    let assistant = messages[..index]
        .iter()
        .rev()
        .find(|m| m.role != Role::Tool)
        .filter(|m| m.role == Role::Assistant)?;
    assistant.tool_calls.iter().find(|call| call.id == id)
}

/// A model message a summarizer may read whole: no opaque parts, no call linked to an effect.
fn is_plain_model_message(message: &Message) -> bool {
    message.opaque.is_empty() && message.tool_calls.iter().all(|c| c.effect.is_none())
}

/// Whether read-back `index` is text the fold may summarize anyway (see [`fold_answer`]).
fn read_back_is_disposable(messages: &[Message], index: usize, proofs: &mut Proofs) -> bool {
    let content = messages[index].content.as_str();
    // Only the pointer tool writes a result that begins with the marker prefix: what it reads
    // back is escaped when it begins with `⟦`.
    for notice in ["error⟧", "range⟧"] {
        if content
            .strip_prefix(MARKER_PREFIX)
            .is_some_and(|rest| rest.starts_with(notice))
        {
            return true;
        }
    }
    proofs.build(messages);
    if let Some((start, end, total, text)) = part_of(content) {
        return proofs
            .plain_results
            .get(&total)
            .into_iter()
            .flatten()
            .filter(|&&j| j < index)
            .any(|&j| messages[j].content.get(start..end) == Some(text));
    }
    if content.starts_with(MARKER_PREFIX) {
        return false;
    }
    let text = content.strip_prefix(VERBATIM_ESCAPE).unwrap_or(content);
    let plain = proofs
        .plain_results
        .get(&text.len())
        .into_iter()
        .flatten()
        .any(|&j| j < index && messages[j].content == text);
    plain || is_model_message_json(messages, index, text, proofs)
}

/// Whether `text` is the JSON of a summarizable model message before `index` (an assistant
/// message read by index from a fold).
fn is_model_message_json(messages: &[Message], index: usize, text: &str, proofs: &Proofs) -> bool {
    if !text.starts_with('{') {
        return false;
    }
    let Ok(read) = serde_json::from_str::<Message>(text) else {
        return false;
    };
    read.role == Role::Assistant
        && proofs
            .model_messages
            .get(&read.content.len())
            .into_iter()
            .flatten()
            .any(|&j| j < index && messages[j] == read)
}

/// A part's note and bytes: `⟦compaction:part POINTER⟧ bytes S..E of T follow (…):\nTEXT`.
fn part_of(content: &str) -> Option<(usize, usize, usize, &str)> {
    let rest = content.strip_prefix(MARKER_PREFIX)?.strip_prefix("part ")?;
    let (_, rest) = rest.split_once("⟧ bytes ")?;
    let (range, rest) = rest.split_once(" of ")?;
    let (total, rest) = rest.split_once(" follow (")?;
    let (_, text) = rest.split_once("):\n")?;
    let (start, end) = range.split_once("..")?;
    let (start, end, total) = (start.parse().ok()?, end.parse().ok()?, total.parse().ok()?);
    (start <= end && end - start == text.len()).then_some((start, end, total, text))
}

#[cfg(test)]
mod tests;
