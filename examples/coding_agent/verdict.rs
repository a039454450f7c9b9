//! The verdict on one request: the failures the issue names, checked the same way for both
//! runs, from what the model would actually receive.

use crate::session::{instruction, write_call_id, write_receipt, CONSTRAINT};
use compaction::transcript::{chat_tokens, MARKER_PREFIX};
use compaction::{Message, Role, TokenCounter, Transcript};
use std::collections::BTreeSet;

/// One run's tally over all its requests.
#[derive(Default)]
pub struct Tally {
    pub requests: usize,
    /// Requests a provider would reject: a call without its result or a result without its call.
    pub orphaned_requests: usize,
    /// Requests where the constraint was neither visible nor pointed to.
    pub constraint_lost: usize,
    /// Writes whose instruction a request shows without any sign that it was carried out (or is
    /// pending): a model reading it would run the write again.
    pub writes_reexecuted: BTreeSet<usize>,
    /// Requests that hide the write of unknown outcome (its call is gone).
    pub unknown_write_hidden: usize,
    /// User messages (by index) some request neither showed verbatim nor pointed to.
    pub users_lost: BTreeSet<usize>,
    /// Requests over the budget by the chat formula.
    pub over_budget: usize,
    /// The largest request, in tokens.
    pub largest: usize,
}

impl Tally {
    /// Whether every invariant held on every request.
    pub fn clean(&self) -> bool {
        self.orphaned_requests == 0
            && self.constraint_lost == 0
            && self.writes_reexecuted.is_empty()
            && self.unknown_write_hidden == 0
            && self.users_lost.is_empty()
            && self.over_budget == 0
    }
}

/// What one check needs besides the request.
pub struct Context<'a> {
    /// The full history the request was made from.
    pub history: &'a [Message],
    /// Turns played so far, and the first message of each (`turn_starts[t]` is its user message).
    pub turn_starts: &'a [usize],
    /// The turn whose write has an unknown outcome, once it was played.
    pub unknown_write: Option<usize>,
    pub budget: usize,
    pub counter: &'a dyn TokenCounter,
    /// Reads back message `index` of the span behind a marker's handle (verified); `None`
    /// when it does not resolve.
    pub resolve: &'a dyn Fn(&str, usize) -> Option<Message>,
}

/// The ranges a request's markers of `kind` announce (`⟦compaction:<kind> pN #a..#b⟧`), with
/// their handle.
fn marker_spans(request: &[Message], kind: &str) -> Vec<(String, usize, usize)> {
    let start = format!("{MARKER_PREFIX}{kind} ");
    request
        .iter()
        .filter_map(|m| {
            let header = m.content.strip_prefix(&start)?.split_once('⟧')?.0;
            let mut fields = header.split(' ');
            let handle = fields.next()?.to_owned();
            let (first, last) = fields.next()?.strip_prefix('#')?.split_once("..#")?;
            Some((handle, first.parse().ok()?, last.parse().ok()?))
        })
        .collect()
}

impl Tally {
    /// Checks one request.
    pub fn check(&mut self, request: &[Message], cx: &Context<'_>) {
        self.requests += 1;
        let tokens = chat_tokens(request, cx.counter);
        self.largest = self.largest.max(tokens);
        if tokens > cx.budget {
            self.over_budget += 1;
        }
        let sent: Transcript = request.iter().cloned().collect();
        if sent.validate().is_err() {
            self.orphaned_requests += 1;
        }
        // Everything the model reads: contents and call arguments.
        let mut visible = String::new();
        for message in request {
            visible.push_str(&message.content);
            for call in &message.tool_calls {
                visible.push_str(call.arguments_text());
            }
        }
        // A user message that left is pointed to when a user run covers it and gives it back
        // exactly, by index.
        let runs = marker_spans(request, "users");
        let pointed = |index: usize| {
            runs.iter().any(|(handle, first, last)| {
                (*first..=*last).contains(&index)
                    && (cx.resolve)(handle, index).as_ref() == Some(&cx.history[index])
            })
        };
        let user_messages = cx
            .history
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::User);
        for (index, message) in user_messages {
            if !visible.contains(&message.content) && !pointed(index) {
                self.users_lost.insert(index);
            }
        }
        let constraint_message = cx
            .history
            .iter()
            .position(|m| m.role == Role::User && m.content.contains(CONSTRAINT));
        // Counted from the turn that states it on.
        let constraint_lost = constraint_message
            .is_some_and(|index| !visible.contains(CONSTRAINT) && !pointed(index));
        if constraint_lost {
            self.constraint_lost += 1;
        }
        let folds: Vec<(usize, usize)> = marker_spans(request, "folded")
            .into_iter()
            .map(|(_, first, last)| (first, last))
            .collect();
        let call_visible = |id: &str| {
            request
                .iter()
                .any(|m| m.tool_calls.iter().any(|c| c.id == id))
        };
        for (turn, &start) in cx.turn_starts.iter().enumerate() {
            if !visible.contains(&instruction(turn)) {
                continue;
            }
            let done = visible.contains(&write_receipt(turn))
                || call_visible(&write_call_id(turn))
                || folds.iter().any(|&(a, b)| a <= start && start <= b);
            if !done {
                self.writes_reexecuted.insert(turn);
            }
        }
        if let Some(turn) = cx.unknown_write {
            if !call_visible(&write_call_id(turn)) {
                self.unknown_write_hidden += 1;
            }
        }
    }
}
