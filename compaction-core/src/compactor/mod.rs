//! The engine: state -> plan -> (summarize / spill) -> render -> report, and the way back.

mod builder;
mod rehydrate_with;
mod summarize;
mod summary_cache;
mod summary_step;
mod trace;
mod transcript;
mod with_ledger;

pub use builder::{Compactor, CompactorBuilder, SESSION_HIGH_WATER, SESSION_LOW_WATER};

use crate::compacted::CompactedTranscript;
use crate::compacted::{Compacted, SchemaFingerprint, FORMAT};
use crate::compactor::summary_cache::CacheUse;
use crate::effects::record::EffectLog;
use crate::error::CompactionError;
use crate::future::block_on;
use crate::plan::{collect, Plan, PlanContext};
use crate::rehydrate::{check_checkpoint, Reacquire, RehydrateOptions};
use crate::render::escape_inline;
use crate::render::{Entry, WindowView, COMPACT_FORM_BELOW};
use crate::state::compactable::Compactable;
use crate::state::path::Shape;
use crate::state::schema::Schema;
use crate::store::{get_verified, AsPointer, ContentHash};
use crate::tokens::TokenCounter;
use crate::transcript::conversation::Message;
use crate::transcript::rehydrate::{span_message, SpanReadError};
use std::borrow::Cow;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use tracing::Instrument;

/// A plan with nothing borrowed from the state: what crosses the `await`s.
struct Prepared {
    schema: &'static Schema,
    plan: Plan,
    shapes: Vec<(String, Shape)>,
    number: u64,
    /// What the window text may take: the budget, less the transcript's messages and the
    /// request overhead when the state has a transcript.
    window_budget: usize,
    /// The `#[transcript]` field's plan, waiting for its summaries.
    transcript: Option<transcript::PendingTranscript>,
}

impl Compactor {
    /// Starts configuring a compactor.
    pub fn builder() -> CompactorBuilder {
        CompactorBuilder::default()
    }

    /// The budget in tokens.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The token counter.
    pub fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    /// The hysteresis marks `(high, low)` as shares of the budget (see
    /// [`CompactorBuilder::high_water_mark`]).
    pub fn water_marks(&self) -> (f64, f64) {
        (self.high_water, self.low_water)
    }

    /// Compacts `state` to the budget. The state is only borrowed: on any error it is exactly
    /// as it was, and nothing in the window or the store stands in for it.
    pub async fn compact<S: Compactable + Sync>(
        &self,
        state: &S,
    ) -> Result<Compacted<S>, CompactionError> {
        self.compact_with_views(state, None).await
    }

    /// [`compact`](Self::compact) with the records of some `#[effect]` fields (by concrete
    /// path) replaced: the hook of [`compact_with_ledger`](Self::compact_with_ledger).
    pub(crate) async fn compact_with_views<S: Compactable + Sync>(
        &self,
        state: &S,
        effect_views: Option<&HashMap<String, EffectLog>>,
    ) -> Result<Compacted<S>, CompactionError> {
        let span = trace::compact_span(S::schema().type_name(), self.budget);
        let compacted = async {
            let number = self.compactions.fetch_add(1, Ordering::Relaxed) + 1;
            let prepared = self.prepare(state, number, effect_views)?;
            self.finish(prepared).await
        }
        .instrument(span.clone())
        .await;
        trace::compacted(&span, compacted.as_ref().map(Compacted::report));
        compacted
    }

    /// [`compact`](Self::compact) for synchronous callers.
    pub fn compact_blocking<S: Compactable + Sync>(
        &self,
        state: &S,
    ) -> Result<Compacted<S>, CompactionError> {
        block_on(self.compact(state))
    }

    /// Reads back the bytes behind a `store://sha256:` pointer, verified against its hash: the
    /// tool an agent calls to look at spilled state.
    pub async fn resolve(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        let span = trace::resolve_span();
        let resolved = async {
            let pointer = pointer.to_pointer()?;
            get_verified(&*self.store, &pointer.hash())
                .await
                .map_err(|e| CompactionError::from_store(e, Some(&pointer.to_string())))
        }
        .instrument(span.clone())
        .await;
        match &resolved {
            Ok(bytes) => {
                span.record("bytes", bytes.len());
            }
            Err(error) => trace::refused(&span, error),
        }
        resolved
    }

    /// [`resolve`](Self::resolve) for synchronous callers.
    pub fn resolve_blocking(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        block_on(self.resolve(pointer))
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

    /// Rebuilds the full state from a compacted one: everything the store holds (spilled
    /// values, effect records and payloads, summarized values) byte-identical and verified,
    /// evicted derivable fields through `reacquirer`. Fails with `Integrity` when any preserved
    /// byte changed or a seal does not verify (see
    /// [`verify_checkpoint`](Self::verify_checkpoint), run first), `Reacquire` when the author's
    /// re-acquisition fails (see [`rehydrate_with`](Self::rehydrate_with) to allow `Default`
    /// instead), and `Store` when a
    /// spilled value cannot be read.
    pub async fn rehydrate<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
    ) -> Result<S, CompactionError> {
        let strict = RehydrateOptions::default();
        Ok(self
            .rehydrate_with(compacted, reacquirer, strict)
            .await?
            .state)
    }

    /// Checks a checkpoint before its window or state is used: `CheckpointFormat` for another
    /// format, `Integrity { field: "<checkpoint>" }` when its plain seal does not match its
    /// content or, with [`seal_key`](CompactorBuilder::seal_key), when its keyed seal does not
    /// verify under one of this compactor's keys (or is missing, unless
    /// [`accept_unkeyed_checkpoints`](CompactorBuilder::accept_unkeyed_checkpoints)).
    /// [`rehydrate`](Self::rehydrate) runs it first; call it yourself before sending a loaded
    /// checkpoint's [`render`](Compacted::render) or [`messages`](Compacted::messages) to a
    /// model.
    pub fn verify_checkpoint<S>(&self, compacted: &Compacted<S>) -> Result<(), CompactionError> {
        check_checkpoint(compacted, &self.seal_keys)
    }

    /// [`rehydrate`](Self::rehydrate) for synchronous callers.
    pub fn rehydrate_blocking<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
    ) -> Result<S, CompactionError> {
        block_on(self.rehydrate(compacted, reacquirer))
    }

    /// Collects the state, plans its floor (refusing when even that is over budget), then
    /// brings fields back while they fit.
    fn prepare<S: Compactable>(
        &self,
        state: &S,
        number: u64,
        effect_views: Option<&HashMap<String, EffectLog>>,
    ) -> Result<Prepared, CompactionError> {
        let schema = S::schema();
        let collection = collect(state, effect_views)?;
        if self.refuse_on_unknown {
            collection.refuse_unknown_effects()?;
        }
        let ctx = PlanContext {
            counter: &*self.counter,
            can_summarize: self.summarizer.is_some(),
            max_summary_tokens: self.max_summary_tokens,
        };
        // The all-verbatim window first: when it fits, it is the plan (nothing evicted). A
        // transcript plans first against what the floor leaves, so it skips this shortcut.
        let has_transcript = !collection.transcripts.is_empty();
        let verbatim = if has_transcript {
            None
        } else {
            Plan::all_verbatim(&collection, self.budget)
        };
        if let Some(plan) = verbatim {
            let (_, window) = self.render(schema, number, &plan);
            if self
                .counter
                .count_till_limit(&window, self.budget)
                .is_some()
            {
                return Ok(Prepared {
                    schema,
                    plan,
                    shapes: collection.shapes,
                    number,
                    window_budget: self.budget,
                    transcript: None,
                });
            }
        }
        let mut plan = Plan::floor(&collection, &ctx);
        let (_, floor_window) = self.render(schema, number, &plan);
        let floor_tokens = self.counter.count(&floor_window);
        if floor_tokens > self.budget {
            // Counted in the form a budget of that size gets: a compact-form window at or
            // above the threshold would be rendered in the full form (longer) at that budget.
            let count_at = |budget: usize| {
                move |plan: &Plan| {
                    let (_, window) = self.render_for(schema, number, plan, budget);
                    self.counter.count(&window)
                }
            };
            let (mut tokens, mut smallest) =
                Plan::smallest(&collection, &ctx, count_at(self.budget));
            if self.budget < COMPACT_FORM_BELOW && tokens >= COMPACT_FORM_BELOW {
                (tokens, smallest) = Plan::smallest(&collection, &ctx, count_at(usize::MAX));
            }
            return Err(smallest.over_budget(tokens, self.budget, &*self.counter));
        }
        let (window_budget, transcript) =
            self.plan_transcript(&collection, schema, floor_tokens)?;
        if floor_tokens > window_budget {
            return Err(plan.over_budget(floor_tokens, window_budget, &*self.counter));
        }
        plan.upgrade(&collection, &ctx, window_budget - floor_tokens);
        Ok(Prepared {
            schema,
            plan,
            shapes: collection.shapes,
            number,
            window_budget,
            transcript,
        })
    }

    /// Summarizes, renders and demotes until the window fits; then spills and reports.
    async fn finish<S: Compactable>(
        &self,
        mut prepared: Prepared,
    ) -> Result<Compacted<S>, CompactionError> {
        let mut cache = CacheUse::default();
        let (entries, window, tokens) = loop {
            self.summarize_pending(prepared.schema, &mut prepared.plan, &mut cache)
                .await?;
            let (entries, window) = self.render(prepared.schema, prepared.number, &prepared.plan);
            let tokens = self.counter.count(&window);
            if tokens <= prepared.window_budget {
                break (entries, window, tokens);
            }
            if !prepared.plan.demote_one() {
                // As above: in the full form when a budget that large would get it.
                let tokens = if self.budget < COMPACT_FORM_BELOW && tokens >= COMPACT_FORM_BELOW {
                    let (_, window) = self.render_for(
                        prepared.schema,
                        prepared.number,
                        &prepared.plan,
                        usize::MAX,
                    );
                    self.counter.count(&window)
                } else {
                    tokens
                };
                return Err(prepared.plan.over_budget(
                    tokens,
                    prepared.window_budget,
                    &*self.counter,
                ));
            }
        };
        let planned = match prepared.transcript.take() {
            Some(pending) => {
                let planned = self.finish_transcript(&pending.path, pending.plan).await?;
                Some((planned, (pending.path, pending.messages_in, pending.paged)))
            }
            None => None,
        };
        // Only once the window fits, so a refused compaction leaves nothing new behind but
        // content-addressed blobs.
        let transcript_blobs: &[(ContentHash, Vec<u8>)] =
            planned.as_ref().map_or(&[], |(planned, _)| planned.blobs());
        let transcript_spills = transcript_blobs.iter().map(|(h, b)| (*h, b.as_slice()));
        for (hash, bytes) in prepared.plan.spills().chain(transcript_spills) {
            self.store
                .put_dyn(&hash, bytes)
                .await
                .map_err(CompactionError::Store)?;
        }
        let mut report = prepared
            .plan
            .report(prepared.number, self.budget, tokens, &*self.counter);
        let transcript = planned.map(|(planned, (path, messages_in, paged))| {
            report.transcript = Some(transcript::transcript_report(
                (&path, messages_in, paged),
                &planned,
            ));
            self.transcript_planner.commit(&planned);
            let request_tokens =
                tokens + transcript::request_overhead(&*self.counter) + planned.tokens();
            let reused = 1 + planned.reused_prefix();
            let memory = planned.memory().clone();
            CompactedTranscript {
                path,
                messages: memory.messages,
                tokens: memory.record.slots.iter().map(|s| s.tokens).sum(),
                request_tokens,
                reused,
                memory: memory.record,
            }
        });
        cache.mark(&mut report);
        cache.remember_all(&*self.store).await;
        let mut compacted = Compacted {
            format: FORMAT,
            state_type: prepared.schema.type_name().to_owned(),
            schema: SchemaFingerprint::of::<S>(),
            budget: self.budget,
            entries,
            shapes: prepared.shapes,
            window,
            tokens,
            report,
            transcript,
            seal: ContentHash::of(b""),
            keyed_seal: None,
            _state: PhantomData,
        };
        compacted.seal_with(&self.seal_keys);
        Ok(compacted)
    }

    fn render(&self, schema: &Schema, number: u64, plan: &Plan) -> (Vec<Entry>, String) {
        self.render_for(schema, number, plan, self.budget)
    }

    /// Renders as if the budget were `budget` (the default renderer's form depends on it).
    fn render_for(
        &self,
        schema: &Schema,
        number: u64,
        plan: &Plan,
        budget: usize,
    ) -> (Vec<Entry>, String) {
        let entries = plan.entries();
        // Renderers see escaped paths, pointers and keys; the checkpoint keeps the raw ones.
        let shown: Vec<Cow<'_, Entry>> = entries.iter().map(Entry::for_window).collect();
        let state_type = escape_inline(schema.type_name());
        let view = WindowView {
            compaction: number,
            state_type: &state_type,
            entries: &shown,
            budget,
        };
        let window = self.renderer.render(&view);
        (entries, window)
    }
}
