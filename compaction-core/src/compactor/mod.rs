//! The engine: state -> plan -> (summarize / spill) -> render -> report, and the way back.

mod builder;
mod summarize;
mod transcript;
mod with_ledger;

pub use builder::CompactorBuilder;

use crate::compacted::{Compacted, CompactedTranscript, SchemaFingerprint, FORMAT};
use crate::compactor::summarize::{checked_summary, DynSummarizer};
use crate::compactor::with_ledger::ledger_views;
use crate::effects::ledger::EffectLedger;
use crate::effects::record::EffectLog;
use crate::error::CompactionError;
use crate::future::block_on;
use crate::plan::{collect, Collection, Plan, PlanContext};
use crate::rehydrate::{rehydrate, Reacquire};
use crate::render::escape_inline;
use crate::render::{Entry, Renderer, WindowView};
use crate::state::compactable::Compactable;
use crate::state::path::Shape;
use crate::state::schema::Schema;
use crate::store::{get_verified, AsPointer, ContentHash, DynStore};
use crate::tokens::TokenCounter;
use crate::transcript::plan::{TranscriptPlan, TranscriptPlanner};
use std::borrow::Cow;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Compacts [`Compactable`] states to a hard token budget, and rehydrates them.
///
/// ```
/// use compaction::{Compactable, Compactor, EffectLog, Effect, MemoryStore, Tokenizer, Extractive};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
/// struct Agent {
///     #[protected(pin)]
///     constraints: Vec<String>,
///     #[protected]
///     plan_step: u32,
///     #[redundant(summarize)]
///     transcript: String,
///     #[effect(idempotent = false)]
///     effects: EffectLog,
/// }
///
/// let compactor = Compactor::builder()
///     .budget(300)
///     .token_counter(Tokenizer::O200kBase)
///     .summarizer(Extractive)
///     .store(MemoryStore::default())
///     .build()?;
///
/// let mut agent = Agent {
///     constraints: vec!["never touch /etc/prod".into()],
///     plan_step: 6,
///     transcript: "tool said: ok. ".repeat(500),
///     ..Agent::default()
/// };
/// agent.effects.record(Effect::new("apply_migration", "db://users", "mig-7")).unwrap();
/// agent.effects.begin("mig-7").unwrap(); // timed out: outcome unknown
///
/// let compacted = compactor.compact_blocking(&agent)?;
/// assert!(compacted.tokens() <= 300);
/// let window = compacted.render();
/// assert!(window.contains("never touch /etc/prod"));
/// assert!(window.contains(r#""status":"unknown""#));
/// # Ok::<(), compaction::CompactionError>(())
/// ```
pub struct Compactor {
    budget: usize,
    counter: Arc<dyn TokenCounter>,
    summarizer: Option<Arc<dyn DynSummarizer>>,
    store: Arc<dyn DynStore>,
    renderer: Arc<dyn Renderer>,
    refuse_on_unknown: bool,
    evict_on_summarizer_error: bool,
    max_summary_tokens: usize,
    compactions: AtomicU64,
    /// Remembers the counts of the last transcript planned, so the next (one message longer)
    /// is planned without recounting it.
    transcript_planner: TranscriptPlanner,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("budget", &self.budget)
            .field("counter", &self.counter.name())
            .field("summarizer", &self.summarizer.is_some())
            .field("refuse_on_unknown_effects", &self.refuse_on_unknown)
            .finish_non_exhaustive()
    }
}

// Here rather than in builder.rs, so the builder never names the compactor it builds and the
// imports stay one-way (mod.rs -> builder.rs).
impl CompactorBuilder {
    /// Builds the compactor.
    pub fn build(self) -> Result<Compactor, CompactionError> {
        let budget = self
            .budget
            .ok_or_else(|| CompactionError::Config("no budget: call .budget(tokens)".into()))?;
        if budget == 0 {
            return Err(CompactionError::Config(
                "the budget must be above zero".into(),
            ));
        }
        Ok(Compactor {
            budget,
            transcript_planner: TranscriptPlanner::new(self.counter.clone()),
            counter: self.counter,
            summarizer: self.summarizer,
            store: self.store,
            renderer: self.renderer,
            refuse_on_unknown: self.refuse_on_unknown,
            evict_on_summarizer_error: self.evict_on_summarizer_error,
            max_summary_tokens: self.max_summary_tokens,
            compactions: AtomicU64::new(0),
        })
    }
}

/// A plan with nothing borrowed from the state: what crosses the `await`s.
struct Prepared {
    schema: &'static Schema,
    plan: Plan,
    shapes: Vec<(String, Shape)>,
    number: u64,
    /// What the window text may take: the budget, less the transcript's messages and the
    /// request overhead when the state has a transcript.
    window_budget: usize,
    /// The `#[transcript]` field's path and plan, waiting for its summaries.
    transcript: Option<(String, TranscriptPlan)>,
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
        let number = self.compactions.fetch_add(1, Ordering::Relaxed) + 1;
        let prepared = self.prepare(state, number, effect_views)?;
        self.finish(prepared).await
    }

    /// [`compact`](Self::compact) for synchronous callers.
    pub fn compact_blocking<S: Compactable + Sync>(
        &self,
        state: &S,
    ) -> Result<Compacted<S>, CompactionError> {
        block_on(self.compact(state))
    }

    /// Compacts `state` with every `#[effect]` field read from `ledger`: each field's records
    /// are those of its scope (`#[effect(scope = "...")]`, or the field's path such as
    /// `charges` or `subtasks[2].effects`), as they are in the ledger now. The window, the
    /// checkpoint and the state rehydrated from it hold the ledger's records; the state's own
    /// effect logs are only checked, never trusted.
    ///
    /// Use this whenever a durable ledger backs the state: `compact` renders whatever the
    /// state's `EffectLog`s hold, so a view the agent forgot to refresh shows a charge as
    /// `not_started` (or not at all) while the ledger knows its outcome is `unknown`; here that
    /// cannot happen, and two `#[effect]` fields on one ledger each get only their own scope.
    /// The ledger's statuses win over the view's (the ledger is where `begin` claims a key);
    /// a record the view holds and the ledger lacks is refused with
    /// [`CompactionError::EffectNotInLedger`] instead of being dropped (record it through the
    /// ledger, or `sync_log` the view, first). A ledger failure is [`CompactionError::Ledger`].
    ///
    /// ```
    /// use compaction::{Compactable, Compactor, Effect, EffectLedger, EffectLog, MemoryLedger};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize, Default)]
    /// struct Agent {
    ///     #[effect(idempotent = false)]
    ///     charges: EffectLog,
    ///     #[effect(idempotent = false, scope = "refunds")]
    ///     refunds: EffectLog,
    /// }
    ///
    /// let ledger = MemoryLedger::new();
    /// compaction::block_on(ledger.begin("charges", "pay-1"))?; // in flight: unknown
    /// let agent = Agent::default(); // its views were never refreshed
    ///
    /// let compactor = Compactor::builder().budget(400).build()?;
    /// let compacted = compactor.compact_with_ledger_blocking(&agent, &ledger)?;
    /// assert!(compacted.render().contains("pay-1"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn compact_with_ledger<S, L>(
        &self,
        state: &S,
        ledger: &L,
    ) -> Result<Compacted<S>, CompactionError>
    where
        S: Compactable + Sync,
        L: EffectLedger,
    {
        let views = ledger_views(state, ledger).await?;
        self.compact_with_views(state, Some(&views)).await
    }

    /// [`compact_with_ledger`](Self::compact_with_ledger) for synchronous callers.
    pub fn compact_with_ledger_blocking<S, L>(
        &self,
        state: &S,
        ledger: &L,
    ) -> Result<Compacted<S>, CompactionError>
    where
        S: Compactable + Sync,
        L: EffectLedger,
    {
        block_on(self.compact_with_ledger(state, ledger))
    }

    /// Reads back the bytes behind a `store://sha256:` pointer, verified against its hash: the
    /// tool an agent calls to look at spilled state.
    pub async fn resolve(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        let pointer = pointer.to_pointer()?;
        get_verified(&*self.store, &pointer.hash())
            .await
            .map_err(|e| CompactionError::from_store(e, Some(&pointer.to_string())))
    }

    /// [`resolve`](Self::resolve) for synchronous callers.
    pub fn resolve_blocking(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        block_on(self.resolve(pointer))
    }

    /// Rebuilds the full state from a compacted one. Fails with `Integrity` when any preserved
    /// byte changed, `Reacquire` when the author's re-acquisition fails, and `Store` when a
    /// spilled value cannot be read.
    pub async fn rehydrate<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
    ) -> Result<S, CompactionError> {
        rehydrate(&*self.store, compacted, reacquirer).await
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
        let with_window = |plan: Plan| {
            let (_, window) = self.render(schema, number, &plan);
            (plan, window)
        };
        // The all-verbatim window first: when it fits, it is the plan (nothing evicted). A
        // transcript plans first against what the floor leaves, so it skips this shortcut.
        let has_transcript = transcript::the_transcript(&collection)?.is_some();
        let verbatim = if has_transcript {
            None
        } else {
            Plan::all_verbatim(&collection, self.budget).map(with_window)
        };
        let verbatim = match verbatim {
            Some((plan, window))
                if self
                    .counter
                    .count_till_limit(&window, self.budget)
                    .is_some() =>
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
            other => other,
        };
        let mut plan = Plan::floor(&collection, &ctx);
        let (_, floor_window) = self.render(schema, number, &plan);
        let floor_tokens = self.counter.count(&floor_window);
        if floor_tokens > self.budget {
            // The smallest window is the floor or, for small states whose pointers cost as
            // much as their values, the all-verbatim one: report the smaller.
            // Ruled out by bytes at this budget, it may still be smaller than the floor.
            let verbatim =
                verbatim.or_else(|| Plan::all_verbatim(&collection, floor_tokens).map(with_window));
            if let Some((verbatim, window)) = &verbatim {
                let tokens = self.counter.count(window);
                if tokens < floor_tokens {
                    return Err(verbatim.over_budget(tokens, self.budget, &*self.counter));
                }
            }
            return Err(plan.over_budget(floor_tokens, self.budget, &*self.counter));
        }
        let (window_budget, transcript) = self.plan_transcript(&collection, floor_tokens)?;
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
        let (entries, window, tokens) = loop {
            self.summarize_pending(prepared.schema, &mut prepared.plan)
                .await?;
            let (entries, window) = self.render(prepared.schema, prepared.number, &prepared.plan);
            let tokens = self.counter.count(&window);
            if tokens <= prepared.window_budget {
                break (entries, window, tokens);
            }
            if !prepared.plan.demote_one() {
                return Err(prepared.plan.over_budget(
                    tokens,
                    prepared.window_budget,
                    &*self.counter,
                ));
            }
        };
        let (transcript, transcript_blobs) = match prepared.transcript.take() {
            Some((path, plan)) => {
                let (transcript, blobs) = self.finish_transcript(path, plan, tokens).await?;
                (Some(transcript), blobs)
            }
            None => (None, Vec::new()),
        };
        // Only once the window fits, so a refused compaction leaves nothing new behind but
        // content-addressed blobs.
        let transcript_spills = transcript_blobs.iter().map(|(h, b)| (*h, b.as_slice()));
        for (hash, bytes) in prepared.plan.spills().chain(transcript_spills) {
            self.store
                .put_dyn(&hash, bytes)
                .await
                .map_err(CompactionError::Store)?;
        }
        let report = prepared
            .plan
            .report(prepared.number, self.budget, tokens, &*self.counter);
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
            _state: PhantomData,
        };
        compacted.seal = compacted.compute_seal();
        Ok(compacted)
    }

    /// Plans the state's transcript, if it has one, into what the budget leaves after the
    /// window's floor (see `compactor/transcript.rs`); returns the window text's budget.
    fn plan_transcript(
        &self,
        collection: &Collection<'_>,
        floor_tokens: usize,
    ) -> Result<(usize, Option<(String, TranscriptPlan)>), CompactionError> {
        let Some(field) = transcript::the_transcript(collection)? else {
            return Ok((self.budget, None));
        };
        let overhead = transcript::request_overhead(&*self.counter);
        let available = self.budget.saturating_sub(overhead + floor_tokens);
        let live = transcript::live_effects(field.transcript, &collection.committed_effects());
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
            .map_err(|e| transcript::plan_error(&field.path, available, self.budget, e))?;
        let window_budget = self.budget - overhead - plan.tokens();
        Ok((window_budget, Some((field.path.clone(), plan))))
    }

    /// Summarizes the transcript's folds and completes its plan.
    async fn finish_transcript(
        &self,
        path: String,
        plan: TranscriptPlan,
        window_tokens: usize,
    ) -> Result<(CompactedTranscript, Vec<(ContentHash, Vec<u8>)>), CompactionError> {
        let requests: Vec<(String, usize)> = plan
            .summary_requests()
            .map(|r| (r.text.clone(), r.target_tokens))
            .collect();
        let summarizer = self.summarizer.as_deref();
        let summaries =
            transcript::summarize_folds(summarizer, &*self.counter, &path, requests).await?;
        let planned = self
            .transcript_planner
            .finish(plan, summaries)
            .map_err(|e| transcript::plan_error(&path, 0, self.budget, e))?;
        let (blobs, tokens) = (planned.blobs().to_vec(), planned.tokens());
        let request_tokens = window_tokens + transcript::request_overhead(&*self.counter) + tokens;
        let messages = planned.into_messages();
        Ok((
            CompactedTranscript {
                path,
                messages,
                tokens,
                request_tokens,
            },
            blobs,
        ))
    }

    fn render(&self, schema: &Schema, number: u64, plan: &Plan) -> (Vec<Entry>, String) {
        let entries = plan.entries();
        // Renderers see escaped paths, pointers and keys; the checkpoint keeps the raw ones.
        let shown: Vec<Cow<'_, Entry>> = entries.iter().map(Entry::for_window).collect();
        let state_type = escape_inline(schema.type_name());
        let view = WindowView {
            compaction: number,
            state_type: &state_type,
            entries: &shown,
        };
        let window = self.renderer.render(&view);
        (entries, window)
    }

    /// Calls the summarizer for every planned summary not made yet. Every request is checked
    /// against the schema first: only fields declared `summarize` may pass.
    async fn summarize_pending(
        &self,
        schema: &'static Schema,
        plan: &mut Plan,
    ) -> Result<(), CompactionError> {
        for slot in plan.pending_summaries() {
            let allowed = schema
                .field_for_instance(slot.path())
                .is_some_and(|f| f.class.may_summarize());
            if !allowed {
                return Err(CompactionError::ProtectedToSummarizer {
                    field: slot.path().to_owned(),
                });
            }
            let Some(summarizer) = &self.summarizer else {
                continue;
            };
            let Some((source, target)) = slot.pending_summary() else {
                continue;
            };
            let counter = &*self.counter;
            match checked_summary(&**summarizer, counter, slot.path(), source, target).await {
                Ok(summary) => slot.set_summary(summary, counter),
                // Only a summarizable field gets here, and its eviction leaves a pointer or a
                // tombstone: falling back loses nothing the window was guaranteed to hold.
                Err(_) if self.evict_on_summarizer_error => slot.evict_value(),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
