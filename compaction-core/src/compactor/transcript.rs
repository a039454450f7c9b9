//! The engine's side of a `#[transcript]` field: the request overhead, which effects are
//! settled (by scope and key), the token limits the planner works to, the fold summaries, and
//! the mapping of the planner's errors.
//!
//! The request is `[system(window), transcript messages...]`, and the budget covers all of it,
//! counted the chat way ([`chat_tokens`](crate::transcript::chat_tokens)). The transcript is
//! planned first, against what the state's smallest window leaves; the state's evictable
//! fields then get the rest. So the conversation stays as verbatim as the budget allows, and
//! protected state is never traded for it.

use crate::checkpoint::{Compacted, CompactedTranscript};
use crate::compactor::trace;
use crate::compactor::{Compactor, FinishedTranscript, PendingTranscript};
use crate::effects::record::EffectStatus;
use crate::error::CompactionError;
use crate::future::block_on;
use crate::plan::{CollectedTranscript, Collection};
use crate::report::{CompactionReport, PagedResult, TranscriptReport};
use crate::state::schema::Schema;
use crate::store::AsPointer;
use crate::summaries::contract::{checked_summary, DynSummarizer};
use crate::summaries::SummarizerError;
use crate::tokens::TokenCounter;
use crate::transcript::conversation::Message;
use crate::transcript::count::{message_tokens, REPLY_PRIMING_TOKENS};
use crate::transcript::effects::EffectStatuses;
use crate::transcript::error::TranscriptPlanError;
use crate::transcript::plan::{PlannedTranscript, Request, TranscriptBudget, TranscriptPlan};
use crate::transcript::rehydrate::{span_message, SpanReadError};
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
            index, key, scopes, ..
        } => CompactionError::AmbiguousEffect {
            field,
            index,
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

/// One count per outcome of the planned transcript (from the planner's memory: no pass over
/// the input), and the results it paged.
fn transcript_report(
    path: &str,
    messages_in: usize,
    paged: Vec<PagedResult>,
    planned: &PlannedTranscript,
) -> TranscriptReport {
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

    /// The transcript part of a checkpoint whose blobs are stored: reports it, and makes it the
    /// request the next plan of this transcript starts from.
    pub(super) fn complete_transcript(
        &self,
        finished: FinishedTranscript,
        window_tokens: usize,
        report: &mut CompactionReport,
    ) -> CompactedTranscript {
        let FinishedTranscript {
            planned,
            path,
            messages_in,
            paged,
        } = finished;
        report.transcript = Some(transcript_report(&path, messages_in, paged, &planned));
        self.transcript_planner.commit(&planned);
        let request_tokens = window_tokens + request_overhead(&*self.counter) + planned.tokens();
        let reused = 1 + planned.reused_prefix();
        let tokens = planned.tokens();
        let memory = planned.memory;
        CompactedTranscript {
            path,
            messages: memory.messages,
            tokens,
            request_tokens,
            reused,
            memory: memory.record,
        }
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

    /// Reads back, byte-exact and verified, input message `index` of the transcript span
    /// stored under `pointer`: a user run's or a fold's full address
    /// ([`Compacted::span_of`] finds the one holding a message;
    /// [`Compacted::handles`] maps a marker's handle to it). `Ok(None)` when the span does not
    /// hold that message; `Integrity` when the blob behind `pointer` is not a span or a chunk
    /// does not verify.
    ///
    /// ```
    /// use compaction::{Compactable, Compactor, Message, Tokenizer, Transcript};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize)]
    /// struct Agent {
    ///     #[transcript]
    ///     chat: Transcript,
    /// }
    ///
    /// let mut agent = Agent { chat: Transcript::new() };
    /// for turn in 0..200 {
    ///     agent.chat.push(Message::user(format!("constraint {turn}: keep numpy below 2.0")));
    ///     agent.chat.push(Message::assistant("noted ".repeat(30)));
    /// }
    /// let compactor = Compactor::builder().budget(2_000).token_counter(Tokenizer::O200kBase).build()?;
    /// let compacted = compactor.compact_blocking(&agent)?;
    /// // Message #4 left the window in a user run; it comes back exactly, by index.
    /// let span = compacted.span_of(4).expect("message 4 is in a compacted span");
    /// let message = compactor.resolve_message_blocking(&span, 4)?.expect("in the span");
    /// assert_eq!(message, agent.chat.messages()[4]);
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub async fn resolve_message(
        &self,
        pointer: impl AsPointer,
        index: usize,
    ) -> Result<Option<Message>, CompactionError> {
        let pointer = pointer.to_pointer()?;
        span_message(&*self.store, &pointer, index)
            .await
            .map_err(|e| match e {
                SpanReadError::Store(source) => {
                    CompactionError::from_store(source, Some(&pointer.to_string()))
                }
                SpanReadError::NotASpan(_) => CompactionError::Integrity {
                    field: pointer.to_string(),
                },
            })
    }

    /// [`resolve_message`](Self::resolve_message) for synchronous callers.
    pub fn resolve_message_blocking(
        &self,
        pointer: impl AsPointer,
        index: usize,
    ) -> Result<Option<Message>, CompactionError> {
        block_on(self.resolve_message(pointer, index))
    }

    /// Installs the planner memory a checkpoint carries, after checking its seals (as
    /// [`verify_checkpoint`](Self::verify_checkpoint)): the next compaction of its transcript
    /// (the same messages, grown by appends, in any process) plans exactly as the compactor
    /// that wrote the checkpoint would have, with the same blocks, handles and forms, so
    /// requests keep their prefix and handles their meaning across a restart.
    /// [`rehydrate`](Self::rehydrate) does it too; call this when the agent keeps its own state
    /// and only needs the compactor to continue. A checkpoint without a transcript installs
    /// nothing.
    ///
    /// ```
    /// use compaction::{Compactable, Compactor, Compacted, Message, Tokenizer, Transcript};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize, Clone)]
    /// struct Agent {
    ///     #[transcript]
    ///     chat: Transcript,
    /// }
    ///
    /// let build = || Compactor::builder().budget(1_500).token_counter(Tokenizer::O200kBase).build();
    /// let mut agent = Agent { chat: Transcript::new() };
    /// for turn in 0..100 {
    ///     agent.chat.push(Message::user(format!("step {turn}")));
    ///     agent.chat.push(Message::assistant("done ".repeat(20)));
    /// }
    /// let before = build()?;
    /// let saved = serde_json::to_string(&before.compact_blocking(&agent)?).unwrap();
    ///
    /// // Another process: load the checkpoint and the agent's state, resume, go on.
    /// let after = build()?;
    /// let checkpoint: Compacted<Agent> = serde_json::from_str(&saved).unwrap();
    /// after.resume(&checkpoint)?;
    /// agent.chat.push(Message::user("next"));
    /// let warm = before.compact_blocking(&agent)?;
    /// let cold = after.compact_blocking(&agent)?;
    /// assert_eq!(warm.messages(), cold.messages());
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn resume<S>(&self, compacted: &Compacted<S>) -> Result<(), CompactionError> {
        self.verify_checkpoint(compacted)?;
        self.install_memory(compacted);
        Ok(())
    }

    pub(super) fn install_memory<S>(&self, compacted: &Compacted<S>) {
        if let Some(transcript) = &compacted.transcript {
            self.transcript_planner.resume(transcript.planner_memory());
        }
    }
}
