//! Conversions both ways between our messages and Anthropic's: system and developer messages
//! become the top-level `system`; tool results become `tool_result` blocks of the following
//! user turn; consecutive same-role messages merge into one turn; a call's arguments become the
//! `tool_use` input byte-for-byte (an object, or a typed error); thinking blocks are our opaque
//! parts, first in their turn. What one side cannot carry is a typed error, never dropped.

use crate::conversation::message::{Message, OpaquePart, Role, ToolCall};
use crate::integrations::anthropic::wire::{
    AnthropicMessage, AnthropicResponse, AnthropicRole, CacheControl, ContentBlock, SystemBlock,
    ToolResultContent,
};

/// Why messages could not be converted. `index` is the message's position in the list
/// converted (ours, or Anthropic's `messages`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnthropicError {
    /// A system or developer message after the conversation started: Anthropic's system prompt
    /// is one top-level field, before every message.
    #[error("message {index}: a {role} message after the conversation started (Anthropic takes the system prompt first, top-level)")]
    SystemInConversation {
        /// The message.
        index: usize,
        /// `system` or `developer`.
        role: &'static str,
    },
    /// A message with a participant `name`: Anthropic has no field for it.
    #[error("message {index}: a name cannot be carried")]
    Named {
        /// The message.
        index: usize,
    },
    /// An opaque part of another provider (OpenAI reasoning): Anthropic cannot replay it.
    #[error("message {index}: an opaque part of another provider ({kind})")]
    ForeignOpaque {
        /// The message.
        index: usize,
        /// Its wire type.
        kind: &'static str,
    },
    /// A call's arguments are not a JSON object (Anthropic's `tool_use.input` must be one).
    #[error("message {index}: the arguments of call `{call_id}` are not a JSON object")]
    ArgumentsNotObject {
        /// The assistant message.
        index: usize,
        /// The call.
        call_id: String,
    },
    /// Two assistant messages with thinking would merge into one turn: the provider checks a
    /// turn's thinking blocks as one sequence, so two replies' blocks cannot be joined.
    #[error("message {index}: its thinking would join another reply's thinking in one turn")]
    SplitThinking {
        /// The second message.
        index: usize,
    },
    /// An Anthropic message holds what our messages cannot carry.
    #[error("message {index}: {what} cannot be represented")]
    Unsupported {
        /// The Anthropic message.
        index: usize,
        /// What it holds.
        what: String,
    },
    /// [`AnthropicRequest::with_thinking`](crate::anthropic::AnthropicRequest::with_thinking)
    /// was given a budget the provider refuses: below 1,024 tokens, or not below `max_tokens`.
    #[error(
        "extended thinking needs budget_tokens of at least 1024 and below max_tokens \
         ({max_tokens}): got {budget_tokens}; raise max_tokens or lower the budget"
    )]
    ThinkingBudget {
        /// The budget given.
        budget_tokens: u32,
        /// The request's `max_tokens`.
        max_tokens: u32,
    },
    /// The request carries more cache breakpoints of the caller's own than the provider
    /// allows (on tool definitions, or in thinking or raw blocks, which the library neither
    /// places nor clears); the library's own give way to the caller's up to that limit.
    #[error(
        "the request carries {found} cache_control breakpoints of your own (on tool \
         definitions, or in thinking or raw blocks you built); Anthropic allows at most {max}"
    )]
    TooManyBreakpoints {
        /// The breakpoints the request would carry.
        found: usize,
        /// The provider's limit ([`ANTHROPIC_MAX_BREAKPOINTS`](crate::cache::ANTHROPIC_MAX_BREAKPOINTS)).
        max: usize,
    },
    /// A session's request carries its tools (`SessionBuilder::tools`, counted in its budget)
    /// and the [`AnthropicCaching`](super::AnthropicCaching) carries others, which would replace
    /// them uncounted (the pointer tool among them).
    #[error(
        "the session's request carries its own tools ({session}) and the AnthropicCaching \
         carries {caching} more, which would replace them: give the tools to \
         SessionBuilder::tools only (counted in the budget), or to AnthropicCaching::tools \
         for a session without tools"
    )]
    ToolsInTwoPlaces {
        /// The session's tools.
        session: usize,
        /// The caching's tools.
        caching: usize,
    },
}

/// Our messages as Anthropic's: the `system` blocks and the `messages` of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConversation {
    /// The top-level system prompt: one text block per leading system or developer message.
    pub system: Vec<SystemBlock>,
    /// The conversation, roles alternating (consecutive same-role messages merged).
    pub messages: Vec<AnthropicMessage>,
}

/// Our messages as Anthropic's. Leading system and developer messages become `system` blocks;
/// user messages text blocks and tool messages `tool_result` blocks of a user turn; assistant
/// messages their thinking blocks (our [`OpaquePart`]s, replayed byte-for-byte), text and
/// `tool_use` blocks (the call's argument text as `input`, byte-for-byte). Consecutive messages
/// of one role share a turn, thinking first. A call still waiting for its result ends the list
/// as it is ([`check_anthropic`](super::check_anthropic) refuses such a request).
pub fn to_anthropic(messages: &[Message]) -> Result<AnthropicConversation, AnthropicError> {
    convert(messages, &Layout::default())
}

/// How [`convert`] lays a list out beyond [`to_anthropic`]'s rules.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Put a cache breakpoint on the last block of the first this-many messages (on the last
    /// block before it that can carry one, when those are all thinking blocks).
    pub(crate) breakpoint_after: Option<usize>,
    /// Another such breakpoint, after this many messages (the prefix a compaction point left in
    /// place); none when it falls on the same block as `breakpoint_after`'s.
    pub(crate) kept_after: Option<usize>,
    /// Send a system or developer message after the conversation started as a user text block
    /// at its place (Anthropic has no system role inside `messages`), instead of refusing it.
    pub(crate) late_system_as_user: bool,
}

/// [`to_anthropic`] with a [`Layout`].
pub(crate) fn convert(
    messages: &[Message],
    layout: &Layout,
) -> Result<AnthropicConversation, AnthropicError> {
    let carrier = |len: usize| {
        messages[..len.min(messages.len())]
            .iter()
            .rposition(can_carry_breakpoint)
    };
    let stable = layout.breakpoint_after.and_then(carrier);
    let kept = layout.kept_after.and_then(carrier);
    let breakpoint = |index: usize| stable == Some(index) || kept == Some(index);
    let mut system = Vec::new();
    let mut out: Vec<AnthropicMessage> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if message.name.is_some() {
            return Err(AnthropicError::Named { index });
        }
        let (role, mut blocks) = match message.role {
            Role::System | Role::Developer if out.is_empty() => {
                let mut block = SystemBlock::text(message.content.clone());
                if breakpoint(index) {
                    block.cache_control = Some(CacheControl::ephemeral());
                }
                system.push(block);
                continue;
            }
            Role::System | Role::Developer if layout.late_system_as_user => (
                AnthropicRole::User,
                vec![ContentBlock::text(message.content.clone())],
            ),
            Role::System | Role::Developer => {
                return Err(AnthropicError::SystemInConversation {
                    index,
                    role: message.role.as_str(),
                });
            }
            Role::User => (
                AnthropicRole::User,
                vec![ContentBlock::text(message.content.clone())],
            ),
            Role::Tool => (
                AnthropicRole::User,
                vec![ContentBlock::ToolResult {
                    tool_use_id: message.tool_call_id.clone().unwrap_or_default(),
                    content: Some(ToolResultContent::Text(message.content.clone())),
                    is_error: None,
                    cache_control: None,
                }],
            ),
            Role::Assistant => (AnthropicRole::Assistant, assistant_blocks(message, index)?),
        };
        if breakpoint(index) {
            // The breakpoint travels with its block when the turn merges (thinking spliced in
            // front of it stays before it).
            if let Some(block) = blocks
                .iter_mut()
                .rev()
                .find(|b| !matches!(b, ContentBlock::Opaque(_)))
            {
                block.set_cache_control(Some(CacheControl::ephemeral()));
            }
        }
        match out.last_mut() {
            Some(turn) if turn.role == role => {
                let (opaque, rest): (Vec<_>, Vec<_>) = blocks
                    .into_iter()
                    .partition(|b| matches!(b, ContentBlock::Opaque(_)));
                if !opaque.is_empty() {
                    if turn
                        .content
                        .iter()
                        .any(|b| matches!(b, ContentBlock::Opaque(_)))
                    {
                        return Err(AnthropicError::SplitThinking { index });
                    }
                    // Thinking first in its turn (a marker before it keeps its place after).
                    turn.content.splice(0..0, opaque);
                }
                turn.content.extend(rest);
            }
            _ => out.push(AnthropicMessage {
                role,
                content: blocks,
            }),
        }
    }
    Ok(AnthropicConversation {
        system,
        messages: out,
    })
}

/// Whether `message` converts to at least one block that can carry a cache breakpoint (every
/// message but an assistant reply of thinking alone).
fn can_carry_breakpoint(message: &Message) -> bool {
    message.role != Role::Assistant
        || !message.content.is_empty()
        || !message.tool_calls.is_empty()
        || message.opaque.is_empty()
}

/// An assistant message's blocks: thinking, then text (when any, or when nothing else), then
/// one `tool_use` per call.
fn assistant_blocks(message: &Message, index: usize) -> Result<Vec<ContentBlock>, AnthropicError> {
    let mut blocks = Vec::new();
    for part in &message.opaque {
        if !part.kind().is_anthropic() {
            return Err(AnthropicError::ForeignOpaque {
                index,
                kind: part.kind().wire_type(),
            });
        }
        blocks.push(ContentBlock::Opaque(part.clone()));
    }
    if !message.content.is_empty() || message.tool_calls.is_empty() && blocks.is_empty() {
        blocks.push(ContentBlock::text(message.content.clone()));
    }
    for call in &message.tool_calls {
        if !call.arguments.is_object() {
            return Err(AnthropicError::ArgumentsNotObject {
                index,
                call_id: call.id.clone(),
            });
        }
        blocks.push(ContentBlock::ToolUse {
            id: call.id.clone(),
            name: call.name.clone(),
            input: call.arguments.clone(),
            cache_control: None,
        });
    }
    Ok(blocks)
}

/// Anthropic's system prompt and messages as ours: one system message per system block, one
/// user message per text block, one tool message per `tool_result`, one assistant message per
/// assistant turn. Cache breakpoints (`cache_control`) are request metadata, not content: they
/// are read and dropped. Refused (`Unsupported`): images, documents, server tools, citations,
/// `is_error` results, results that are not text, and an assistant turn our message cannot hold
/// in order (thinking after other blocks, several text blocks, text after a `tool_use`).
pub fn from_anthropic(
    system: &[SystemBlock],
    messages: &[AnthropicMessage],
) -> Result<Vec<Message>, AnthropicError> {
    let mut out: Vec<Message> = system
        .iter()
        .map(|b| Message::system(b.text.clone()))
        .collect();
    for (index, message) in messages.iter().enumerate() {
        match message.role {
            AnthropicRole::User => {
                for block in &message.content {
                    out.push(user_block(block, index)?);
                }
            }
            AnthropicRole::Assistant => out.push(assistant_turn(&message.content, index)?),
        }
    }
    Ok(out)
}

/// The model's reply as our assistant message, to push onto the transcript (thinking blocks
/// kept byte-for-byte as they arrived).
pub fn from_anthropic_response(response: &AnthropicResponse) -> Result<Message, AnthropicError> {
    assistant_turn(&response.content, 0)
}

fn unsupported(index: usize, what: impl Into<String>) -> AnthropicError {
    AnthropicError::Unsupported {
        index,
        what: what.into(),
    }
}

fn user_block(block: &ContentBlock, index: usize) -> Result<Message, AnthropicError> {
    match block {
        ContentBlock::Text { text, .. } => Ok(Message::user(text.clone())),
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => {
            if *is_error == Some(true) {
                return Err(unsupported(index, "a tool_result with is_error"));
            }
            let text = match content {
                None => String::new(),
                Some(ToolResultContent::Text(text)) => text.clone(),
                Some(ToolResultContent::Blocks(blocks)) => match blocks.as_slice() {
                    [] => String::new(),
                    [ContentBlock::Text { text, .. }] => text.clone(),
                    _ => return Err(unsupported(index, "a tool_result that is not one text")),
                },
            };
            Ok(Message::tool_result(tool_use_id.clone(), text))
        }
        other => Err(unsupported(
            index,
            format!("a `{}` block in a user message", other.kind()),
        )),
    }
}

fn assistant_turn(blocks: &[ContentBlock], index: usize) -> Result<Message, AnthropicError> {
    let mut opaque: Vec<OpaquePart> = Vec::new();
    let mut text: Option<String> = None;
    let mut calls: Vec<ToolCall> = Vec::new();
    for block in blocks {
        match block {
            // A reply never carries a breakpoint, and the provider refuses one on a thinking
            // block; kept, it would be replayed in every later request (an opaque part goes
            // back byte for byte) and fail each of them.
            ContentBlock::Opaque(part) if block.raw_cache_control().is_some() => {
                return Err(unsupported(
                    index,
                    format!("a `cache_control` on a {} block", part.kind().wire_type()),
                ))
            }
            ContentBlock::Opaque(part) if text.is_none() && calls.is_empty() => {
                opaque.push(part.clone())
            }
            ContentBlock::Opaque(part) => {
                return Err(unsupported(
                    index,
                    format!("{} after text or tool_use", part.kind().wire_type()),
                ))
            }
            ContentBlock::Text { text: t, .. } if text.is_none() && calls.is_empty() => {
                text = Some(t.clone())
            }
            ContentBlock::Text { .. } => {
                return Err(unsupported(
                    index,
                    "several text blocks, or text after tool_use",
                ))
            }
            ContentBlock::ToolUse {
                id, name, input, ..
            } => calls.push(ToolCall::new(id.clone(), name.clone(), input.clone())),
            other => {
                return Err(unsupported(
                    index,
                    format!("a `{}` block in an assistant message", other.kind()),
                ))
            }
        }
    }
    Ok(Message::assistant_with_tools(text.unwrap_or_default(), calls).with_opaque(opaque))
}
