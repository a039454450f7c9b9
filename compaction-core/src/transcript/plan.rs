//! The transcript planner: which messages stay, which are stubbed, tombstoned or folded, so the
//! transcript fits its budget under the rules of the module docs. A pure function of its inputs
//! (the cache only remembers counts and hashes).

use crate::store::{ContentHash, Pointer};
use crate::tokens::TokenCounter;
use crate::transcript::conversation::Transcript;
use crate::transcript::conversation::{Message, Role};
use crate::transcript::count::{message_tokens_with, TranscriptPlanner};
use crate::transcript::error::TranscriptPlanError;
use crate::transcript::layout::{Layout, TranscriptPolicy};
use crate::transcript::marker;
use std::collections::HashSet;

/// What happened to one message of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageOutcome {
    /// Sent as it is (with [`VERBATIM_ESCAPE`](crate::transcript::VERBATIM_ESCAPE) in front
    /// when its content begins like a marker).
    Kept,
    /// A user message replaced by a stub; its content is in the store.
    Spilled,
    /// A tool result whose content was replaced by a tombstone; the content is in the store.
    Tombstoned,
    /// Part of a folded run; the run is in the store.
    Folded,
}

/// A folded run that wants a summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldSummaryRequest {
    /// First input message of the run.
    pub first: usize,
    /// Last input message of the run.
    pub last: usize,
    /// The assistant and tool messages of the run, one JSON message per line (its user
    /// messages are not summarized: they stay in place).
    pub text: String,
    /// The most tokens the summary may have.
    pub target_tokens: usize,
}

/// A plan before its summaries: [`TranscriptPlanner::finish`] completes it.
#[derive(Debug, Clone)]
pub struct TranscriptPlan {
    planned: PlannedTranscript,
    pending: Vec<PendingSummary>,
}

#[derive(Debug, Clone)]
struct PendingSummary {
    request: FoldSummaryRequest,
    /// Position of the fold message in the output.
    position: usize,
    /// The fold's header (its content without summary is `without_summary(base)`).
    base: String,
    /// Tokens the plan counted for the fold message with its summary.
    reserved: usize,
    /// Tokens of the fold message without summary (the fallback, never more than `reserved`).
    plain: usize,
}

impl TranscriptPlan {
    /// Tokens of the planned messages, counting each summary at its full target.
    pub fn tokens(&self) -> usize {
        self.planned.tokens
    }

    /// The summaries this plan needs, in order (none without a summarizer).
    pub fn summary_requests(&self) -> impl Iterator<Item = &FoldSummaryRequest> {
        self.pending.iter().map(|p| &p.request)
    }
}

/// A planned transcript: the messages to send, and the blobs to store first.
#[derive(Debug, Clone)]
pub struct PlannedTranscript {
    messages: Vec<Message>,
    outcomes: Vec<MessageOutcome>,
    blobs: Vec<(ContentHash, Vec<u8>)>,
    tokens: usize,
    summarized_folds: usize,
}

impl PlannedTranscript {
    /// The messages to send, in order; they always pass [`Transcript::validate`].
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The messages, owned.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    /// What happened to each input message.
    pub fn outcomes(&self) -> &[MessageOutcome] {
        &self.outcomes
    }

    /// Every blob a stub, tombstone or fold points to: store them before sending.
    pub fn blobs(&self) -> &[(ContentHash, Vec<u8>)] {
        &self.blobs
    }

    /// Tokens of the messages by the chat formula (without the reply priming).
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Fold messages in [`messages`](Self::messages): one per folded run.
    pub fn fold_messages(&self) -> usize {
        let unfolded = self
            .outcomes
            .iter()
            .filter(|o| **o != MessageOutcome::Folded)
            .count();
        self.messages.len() - unfolded
    }

    /// Fold messages that carry a summary (a summary that did not fit its reserve fell back to
    /// the fold without one).
    pub fn summarized_folds(&self) -> usize {
        self.summarized_folds
    }
}

impl TranscriptPlanner {
    /// The token counter.
    pub fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    /// Plans `transcript` into at most `budget` tokens of messages (chat formula, without the
    /// reply priming). `live_effects` are the idempotency keys whose status is `not_started` or
    /// `unknown`; `summary_tokens` is the size of each fold's summary, `None` when no summarizer
    /// is configured.
    pub fn plan(
        &self,
        transcript: &Transcript,
        policy: &TranscriptPolicy,
        budget: usize,
        live_effects: &HashSet<String>,
        summary_tokens: Option<usize>,
    ) -> Result<TranscriptPlan, TranscriptPlanError> {
        transcript.validate()?;
        let messages = transcript.messages();
        let layout = Layout::of(messages, policy, live_effects);
        // A poisoned lock only means a panic mid-plan: the cache holds counts, still right.
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.begin();
        let mut work = crate::transcript::steps::Work::new(
            messages,
            &layout,
            &*self.counter,
            &mut cache,
            summary_tokens,
        );
        work.fit(budget, policy.pin_user);
        let result = if work.total > budget {
            Err(TranscriptPlanError::OverBudget {
                required_tokens: work.total,
                budget,
            })
        } else {
            Ok(assemble(work))
        };
        cache.sweep();
        result
    }

    /// Completes a plan with one summary per request, in order. A summary that would push the
    /// fold past what the plan reserved falls back to the fold without summary (still within
    /// budget); an empty or over-long summary is an error.
    pub fn finish(
        &self,
        plan: TranscriptPlan,
        summaries: Vec<String>,
    ) -> Result<PlannedTranscript, TranscriptPlanError> {
        if summaries.len() != plan.pending.len() {
            return Err(TranscriptPlanError::SummaryCount {
                expected: plan.pending.len(),
                got: summaries.len(),
            });
        }
        let mut planned = plan.planned;
        for (pending, summary) in plan.pending.iter().zip(&summaries) {
            let request = &pending.request;
            if summary.trim().is_empty() {
                return Err(TranscriptPlanError::SummaryEmpty {
                    first: request.first,
                    last: request.last,
                });
            }
            if self
                .counter
                .count_till_limit(summary, request.target_tokens)
                .is_none()
            {
                return Err(TranscriptPlanError::SummaryOverLong {
                    first: request.first,
                    last: request.last,
                    tokens: self.counter.count(summary),
                    target: request.target_tokens,
                });
            }
        }
        for (pending, summary) in plan.pending.into_iter().zip(summaries) {
            let message = &mut planned.messages[pending.position];
            let content = marker::with_summary(&pending.base, &summary);
            let tokens = message_tokens_with(message, &content, &mut |t| self.counter.count(t));
            planned.tokens -= pending.reserved;
            if tokens <= pending.reserved {
                message.content = content;
                planned.tokens += tokens;
                planned.summarized_folds += 1;
            } else {
                message.content = marker::without_summary(&pending.base);
                planned.tokens += pending.plain;
            }
        }
        Ok(planned)
    }

    /// Plans and finishes in one call when no summary is wanted (`summary_tokens` is `None`).
    pub fn plan_without_summaries(
        &self,
        transcript: &Transcript,
        policy: &TranscriptPolicy,
        budget: usize,
        live_effects: &HashSet<String>,
    ) -> Result<PlannedTranscript, TranscriptPlanError> {
        let plan = self.plan(transcript, policy, budget, live_effects, None)?;
        self.finish(plan, Vec::new())
    }
}

/// Builds the output messages and blobs from the decisions.
fn assemble(work: crate::transcript::steps::Work<'_, '_>) -> TranscriptPlan {
    use crate::transcript::steps::Form;
    let messages = work.messages;
    let mut out = Vec::with_capacity(messages.len());
    let mut outcomes = Vec::with_capacity(messages.len());
    let mut blobs: Vec<(ContentHash, Vec<u8>)> = Vec::new();
    let mut seen: HashSet<ContentHash> = HashSet::new();
    let mut pending = Vec::new();
    let mut runs = work.runs.iter().peekable();
    for (index, message) in messages.iter().enumerate() {
        match &work.forms[index] {
            Form::Kept => {
                let mut kept = message.clone();
                if marker::needs_escape(&kept.content) {
                    kept.content = marker::escape(&message.content).into_owned();
                }
                out.push(kept);
                outcomes.push(MessageOutcome::Kept);
            }
            Form::Replaced { text, hash } => {
                if seen.insert(*hash) {
                    blobs.push((*hash, message.content.as_bytes().to_vec()));
                }
                out.push(Message {
                    content: text.clone(),
                    ..shell(message)
                });
                outcomes.push(if message.role == Role::User {
                    MessageOutcome::Spilled
                } else {
                    MessageOutcome::Tombstoned
                });
            }
            Form::Folded => outcomes.push(MessageOutcome::Folded),
        }
        if let Some(run) = runs.next_if(|run| run.end == index + 1) {
            let span = serde_json::to_vec(&messages[run.start..run.end])
                .expect("messages serialize: string keys, JSON values");
            let hash = ContentHash::of(&span);
            debug_assert_eq!(
                Some(hash),
                run.hash,
                "the span hash streamed while planning"
            );
            let base = work.fold_base(run, &Pointer::for_hash(hash));
            let content = if run.summarized() {
                marker::with_summary(&base, "")
            } else {
                marker::without_summary(&base)
            };
            if run.summarized() {
                pending.push(PendingSummary {
                    request: FoldSummaryRequest {
                        first: run.start,
                        last: run.end - 1,
                        text: summary_source(&messages[run.start..run.end]),
                        target_tokens: run.target,
                    },
                    position: out.len(),
                    base,
                    reserved: run.cost,
                    plain: run.plain_cost,
                });
            }
            if seen.insert(hash) {
                blobs.push((hash, span));
            }
            out.push(Message::assistant(content));
        }
    }
    TranscriptPlan {
        planned: PlannedTranscript {
            messages: out,
            outcomes,
            blobs,
            tokens: work.total,
            summarized_folds: 0,
        },
        pending,
    }
}

/// A message without its content and calls (what a stub or tombstone keeps).
fn shell(message: &Message) -> Message {
    Message {
        role: message.role,
        content: String::new(),
        tool_calls: Vec::new(),
        tool_call_id: message.tool_call_id.clone(),
        name: message.name.clone(),
        // Only user and tool messages are stubbed or tombstoned, and they carry no opaque
        // parts (`validate`); a shell never carries them (they never leave their turn).
        opaque: Vec::new(),
    }
}

/// What a summarizer reads for a folded run: its assistant and tool messages as JSON lines.
pub(crate) fn summary_source(run: &[Message]) -> String {
    let mut text = String::new();
    for message in run.iter().filter(|m| m.role != Role::User) {
        // A call's `effect` is the key of its ledger record: the summarizer never sees it (a
        // summary must never stand in for the ledger). Opaque parts (signed thinking,
        // encrypted reasoning) are never shown to a summarizer either. The stored span keeps
        // both verbatim.
        let mut message = message.clone();
        for call in &mut message.tool_calls {
            call.effect = None;
        }
        message.opaque.clear();
        text.push_str(&serde_json::to_string(&message).unwrap_or_default());
        text.push('\n');
    }
    text
}
