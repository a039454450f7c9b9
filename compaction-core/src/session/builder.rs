//! [`SessionBuilder`]: a session's parts and their defaults, and opening it: the checkpoint
//! loaded, checked against the ledger and rehydrated, or a fresh state when the agent has none.

use crate::checkpoint::{CheckpointError, CheckpointRow, CheckpointStore, Compacted};
use crate::compactor::{
    CompactorBuilder, SESSION_HIGH_WATER, SESSION_KEEP_FIRST, SESSION_LOW_WATER,
    SESSION_PAGE_RESULTS_OVER, SESSION_WINDOW_SHARE,
};
use crate::conversation::format::ChatFormat;
use crate::conversation::message::ToolCall;
use crate::conversation::tool::ToolDefinition;
use crate::effects::ledger::EffectLedger;
use crate::effects::memory::MemoryLedger;
use crate::error::CompactionError;
use crate::fence::{Fence, FenceRecord, OpenMode};
use crate::future::block_on;
use crate::pointer_tool::PointerResolver;
use crate::rehydrate::{NoReacquire, Reacquire, RehydrateOptions};
use crate::session::effect::EffectCall;
use crate::session::error::SessionError;
use crate::session::ledger::SessionLedger;
use crate::session::reacquire::ErasedReacquire;
use crate::session::{allow, EffectCalls, Session};
use crate::state::has_transcript::HasTranscript;
use crate::store::{MemoryStore, Store};
use std::sync::Arc;

impl<S: HasTranscript + Send + Sync> Session<S> {
    /// Starts configuring the session of agent `agent_id` (see [`SessionBuilder`]).
    pub fn builder(agent_id: impl Into<String>) -> SessionBuilder<S> {
        SessionBuilder::new(agent_id.into())
    }
}

/// Configures and opens a [`Session`]: `Session::builder(agent_id)`, then the parts, then
/// [`open`](Self::open).
///
/// | setting | default |
/// |---|---|
/// | [`compactor`](Self::compactor) | `Compactor::builder()` (a budget is required) |
/// | [`store`](Self::store): blobs and checkpoints | a fresh `MemoryStore` (lost on exit) |
/// | [`ledger`](Self::ledger) | a fresh `MemoryLedger` (lost on exit) |
/// | [`water_marks`](Self::water_marks) | [`SESSION_HIGH_WATER`], [`SESSION_LOW_WATER`] (0.9, 0.5) |
/// | [`page_results_over`](Self::page_results_over) | [`SESSION_PAGE_RESULTS_OVER`] (0.25) |
/// | [`verbatim_first`](Self::verbatim_first) | off |
/// | [`keep_first`](Self::keep_first) | [`SESSION_KEEP_FIRST`] (6) |
/// | [`window_share`](Self::window_share) | [`SESSION_WINDOW_SHARE`] (0.1) |
/// | [`chat_format`](Self::chat_format) | the `CompactorBuilder`'s (`OpenAiChat` by default) |
/// | [`effect_calls`](Self::effect_calls) | none: no call is an effect |
/// | [`reacquire`](Self::reacquire), [`rehydrate_options`](Self::rehydrate_options) | `NoReacquire`, strict |
/// | [`resolver`](Self::resolver) | `PointerResolver::new()` |
/// | [`open_mode`](Self::open_mode) | [`OpenMode::TakeOver`]: a newer session fences this one |
///
/// The session sets the compactor's store, agent id, namespace (the store's) and water marks
/// itself (and pages new results past their share, and caps the window), whatever the `CompactorBuilder` says: its checkpoints must be sealed for this agent
/// and kept where they are loaded from.
#[must_use]
pub struct SessionBuilder<S> {
    agent_id: String,
    compactor: CompactorBuilder,
    /// Gives the compactor the session's store, fenced when the session is (a closure:
    /// `Store` is not object-safe), and returns the checkpoint handle of the same store.
    set_store: SetStore,
    checkpoints: Arc<dyn CheckpointStore>,
    ledger: Arc<dyn SessionLedger<S>>,
    /// The session's ledger fenced for its epoch (`None`: the ledger does not fence).
    fence_ledger: FenceLedger<S>,
    open_mode: OpenMode,
    marks: (f64, f64),
    page_results_over: f64,
    verbatim_first: bool,
    keep_first: usize,
    window_share: f64,
    chat_format: Option<Arc<dyn ChatFormat>>,
    effect_calls: Option<EffectCalls>,
    reacquire: ErasedReacquire,
    options: RehydrateOptions,
    resolver: PointerResolver,
    tools: Option<Vec<ToolDefinition>>,
}

/// Sets a compactor's store (fenced for the session's epoch, when given and the store fences)
/// and returns the checkpoint handle of the same store (fenced alike).
type SetStore = Box<
    dyn FnOnce(CompactorBuilder, Option<&Fence>) -> (CompactorBuilder, Arc<dyn CheckpointStore>)
        + Send
        + Sync,
>;

/// A ledger fenced for an epoch, as the session holds it.
type FenceLedger<S> = Box<dyn Fn(&Fence) -> Option<Arc<dyn SessionLedger<S>>> + Send + Sync>;

fn set_store<T: Store + CheckpointStore + Clone + 'static>(store: T) -> SetStore {
    Box::new(move |compactor: CompactorBuilder, fence: Option<&Fence>| {
        let store = fence.and_then(|f| store.fenced(f)).unwrap_or(store);
        (compactor.store(store.clone()), Arc::new(store))
    })
}

fn fence_ledger<S, L>(ledger: Arc<L>) -> FenceLedger<S>
where
    S: HasTranscript + Send + Sync,
    L: EffectLedger + 'static,
{
    Box::new(move |fence: &Fence| {
        ledger
            .fenced(fence)
            .map(|fenced| Arc::new(fenced) as Arc<dyn SessionLedger<S>>)
    })
}

impl<S: HasTranscript + Send + Sync> SessionBuilder<S> {
    fn new(agent_id: String) -> Self {
        let store = MemoryStore::new();
        let ledger = MemoryLedger::new();
        SessionBuilder {
            agent_id,
            compactor: CompactorBuilder::default(),
            set_store: set_store(store.clone()),
            checkpoints: Arc::new(store),
            ledger: Arc::new(ledger.clone()),
            fence_ledger: fence_ledger(Arc::new(ledger)),
            open_mode: OpenMode::TakeOver,
            marks: (SESSION_HIGH_WATER, SESSION_LOW_WATER),
            page_results_over: SESSION_PAGE_RESULTS_OVER,
            verbatim_first: false,
            keep_first: SESSION_KEEP_FIRST,
            window_share: SESSION_WINDOW_SHARE,
            chat_format: None,
            effect_calls: None,
            reacquire: ErasedReacquire::new(NoReacquire),
            options: RehydrateOptions::default(),
            resolver: PointerResolver::new(),
            tools: None,
        }
    }

    /// The tool definitions every request carries, the pointer tool's included if you offer it
    /// ([`resolve_pointer_definition`](crate::pointer_tool::resolve_pointer_definition)):
    /// the budget covers them (their tokens by the chat format's formula are taken from every
    /// request's), [`SessionRequest::tools`](crate::session::SessionRequest::tools) returns
    /// them, and `anthropic_request` sends them. Replaces the `CompactorBuilder`'s tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = ToolDefinition>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// The compactor's settings: budget (required), token counter, summarizer, seal keys
    /// (recommended: a keyed seal is what makes a forged or moved checkpoint fail to open).
    pub fn compactor(mut self, compactor: CompactorBuilder) -> Self {
        self.compactor = compactor;
        self
    }

    /// Where spilled state and checkpoints are kept: one handle that is both a blob store and a
    /// checkpoint store (`SqliteStore`, `PgStore`, `MemoryStore`). Checkpoints are bound to its
    /// namespace.
    pub fn store<T>(mut self, store: T) -> Self
    where
        T: Store + CheckpointStore + Clone + 'static,
    {
        self.set_store = set_store(store.clone());
        self.checkpoints = Arc::new(store);
        self
    }

    /// The effect ledger (`SqliteLedger`, `PgLedger`, `MemoryLedger`): the source of truth of
    /// every `#[effect]` field, where [`run_effect`](Session::run_effect) claims each effect
    /// before it runs, and where the agent's newest checkpoint sequence is kept. Rollback
    /// protection rests on it: keep it out of reach of whoever could put an old checkpoint
    /// back.
    pub fn ledger<L: EffectLedger + 'static>(mut self, ledger: L) -> Self {
        let ledger = Arc::new(ledger);
        self.fence_ledger = fence_ledger(Arc::clone(&ledger));
        self.ledger = ledger;
        self
    }

    /// What opening does when another session of the agent may still be running (see
    /// [`crate::fence`]). [`OpenMode::TakeOver`] (the default): this session takes the agent's
    /// next epoch, and every later write of the session opened before (a worker presumed dead
    /// that still runs) is refused with [`SessionError::Superseded`], having written nothing.
    /// [`OpenMode::RefuseIfLive`]: opening is refused with [`SessionError::Live`] while that
    /// session wrote within the lease (each write, and [`Session::heartbeat`], renews it).
    pub fn open_mode(mut self, mode: OpenMode) -> Self {
        self.open_mode = mode;
        self
    }

    /// The hysteresis marks as shares of the budget (see
    /// [`CompactorBuilder::high_water_mark`]): a request grows by appending until it passes
    /// `high`, then one compaction point brings it down to about `low`.
    pub fn water_marks(mut self, high: f64, low: f64) -> Self {
        self.marks = (high, low);
        self
    }

    /// The share of the budget a new tool result may take verbatim (see
    /// [`CompactorBuilder::page_results_over`]): a larger one is sent as a head and a tail
    /// excerpt with its handle, and read page by page through `resolve_pointer`. `1.0` pages
    /// only what could not be sent at all.
    pub fn page_results_over(mut self, share: f64) -> Self {
        self.page_results_over = share;
        self
    }

    /// Sends a new tool result verbatim whenever its turn fits the request, paging it on
    /// arrival only when it does not (see [`CompactorBuilder::verbatim_first`]). Off by
    /// default.
    pub fn verbatim_first(mut self, on: bool) -> Self {
        self.verbatim_first = on;
        self
    }

    /// Keeps the transcript's first `n` messages in place at the start of every request while
    /// a compaction point can (see [`CompactorBuilder::keep_first`]), so the request right
    /// after a point reads them from the provider's prompt cache. `0` turns it off.
    pub fn keep_first(mut self, n: usize) -> Self {
        self.keep_first = n;
        self
    }

    /// The share of the budget the state window may grow to beyond its floor (see
    /// [`CompactorBuilder::window_share`], which gives the order): pinned protected fields and
    /// live effects are always shown; past the share, the rest waits behind its pointers.
    /// `1.0` lets the window take whatever the conversation leaves.
    pub fn window_share(mut self, share: f64) -> Self {
        self.window_share = share;
        self
    }

    /// The wire format the session's requests are planned for, passed on to the compactor
    /// (see [`CompactorBuilder::chat_format`]; set here, it wins over the `CompactorBuilder`'s
    /// whatever the order of the calls). An agent on Anthropic's Messages API, which sends
    /// [`SessionRequest::anthropic_request`](crate::SessionRequest), chooses
    /// [`AnthropicMessages`](crate::transcript::AnthropicMessages).
    pub fn chat_format(mut self, format: impl ChatFormat + 'static) -> Self {
        self.chat_format = Some(Arc::new(format));
        self
    }

    /// Which tool calls have side effects, and as which effect: `map` gets each call of the
    /// model's responses and returns its [`EffectCall`] (the `#[effect]` field's scope, and
    /// the effect with an idempotency key derived from the call's arguments, so the same
    /// request after a restart gets the same key), or `None` for a call without side effects.
    /// [`push_response`](Session::push_response) links each such call to its effect, and
    /// [`run_effect`](Session::run_effect) runs it under the ledger.
    pub fn effect_calls<F>(mut self, map: F) -> Self
    where
        F: Fn(&ToolCall) -> Option<EffectCall> + Send + Sync + 'static,
    {
        self.effect_calls = Some(Arc::new(map));
        self
    }

    /// How `#[derivable]` fields are re-read when the session resumes from a checkpoint.
    pub fn reacquire(mut self, reacquirer: impl Reacquire + 'static) -> Self {
        self.reacquire = ErasedReacquire::new(reacquirer);
        self
    }

    /// How the state is rehydrated when the session resumes (see [`RehydrateOptions`]).
    pub fn rehydrate_options(mut self, options: RehydrateOptions) -> Self {
        self.options = options;
        self
    }

    /// The pointer tool's handler (for example `PointerResolver::new().with_max_bytes(..)`).
    pub fn resolver(mut self, resolver: PointerResolver) -> Self {
        self.resolver = resolver;
        self
    }

    /// Opens the session: resumes from the agent's last checkpoint in the store, or, when
    /// there is none, starts from `fresh()`.
    ///
    /// A checkpoint is verified (seals with the compactor's keys; bound to this agent and the
    /// store's namespace: `Integrity`, `ForeignCheckpoint`), refused when the ledger recorded a
    /// newer one of the agent (`CheckpointRollback`), rehydrated (the transcript planner's
    /// memory installed with it, so the next request is exactly what the process that saved it
    /// would have sent) and its pointers allowed. No checkpoint, but a sequence in the ledger:
    /// the checkpoint was lost, [`SessionError::CheckpointMissing`].
    ///
    /// Opening takes the agent's next epoch in the store, atomically with reading the
    /// checkpoint, and in the ledger (see [`crate::fence`] and [`open_mode`](Self::open_mode)):
    /// from then on every write of a session of the agent opened before is refused with
    /// [`SessionError::Superseded`]. A session overtaken while it opened gets that error here.
    /// The epoch is taken before the checkpoint is verified: an open that then fails (a broken
    /// seal, a rolled-back checkpoint) has still fenced the session before it, which is what a
    /// worker that decided to take the agent over asked for.
    pub async fn open(self, fresh: impl FnOnce() -> S) -> Result<Session<S>, SessionError> {
        let namespace = self.checkpoints.namespace().to_owned();
        let (high, low) = self.marks;
        let (fence, row) = self.take_epoch().await?;
        // A manifest's parts are immutable and content-addressed: read after the epoch's
        // transaction, they are the ones the row names (checked against their addresses).
        let row = match row {
            Some(row) => Some(
                self.checkpoints
                    .read_parts(row)
                    .await
                    .map_err(CompactionError::from)?,
            ),
            None => None,
        };
        let mut compactor = self.compactor;
        if let Some(format) = self.chat_format {
            compactor = compactor.shared_chat_format(format);
        }
        if let Some(tools) = self.tools {
            compactor = compactor.tools(tools);
        }
        let (compactor, checkpoints) = (self.set_store)(compactor, fence.as_ref());
        let ledger = fence
            .as_ref()
            .and_then(|fence| (self.fence_ledger)(fence))
            .unwrap_or(self.ledger);
        let compactor = compactor
            .agent_id(self.agent_id.clone())
            .namespace(namespace.clone())
            .high_water_mark(high)
            .low_water_mark(low)
            .page_results_over(self.page_results_over)
            .verbatim_first(self.verbatim_first)
            .keep_first(self.keep_first)
            .window_share(self.window_share)
            .build()?;
        let mut resolver = self.resolver;
        let parent = row.as_ref().and_then(|row| row.sha256().map(str::to_owned));
        let parent_parts = row
            .as_ref()
            .map(|row| row.parts().iter().map(|part| *part.hash()).collect())
            .unwrap_or_default();
        let loaded: Option<Compacted<S>> = row
            .map(|row| row.decode(&self.agent_id, &namespace))
            .transpose()
            .map_err(CompactionError::from)?;
        let state = match &loaded {
            Some(checkpoint) => {
                ledger.advance(&compactor, checkpoint).await?;
                let rehydrated = compactor
                    .rehydrate_with(checkpoint, &self.reacquire, self.options)
                    .await?;
                allow(&mut resolver, &compactor, checkpoint)?;
                rehydrated.state
            }
            None => {
                if let Some(newest) = ledger.newest(&self.agent_id).await? {
                    return Err(SessionError::CheckpointMissing {
                        agent_id: self.agent_id,
                        newest,
                    });
                }
                fresh()
            }
        };
        let resumed_from = loaded
            .as_ref()
            .and_then(|c| c.binding())
            .map(|b| b.sequence());
        Ok(Session {
            agent_id: self.agent_id,
            namespace,
            compactor,
            checkpoints,
            ledger,
            resolver,
            effect_calls: self.effect_calls,
            state,
            last: loaded,
            resumed_from,
            fence,
            parent,
            parent_parts,
            unacked: Vec::new(),
        })
    }

    /// Takes the agent's next epoch in the checkpoint store, reading its newest checkpoint row
    /// in the same transaction, and raises the ledger to it (see [`crate::fence`]). The ledger's
    /// record is read first: its epoch is a floor (a ledger that saw a newer session than the
    /// store did keeps it), and its lease is honoured like the store's. A store that does not
    /// fence (one of your own) opens unfenced, reading the row as before.
    async fn take_epoch(&self) -> Result<(Option<Fence>, Option<CheckpointRow>), SessionError> {
        let agent_id = self.agent_id.as_str();
        let lease = self.open_mode.lease();
        let held = self.ledger.fence_record(agent_id).await?;
        if let Some(lease) = lease {
            let now = crate::fence::now_ms();
            FenceRecord::take(held, agent_id, 0, Some(lease), now).map_err(SessionError::live)?;
        }
        let at_least = held.map_or(0, |record| record.epoch.saturating_add(1));
        let taken = self
            .checkpoints
            .take_epoch(agent_id, at_least, lease)
            .await
            .map_err(|error| match error {
                CheckpointError::Live(live) => SessionError::live(live),
                other => SessionError::from(CompactionError::from(other)),
            })?;
        let Some(taken) = taken else {
            let row = self
                .checkpoints
                .load_row(agent_id)
                .await
                .map_err(CompactionError::from)?;
            return Ok((None, row));
        };
        let fence = Fence::new(agent_id, taken.epoch);
        self.ledger.raise_epoch(&fence).await?;
        Ok((Some(fence), taken.row))
    }

    /// [`open`](Self::open) for synchronous callers.
    pub fn open_blocking(self, fresh: impl FnOnce() -> S) -> Result<Session<S>, SessionError> {
        block_on(self.open(fresh))
    }
}
