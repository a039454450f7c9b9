//! The planner's steps, in the order the rules give: tombstone old tool results, fold old
//! turns, drop fold summaries, stub old user messages; each takes the oldest candidates first
//! and stops as soon as the transcript fits.

use crate::store::{ContentHash, Pointer};
use crate::tokens::TokenCounter;
use crate::transcript::conversation::{Message, Role, ToolCall};
use crate::transcript::count::{message_tokens_with, TextCache};
use crate::transcript::layout::Layout;
use crate::transcript::marker::{self, FoldHeader};
use sha2::{Digest, Sha256};

/// What a message becomes.
pub(crate) enum Form {
    /// Sent as it is (escaped if it begins like a marker).
    Kept,
    /// Its content replaced by a stub or tombstone; `hash` addresses the content.
    Replaced { text: String, hash: ContentHash },
    /// Inside a folded run (user messages of a run are `Kept` or `Replaced`, never `Folded`).
    Folded,
}

/// A run of consecutive folded turns, standing as one message after its user messages.
pub(crate) struct Run<'m> {
    /// First input message of the run.
    pub(crate) start: usize,
    /// One past its last input message.
    pub(crate) end: usize,
    hasher: SpanHasher,
    /// Hash of the stored span (`messages[start..end]` as a JSON array).
    pub(crate) hash: Option<ContentHash>,
    users: usize,
    calls: Vec<&'m ToolCall>,
    folded_messages: usize,
    source_tokens: usize,
    /// Tokens the summary may have.
    pub(crate) target: usize,
    summary_allowed: bool,
    /// Tokens counted for the fold message (with the summary reserve when summarized).
    pub(crate) cost: usize,
    /// Tokens of the fold message without summary.
    pub(crate) plain_cost: usize,
    /// What the folded messages were before, to undo a fold that does not pay for itself.
    undo: Vec<(usize, usize, Form)>,
    /// Tokens the folded messages cost before.
    replaced_cost: usize,
}

impl Run<'_> {
    /// Whether this fold carries a summary: a summarizer is configured, the step that drops
    /// summaries has not reached it, and the summary is smaller than what it replaces.
    pub(crate) fn summarized(&self) -> bool {
        self.summary_allowed && self.target > 0 && self.target < self.source_tokens
    }
}

/// The decisions so far and what they cost.
pub(crate) struct Work<'m, 'c> {
    pub(crate) messages: &'m [Message],
    layout: &'c Layout<'m>,
    counter: &'c dyn TokenCounter,
    cache: &'c mut TextCache,
    summary_tokens: Option<usize>,
    pub(crate) forms: Vec<Form>,
    kept_costs: Vec<usize>,
    costs: Vec<usize>,
    /// Tokens of the output as decided (summaries at their reserve).
    pub(crate) total: usize,
    pub(crate) runs: Vec<Run<'m>>,
}

impl<'m, 'c> Work<'m, 'c> {
    /// Everything kept: the starting point.
    pub(crate) fn new(
        messages: &'m [Message],
        layout: &'c Layout<'m>,
        counter: &'c dyn TokenCounter,
        cache: &'c mut TextCache,
        summary_tokens: Option<usize>,
    ) -> Self {
        let kept_costs: Vec<usize> = messages
            .iter()
            .map(|m| {
                let content = marker::escape(&m.content);
                message_tokens_with(m, &content, &mut |t| cache.tokens(t, counter))
            })
            .collect();
        Work {
            messages,
            layout,
            counter,
            cache,
            summary_tokens,
            forms: messages.iter().map(|_| Form::Kept).collect(),
            total: kept_costs.iter().sum(),
            costs: kept_costs.clone(),
            kept_costs,
            runs: Vec::new(),
        }
    }

    /// Applies the steps in order until the output fits `budget` or nothing is left to take.
    pub(crate) fn fit(&mut self, budget: usize, pin_user: bool) {
        self.replace_old(budget, Role::Tool);
        self.fold_turns(budget);
        self.drop_summaries(budget);
        if !pin_user {
            self.replace_old(budget, Role::User);
        }
    }

    fn tokens_with(&mut self, message: &Message, content: &str) -> usize {
        let (cache, counter) = (&mut *self.cache, self.counter);
        message_tokens_with(message, content, &mut |t| cache.tokens(t, counter))
    }

    /// Tombstones old tool results (`Role::Tool`) or stubs old user messages (`Role::User`),
    /// oldest first, each only when that makes it smaller.
    fn replace_old(&mut self, budget: usize, role: Role) {
        let messages = self.messages;
        for (index, message) in messages.iter().enumerate() {
            if self.total <= budget || index >= self.layout.recent_start {
                return;
            }
            if message.role != role
                || self.layout.locked[index]
                || !matches!(self.forms[index], Form::Kept)
            {
                continue;
            }
            let hash = self.cache.hash(&message.content);
            let pointer = Pointer::for_hash(hash);
            let bytes = message.content.len();
            let text = match role {
                Role::User => marker::stub_text(&pointer, index, bytes),
                _ => {
                    let call = message
                        .tool_call_id
                        .as_deref()
                        .and_then(|id| self.layout.calls.get(id).copied());
                    marker::tombstone_text(&pointer, call, bytes)
                }
            };
            let cost = self.tokens_with(message, &text);
            if cost < self.costs[index] {
                self.total = self.total - self.costs[index] + cost;
                self.costs[index] = cost;
                self.forms[index] = Form::Replaced { text, hash };
            }
        }
    }

    /// Folds old turns, oldest first, joining consecutive ones into one run (a turn with a
    /// locked unit folds around it: the unit stays in place, between two runs). A run whose fold
    /// message costs more than the messages it replaced is undone when it closes; one that pays
    /// for itself only without its summary loses the summary.
    fn fold_turns(&mut self, budget: usize) {
        let messages = self.messages;
        for turn in &self.layout.pieces {
            if self.total <= budget {
                break;
            }
            let turn = turn.clone();
            let extends = self.runs.last().is_some_and(|run| run.end == turn.start);
            if !extends {
                self.close_last_run();
                self.runs.push(Run {
                    start: turn.start,
                    end: turn.start,
                    hasher: SpanHasher::default(),
                    hash: None,
                    users: 0,
                    calls: Vec::new(),
                    folded_messages: 0,
                    source_tokens: 0,
                    target: self.summary_tokens.unwrap_or(0),
                    summary_allowed: self.summary_tokens.is_some(),
                    cost: 0,
                    plain_cost: 0,
                    undo: Vec::new(),
                    replaced_cost: 0,
                });
            }
            let r = self.runs.len() - 1;
            for index in turn.clone() {
                let message = &messages[index];
                let json = serde_json::to_vec(message).expect("a message serializes");
                let run = &mut self.runs[r];
                run.hasher.push(&json);
                if message.role == Role::User {
                    run.users += 1;
                    continue;
                }
                run.folded_messages += 1;
                run.source_tokens += self.kept_costs[index];
                run.calls.extend(&message.tool_calls);
                run.replaced_cost += self.costs[index];
                let before = std::mem::replace(&mut self.forms[index], Form::Folded);
                run.undo.push((index, self.costs[index], before));
                self.total -= self.costs[index];
                self.costs[index] = 0;
            }
            self.runs[r].end = turn.end;
            self.recost(r);
        }
        self.close_last_run();
    }

    /// Keeps the last run only if it saves tokens (without its summary if need be).
    fn close_last_run(&mut self) {
        let Some(run) = self.runs.last() else {
            return;
        };
        if run.plain_cost >= run.replaced_cost {
            let run = self.runs.pop().expect("checked above");
            self.total = self.total - run.cost + run.replaced_cost;
            for (index, cost, form) in run.undo {
                self.costs[index] = cost;
                self.forms[index] = form;
            }
        } else if run.cost >= run.replaced_cost {
            let r = self.runs.len() - 1;
            self.runs[r].summary_allowed = false;
            self.recost(r);
        }
    }

    /// Drops fold summaries, oldest first: a summary is a convenience, user messages are not.
    fn drop_summaries(&mut self, budget: usize) {
        for r in 0..self.runs.len() {
            if self.total <= budget {
                return;
            }
            if self.runs[r].summarized() {
                self.runs[r].summary_allowed = false;
                self.recost(r);
            }
        }
    }

    /// Prices run `r` again after it changed.
    fn recost(&mut self, r: usize) {
        let hash = self.runs[r].hasher.hash();
        self.runs[r].hash = Some(hash);
        let base = self.fold_base(&self.runs[r], &Pointer::for_hash(hash));
        let template = Message::assistant(String::new());
        let plain = self.tokens_with(&template, &marker::without_summary(&base));
        let cost = if self.runs[r].summarized() {
            self.tokens_with(&template, &marker::with_summary(&base, "")) + self.runs[r].target
        } else {
            plain
        };
        let run = &mut self.runs[r];
        self.total = self.total - run.cost + cost;
        run.cost = cost;
        run.plain_cost = plain;
    }

    /// The header of run `run`'s fold message.
    pub(crate) fn fold_base(&self, run: &Run<'_>, pointer: &Pointer) -> String {
        marker::fold_base(&FoldHeader {
            pointer,
            users: run.users,
            first: run.start,
            last: run.end - 1,
            folded_messages: run.folded_messages,
            calls: &run.calls,
        })
    }
}

/// SHA-256 of a JSON array streamed element by element, so a run that grows by one turn
/// re-hashes only that turn.
#[derive(Clone, Default)]
pub(crate) struct SpanHasher {
    hasher: Sha256,
    elements: usize,
}

impl SpanHasher {
    /// Appends one element's JSON.
    pub(crate) fn push(&mut self, json: &[u8]) {
        self.hasher
            .update(if self.elements == 0 { b"[" } else { b"," });
        self.hasher.update(json);
        self.elements += 1;
    }

    /// The hash of the array so far.
    pub(crate) fn hash(&self) -> ContentHash {
        let mut hasher = self.hasher.clone();
        if self.elements == 0 {
            hasher.update(b"[");
        }
        hasher.update(b"]");
        let digest: [u8; 32] = hasher.finalize().into();
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        ContentHash::from_hex(&hex).expect("64 hex digits")
    }
}
