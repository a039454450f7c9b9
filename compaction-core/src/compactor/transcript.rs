//! The engine's side of a `#[transcript]` field: the request overhead, which calls are live,
//! the fold summaries, and the mapping of the planner's errors.
//!
//! The request is `[system(window), transcript messages...]`, and the budget covers all of it,
//! counted the chat way ([`chat_tokens`](crate::transcript::chat_tokens)). The transcript is
//! planned first, against what the state's smallest window leaves; the state's evictable
//! fields then get the rest. So the conversation stays as verbatim as the budget allows, and
//! protected state is never traded for it.

use crate::compactor::summarize::{checked_summary, DynSummarizer};
use crate::error::CompactionError;
use crate::plan::{CollectedTranscript, Collection};
use crate::summarize::SummarizerError;
use crate::tokens::TokenCounter;
use crate::transcript::conversation::{Message, Transcript};
use crate::transcript::count::{message_tokens, REPLY_PRIMING_TOKENS};
use crate::transcript::error::TranscriptPlanError;
use std::collections::HashSet;

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
        let summary = checked_summary(summarizer, counter, field, &source, target)
            .await
            .map_err(CompactionError::Summarizer)?;
        summaries.push(summary);
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
