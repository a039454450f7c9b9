//! [`SessionError`]: why a session could not open, make a request, or take a turn's message.

use crate::conversation::message::Role;
use crate::error::CompactionError;

/// Why a [`Session`](crate::session::Session) refused. A compaction, checkpoint or seal error
/// is [`Compaction`](Self::Compaction); the others are the session's own. Converts into
/// `Box<dyn Error>`, so `?` works in an agent's `main`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Compacting, saving, loading or verifying a checkpoint failed: a refusal of the engine
    /// (over budget, an invalid transcript), a seal or binding that does not verify
    /// (`Integrity`, `ForeignCheckpoint`), a rolled-back checkpoint (`CheckpointRollback`),
    /// or a store failure.
    #[error(transparent)]
    Compaction(#[from] CompactionError),
    /// The ledger recorded a checkpoint of this agent (sequence `newest`), but the store holds
    /// none: the checkpoint was deleted, or the store was replaced by an older copy. Starting
    /// fresh would drop the conversation without a word, so the session refuses; delete the
    /// agent's sequence deliberately (a new agent id) if that is what you want.
    #[error(
        "agent `{agent_id}`: the ledger recorded its checkpoint {newest}, but the store holds \
         no checkpoint for it (deleted, or an older copy of the store); refusing to start over"
    )]
    CheckpointMissing {
        /// The agent.
        agent_id: String,
        /// The newest sequence the ledger holds for it.
        newest: u64,
    },
    /// [`next_request`](crate::session::Session::next_request) while calls of the model's last
    /// message have no result yet: a chat API refuses such a request. Answer each (a tool
    /// result, [`run_effect`](crate::session::Session::run_effect),
    /// [`answer_pointer_calls`](crate::session::Session::answer_pointer_calls)) first.
    #[error("calls {call_ids:?} have no result yet: answer every call before the next request")]
    CallsPending {
        /// The calls without a result, in order.
        call_ids: Vec<String>,
    },
    /// [`push_response`](crate::session::Session::push_response) with a message that is not
    /// the model's (assistant) message.
    #[error("push_response takes the model's message (role assistant), not a {} message", .role.as_str())]
    NotAResponse {
        /// The message's role.
        role: Role,
    },
    /// The model's response could not be converted into our messages (a part our messages
    /// cannot carry); nothing was pushed.
    #[error("the model's response cannot be carried: {0}")]
    Response(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A call that is not waiting for a result: no pending call of the model's last message
    /// has this id (already answered, or never made).
    #[error("call `{call_id}` is not waiting for a result")]
    NotPending {
        /// The call id.
        call_id: String,
    },
    /// [`run_effect`](crate::session::Session::run_effect) on a call the session does not know
    /// as an effect: no [`effect_calls`](crate::session::SessionBuilder::effect_calls) mapping,
    /// or it returned `None` for this call. Nothing was run or pushed.
    #[error(
        "call `{call_id}` (tool `{tool}`) is not an effect of this session: map it to its \
         effect with SessionBuilder::effect_calls, or answer it with Session::answer"
    )]
    NotAnEffect {
        /// The call id.
        call_id: String,
        /// The tool it calls.
        tool: String,
    },
    /// The effect ledger failed (a backend failure, not a refusal) while recording, claiming or
    /// settling an effect. The call got a tool result saying what is known: not run when the
    /// claim failed; outcome unknown when the tool ran and its outcome could not be recorded.
    #[error("the effect ledger failed on `{key}` in scope `{scope}`: {source}")]
    Ledger {
        /// The effect's scope.
        scope: String,
        /// Its idempotency key.
        key: String,
        /// The ledger's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
