//! The Responses API's item rules, checked on a request's input before it is sent
//! (`check_responses_input`), and the typed errors of the Responses conversions.

use async_openai::types::responses::{InputItem, Item, MessageItem, Role as WireRole};
use std::collections::HashSet;

/// Why messages or items could not be converted. `index` is the position in the list
/// converted (our messages, or the items).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponsesError {
    /// A message with a participant `name`: Responses messages have no field for it.
    #[error("message {index}: a name cannot be carried")]
    Named {
        /// The message.
        index: usize,
    },
    /// An opaque part of another provider (Anthropic thinking): Responses cannot replay it.
    #[error("message {index}: an opaque part of another provider ({kind})")]
    ForeignOpaque {
        /// The message.
        index: usize,
        /// Its wire type.
        kind: &'static str,
    },
    /// A reasoning block async-openai's reasoning item cannot hold with every field unchanged.
    #[error("item {index}: the reasoning item cannot be carried unchanged: {reason}")]
    ReasoningNotCarried {
        /// The message or item.
        index: usize,
        /// What does not fit.
        reason: String,
    },
    /// A compaction block async-openai's compaction item cannot hold with every field
    /// unchanged.
    #[error("item {index}: the compaction item cannot be carried unchanged: {reason}")]
    CompactionNotCarried {
        /// The message or item.
        index: usize,
        /// What does not fit.
        reason: String,
    },
    /// A function call's `arguments` text is not one JSON value (ours are JSON text, kept byte
    /// for byte).
    #[error("item {index}: the arguments of call `{call_id}` are not JSON: {reason}")]
    ArgumentsNotJson {
        /// The item.
        index: usize,
        /// The call.
        call_id: String,
        /// The parser's message.
        reason: String,
    },
    /// A `function_call_output` without `call_id`: it answers no call.
    #[error("item {index}: a function_call_output without call_id")]
    OutputWithoutCallId {
        /// The item.
        index: usize,
    },
    /// A `compaction_trigger` item: a request to OpenAI's server to compact the input at that
    /// point, not a turn of the conversation. A transcript holds the conversation; put the
    /// trigger on the request you send. (A `compaction` item, what the server's compaction
    /// returns, is kept: an opaque part of its assistant turn.)
    #[error("item {index}: a compaction_trigger item is a request to the server, not a turn: set it on the request you send")]
    Compaction {
        /// The item.
        index: usize,
    },
    /// An item or content our messages cannot carry.
    #[error("item {index}: {what} cannot be represented")]
    Unsupported {
        /// The item.
        index: usize,
        /// What it holds.
        what: String,
    },
}

/// Which item rule a Responses input breaks; `index` is the item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponsesRuleError {
    /// A `function_call` with no `function_call_output` of its `call_id` before the next
    /// message or reasoning item (or the end of the input).
    #[error("item {index}: function_call `{call_id}` has no function_call_output")]
    CallWithoutOutput {
        /// The call.
        index: usize,
        /// Its `call_id`.
        call_id: String,
    },
    /// A `function_call_output` whose `call_id` no earlier `function_call` has (or none).
    #[error("item {index}: function_call_output for `{call_id}`, which no earlier item called")]
    OutputWithoutCall {
        /// The output.
        index: usize,
        /// The id it answers (empty when it has none).
        call_id: String,
    },
    /// Two `function_call`s share a `call_id`.
    #[error("item {index}: call_id `{call_id}` used twice")]
    DuplicateCallId {
        /// The second call.
        index: usize,
        /// The id.
        call_id: String,
    },
    /// A call answered twice.
    #[error("item {index}: call `{call_id}` already has an output")]
    DuplicateOutput {
        /// The second output.
        index: usize,
        /// The call.
        call_id: String,
    },
    /// A `reasoning` item not followed by the item it produced (an assistant message, a
    /// `function_call`, or more reasoning that is): OpenAI rejects it ("provided without its
    /// required following item").
    #[error("item {index}: a reasoning item without its following assistant item")]
    ReasoningWithoutItem {
        /// The reasoning item.
        index: usize,
    },
}

/// Where an item stands in the rules.
enum Kind<'a> {
    /// A message of a role other than the assistant's (or an item the rules do not concern).
    Other,
    /// An assistant message.
    AssistantText,
    Reasoning,
    /// A provider's `compaction` item: opaque, carried with its assistant turn.
    Compaction,
    Call(&'a str),
    Output(Option<&'a str>),
}

fn kind(item: &InputItem) -> Kind<'_> {
    match item {
        InputItem::EasyMessage(m) if m.role == WireRole::Assistant => Kind::AssistantText,
        InputItem::Item(Item::Message(MessageItem::Output(_))) => Kind::AssistantText,
        InputItem::Item(Item::Reasoning(_)) => Kind::Reasoning,
        InputItem::Item(Item::Compaction(_)) => Kind::Compaction,
        InputItem::Item(Item::FunctionCall(call)) => Kind::Call(&call.call_id),
        InputItem::Item(Item::FunctionCallOutput(output)) => {
            Kind::Output(output.call_id.as_deref())
        }
        _ => Kind::Other,
    }
}

/// Checks the item rules of a Responses input: every `function_call` is answered by a
/// `function_call_output` with its `call_id` before the next message or reasoning item; no
/// output comes without an earlier call of its `call_id`; call ids are unique and each call is
/// answered once; every `reasoning` item is followed by the assistant item it produced (a
/// message, a `function_call`, or further reasoning that is). That reasoning is *unchanged* is
/// kept by construction: it is the item that arrived, every field as received. The first broken
/// rule, in item order, is the error.
pub fn check_responses_input(items: &[InputItem]) -> Result<(), ResponsesRuleError> {
    let mut calls: HashSet<&str> = HashSet::new();
    // Calls waiting for their outputs, in order, with their item.
    let mut waiting: Vec<(usize, &str)> = Vec::new();
    let mut seen_outputs: HashSet<&str> = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        let kind = kind(item);
        if matches!(
            kind,
            Kind::Other | Kind::AssistantText | Kind::Reasoning | Kind::Compaction
        ) {
            if let Some((at, call_id)) = waiting.first() {
                return Err(ResponsesRuleError::CallWithoutOutput {
                    index: *at,
                    call_id: (*call_id).to_owned(),
                });
            }
        }
        if let Kind::Reasoning = kind {
            let follows = items[index + 1..]
                .iter()
                .find(|next| !matches!(self::kind(next), Kind::Reasoning | Kind::Compaction));
            if !follows
                .is_some_and(|next| matches!(self::kind(next), Kind::AssistantText | Kind::Call(_)))
            {
                return Err(ResponsesRuleError::ReasoningWithoutItem { index });
            }
        }
        match kind {
            Kind::Call(call_id) => {
                if !calls.insert(call_id) {
                    return Err(ResponsesRuleError::DuplicateCallId {
                        index,
                        call_id: call_id.to_owned(),
                    });
                }
                waiting.push((index, call_id));
            }
            Kind::Output(call_id) => {
                let Some(call_id) = call_id.filter(|id| calls.contains(id)) else {
                    return Err(ResponsesRuleError::OutputWithoutCall {
                        index,
                        call_id: call_id.unwrap_or_default().to_owned(),
                    });
                };
                if !seen_outputs.insert(call_id) {
                    return Err(ResponsesRuleError::DuplicateOutput {
                        index,
                        call_id: call_id.to_owned(),
                    });
                }
                waiting.retain(|(_, id)| *id != call_id);
            }
            _ => {}
        }
    }
    match waiting.first() {
        Some((index, call_id)) => Err(ResponsesRuleError::CallWithoutOutput {
            index: *index,
            call_id: (*call_id).to_owned(),
        }),
        None => Ok(()),
    }
}
