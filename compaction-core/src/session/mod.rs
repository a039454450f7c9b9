//! [`Session`]: one agent's loop around a [`Compactor`], in a few calls. It owns the agent id,
//! the compactor, the store (blobs and checkpoints), the effect ledger, the pointer tool's
//! resolver and the state, and does at each request what an agent must never forget:
//! compact with the ledger, save the checkpoint, record its sequence (refusing a rolled-back
//! checkpoint), and allow the model to read back what left its context.
//!
//! This file holds the types with everything that names the compactor's builder or the pointer
//! tool (a type kept with its impls, like `compactor/mod.rs`); the work beside it is in files
//! that name neither:
//! - `builder.rs`: [`SessionBuilder`], the parts and their defaults, and opening a session
//!   (resume from the checkpoint, or fresh);
//! - `request.rs`: [`SessionRequest`], what to send, wire-format free, and [`ExpectedCache`];
//! - `turn.rs`: which calls wait for a result, and linking effect calls to their effects;
//! - `effect.rs`: a side-effecting tool run under the ledger ([`EffectCall`],
//!   [`EffectOutcome`]); `tools.rs`: what [`Session::run_tools`] reports ([`ToolRun`]);
//! - `save.rs`: a request's checkpoint saved over the last one, under the fence;
//! - `guard.rs` and `ledger.rs`: the ledger behind object-safe traits; `reacquire.rs`: the same for
//!   `Reacquire`; `error.rs`: [`SessionError`].

mod builder;
mod effect;
pub(crate) mod error;
mod guard;
mod ledger;
mod reacquire;
pub(crate) mod request;
mod save;
mod tools;
pub(crate) mod turn;

pub use crate::conversation::answer::EffectAnswer;
pub use crate::fence::OpenMode;
pub use builder::SessionBuilder;
pub use effect::{EffectCall, EffectOutcome, ToolFailure};
pub use error::{ResponseProblem, SessionError};
pub use request::{ExpectedCache, SessionRequest};
pub use tools::{ToolRun, ToolRunOutcome};
pub use turn::ModelResponse;

use crate::checkpoint::{CheckpointStore, Compacted};
use crate::compactor::Compactor;
use crate::conversation::message::{Message, ToolCall};
use crate::conversation::transcript::Transcript;
use crate::error::CompactionError;
use crate::fence::Fence;
use crate::future::{block_on, join_all};
use crate::pointer_tool::{PointerResolver, PointerToolError, PointerToolReply};
use crate::state::has_transcript::HasTranscript;
use crate::store::ContentHash;
use ledger::SessionLedger;
use std::collections::HashSet;
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
///
/// **One writer per agent** ([`crate::fence`]): opening takes the agent's next epoch, and every
/// write of a session opened before it (a worker presumed dead that still runs) is refused with
/// [`SessionError::Superseded`], having written nothing; each checkpoint is also saved only over
/// the one this session loaded or saved last ([`SessionError::CheckpointConflict`]), so two
/// sessions never overwrite each other's conversation.
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
    /// The epoch this session took when it opened (`None`: its store does not fence).
    fence: Option<Fence>,
    /// The row checksum of the checkpoint this session loaded or saved last: the next save is
    /// made over it, and only over it.
    parent: Option<String>,
    /// The parts of that checkpoint (empty for a whole row): a save over it writes the others.
    parent_parts: HashSet<ContentHash>,
    /// The row checksums of the saves that failed since the last one that succeeded, without
    /// saying whether they were written (an acknowledgement lost): found as the store's
    /// newest, any of them is this session's own row. (Every one is kept: after a save whose
    /// acknowledgement was lost, a later try may fail before writing, and the store still
    /// holds the first.)
    unacked: Vec<String>,
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
            .field("epoch", &self.fence.as_ref().map(Fence::epoch))
            .field("compactor", &self.compactor)
            .finish_non_exhaustive()
    }
}

impl<S: HasTranscript + Send + Sync> Session<S> {
    /// Compacts the state for the next request: every `#[effect]` field read from the ledger,
    /// the checkpoint saved and its sequence recorded in the ledger (forward only), its
    /// pointers allowed for the pointer tool. Returns the messages to send.
    ///
    /// Refused with [`SessionError::CallsPending`] while calls of the model's last message
    /// have no result (a chat API rejects such a request); the state is untouched on any
    /// error, and a compaction error leaves the previous checkpoint in place. A session a newer
    /// one of its agent took over gets [`SessionError::Superseded`], and nothing is saved.
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
        let request = SessionRequest::of(
            &compacted,
            self.last.as_ref(),
            &self.agent_id,
            &self.namespace,
            self.compactor.shared_tools(),
        );
        self.last = Some(compacted);
        Ok(request)
    }

    /// Renews this session's lease without writing anything else (see
    /// [`OpenMode::RefuseIfLive`]): for an agent that waits long between writes (a user who
    /// takes an hour to answer) and must not be taken over by a scheduler that respects
    /// leases. Refused with [`SessionError::Superseded`] once a newer session opened: a
    /// cheap way to ask whether this session may still write.
    pub async fn heartbeat(&self) -> Result<(), SessionError> {
        self.checkpoints
            .renew(&self.agent_id)
            .await
            .map_err(SessionError::from_checkpoint)
    }

    /// [`heartbeat`](Self::heartbeat) for synchronous callers.
    pub fn heartbeat_blocking(&self) -> Result<(), SessionError> {
        block_on(self.heartbeat())
    }

    /// [`next_request`](Self::next_request) for synchronous callers.
    pub fn next_request_blocking(&mut self) -> Result<SessionRequest, SessionError> {
        block_on(self.next_request())
    }

    /// Makes what was pushed since the last request durable without asking the model again:
    /// call it when the agent is done (its last reply pushed), so that running it again
    /// resumes after that reply ([`awaiting_user`](Self::awaiting_user) is then true) instead
    /// of sending the last request once more. It saves the checkpoint
    /// [`next_request`](Self::next_request) would (the same compaction, fence and ledger
    /// records, the same errors, nothing changed on an error) and sends nothing: the request
    /// it planned is dropped, and a later `next_request` counts its reused prefix against it.
    pub async fn finish(&mut self) -> Result<(), SessionError> {
        self.next_request().await.map(drop)
    }

    /// [`finish`](Self::finish) for synchronous callers.
    pub fn finish_blocking(&mut self) -> Result<(), SessionError> {
        block_on(self.finish())
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

    /// The epoch this session took when it opened (see [`crate::fence`]): 1 for the agent's
    /// first session, one more at every open. `None` when the store does not fence (a store of
    /// your own that does not implement `take_epoch`).
    pub fn epoch(&self) -> Option<u64> {
        self.fence.as_ref().map(Fence::epoch)
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
        let mut messages = response.into_messages()?;
        // The transcript only grows: a reply is checked whole before any of it is pushed.
        turn::check_reply(self.state.transcript(), &messages)?;
        for mut message in messages.drain(..) {
            if let Some(map) = &self.effect_calls {
                effect::link_effects(&mut message, &**map);
            }
            self.push(message);
        }
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

    /// Answers every pending call of the model's last reply, and pushes each result in the
    /// model's order: a pointer-tool call (`resolve_pointer`) by the session's resolver
    /// ([`answer_pointer_calls`](Self::answer_pointer_calls)), a call that
    /// [`effect_calls`](SessionBuilder::effect_calls) maps to an effect under the ledger with
    /// `tool` as its run ([`run_effect`](Self::run_effect): never twice, never while its
    /// outcome is unknown), and every other call by `tool` itself. `tool` gets the call and
    /// returns the result's text, or an error the model reads as `error: ...`
    /// ([`ToolFailure::unknown`] for an effect that may have happened).
    ///
    /// Parallel calls: the plain tools of one reply run concurrently (they have no side
    /// effects, so their order does not matter); effects run one after another in the model's
    /// order, after the plain tools, because one may depend on the one before (a migration,
    /// then the deploy). Returns what happened to each call, in the model's order.
    ///
    /// When the ledger fails to record or claim an effect ([`SessionError::Ledger`]), the calls
    /// before it are answered and that call and the ones after it stay pending: call
    /// `run_tools` again (the plain tools among them run again; nothing with an effect ran).
    ///
    /// ```
    /// # use compaction::{Compactable, Compactor, Message, MemoryStore, MemoryLedger, ToolCall, Transcript};
    /// # use compaction::session::{Session, ToolFailure, ToolRunOutcome};
    /// # use serde::{Deserialize, Serialize};
    /// # use serde_json::json;
    /// # #[derive(Compactable, Serialize, Deserialize, Default)]
    /// # struct Agent { #[transcript] chat: Transcript }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut session = Session::builder("agent-7")
    /// #     .compactor(Compactor::builder().budget(8_000))
    /// #     .store(MemoryStore::new())
    /// #     .ledger(MemoryLedger::new())
    /// #     .open_blocking(Agent::default)?;
    /// session.push(Message::user("what is in notes.txt and todo.txt?"));
    /// let _request = session.next_request_blocking()?;
    /// session.push_response(Message::assistant_with_tools("", vec![
    ///     ToolCall::new("c1", "read_file", json!({"path": "notes.txt"})),
    ///     ToolCall::new("c2", "read_file", json!({"path": "todo.txt"})),
    /// ]))?;
    /// let runs = session.run_tools_blocking(|call| async move {
    ///     match call.name.as_str() {
    ///         "read_file" => Ok(format!("contents of {}", call.arguments.value()?["path"])),
    ///         other => Err(ToolFailure::failed(format!("no tool named {other}"))),
    ///     }
    /// })?;
    /// assert!(runs.iter().all(|run| matches!(run.outcome, ToolRunOutcome::Answered)));
    /// assert!(session.pending_calls().is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn run_tools<F, Fut, E>(&mut self, tool: F) -> Result<Vec<ToolRun>, SessionError>
    where
        F: Fn(ToolCall) -> Fut,
        Fut: Future<Output = Result<String, E>>,
        E: Into<ToolFailure>,
    {
        let calls = self.pending_calls();
        let is_effect = |call: &ToolCall| {
            self.effect_calls
                .as_ref()
                .is_some_and(|map| map(call).is_some())
        };
        let plain: Vec<bool> = calls
            .iter()
            .map(|call| !PointerResolver::handles(call) && !is_effect(call))
            .collect();
        let outputs = join_all(
            calls
                .iter()
                .zip(&plain)
                .filter(|(_, plain)| **plain)
                .map(|(call, _)| tool(call.clone())),
        )
        .await;
        let mut outputs = outputs.into_iter();
        let mut runs = Vec::with_capacity(calls.len());
        for (call, plain) in calls.into_iter().zip(plain) {
            let outcome = if plain {
                let output = outputs.next().expect("one output per plain call");
                let (result, outcome) = tools::plain_result(&call, output.map_err(Into::into));
                self.push(result);
                outcome
            } else if PointerResolver::handles(&call) {
                let reply = self.resolver.handle(&self.compactor, &call).await;
                self.push(reply.message.clone());
                ToolRunOutcome::Pointer(Box::new(reply))
            } else {
                ToolRunOutcome::Effect(self.run_effect(&call, || tool(call.clone())).await?)
            };
            runs.push(ToolRun { call, outcome });
        }
        Ok(runs)
    }

    /// [`run_tools`](Self::run_tools) for synchronous callers (`tool` still returns a future,
    /// driven on the calling thread).
    pub fn run_tools_blocking<F, Fut, E>(&mut self, tool: F) -> Result<Vec<ToolRun>, SessionError>
    where
        F: Fn(ToolCall) -> Fut,
        Fut: Future<Output = Result<String, E>>,
        E: Into<ToolFailure>,
    {
        block_on(self.run_tools(tool))
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
