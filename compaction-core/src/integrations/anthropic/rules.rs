//! The Messages API's conversation rules, written from its documentation, checked on a request
//! before it is sent: `check_anthropic`.

use crate::integrations::anthropic::wire::{AnthropicMessage, AnthropicRole, ContentBlock};
use std::collections::HashSet;

/// Which rule a conversation breaks; `index` is the message, in Anthropic's `messages`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnthropicRuleError {
    /// No message at all.
    #[error("a request needs at least one message")]
    Empty,
    /// The first message is the assistant's.
    #[error("the first message must be the user's")]
    FirstNotUser,
    /// Two messages in a row of one role (they must be merged).
    #[error("message {index}: the same role as the message before (roles alternate)")]
    SameRoleTwice {
        /// The second message.
        index: usize,
    },
    /// A message with no content block.
    #[error("message {index}: no content")]
    EmptyContent {
        /// The message.
        index: usize,
    },
    /// A `tool_use` not answered by a `tool_result` in the very next (user) message.
    #[error("message {index}: tool_use `{id}` has no tool_result in the next message")]
    UnansweredToolUse {
        /// The assistant message.
        index: usize,
        /// The call.
        id: String,
    },
    /// A `tool_result` whose `tool_use` is not in the message just before.
    #[error("message {index}: tool_result for `{id}`, which the message before did not call")]
    ResultWithoutToolUse {
        /// The user message.
        index: usize,
        /// The id it answers.
        id: String,
    },
    /// A `tool_result` after another kind of block (results come first in their message).
    #[error("message {index}: a tool_result after other content")]
    ResultNotFirst {
        /// The user message.
        index: usize,
    },
    /// A thinking block after other blocks of its turn, or in a user message.
    #[error("message {index}: a thinking block that is not first in an assistant turn")]
    ThinkingNotFirst {
        /// The message.
        index: usize,
    },
    /// Two `tool_use` blocks share an id.
    #[error("message {index}: tool_use id `{id}` used twice")]
    DuplicateToolUseId {
        /// The message with the second one.
        index: usize,
        /// The id.
        id: String,
    },
}

/// Checks the documented rules of a conversation: it starts with the user; roles alternate;
/// no message is empty; every `tool_use` is answered by a `tool_result` in the next message
/// and no `tool_result` comes without its `tool_use` in the message before; results come
/// first in their message; thinking blocks come first in their assistant turn (that they are
/// unchanged is kept by construction: they are the raw blocks that arrived); tool ids are
/// unique. The first broken rule, in message order, is the error.
pub fn check_anthropic(messages: &[AnthropicMessage]) -> Result<(), AnthropicRuleError> {
    let Some(first) = messages.first() else {
        return Err(AnthropicRuleError::Empty);
    };
    if first.role != AnthropicRole::User {
        return Err(AnthropicRuleError::FirstNotUser);
    }
    let mut ids = HashSet::new();
    let mut called: Vec<&str> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if index > 0 && messages[index - 1].role == message.role {
            return Err(AnthropicRuleError::SameRoleTwice { index });
        }
        if message.content.is_empty() {
            return Err(AnthropicRuleError::EmptyContent { index });
        }
        match message.role {
            AnthropicRole::User => {
                let mut answered = HashSet::new();
                let mut other_seen = false;
                for block in &message.content {
                    match block {
                        ContentBlock::ToolResult { tool_use_id, .. } => {
                            if other_seen {
                                return Err(AnthropicRuleError::ResultNotFirst { index });
                            }
                            if !called.contains(&tool_use_id.as_str()) {
                                return Err(AnthropicRuleError::ResultWithoutToolUse {
                                    index,
                                    id: tool_use_id.clone(),
                                });
                            }
                            answered.insert(tool_use_id.as_str());
                        }
                        ContentBlock::Opaque(_) => {
                            return Err(AnthropicRuleError::ThinkingNotFirst { index })
                        }
                        _ => other_seen = true,
                    }
                }
                if let Some(id) = called.iter().find(|id| !answered.contains(*id)) {
                    return Err(AnthropicRuleError::UnansweredToolUse {
                        index: index - 1,
                        id: (*id).to_owned(),
                    });
                }
                called.clear();
            }
            AnthropicRole::Assistant => {
                let mut other_seen = false;
                for block in &message.content {
                    match block {
                        ContentBlock::Opaque(_) if other_seen => {
                            return Err(AnthropicRuleError::ThinkingNotFirst { index })
                        }
                        ContentBlock::Opaque(_) => {}
                        ContentBlock::ToolUse { id, .. } => {
                            other_seen = true;
                            if !ids.insert(id.as_str()) {
                                return Err(AnthropicRuleError::DuplicateToolUseId {
                                    index,
                                    id: id.clone(),
                                });
                            }
                            called.push(id);
                        }
                        ContentBlock::ToolResult { tool_use_id, .. } => {
                            return Err(AnthropicRuleError::ResultWithoutToolUse {
                                index,
                                id: tool_use_id.clone(),
                            })
                        }
                        _ => other_seen = true,
                    }
                }
            }
        }
    }
    match called.first() {
        Some(id) => Err(AnthropicRuleError::UnansweredToolUse {
            index: messages.len() - 1,
            id: (*id).to_owned(),
        }),
        None => Ok(()),
    }
}
