//! The shape of a transcript as the planner sees it: turns, tool-call units, and which
//! messages must stay verbatim whatever the budget.

use crate::transcript::conversation::{Message, Role, ToolCall};
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// How a transcript field may be compacted (`#[transcript(keep_recent = N, pin_user)]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptPolicy {
    /// The last `keep_recent` user turns and everything after them stay verbatim (default 1:
    /// the current request and the work on it).
    pub keep_recent: usize,
    /// Refuse instead of spilling old user messages.
    pub pin_user: bool,
}

impl Default for TranscriptPolicy {
    fn default() -> Self {
        TranscriptPolicy {
            keep_recent: 1,
            pin_user: false,
        }
    }
}

/// What the rules fix before any budget is looked at.
pub(crate) struct Layout<'a> {
    /// Messages from here on are the last `keep_recent` user turns and what followed them.
    pub(crate) recent_start: usize,
    /// Messages that stay verbatim in every plan: pinned roles, the recent turns, and every
    /// unit (assistant message and its results) with a live effect or a call still in flight.
    pub(crate) locked: Vec<bool>,
    /// Foldable pieces of turns, in order: each starts at a user message, at the start, or
    /// right after a locked message, and ends before the next of these. Locked messages are in
    /// no piece; two pieces with nothing locked between them touch (`a.end == b.start`).
    pub(crate) pieces: Vec<Range<usize>>,
    /// Each call by id, for tombstones to name their tool and arguments.
    pub(crate) calls: HashMap<&'a str, &'a ToolCall>,
}

impl<'a> Layout<'a> {
    /// Reads a validated transcript.
    pub(crate) fn of(
        messages: &'a [Message],
        policy: &TranscriptPolicy,
        live_effects: &HashSet<String>,
    ) -> Self {
        let users: Vec<usize> = (0..messages.len())
            .filter(|&i| messages[i].role == Role::User)
            .collect();
        let recent_start = match policy.keep_recent {
            0 => messages.len(),
            keep if keep <= users.len() => users[users.len() - keep],
            _ => 0,
        };
        let mut locked: Vec<bool> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| m.role.is_pinned() || i >= recent_start)
            .collect();
        let mut calls = HashMap::new();
        for (index, message) in messages.iter().enumerate() {
            if message.tool_calls.is_empty() {
                continue;
            }
            for call in &message.tool_calls {
                calls.insert(call.id.as_str(), call);
            }
            // Validated: a call's results come after it and before the next user or assistant
            // message, so the unit is this message and the tool messages up to there.
            let ids: HashSet<&str> = message.tool_calls.iter().map(|c| c.id.as_str()).collect();
            let results: Vec<usize> = (index + 1..messages.len())
                .take_while(|&j| !matches!(messages[j].role, Role::User | Role::Assistant))
                .filter(|&j| {
                    messages[j].role == Role::Tool
                        && messages[j]
                            .tool_call_id
                            .as_deref()
                            .is_some_and(|id| ids.contains(id))
                })
                .collect();
            let in_flight = results.len() < ids.len();
            let live = message.tool_calls.iter().any(|call| {
                call.effect
                    .as_ref()
                    .is_some_and(|key| live_effects.contains(key))
            });
            // A pinned message between a call and its last result would split the unit across
            // two pieces: the unit stays whole instead.
            let last = results.last().copied().unwrap_or(index);
            let pinned_inside = (index..=last).any(|j| messages[j].role.is_pinned());
            if in_flight || live || pinned_inside || locked[index] {
                locked[index] = true;
                for j in results {
                    locked[j] = true;
                }
            }
        }
        let mut pieces: Vec<Range<usize>> = Vec::new();
        let mut open: Option<usize> = None;
        for (index, message) in messages.iter().enumerate() {
            if locked[index] {
                pieces.extend(open.take().map(|start| start..index));
            } else if message.role == Role::User {
                pieces.extend(open.replace(index).map(|start| start..index));
            } else if open.is_none() {
                open = Some(index);
            }
        }
        pieces.extend(open.map(|start| start..messages.len()));
        Layout {
            recent_start,
            locked,
            pieces,
            calls,
        }
    }
}
