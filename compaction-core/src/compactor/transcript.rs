//! The engine's side of a `#[transcript]` field: the request overhead, which calls are live,
//! the fold summaries, and the mapping of the planner's errors.
//!
//! The request is `[system(window), transcript messages...]`, and the budget covers all of it,
//! counted the chat way ([`chat_tokens`](crate::transcript::chat_tokens)). The transcript is
//! planned first, against what the state's smallest window leaves; the state's evictable
//! fields then get the rest. So the conversation stays as verbatim as the budget allows, and
//! protected state is never traded for it.

use crate::checkpoint::CompactedTranscript;
use crate::compactor::trace;
use crate::compactor::Compactor;
use crate::error::CompactionError;
use crate::plan::{CollectedTranscript, Collection};
use crate::report::TranscriptReport;
use crate::store::ContentHash;
use crate::summaries::contract::{checked_summary, DynSummarizer};
use crate::summaries::SummarizerError;
use crate::tokens::TokenCounter;
use crate::transcript::conversation::{Message, Transcript};
use crate::transcript::count::{message_tokens, REPLY_PRIMING_TOKENS};
use crate::transcript::error::TranscriptPlanError;
use crate::transcript::plan::{MessageOutcome, PlannedTranscript, TranscriptPlan};
use std::collections::HashSet;
use tracing::Instrument;

/// Tokens a request costs besides the window text and the transcript: the system message's
/// overhead and the reply priming.
pub(super) fn request_overhead(counter: &dyn TokenCounter) -> usize {
    message_tokens(&Message::system(""), counter) + REPLY_PRIMING_TOKENS
}

/// The effect keys of the transcript's calls that no ledger of the state shows committed: such
/// a call is never folded (an effect in no ledger at all cannot be shown settled).
pub(super) fn live_effects(transcript: &Transcript, committed: &HashSet<&str>) -> HashSet<String> {
    transcript
        .iter()
        .flat_map(|m| &m.tool_calls)
        .filter_map(|call| call.effect.as_deref())
        .filter(|key| !committed.contains(key))
        .map(str::to_owned)
        .collect()
}

/// The state's one `#[transcript]` field, if any.
pub(super) fn the_transcript<'c, 'a>(
    collection: &'c Collection<'a>,
) -> Result<Option<&'c CollectedTranscript<'a>>, CompactionError> {
    match collection.transcripts.as_slice() {
        [] => Ok(None),
        [field] => Ok(Some(field)),
        [_, second, ..] => Err(CompactionError::SchemaMismatch {
            field: second.path.clone(),
            reason: "a state holds at most one #[transcript] field (its messages are the \
                     request's); this is a second one"
                .into(),
        }),
    }
}

/// One summary per fold request `(source, target)`, each held to its contract (none when no
/// summarizer is configured: then the planner asked for none).
pub(super) async fn summarize_folds(
    summarizer: Option<&dyn DynSummarizer>,
    counter: &dyn TokenCounter,
    field: &str,
    requests: Vec<(String, usize)>,
) -> Result<Vec<String>, CompactionError> {
    let mut summaries = Vec::with_capacity(requests.len());
    let Some(summarizer) = summarizer else {
        return Ok(summaries);
    };
    for (source, target) in requests {
        let span = trace::summarize_span(field, target);
        let summary = checked_summary(summarizer, counter, field, &source, target)
            .instrument(span.clone())
            .await;
        trace::summary_made(&span, &summary, counter);
        summaries.push(summary.map_err(CompactionError::Summarizer)?);
    }
    Ok(summaries)
}

/// The planner's error as the engine reports it.
pub(super) fn plan_error(
    field: &str,
    available: usize,
    budget: usize,
    error: TranscriptPlanError,
) -> CompactionError {
    let field = field.to_owned();
    match error {
        TranscriptPlanError::Invalid(source) => {
            CompactionError::InvalidTranscript { field, source }
        }
        TranscriptPlanError::OverBudget {
            required_tokens, ..
        } => CompactionError::TranscriptOverBudget {
            field,
            required_tokens,
            available,
            budget,
        },
        TranscriptPlanError::SummaryEmpty { .. } => {
            CompactionError::Summarizer(SummarizerError::Empty { field })
        }
        TranscriptPlanError::SummaryOverLong { tokens, target, .. } => {
            CompactionError::Summarizer(SummarizerError::OverLong {
                field,
                tokens,
                target,
            })
        }
        TranscriptPlanError::SummaryCount { expected, got } => CompactionError::Summarizer(
            SummarizerError::failed(&field, format!("{got} summaries for {expected} folds")),
        ),
    }
}

/// A completed transcript, the blobs its stubs, tombstones and folds point to, and its report.
pub(super) type FinishedTranscript = (
    CompactedTranscript,
    Vec<(ContentHash, Vec<u8>)>,
    TranscriptReport,
);

/// One count per outcome of the planned transcript.
fn transcript_report(path: &str, planned: &PlannedTranscript) -> TranscriptReport {
    let outcomes = planned.outcomes();
    let count = |wanted: MessageOutcome| outcomes.iter().filter(|o| **o == wanted).count();
    TranscriptReport {
        field: path.to_owned(),
        messages_in: outcomes.len(),
        kept: count(MessageOutcome::Kept),
        stubbed: count(MessageOutcome::Spilled),
        tombstoned: count(MessageOutcome::Tombstoned),
        folded: count(MessageOutcome::Folded),
        fold_messages: planned.fold_messages(),
        summarized_folds: planned.summarized_folds(),
        tokens: planned.tokens(),
    }
}

impl Compactor {
    /// Plans the state's transcript, if it has one, into what the budget leaves after the
    /// window's floor (see `compactor/transcript.rs`); returns the window text's budget.
    pub(super) fn plan_transcript(
        &self,
        collection: &Collection<'_>,
        floor_tokens: usize,
    ) -> Result<(usize, Option<(String, TranscriptPlan)>), CompactionError> {
        let Some(field) = the_transcript(collection)? else {
            return Ok((self.budget, None));
        };
        let overhead = request_overhead(&*self.counter);
        let available = self.budget.saturating_sub(overhead + floor_tokens);
        let live = live_effects(field.transcript, &collection.committed_effects());
        let summary_tokens = self.summarizer.is_some().then_some(self.max_summary_tokens);
        let plan = self
            .transcript_planner
            .plan(
                field.transcript,
                &field.policy,
                available,
                &live,
                summary_tokens,
            )
            .map_err(|e| plan_error(&field.path, available, self.budget, e))?;
        let window_budget = self.budget - overhead - plan.tokens();
        Ok((window_budget, Some((field.path.clone(), plan))))
    }

    /// Summarizes the transcript's folds and completes its plan.
    pub(super) async fn finish_transcript(
        &self,
        path: String,
        plan: TranscriptPlan,
        window_tokens: usize,
    ) -> Result<FinishedTranscript, CompactionError> {
        let requests: Vec<(String, usize)> = plan
            .summary_requests()
            .map(|r| (r.text.clone(), r.target_tokens))
            .collect();
        let summarizer = self.summarizer.as_deref();
        let summaries = summarize_folds(summarizer, &*self.counter, &path, requests).await?;
        let planned = self
            .transcript_planner
            .finish(plan, summaries)
            .map_err(|e| plan_error(&path, 0, self.budget, e))?;
        let (blobs, tokens) = (planned.blobs().to_vec(), planned.tokens());
        let request_tokens = window_tokens + request_overhead(&*self.counter) + tokens;
        let report = transcript_report(&path, &planned);
        let messages = planned.into_messages();
        Ok((
            CompactedTranscript {
                path,
                messages,
                tokens,
                request_tokens,
            },
            blobs,
            report,
        ))
    }
}
