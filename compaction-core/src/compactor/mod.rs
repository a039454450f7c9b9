//! The engine, [`Compactor`]: state -> plan -> (summarize / spill) -> render -> report, and the
//! way back (`rehydrate.rs`). Its settings are in `builder.rs`, the ledger's views of a state in
//! `ledger.rs`, what it does with its agent's checkpoints (verify, number, advance) in
//! `checkpoints.rs`, its summaries in `summarize.rs`, its `#[transcript]` side in
//! `transcript.rs`, its spans in `trace.rs`.

mod builder;
mod checkpoints;
mod ledger;
pub(crate) mod memories;
mod rehydrate;
mod render;
mod request;
mod statuses;
mod summarize;
#[cfg(test)]
mod tests_work;
mod trace;
mod transcript;

pub use builder::{
    CompactorBuilder, SESSION_HIGH_WATER, SESSION_KEEP_FIRST, SESSION_LOW_WATER,
    SESSION_PAGE_RESULTS_OVER, SESSION_WINDOW_SHARE,
};

use crate::checkpoint::{Compacted, FrontFields, SchemaFingerprint, WindowRecord, FORMAT};
use crate::checkpoint::{Owner, SealKeys};
use crate::compactor::ledger::ledger_views;
use crate::conversation::format::ChatFormat;
use crate::conversation::tool::ToolDefinition;
use crate::conversation::transcript::Transcript;
use crate::effects::ledger::EffectLedger;
use crate::effects::record::EffectLog;
use crate::error::CompactionError;
use crate::future::block_on;
use crate::plan::{collect, KeptRecordsOver, Plan, PlanContext};
use crate::planner::effects::EffectStatuses;
use crate::planner::memories::TranscriptPlanner;
use crate::planner::plan::{PlannedTranscript, TranscriptPlan};
use crate::planner::policy::TranscriptPolicy;
use crate::report::PagedResult;
use crate::state::compactable::Compactable;
use crate::state::path::Shape;
use crate::state::schema::Schema;
use crate::store::{ContentHash, DynStore};
use crate::summaries::cache::CacheUse;
use crate::summaries::contract::DynSummarizer;
use crate::tokens::TokenCounter;
use crate::window::{Entry, Renderer};
use request::{WindowMemory, Windows};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tracing::Instrument;

/// A planned transcript waiting for its summaries, with what its report needs of the input
/// (see `transcript.rs`).
struct PendingTranscript {
    path: String,
    plan: TranscriptPlan,
    messages_in: usize,
    paged: Vec<PagedResult>,
}

/// A transcript whose request is final, waiting for its blobs to be stored.
struct FinishedTranscript {
    planned: PlannedTranscript,
    path: String,
    messages_in: usize,
    paged: Vec<PagedResult>,
    /// Folds sent without their summary because the summarizer failed.
    skipped: usize,
}

/// A plan ready for its summaries: what crosses the `await`s (it borrows only the state's
/// transcript, when a request goes on from the last one).
struct Prepared<'s> {
    schema: &'static Schema,
    plan: Plan,
    shapes: Vec<(String, Shape)>,
    number: u64,
    /// What the window text may take: the budget, less the transcript's messages and the
    /// request overhead when the state has a transcript.
    window_budget: usize,
    /// The window's form when it is fixed (`Some(true)`: compact); `None`: the full form when
    /// it fits, else the compact one.
    form: Option<bool>,
    /// The `#[transcript]` field's plan, waiting for its summaries (a compaction point, or a
    /// transcript planned from nothing).
    transcript: Option<PendingTranscript>,
    /// Or: the transcript's request goes on from the last one (see `request.rs`).
    next: Option<NextRequest<'s>>,
}

/// A transcript whose next request goes on from the one the compactor remembers.
struct NextRequest<'s> {
    path: String,
    transcript: &'s Transcript,
    policy: TranscriptPolicy,
    effects: Arc<EffectStatuses>,
    window: Arc<WindowMemory>,
}

/// The request's front and transcript once the window's fields are final.
struct RequestParts {
    /// The window at the front of the request, and its tokens.
    front: String,
    front_tokens: usize,
    finished: FinishedTranscript,
    /// The fields as the model is shown them after this request.
    shown: Vec<Entry>,
    /// Whether the front is the same text as the previous request's.
    same_front: bool,
    /// The fields the front was rendered from.
    front_fields: FrontFields,
}

/// How a compaction ended: a checkpoint, or (rarely) a plan to make again from nothing.
enum Finished<S> {
    Done(Box<Compacted<S>>),
    /// A request that went on from the last one found no room for its transcript beside the
    /// window it kept: plan the window from its floor again.
    Again,
}

/// Compacts [`Compactable`](crate::state::compactable::Compactable) states to a hard token budget, and
/// rehydrates them.
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
    /// The wire format requests are planned for (`CompactorBuilder::chat_format`).
    chat_format: Arc<dyn ChatFormat>,
    summarizer: Option<Arc<dyn DynSummarizer>>,
    store: Arc<dyn DynStore>,
    renderer: Arc<dyn Renderer>,
    refuse_on_unknown: bool,
    evict_on_summarizer_error: bool,
    max_summary_tokens: usize,
    compactions: AtomicU64,
    /// Hysteresis marks, as shares of the budget (see `CompactorBuilder::high_water_mark`).
    high_water: f64,
    low_water: f64,
    /// New tool results above this many tokens are paged on arrival.
    page_results_over: Option<usize>,
    /// Unless their turn fits the request (`CompactorBuilder::verbatim_first`).
    verbatim_first: bool,
    /// The transcript's first messages kept in place (`CompactorBuilder::keep_first`).
    keep_first: usize,
    /// The most tokens the window grows to beyond its floor.
    window_share: Option<usize>,
    /// Remembers the last request of each transcript it planned (the last `REMEMBERED`), so
    /// the next request of one only appends to it.
    transcript_planner: TranscriptPlanner,
    /// And the window each of those requests showed at its front (see `request.rs`).
    windows: Windows,
    /// The limits its counter counted effect logs' lines over (see `plan/keep.rs`).
    records_over: KeptRecordsOver,
    /// The keys checkpoints are sealed and verified with (none by default).
    seal_keys: SealKeys,
    /// The agent and namespace checkpoints are bound to (nobody by default).
    owner: Owner,
    /// The tool definitions every request carries, and their tokens by the chat format.
    tools: Arc<[ToolDefinition]>,
    tools_tokens: usize,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("budget", &self.budget)
            .field("counter", &self.counter.name())
            .field("chat_format", &self.chat_format.name())
            .field("summarizer", &self.summarizer.is_some())
            .field("refuse_on_unknown_effects", &self.refuse_on_unknown)
            .field("seal_key_ids", &self.seal_keys.ids())
            .field("agent_id", &self.owner.agent_id())
            .field("namespace", &self.owner.namespace())
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// Forgets the limits its counter counted effect logs' lines over (tests: `plan/keep.rs`).
    #[cfg(test)]
    pub(crate) fn forget_records_over(&self) {
        self.records_over.forget();
    }

    /// The tool definitions every request of a transcript carries
    /// ([`CompactorBuilder::tools`]).
    pub fn tools(&self) -> &[ToolDefinition] {
        &self.tools
    }

    /// The same tools, shared: each request holds them without copying the definitions.
    pub(crate) fn shared_tools(&self) -> Arc<[ToolDefinition]> {
        Arc::clone(&self.tools)
    }

    /// What [`tools`](Self::tools) cost by the chat format's formula: taken from the budget
    /// of every request.
    pub fn tools_tokens(&self) -> usize {
        self.tools_tokens
    }

    /// The budget in tokens.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The token counter.
    pub fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    /// The wire format requests are planned for
    /// ([`CompactorBuilder::chat_format`](crate::CompactorBuilder::chat_format)).
    pub fn chat_format(&self) -> &dyn ChatFormat {
        &*self.chat_format
    }

    /// The hysteresis marks `(high, low)` as shares of the budget (see
    /// [`CompactorBuilder::high_water_mark`]).
    pub fn water_marks(&self) -> (f64, f64) {
        (self.high_water, self.low_water)
    }

    /// The tokens above which a new tool result is paged on arrival (see
    /// [`CompactorBuilder::page_results_over`]), `None` when off.
    pub fn page_results_over(&self) -> Option<usize> {
        self.page_results_over
    }

    /// Whether a new tool result is sent verbatim whenever its turn fits the request
    /// ([`CompactorBuilder::verbatim_first`]).
    pub fn verbatim_first(&self) -> bool {
        self.verbatim_first
    }

    /// How many of a transcript's first messages are kept in place at the start of every
    /// request while a compaction point can ([`CompactorBuilder::keep_first`]).
    pub fn keep_first(&self) -> usize {
        self.keep_first
    }

    /// The most tokens the window takes beyond its floor (see
    /// [`CompactorBuilder::window_share`]), `None` when it takes whatever the transcript leaves.
    pub fn window_share(&self) -> Option<usize> {
        self.window_share
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
            let prepared = self.prepare(state, number, effect_views, false)?;
            match self.finish(prepared).await? {
                Finished::Done(compacted) => Ok(*compacted),
                Finished::Again => {
                    let prepared = self.prepare(state, number, effect_views, true)?;
                    match self.finish(prepared).await? {
                        Finished::Done(compacted) => Ok(*compacted),
                        Finished::Again => unreachable!("a fresh plan does not go on"),
                    }
                }
            }
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
    /// With an [`agent_id`](CompactorBuilder::agent_id), the checkpoint is numbered after the
    /// newest checkpoint sequence the ledger recorded for the agent
    /// ([`advance_checkpoint`](Self::advance_checkpoint)), so a restarted worker's checkpoints
    /// keep going forward.
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
        // Numbered past the newest checkpoint the ledger recorded for this agent first, so a
        // restarted worker's checkpoints keep going forward.
        let views = async {
            self.continue_after_ledger(ledger).await?;
            ledger_views(state, ledger).await
        };
        let views = match views.await {
            Ok(views) => views,
            Err(error) => {
                // Refused before the compaction began: traced as a compaction all the same.
                let span = trace::compact_span(S::schema().type_name(), self.budget);
                trace::compacted(&span, Err(&error));
                return Err(error);
            }
        };
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

    /// Collects the state, plans its floor (refusing when even that is over budget), then
    /// brings fields back while they fit. With a transcript, `fresh` plans its window from the
    /// floor even when the request could go on from the last one.
    fn prepare<'s, S: Compactable>(
        &self,
        state: &'s S,
        number: u64,
        effect_views: Option<&'s HashMap<String, EffectLog>>,
        fresh: bool,
    ) -> Result<Prepared<'s>, CompactionError> {
        let schema = S::schema();
        let collection = collect(state, effect_views)?;
        if self.refuse_on_unknown {
            collection.refuse_unknown_effects()?;
        }
        let ctx = PlanContext {
            counter: &*self.counter,
            can_summarize: self.summarizer.is_some(),
            max_summary_tokens: self.max_summary_tokens,
            records_over: &self.records_over,
        };
        let prepared = |plan, window_budget, form| Prepared {
            schema,
            plan,
            shapes: collection.shapes.clone(),
            number,
            window_budget,
            form,
            transcript: None,
            next: None,
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
            let (_, window) = self.render(schema, number, &plan, false);
            if self
                .counter
                .count_till_limit(&window, self.budget)
                .is_some()
            {
                return Ok(prepared(plan, self.budget, Some(false)));
            }
        }
        let mut plan = Plan::floor(&collection, &ctx);
        let floor = |plan: &Plan, compact: bool| {
            let (_, window) = self.render(schema, number, plan, compact);
            self.windows.count(&*self.counter, &window)
        };
        // The compact form only when the full one does not fit, so the smallest budget that
        // works is the compact floor's, and every larger one works too.
        let floors = (floor(&plan, false), floor(&plan, true));
        if floors.1 > self.budget {
            let (tokens, smallest) = Plan::smallest(&collection, &ctx, |p| floor(p, true));
            return Err(smallest.over_budget(tokens, self.budget, &*self.counter));
        }
        let Some(field) = request::the_transcript(&collection)? else {
            let floor_tokens = if floors.0 <= self.budget {
                floors.0
            } else {
                floors.1
            };
            plan.upgrade(&collection, &ctx, self.budget - floor_tokens);
            return Ok(prepared(plan, self.budget, None));
        };
        let path = field.path.clone();
        let effects = statuses::effect_statuses(&collection, schema);
        if !fresh {
            if let Some(window) = self.remembered_window(field.transcript) {
                let floor_tokens = if window.compact { floors.1 } else { floors.0 };
                if floor_tokens <= window.budget {
                    plan.upgrade(&collection, &ctx, window.budget - floor_tokens);
                    let mut prepared = prepared(plan, window.budget, Some(window.compact));
                    prepared.next = Some(NextRequest {
                        path,
                        transcript: field.transcript,
                        policy: field.policy,
                        effects,
                        window,
                    });
                    return Ok(prepared);
                }
            }
        }
        let (form, floor_tokens, (window_budget, pending)) =
            match self.plan_transcript(field, &effects, floors.0) {
                Err(CompactionError::TranscriptOverBudget { .. }) if floors.1 < floors.0 => (
                    Some(true),
                    floors.1,
                    self.plan_transcript(field, &effects, floors.1)?,
                ),
                planned => (None, floors.0, planned?),
            };
        if floor_tokens > window_budget {
            return Err(plan.over_budget(floor_tokens, window_budget, &*self.counter));
        }
        plan.upgrade(&collection, &ctx, window_budget - floor_tokens);
        let mut prepared = prepared(plan, window_budget, form);
        prepared.transcript = Some(pending);
        Ok(prepared)
    }

    /// Summarizes, renders and demotes until the window fits; then completes the transcript's
    /// request, spills and reports.
    async fn finish<S: Compactable>(
        &self,
        mut prepared: Prepared<'_>,
    ) -> Result<Finished<S>, CompactionError> {
        let mut cache = CacheUse::default();
        let (entries, window, tokens, compact) = loop {
            self.summarize_pending(prepared.schema, &mut prepared.plan, &mut cache)
                .await?;
            let rendered = self.render_fitting(&prepared);
            if rendered.2 <= prepared.window_budget {
                break rendered;
            }
            if !prepared.plan.demote_one() {
                // Counted in the smallest form, which a budget that large would get.
                let (_, window) =
                    self.render(prepared.schema, prepared.number, &prepared.plan, true);
                let tokens = self.counter.count(&window);
                return Err(prepared.plan.over_budget(
                    tokens,
                    prepared.window_budget,
                    &*self.counter,
                ));
            }
        };
        let parts = if let Some(next) = prepared.next.take() {
            let current = (&entries[..], window.as_str(), tokens);
            match self
                .next_request(next, prepared.schema, prepared.number, compact, current)
                .await?
            {
                Some(parts) => Some(parts),
                None => return Ok(Finished::Again),
            }
        } else if let Some(pending) = prepared.transcript.take() {
            Some(
                self.first_request(pending, &entries, &window, tokens)
                    .await?,
            )
        } else {
            None
        };
        // Only once the window fits, so a refused compaction leaves nothing new behind but
        // content-addressed blobs.
        let transcript_blobs: &[(ContentHash, Vec<u8>)] = parts
            .as_ref()
            .map_or(&[], |parts| parts.finished.planned.blobs());
        let transcript_spills = transcript_blobs.iter().map(|(h, b)| (*h, b.as_slice()));
        for (hash, bytes) in prepared.plan.spills().chain(transcript_spills) {
            self.store
                .put_dyn(&hash, bytes)
                .await
                .map_err(CompactionError::Store)?;
        }
        let (front, front_tokens) = match &parts {
            Some(parts) => (parts.front.clone(), parts.front_tokens),
            None => (window, tokens),
        };
        let mut report =
            prepared
                .plan
                .report(prepared.number, self.budget, front_tokens, &*self.counter);
        let record = WindowRecord {
            budget: prepared.window_budget,
            compact,
            shown: None,
            front: FrontFields::Entries,
        };
        let transcript =
            parts.map(|parts| self.complete_transcript(parts, &entries, record, &mut report));
        cache.mark(&mut report);
        cache.remember_all(&*self.store).await;
        let mut compacted = Compacted {
            format: FORMAT,
            state_type: prepared.schema.type_name().to_owned(),
            schema: SchemaFingerprint::of::<S>(prepared.schema),
            budget: self.budget,
            entries,
            shapes: prepared.shapes,
            window: front,
            tokens: front_tokens,
            report,
            transcript,
            binding: self.owner.bind(prepared.number),
            seal: ContentHash::of(b""),
            keyed_seal: None,
            chat_format: Some(self.chat_format.clone()),
            sealed_input: None,
            _state: PhantomData,
        };
        compacted.seal_with(&self.seal_keys);
        self.install_window(&compacted);
        Ok(Finished::Done(Box::new(compacted)))
    }
}
