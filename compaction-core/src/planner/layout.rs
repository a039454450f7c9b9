//! The shape of a transcript as the planner sees it: which messages are anchors (verbatim in
//! place whatever the budget), where the recent turns start, and where a compacted range may
//! end.

use crate::conversation::transcript::{Message, Role};
use crate::planner::effects::EffectStatuses;
use crate::planner::error::TranscriptPlanError;
use crate::planner::policy::TranscriptPolicy;
use std::collections::HashSet;
use std::ops::Range;

/// The zone a compaction point may change: input messages `start..end` (everything after the
/// blocks), with what the rules fix before any budget is looked at.
#[derive(Debug, Clone)]
pub(crate) struct Zone {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// `anchor[i - start]`: message `i` stays in place in its current form, whatever the
    /// budget: pinned roles, units with a live effect or a call in flight, pending user
    /// messages; and the opening's messages, while the point keeps the opening.
    pub(crate) anchor: Vec<bool>,
    /// Soft compaction (towards the low-water mark) takes only messages before this: the
    /// recent turns and the newest user message are left to the hard steps.
    pub(crate) soft_end: usize,
    /// The newest user message (never compacted), or `end` when the zone has none.
    pub(crate) newest_user: usize,
}

impl Zone {
    /// Whether message `i` is an anchor.
    pub(crate) fn is_anchor(&self, i: usize) -> bool {
        self.anchor[i - self.start]
    }
}

/// Whether a compacted range may end before message `i`: never between a call and its results.
pub(crate) fn is_cut(messages: &[Message], i: usize) -> bool {
    i >= messages.len() || messages[i].role != Role::Tool
}

/// Reads the zone `start..` of a validated transcript whose opening to keep ends at input
/// `opening` (`planner::opening`; `0` when the point does not keep one).
pub(crate) fn zone(
    messages: &[Message],
    start: usize,
    policy: &TranscriptPolicy,
    effects: &EffectStatuses,
    opening: usize,
) -> Result<Zone, TranscriptPlanError> {
    let end = messages.len();
    let range = start..end;
    let users: Vec<usize> = range
        .clone()
        .filter(|&i| messages[i].role == Role::User)
        .collect();
    let recent = match policy.keep_recent {
        0 => end,
        keep if keep <= users.len() => users[users.len() - keep],
        _ => start,
    };
    let newest_user = users.last().copied().unwrap_or(end);
    let mut anchor = anchors(messages, range.clone(), effects)?;
    // Pending user messages: nothing after them has answered them yet (issue 21.3).
    let last_assistant = messages[start..]
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map(|i| start + i);
    for &user in &users {
        if last_assistant.is_none_or(|a| user > a) {
            anchor[user - start] = true;
        }
    }
    // The opening ends at a cut, so it holds whole units.
    for flag in anchor.iter_mut().take(opening.saturating_sub(start)) {
        *flag = true;
    }
    Ok(Zone {
        start,
        end,
        anchor,
        soft_end: recent.min(newest_user).max(start),
        newest_user,
    })
}

/// `anchor` flags for `range` (cut-aligned): pinned roles, and every unit (an assistant
/// message with calls and its results) with a live effect, a call still in flight, or a pinned
/// message inside. Pending user messages are the zone's business (see [`zone`]).
pub(crate) fn anchors(
    messages: &[Message],
    range: Range<usize>,
    effects: &EffectStatuses,
) -> Result<Vec<bool>, TranscriptPlanError> {
    let start = range.start;
    let mut anchor: Vec<bool> = messages[range.clone()]
        .iter()
        .map(|m| m.role.is_pinned())
        .collect();
    for index in range.clone() {
        let message = &messages[index];
        if message.tool_calls.is_empty() {
            continue;
        }
        let mut live = false;
        for call in &message.tool_calls {
            match effects.is_settled(call) {
                Ok(settled) => live |= !settled,
                Err(ambiguous) => {
                    return Err(TranscriptPlanError::AmbiguousEffect {
                        index,
                        call_id: call.id.clone(),
                        key: ambiguous.key,
                        scopes: ambiguous.scopes,
                    })
                }
            }
        }
        // Validated: a call's results come after it and before the next user or assistant
        // message, so the unit is this message and the tool messages up to there.
        let ids: HashSet<&str> = message.tool_calls.iter().map(|c| c.id.as_str()).collect();
        let mut last = index;
        let mut answered = 0;
        let mut first_pinned = None;
        for (j, next) in messages.iter().enumerate().skip(index + 1) {
            if matches!(next.role, Role::User | Role::Assistant) {
                break;
            }
            if next.role.is_pinned() {
                first_pinned.get_or_insert(j);
            }
            if next.role == Role::Tool
                && next
                    .tool_call_id
                    .as_deref()
                    .is_some_and(|id| ids.contains(id))
            {
                answered += 1;
                last = j;
            }
        }
        let in_flight = answered < ids.len();
        // A pinned message between a call and its last result: the unit stays whole.
        let pinned_inside = first_pinned.is_some_and(|p| p < last);
        if live || in_flight || pinned_inside {
            for flag in &mut anchor[index - start..=last.min(range.end - 1) - start] {
                *flag = true;
            }
        }
    }
    Ok(anchor)
}
