//! The engine's side of a `#[transcript]` field: the request overhead, which effects are
//! settled (by scope and key), the token limits the planner works to, the fold summaries, and
//! the mapping of the planner's errors.
//!
//! The request is `[system(window), transcript messages...]`, and the budget covers all of it,
//! counted the chat way ([`chat_tokens`](crate::transcript::chat_tokens)). The transcript is
//! planned first, against what the state's smallest window leaves; the state's evictable
//! fields then get the rest. So the conversation stays as verbatim as the budget allows, and
//! protected state is never traded for it.

use crate::compactor::builder::Compactor;
use crate::compactor::summarize::{checked_summary, DynSummarizer};
use crate::compactor::trace;
use crate::effects::record::EffectStatus;
use crate::error::CompactionError;
use crate::plan::{CollectedTranscript, Collection};
use crate::report::{PagedResult, TranscriptReport};
use crate::state::schema::Schema;
use crate::summarize::SummarizerError;
use crate::tokens::TokenCounter;
use crate::transcript::conversation::Message;
use crate::transcript::count::{message_tokens, REPLY_PRIMING_TOKENS};
use crate::transcript::effects::EffectStatuses;
use crate::transcript::error::TranscriptPlanError;
use crate::transcript::plan::{PlannedTranscript, Request, TranscriptBudget, TranscriptPlan};
use tracing::Instrument;

/// Tokens a request costs besides the window text and the transcript: the system message's
/// overhead and the reply priming.
pub(super) fn request_overhead(counter: &dyn TokenCounter) -> usize {
    message_tokens(&Message::system(""), counter) + REPLY_PRIMING_TOKENS
}

/// What the state's ledgers say about each effect, by scope and key: a transcript call whose
/// effect no scope shows committed is never folded, and a key-only call that two scopes hold
/// is refused (issue 21.4).
pub(super) fn effect_statuses(collection: &Collection<'_>, schema: &Schema) -> EffectStatuses {
    let mut effects = EffectStatuses::new();
    for (path, log) in collection.effect_logs() {
        let scope = schema
            .field_for_instance(path)
            .map_or_else(|| path.to_owned(), |field| field.ledger_scope(path));
        for effect in log.iter() {
            let settled = effect.status == EffectStatus::Committed;
            effects.insert(scope.clone(), effect.idempotency_key.clone(), settled);
        }
    }
    effects
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
        TranscriptPlanError::AmbiguousEffect {
            index,
            call_id,
            key,
            scopes,
        } => CompactionError::AmbiguousEffect {
            field,
            index,
            call_id,
            key,
            scopes,
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

/// A planned transcript waiting for its summaries, with what its report needs of the input.
pub(super) struct PendingTranscript {
    pub(super) path: String,
    pub(super) plan: TranscriptPlan,
    pub(super) messages_in: usize,
    pub(super) paged: Vec<PagedResult>,
}

/// One count per outcome of the planned transcript (from the planner's memory: no pass over
/// the input), and the results it paged.
pub(super) fn transcript_report(
    pending: (&str, usize, Vec<PagedResult>),
    planned: &PlannedTranscript,
) -> TranscriptReport {
    let (path, messages_in, paged) = pending;
    let counts = planned.counts();
    TranscriptReport {
        field: path.to_owned(),
        messages_in,
        kept: counts.kept,
        stubbed: counts.spilled,
        tombstoned: counts.tombstoned,
        paged,
        folded: counts.folded,
        fold_messages: planned.fold_messages(),
        user_runs: planned.user_runs(),
        summarized_folds: planned.summarized_folds(),
        tokens: planned.tokens(),
        compaction_point: planned.compacted(),
        reused_messages: planned.reused_prefix(),
    }
}

/// The transcript's limits inside a request of `budget` tokens whose window and overhead take
/// `taken`: the hard limit is what is left; the marks are the compactor's shares of the whole
/// request, less `taken`.
pub(super) fn transcript_budget(compactor: &Compactor, taken: usize) -> TranscriptBudget {
    let budget = compactor.budget;
    let limit = budget.saturating_sub(taken);
    let share = |ratio: f64| ((budget as f64 * ratio).floor() as usize).saturating_sub(taken);
    let high_water = share(compactor.high_water).min(limit);
    TranscriptBudget {
        limit,
        high_water,
        low_water: share(compactor.low_water).min(high_water),
    }
}

impl Compactor {
    /// Plans the state's transcript, if it has one, into what the budget leaves after the
    /// window's floor (see `compactor/transcript.rs`); returns the window text's budget.
    pub(super) fn plan_transcript(
        &self,
        collection: &Collection<'_>,
        schema: &Schema,
        floor_tokens: usize,
    ) -> Result<(usize, Option<PendingTranscript>), CompactionError> {
        let Some(field) = the_transcript(collection)? else {
            return Ok((self.budget, None));
        };
        let overhead = request_overhead(&*self.counter);
        let budget = transcript_budget(self, overhead + floor_tokens);
        let effects = effect_statuses(collection, schema);
        let summary_tokens = self.summarizer.is_some().then_some(self.max_summary_tokens);
        let request = Request {
            policy: field.policy,
            budget,
            effects: &effects,
            summary_tokens,
            update: None,
            compact: false,
        };
        let plan = self
            .transcript_planner
            .plan_request(field.transcript, &request)
            .map_err(|e| plan_error(&field.path, budget.limit, self.budget, e))?;
        // The window gets what the transcript leaves; with hysteresis, only up to the low-water
        // mark, so the next turns find room to append.
        let left = self.budget - overhead - plan.tokens();
        let share = ((self.budget as f64 * self.low_water).floor() as usize)
            .saturating_sub(overhead + plan.tokens());
        let window_budget = if self.low_water < 1.0 {
            left.min(share.max(floor_tokens))
        } else {
            left
        };
        let pending = PendingTranscript {
            path: field.path.clone(),
            messages_in: field.transcript.len(),
            paged: plan.planned.paged_results(field.transcript),
            plan,
        };
        Ok((window_budget, Some(pending)))
    }

    /// Summarizes the transcript's folds and completes its plan.
    pub(super) async fn finish_transcript(
        &self,
        path: &str,
        plan: TranscriptPlan,
    ) -> Result<PlannedTranscript, CompactionError> {
        let requests: Vec<(String, usize)> = plan
            .summary_requests()
            .map(|r| (r.text.clone(), r.target_tokens))
            .collect();
        let summarizer = self.summarizer.as_deref();
        let summaries = summarize_folds(summarizer, &*self.counter, path, requests).await?;
        self.transcript_planner
            .finish(plan, summaries)
            .map_err(|e| plan_error(path, 0, self.budget, e))
    }
}
