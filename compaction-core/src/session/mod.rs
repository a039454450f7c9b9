//! [`Session`]: one agent's loop around a [`Compactor`], in a few calls. It owns the agent id,
//! the compactor, the store (blobs and checkpoints), the effect ledger, the pointer tool's
//! resolver and the state, and does at each request what an agent must never forget:
//! compact with the ledger, save the checkpoint, record its sequence (refusing a rolled-back
//! checkpoint), and allow the model to read back what left its context.
//!
//! This file holds the types with everything that names the compactor's builder or the pointer
//! tool (a type kept with its impls, like `compactor/mod.rs`); the work beside it is in files
//! that name neither:
//! - `request.rs`: [`SessionRequest`], what to send, wire-format free;
//! - `turn.rs`: which calls wait for a result, and linking effect calls to their effects;
//! - `effect.rs`: a side-effecting tool run under the ledger ([`EffectCall`],
//!   [`EffectOutcome`]);
//! - `guard.rs` and `ledger.rs`: the ledger behind object-safe traits; `reacquire.rs`: the same for
//!   `Reacquire`; `error.rs`: [`SessionError`].

mod effect;
pub(crate) mod error;
mod guard;
mod ledger;
mod reacquire;
pub(crate) mod request;
pub(crate) mod turn;

pub use crate::conversation::answer::EffectAnswer;
pub use effect::{EffectCall, EffectOutcome, ToolFailure};
pub use error::{ResponseProblem, SessionError};
pub use request::SessionRequest;
pub use turn::ModelResponse;

use crate::checkpoint::{CheckpointStore, Compacted};
use crate::compactor::{
    Compactor, CompactorBuilder, SESSION_HIGH_WATER, SESSION_LOW_WATER, SESSION_PAGE_RESULTS_OVER,
    SESSION_WINDOW_SHARE,
};
use crate::conversation::format::ChatFormat;
use crate::conversation::message::{Message, Role, ToolCall};
use crate::conversation::transcript::Transcript;
use crate::effects::ledger::EffectLedger;
use crate::effects::memory::MemoryLedger;
use crate::error::CompactionError;
use crate::future::block_on;
use crate::pointer_tool::{PointerResolver, PointerToolError, PointerToolReply};
use crate::rehydrate::{NoReacquire, Reacquire, RehydrateOptions};
use crate::state::has_transcript::HasTranscript;
use crate::store::{MemoryStore, Store};
use ledger::SessionLedger;
use reacquire::ErasedReacquire;
use std::future::Future;
use std::sync::Arc;

/// Which tool calls have side effects, and as which effect (see
/// [`SessionBuilder::effect_calls`]).
pub(crate) type EffectCalls = Arc<dyn Fn(&ToolCall) -> Option<EffectCall> + Send + Sync>;

/// One agent's conversation with a model, durable and compacted: the loop of an agent in a
/// few calls.
///
/// ```
/// use compaction::session::{EffectCall, Session};
/// use compaction::{Compactable, Compactor, Effect, EffectLog, Message, ToolCall, Transcript};
/// use compaction::{MemoryLedger, MemoryStore};
/// use serde::{Deserialize, Serialize};
/// use serde_json::json;
///
/// #[derive(Compactable, Serialize, Deserialize, Default)]
/// struct Agent {
///     #[protected(pin)]
///     rules: Vec<String>,
///     #[transcript]
///     chat: Transcript,
///     #[effect(idempotent = false)]
///     deploys: EffectLog,
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (store, ledger) = (MemoryStore::new(), MemoryLedger::new()); // SqliteStore/Ledger: durable
/// let mut session = Session::builder("agent-7")
///     .compactor(Compactor::builder().budget(8_000))
///     .store(store.clone())
///     .ledger(ledger.clone())
///     .effect_calls(|call: &ToolCall| {
///         let service = call.arguments.value().ok()?["service"].as_str()?.to_owned();
///         let effect = Effect::new("deploy", &service, format!("deploy-{service}"));
///         (call.name == "deploy").then(|| EffectCall::new("deploys", effect))
///     })
///     .open_blocking(|| Agent { rules: vec!["never deploy on Fridays".into()], ..Agent::default() })?;
///
/// session.push(Message::user("deploy the api"));
/// let request = session.next_request_blocking()?; // compacted, checkpointed, pointers allowed
/// assert!(request.messages()[0].content.contains("never deploy on Fridays"));
///
/// // The model answers with a call (from your chat client: `push_openai_completion` etc.).
/// let call = ToolCall::new("call_1", "deploy", json!({"service": "api"}));
/// session.push_response(Message::assistant_with_tools("", vec![call.clone()]))?;
/// for call in session.pending_calls() {
///     session.run_effect_blocking(&call, || async { Ok::<_, std::io::Error>("deployed".to_owned()) })?;
/// }
/// let request = session.next_request_blocking()?;
/// let answered = request.messages().iter().find(|m| m.tool_call_id.as_deref() == Some("call_1"));
/// assert_eq!(answered.unwrap().content, "deployed");
/// // The deploy's new status comes late, as a state update: the front stays cacheable.
/// assert!(request.messages().last().unwrap().content.contains("\"status\":\"committed\""));
/// assert_eq!(request.sequence(), 2);
/// # Ok(()) }
/// ```
///
/// **Opening** ([`SessionBuilder::open`]) loads the agent's last checkpoint from the store and,
/// when there is one, verifies it with the compactor's keys and binding, refuses it when the
/// ledger recorded a newer one (a rolled-back checkpoint), rehydrates the state from it,
/// installs the transcript planner's memory of it and allows its pointers: the next request is
/// then byte for byte what the process that saved it would have sent. Without a checkpoint it
/// starts from the state you give.
///
/// **Each request** ([`next_request`](Self::next_request)) compacts the state with every
/// `#[effect]` field read from the ledger, saves the checkpoint, records its sequence in the
/// ledger (forward only), allows the new pointers, and returns the [`SessionRequest`]. What you
/// push between two requests becomes durable with the next request's checkpoint; a process
/// killed in between resumes from the last one, and its ledger still refuses every effect that
/// already ran or whose outcome is unknown.
///
/// **The sequence** ([`sequence`](Self::sequence)) is the number of the last checkpoint. It
/// only goes forward, also across restarts (the next checkpoint is numbered after the newest
/// the ledger recorded), and is what the operator sees (`compaction show`, the report).
pub struct Session<S> {
    agent_id: String,
    namespace: String,
    compactor: Compactor,
    checkpoints: Arc<dyn CheckpointStore>,
    ledger: Arc<dyn SessionLedger<S>>,
    resolver: PointerResolver,
    effect_calls: Option<EffectCalls>,
    state: S,
    /// The last checkpoint made or loaded.
    last: Option<Compacted<S>>,
    /// The sequence of the checkpoint this session resumed from.
    resumed_from: Option<u64>,
}

impl<S> std::fmt::Debug for Session<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("agent_id", &self.agent_id)
            .field("namespace", &self.namespace)
            .field(
                "sequence",
                &self
                    .last
                    .as_ref()
                    .and_then(|c| c.binding())
                    .map(|b| b.sequence()),
            )
            .field("resumed_from", &self.resumed_from)
            .field("compactor", &self.compactor)
            .finish_non_exhaustive()
    }
}

impl<S: HasTranscript + Send + Sync> Session<S> {
    /// Starts configuring the session of agent `agent_id` (see [`SessionBuilder`]).
    pub fn builder(agent_id: impl Into<String>) -> SessionBuilder<S> {
        SessionBuilder::new(agent_id.into())
    }

    /// Compacts the state for the next request: every `#[effect]` field read from the ledger,
    /// the checkpoint saved and its sequence recorded in the ledger (forward only), its
    /// pointers allowed for the pointer tool. Returns the messages to send.
    ///
    /// Refused with [`SessionError::CallsPending`] while calls of the model's last message
    /// have no result (a chat API rejects such a request); the state is untouched on any
    /// error, and a compaction error leaves the previous checkpoint in place.
    pub async fn next_request(&mut self) -> Result<SessionRequest, SessionError> {
        let pending = self.pending_calls();
        if !pending.is_empty() {
            return Err(SessionError::CallsPending {
                call_ids: pending.into_iter().map(|c| c.id).collect(),
            });
        }
        // The compactor remembers a request as it plans it; the request only counts once its
        // checkpoint is saved and recorded. On any error, forget it: the retry plans (and
        // numbers) exactly as this try did.
        let memories = self.compactor.memories();
        let compacted = match self.checkpointed().await {
            Ok(compacted) => compacted,
            Err(error) => {
                self.compactor.restore_memories(memories);
                return Err(error);
            }
        };
        let request = SessionRequest::of(&compacted, &self.agent_id, &self.namespace);
        self.last = Some(compacted);
        Ok(request)
    }

    /// Compacts the state, saves the checkpoint, records its sequence and allows its pointers.
    async fn checkpointed(&mut self) -> Result<Compacted<S>, SessionError> {
        let compacted = self.ledger.compact(&self.compactor, &self.state).await?;
        self.checkpoints
            .save(&self.agent_id, &compacted)
            .await
            .map_err(CompactionError::from)?;
        self.ledger.advance(&self.compactor, &compacted).await?;
        allow(&mut self.resolver, &self.compactor, &compacted)?;
        Ok(compacted)
    }

    /// [`next_request`](Self::next_request) for synchronous callers.
    pub fn next_request_blocking(&mut self) -> Result<SessionRequest, SessionError> {
        block_on(self.next_request())
    }
}

impl<S: HasTranscript> Session<S> {
    /// The agent's id.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state, to change its other fields (the plan, the files in view). Push messages with
    /// [`push`](Self::push) or the turn helpers; a transcript only grows by appending.
    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    /// The state, ending the session.
    pub fn into_state(self) -> S {
        self.state
    }

    /// The whole conversation (not compacted).
    pub fn transcript(&self) -> &Transcript {
        self.state.transcript()
    }

    /// Appends a message to the conversation (a user turn, a system note).
    pub fn push(&mut self, message: Message) {
        self.state.transcript_mut().push(message);
    }

    /// The compactor (its budget, counter and keys; `resolve`, `resolve_message`).
    pub fn compactor(&self) -> &Compactor {
        &self.compactor
    }

    /// The sequence number of the last checkpoint this session made or resumed from; 0 before
    /// the first.
    pub fn sequence(&self) -> u64 {
        self.last
            .as_ref()
            .and_then(|c| c.binding())
            .map_or(0, |b| b.sequence())
    }

    /// The sequence of the checkpoint the session resumed from when it opened; `None` when it
    /// started fresh.
    pub fn resumed_from(&self) -> Option<u64> {
        self.resumed_from
    }

    /// The last checkpoint this session made or resumed from (its report, window, pointers).
    pub fn last_checkpoint(&self) -> Option<&Compacted<S>> {
        self.last.as_ref()
    }

    /// The pointer tool's resolver, with every pointer of this session's checkpoints allowed.
    pub fn resolver(&self) -> &PointerResolver {
        &self.resolver
    }
}

impl<S: HasTranscript + Send + Sync> Session<S> {
    /// Pushes the model's response: our assistant [`Message`], or with `openai-types` a chat
    /// completion or its message ([`ModelResponse`]). Each call that
    /// [`effect_calls`](SessionBuilder::effect_calls) maps to an effect is linked to it
    /// ([`ToolCall::with_effect_in`]: scope and key), so compaction never folds it while its
    /// effect is live. A message of another role is refused ([`SessionError::NotAResponse`]),
    /// and so is a reply the transcript cannot take ([`SessionError::InvalidResponse`]: a call
    /// without an id or with one already used, calls of the last message still waiting); in
    /// both cases nothing is pushed.
    pub fn push_response(&mut self, response: impl ModelResponse) -> Result<(), SessionError> {
        let mut message = response.into_message()?;
        if message.role != Role::Assistant {
            return Err(SessionError::NotAResponse { role: message.role });
        }
        turn::check_response(self.state.transcript(), &message)
            .map_err(|problem| SessionError::InvalidResponse { problem })?;
        if let Some(map) = &self.effect_calls {
            effect::link_effects(&mut message, &**map);
        }
        self.push(message);
        Ok(())
    }

    /// The calls of the model's last message that have no result yet, in order: what the agent
    /// must answer before the next request. Empty when the conversation does not end with a
    /// message that calls tools (and its results so far).
    pub fn pending_calls(&self) -> Vec<ToolCall> {
        turn::pending_calls(self.state.transcript().messages())
    }

    /// Whether the model's turn is over and it waits for the user: the conversation ends with
    /// an assistant message that calls no tool. `false` while calls wait for results, after a
    /// tool result (the model reads it next), after a user message, and before anything was
    /// said. The loop: push the user's message, then request, push the reply and answer its
    /// calls until this is `true`.
    pub fn awaiting_user(&self) -> bool {
        turn::awaiting_user(self.state.transcript().messages())
    }

    /// Pushes the result of a tool without side effects (or one you guard yourself) for
    /// `call`, which must be pending ([`SessionError::NotPending`] otherwise, pushing nothing).
    pub fn answer(
        &mut self,
        call: &ToolCall,
        content: impl Into<String>,
    ) -> Result<(), SessionError> {
        if !self.pending_calls().iter().any(|c| c.id == call.id) {
            return Err(SessionError::NotPending {
                call_id: call.id.clone(),
            });
        }
        self.push(Message::tool_result(call.id.clone(), content));
        Ok(())
    }

    /// Answers every pending `resolve_pointer` call (the pointer tool,
    /// [`resolve_pointer_tool`](crate::pointer_tool::resolve_pointer_tool)): each gets its
    /// result pushed, the verified bytes or an error text the model understands. Returns the
    /// replies in call order (each [`outcome`](PointerToolReply::outcome) says what was
    /// returned, or why not, for your logs).
    pub async fn answer_pointer_calls(&mut self) -> Vec<PointerToolReply> {
        let mut replies = Vec::new();
        for call in self.pending_calls() {
            if PointerResolver::handles(&call) {
                let reply = self.resolver.handle(&self.compactor, &call).await;
                self.push(reply.message.clone());
                replies.push(reply);
            }
        }
        replies
    }

    /// [`answer_pointer_calls`](Self::answer_pointer_calls) for synchronous callers.
    pub fn answer_pointer_calls_blocking(&mut self) -> Vec<PointerToolReply> {
        block_on(self.answer_pointer_calls())
    }

    /// Runs the side-effecting tool of `call` under the ledger: records its effect (the
    /// [`effect_calls`](SessionBuilder::effect_calls) mapping says which), claims its key,
    /// runs `run`, then commits, or records that it did not happen (`fail`) when `run` returns
    /// an error; an error that says the outcome is unknown ([`ToolFailure::unknown`]) leaves
    /// the key `unknown` for an operator. A key already committed, or whose outcome is unknown, is not run. The tool
    /// result is pushed in every case: `run`'s output, or words that tell the model what
    /// happened and what not to do ([`EffectOutcome`] says which, for your code).
    ///
    /// `call` must be pending ([`SessionError::NotPending`]) and an effect
    /// ([`SessionError::NotAnEffect`]); otherwise nothing is run or pushed. A ledger that fails
    /// to record or claim the effect is [`SessionError::Ledger`]: nothing was run or pushed,
    /// and the call stays pending for `run_effect` again. A ledger that fails to settle it
    /// after the tool ran is [`EffectOutcome::LeftUnknown`] (the claim stays, unknown, for an
    /// operator), with the tool's output in the result. If this future is dropped while `run`
    /// runs (a timeout, a crash), the key stays claimed with an unknown outcome: the truth.
    pub async fn run_effect<F, Fut, E>(
        &mut self,
        call: &ToolCall,
        run: F,
    ) -> Result<EffectOutcome, SessionError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<String, E>>,
        E: Into<ToolFailure>,
    {
        let effect_call = self.effect_calls.as_ref().and_then(|map| map(call));
        let guard = self.ledger.guard();
        // What the model was last shown: the window and the state updates after it.
        let shown: Vec<String> = self.last.as_ref().map_or_else(Vec::new, |last| {
            last.messages().into_iter().map(|m| m.content).collect()
        });
        let transcript = self.state.transcript_mut();
        effect::run_effect(guard, transcript, &shown.join("\n"), call, effect_call, run).await
    }

    /// [`run_effect`](Self::run_effect) for synchronous callers (`run` still returns a future,
    /// driven on the calling thread).
    pub fn run_effect_blocking<F, Fut, E>(
        &mut self,
        call: &ToolCall,
        run: F,
    ) -> Result<EffectOutcome, SessionError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<String, E>>,
        E: Into<ToolFailure>,
    {
        block_on(self.run_effect(call, run))
    }
}

/// Allows `compacted`'s pointers. The compactor verified it already (it made it, or
/// `advance_checkpoint` checked it), so a refusal here is the compactor's own verdict.
fn allow<S>(
    resolver: &mut PointerResolver,
    compactor: &Compactor,
    compacted: &Compacted<S>,
) -> Result<(), CompactionError> {
    match resolver.allow_compacted(compactor, compacted) {
        Ok(_) => Ok(()),
        Err(PointerToolError::NotTrusted { source }) => Err(source),
        Err(_) => Err(CompactionError::checkpoint_integrity()),
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
/// | [`water_marks`](Self::water_marks) | [`SESSION_HIGH_WATER`], [`SESSION_LOW_WATER`] (0.9, 0.6) |
/// | [`page_results_over`](Self::page_results_over) | [`SESSION_PAGE_RESULTS_OVER`] (0.25) |
/// | [`window_share`](Self::window_share) | [`SESSION_WINDOW_SHARE`] (0.1) |
/// | [`chat_format`](Self::chat_format) | the `CompactorBuilder`'s (`OpenAiChat` by default) |
/// | [`effect_calls`](Self::effect_calls) | none: no call is an effect |
/// | [`reacquire`](Self::reacquire), [`rehydrate_options`](Self::rehydrate_options) | `NoReacquire`, strict |
/// | [`resolver`](Self::resolver) | `PointerResolver::new()` |
///
/// The session sets the compactor's store, agent id, namespace (the store's) and water marks
/// itself (and pages new results past their share, and caps the window), whatever the `CompactorBuilder` says: its checkpoints must be sealed for this agent
/// and kept where they are loaded from.
#[must_use]
pub struct SessionBuilder<S> {
    agent_id: String,
    compactor: CompactorBuilder,
    /// Gives the compactor the session's store (a closure: `Store` is not object-safe).
    set_store: SetStore,
    checkpoints: Arc<dyn CheckpointStore>,
    ledger: Arc<dyn SessionLedger<S>>,
    marks: (f64, f64),
    page_results_over: f64,
    window_share: f64,
    chat_format: Option<Arc<dyn ChatFormat>>,
    effect_calls: Option<EffectCalls>,
    reacquire: ErasedReacquire,
    options: RehydrateOptions,
    resolver: PointerResolver,
}

/// Sets a compactor's store.
type SetStore = Box<dyn FnOnce(CompactorBuilder) -> CompactorBuilder + Send + Sync>;

fn set_store<T: Store + 'static>(store: T) -> SetStore {
    Box::new(move |compactor: CompactorBuilder| compactor.store(store))
}

impl<S: HasTranscript + Send + Sync> SessionBuilder<S> {
    fn new(agent_id: String) -> Self {
        let store = MemoryStore::new();
        SessionBuilder {
            agent_id,
            compactor: CompactorBuilder::default(),
            set_store: set_store(store.clone()),
            checkpoints: Arc::new(store),
            ledger: Arc::new(MemoryLedger::new()),
            marks: (SESSION_HIGH_WATER, SESSION_LOW_WATER),
            page_results_over: SESSION_PAGE_RESULTS_OVER,
            window_share: SESSION_WINDOW_SHARE,
            chat_format: None,
            effect_calls: None,
            reacquire: ErasedReacquire::new(NoReacquire),
            options: RehydrateOptions::default(),
            resolver: PointerResolver::new(),
        }
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
        self.ledger = Arc::new(ledger);
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
    pub async fn open(self, fresh: impl FnOnce() -> S) -> Result<Session<S>, SessionError> {
        let namespace = self.checkpoints.namespace().to_owned();
        let (high, low) = self.marks;
        let mut compactor = self.compactor;
        if let Some(format) = self.chat_format {
            compactor = compactor.shared_chat_format(format);
        }
        let compactor = (self.set_store)(compactor)
            .agent_id(self.agent_id.clone())
            .namespace(namespace.clone())
            .high_water_mark(high)
            .low_water_mark(low)
            .page_results_over(self.page_results_over)
            .window_share(self.window_share)
            .build()?;
        let mut resolver = self.resolver;
        let loaded: Option<Compacted<S>> = self
            .checkpoints
            .load(&self.agent_id)
            .await
            .map_err(CompactionError::from)?;
        let state = match &loaded {
            Some(checkpoint) => {
                self.ledger.advance(&compactor, checkpoint).await?;
                let rehydrated = compactor
                    .rehydrate_with(checkpoint, &self.reacquire, self.options)
                    .await?;
                allow(&mut resolver, &compactor, checkpoint)?;
                rehydrated.state
            }
            None => {
                if let Some(newest) = self.ledger.newest(&self.agent_id).await? {
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
            checkpoints: self.checkpoints,
            ledger: self.ledger,
            resolver,
            effect_calls: self.effect_calls,
            state,
            last: loaded,
            resumed_from,
        })
    }

    /// [`open`](Self::open) for synchronous callers.
    pub fn open_blocking(self, fresh: impl FnOnce() -> S) -> Result<Session<S>, SessionError> {
        block_on(self.open(fresh))
    }
}
