//! The engine's side of a `#[transcript]` field: the request overhead, which effects are
//! settled (by scope and key), the token limits the planner works to, and the mapping of the
//! planner's errors (the fold summaries are in `summarize.rs`).
//!
//! The request is the window at the front (as the compactor's
//! [`ChatFormat`](crate::transcript::ChatFormat) sends it: a system message by default), then
//! the transcript's messages, and the budget covers all of it, counted the format's way. The
//! transcript is planned first, against what the state's smallest window leaves; the state's
//! evictable fields then get the rest. So the conversation stays as verbatim as the budget
//! allows, and protected state is never traded for it.

use crate::checkpoint::{
    Compacted, CompactedTranscript, FrontFields, MessageDigests, WindowRecord,
};
use crate::compactor::request::{self, WindowMemory};
use crate::compactor::{
    Compactor, FinishedTranscript, NextRequest, PendingTranscript, RequestParts,
};
use crate::conversation::transcript::{Message, Transcript};
use crate::error::CompactionError;
use crate::future::block_on;
use crate::plan::CollectedTranscript;
use crate::planner::effects::EffectStatuses;
use crate::planner::error::TranscriptPlanError;
use crate::planner::plan::{PlannedTranscript, Request, TranscriptBudget, TranscriptPlan};
use crate::planner::policy::TranscriptPolicy;
use crate::planner::rehydrate::{span_message, SpanReadError};
use crate::report::{CompactionReport, PagedResult, TranscriptReport};
use crate::state::schema::Schema;
use crate::store::AsPointer;
use crate::summaries::SummarizerError;
use crate::window::Entry;
use std::sync::Arc;

impl Compactor {
    /// What every request costs beside its window's text and its messages: the window
    /// message's own overhead, the reply priming, and the tool definitions.
    fn request_overhead(&self) -> usize {
        self.chat_format.window_tokens("", &*self.counter)
            + self.chat_format.reply_priming()
            + self.tools_tokens
    }
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
    summaries_skipped: usize,
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
        summaries_skipped,
        tokens: planned.tokens(),
        compaction_point: planned.compacted(),
        reused_messages: planned.reused_prefix(),
    }
}

/// What a request's record says of the fields its front was rendered from.
fn front_fields(front: Option<&[Entry]>) -> FrontFields {
    front.map_or(FrontFields::Unknown, |fields| {
        FrontFields::Fields(fields.to_vec())
    })
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
    /// Plans the state's transcript into what the budget leaves after a window of
    /// `floor_tokens` (a request from nothing, or a compaction point); returns the window
    /// text's budget and the plan waiting for its summaries.
    pub(super) fn plan_transcript(
        &self,
        field: &CollectedTranscript<'_>,
        effects: &EffectStatuses,
        floor_tokens: usize,
    ) -> Result<(usize, PendingTranscript), CompactionError> {
        let overhead = self.request_overhead();
        let budget = transcript_budget(self, overhead + floor_tokens);
        let request = self.request(field.policy, budget, effects, None, false);
        let plan = self
            .transcript_planner
            .plan_request(field.transcript, &request)
            .map_err(|e| plan_error(&field.path, budget.limit, self.budget, e))?;
        // The window gets what the transcript leaves; with hysteresis, only up to the low-water
        // mark, so the next turns find room to append.
        let left = self.budget - overhead - plan.tokens();
        let share = ((self.budget as f64 * self.low_water).floor() as usize)
            .saturating_sub(overhead + plan.tokens());
        // And never past the window's share, when one is set: a window that grows into the
        // room the transcript leaves (an effect log listed record by record) is rendered again,
        // larger, at every compaction point, and everything after it leaves the prompt cache.
        let cap = self.window_share.unwrap_or(usize::MAX);
        let window_budget = if self.low_water < 1.0 {
            left.min(share.min(cap).max(floor_tokens))
        } else {
            left.min(cap.max(floor_tokens))
        };
        let pending = PendingTranscript {
            path: field.path.clone(),
            messages_in: field.transcript.len(),
            paged: plan.planned.paged_results(field.transcript),
            plan,
        };
        Ok((window_budget, pending))
    }

    fn request<'a>(
        &self,
        policy: TranscriptPolicy,
        budget: TranscriptBudget,
        effects: &'a EffectStatuses,
        update: Option<&'a str>,
        compact: bool,
    ) -> Request<'a> {
        Request {
            policy,
            budget,
            effects,
            summary_tokens: self.summarizer.is_some().then_some(self.max_summary_tokens),
            update,
            compact,
            page_over: self.page_results_over,
            verbatim_first: self.verbatim_first,
            keep_first: self.keep_first,
        }
    }

    /// The window the last request of `transcript` showed, when this compactor remembers that
    /// request and `transcript` grew from it.
    pub(super) fn remembered_window(&self, transcript: &Transcript) -> Option<Arc<WindowMemory>> {
        let base = self.transcript_planner.memory_for(transcript);
        if base.planned_len() == 0 {
            return None;
        }
        self.windows.get(base.key())
    }

    /// A request planned from nothing, or at a compaction point with a window planned again:
    /// its summaries, and this window at the front.
    pub(super) async fn first_request(
        &self,
        pending: PendingTranscript,
        entries: &[Entry],
        window: &str,
        tokens: usize,
    ) -> Result<RequestParts, CompactionError> {
        let PendingTranscript {
            path,
            plan,
            messages_in,
            paged,
        } = pending;
        let (planned, skipped) = self.finish_transcript(&path, plan).await?;
        let same_front = false;
        Ok(RequestParts {
            front: window.to_owned(),
            front_tokens: tokens,
            finished: FinishedTranscript {
                planned,
                path,
                messages_in,
                paged,
                skipped,
            },
            shown: entries.to_vec(),
            same_front,
            front_fields: FrontFields::Entries,
        })
    }

    /// The next request of a transcript whose last one this compactor remembers, once the
    /// window's fields are final (`current`: the entries, the window rendered from them, its
    /// tokens): the same front window and an append (with a state update for the fields that
    /// changed) while that stays under the high-water mark; else a compaction point with this
    /// window at the front. `None` when even that leaves the transcript no room: the window is
    /// planned again from its floor.
    pub(super) async fn next_request(
        &self,
        next: NextRequest<'_>,
        schema: &'static Schema,
        number: u64,
        compact: bool,
        current: (&[Entry], &str, usize),
    ) -> Result<Option<RequestParts>, CompactionError> {
        let (entries, window, tokens) = current;
        let overhead = self.request_overhead();
        let remembered = &next.window;
        if let Some(changed) = request::changed(&remembered.shown, entries) {
            // Every update since the front is still in this request (an append only adds), so
            // a list that only grew is sent as its new items, and a ledger whose records are all
            // in the window as its new and changed records, to a renderer that shows them.
            let (lists, records) = (
                self.renderer.renders_appended(),
                self.renderer.renders_changed_records(),
            );
            let (fields, appended) = request::update_fields(changed, lists, records);
            let update = (!fields.is_empty())
                .then(|| self.render_view(schema, number, fields.iter(), compact, true, &appended));
            let budget = transcript_budget(self, overhead + remembered.stable_tokens);
            let request =
                self.request(next.policy, budget, &next.effects, update.as_deref(), false);
            let appended = self
                .transcript_planner
                .plan_append(next.transcript, &request)
                .map_err(|e| plan_error(&next.path, budget.limit, self.budget, e))?;
            if let Some(plan) = appended {
                let shown = if plan.planned.update_sent() {
                    entries.to_vec()
                } else {
                    remembered.shown.clone()
                };
                return Ok(Some(RequestParts {
                    front: remembered.stable.clone(),
                    front_tokens: remembered.stable_tokens,
                    finished: self.finished(&next, plan).await?,
                    shown,
                    same_front: true,
                    front_fields: front_fields(remembered.front.as_deref()),
                }));
            }
        }
        if let Some(parts) = self
            .point_keeping_front(&next, schema, number, compact, entries)
            .await?
        {
            return Ok(Some(parts));
        }
        // A compaction point, this window at the front (the same text when no field changed).
        let Some(plan) = self.plan_point(&next, overhead + tokens, None)? else {
            return Ok(None);
        };
        Ok(Some(RequestParts {
            front: window.to_owned(),
            front_tokens: tokens,
            finished: self.finished(&next, plan).await?,
            shown: entries.to_vec(),
            same_front: window == remembered.stable,
            front_fields: FrontFields::Entries,
        }))
    }

    /// `plan` of `next`'s transcript with its summaries, and the results it pages.
    async fn finished(
        &self,
        next: &NextRequest<'_>,
        plan: TranscriptPlan,
    ) -> Result<FinishedTranscript, CompactionError> {
        let paged = plan.planned.paged_results(next.transcript);
        let (planned, skipped) = self.finish_transcript(&next.path, plan).await?;
        Ok(FinishedTranscript {
            planned,
            path: next.path.clone(),
            messages_in: next.transcript.len(),
            paged,
            skipped,
        })
    }

    /// A compaction point of `next`'s transcript beside a front (and overhead) of `taken`
    /// tokens, with `update` last; `None` when it does not fit beside them.
    fn plan_point(
        &self,
        next: &NextRequest<'_>,
        taken: usize,
        update: Option<&str>,
    ) -> Result<Option<TranscriptPlan>, CompactionError> {
        let budget = transcript_budget(self, taken);
        let request = self.request(next.policy, budget, &next.effects, update, true);
        match self
            .transcript_planner
            .plan_request(next.transcript, &request)
        {
            Ok(plan) => Ok(Some(plan)),
            Err(TranscriptPlanError::OverBudget { .. }) => Ok(None),
            Err(e) => Err(plan_error(&next.path, budget.limit, self.budget, e)),
        }
    }

    /// A compaction point that keeps the window at the front, when the fields that changed
    /// since it was rendered fit in a state update that costs less than rendering the front
    /// again would: the update goes last (`plan_request` places it), and the front and the
    /// request's stable part after it (system prompt, blocks) stay in the prompt cache; a new
    /// front would take all of them out. `None` when the front must be rendered again (a field
    /// appeared or went, the front's fields are not known, the update costs more than that
    /// prefix, or the point does not fit beside them).
    async fn point_keeping_front(
        &self,
        next: &NextRequest<'_>,
        schema: &'static Schema,
        number: u64,
        compact: bool,
        entries: &[Entry],
    ) -> Result<Option<RequestParts>, CompactionError> {
        let remembered = &next.window;
        let Some(front) = &remembered.front else {
            return Ok(None);
        };
        let Some(changed) = request::changed(front, entries) else {
            return Ok(None);
        };
        let changed_is_empty = changed.is_empty();
        // Whole values: the updates after the front may be folded by this point.
        let fields = changed.into_iter().map(|(_, now)| now);
        let update = (!changed_is_empty)
            .then(|| self.render_view(schema, number, fields, compact, true, &[]));
        if let Some(text) = &update {
            let prefix = self
                .transcript_planner
                .memory_for(next.transcript)
                .stable_tokens(next.transcript.messages());
            let most = remembered.stable_tokens + prefix;
            if self.counter.count_till_limit(text, most).is_none() {
                return Ok(None);
            }
        }
        let overhead = self.request_overhead();
        let taken = overhead + remembered.stable_tokens;
        let Some(plan) = self.plan_point(next, taken, update.as_deref())? else {
            return Ok(None);
        };
        let shown = if plan.planned.update_sent() || update.is_none() {
            entries.to_vec()
        } else {
            front.clone()
        };
        Ok(Some(RequestParts {
            front: remembered.stable.clone(),
            front_tokens: remembered.stable_tokens,
            finished: self.finished(next, plan).await?,
            shown,
            same_front: true,
            front_fields: front_fields(Some(front)),
        }))
    }

    /// The transcript part of a checkpoint whose blobs are stored: reports it, and makes it the
    /// request the next plan of this transcript starts from (the window install follows the
    /// seal, in `finish`).
    pub(super) fn complete_transcript(
        &self,
        parts: RequestParts,
        entries: &[Entry],
        mut window: WindowRecord,
        report: &mut CompactionReport,
    ) -> CompactedTranscript {
        let RequestParts {
            front_tokens,
            finished,
            shown,
            same_front,
            front_fields,
            ..
        } = parts;
        let FinishedTranscript {
            planned,
            path,
            messages_in,
            paged,
            skipped,
        } = finished;
        report.transcript = Some(transcript_report(
            &path,
            messages_in,
            paged,
            &planned,
            skipped,
        ));
        let digests = self.transcript_planner.commit_digests(&planned);
        let request_tokens = front_tokens + self.request_overhead() + planned.tokens();
        report.request_tokens = Some(request_tokens);
        let reused = if same_front {
            1 + planned.reused_prefix()
        } else {
            0
        };
        if shown != entries {
            window.shown = Some(shown);
        }
        window.front = match front_fields {
            FrontFields::Fields(fields) if fields == entries => FrontFields::Entries,
            other => other,
        };
        let tokens = planned.tokens();
        let memory = planned.memory;
        CompactedTranscript {
            path,
            messages: memory.messages,
            tokens,
            request_tokens,
            reused,
            memory: memory.record,
            window: Some(window),
            digests: MessageDigests(digests),
        }
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
            self.install_window(compacted);
        }
    }

    /// Remembers the window a checkpoint shows at its front, for the transcript memory it
    /// carries (see `request.rs`).
    pub(super) fn install_window<S>(&self, compacted: &Compacted<S>) {
        let Some(transcript) = &compacted.transcript else {
            return;
        };
        let Some(record) = &transcript.window else {
            return;
        };
        let key = (transcript.memory.len, transcript.memory.link);
        self.windows
            .put(key, request::window_memory(compacted, record));
    }
}
