//! [`SessionError`]: why a session could not open, make a request, or take a turn's message.

use crate::checkpoint::CheckpointError;
use crate::conversation::message::Role;
use crate::effects::error::EffectError;
use crate::error::CompactionError;
use crate::fence::{AgentLive, Superseded};
use crate::store::StoreError;
use std::time::Duration;

/// Why a [`Session`](crate::session::Session) refused. A compaction, checkpoint or seal error
/// is [`Compaction`](Self::Compaction); the others are the session's own. Converts into
/// `Box<dyn Error>`, so `?` works in an agent's `main`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Compacting, saving, loading or verifying a checkpoint failed: a refusal of the engine
    /// (over budget, an invalid transcript), a seal or binding that does not verify
    /// (`Integrity`, `ForeignCheckpoint`), a rolled-back checkpoint (`CheckpointRollback`),
    /// or a store failure. Its message ends with what the caller does next; after
    /// [`next_request`](crate::session::Session::next_request) the session is exactly as before
    /// the call (nothing of the refused request was committed).
    #[error("{0}; {next}", next = compaction_next(.0))]
    Compaction(#[from] CompactionError),
    /// The ledger recorded a checkpoint of this agent (sequence `newest`), but the store holds
    /// none: the checkpoint was deleted, or the store was replaced by an older copy. Starting
    /// fresh would drop the conversation without a word, so the session refuses; delete the
    /// agent's sequence deliberately (a new agent id) if that is what you want.
    #[error(
        "agent `{agent_id}`: the ledger recorded its checkpoint {newest}, but the store holds \
         no checkpoint for it (deleted, or an older copy of the store); refusing to start over: \
         an operator restores the store, or the agent starts over under a new agent id"
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
    #[error(
        "calls {call_ids:?} have no result yet: answer every call (answer, run_effect, \
         answer_pointer_calls), then call next_request again; the session is unchanged"
    )]
    CallsPending {
        /// The calls without a result, in order.
        call_ids: Vec<String>,
    },
    /// [`push_response`](crate::session::Session::push_response) with a message that is not
    /// the model's (assistant) message.
    #[error(
        "push_response takes the model's message (role assistant), not a {} message; nothing \
         was pushed: push other messages with push, and the model's reply with push_response",
        .role.as_str()
    )]
    NotAResponse {
        /// The message's role.
        role: Role,
    },
    /// [`push_response`](crate::session::Session::push_response) with a reply the transcript
    /// cannot take (see [`ResponseProblem`]): refused before anything was pushed, so the
    /// transcript, which only grows by appending, stays valid. Ask the model again (or, while
    /// calls wait, answer them first).
    #[error(
        "the model's reply was refused and nothing was pushed: {problem}; {}",
        problem.what_next()
    )]
    InvalidResponse {
        /// What is wrong with it.
        problem: ResponseProblem,
    },
    /// The model's response could not be converted into our messages (a part our messages
    /// cannot carry); nothing was pushed.
    #[error(
        "the model's response cannot be carried: {0}; nothing was pushed: ask the model again"
    )]
    Response(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A call that is not waiting for a result: no pending call of the model's last message
    /// has this id (already answered, or never made).
    #[error(
        "call `{call_id}` is not waiting for a result; nothing was pushed: answer only the calls \
         pending_calls lists"
    )]
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
    /// The effect ledger failed (a backend failure, not a refusal) while recording or
    /// claiming an effect: nothing was run or pushed, and the call stays pending. (A ledger that
    /// fails to settle an effect after its tool ran is not an error:
    /// [`EffectOutcome::LeftUnknown`](crate::session::EffectOutcome::LeftUnknown).)
    #[error(
        "the effect ledger failed on `{key}` in scope `{scope}`: {source}; nothing was run or \
         pushed: call run_effect again once the ledger answers"
    )]
    Ledger {
        /// The effect's scope.
        scope: String,
        /// Its idempotency key.
        key: String,
        /// The ledger's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A newer session of this agent opened (a restarted worker took it over: see
    /// [`crate::fence`]), so this session may no longer write: the write it attempted (a
    /// checkpoint, a sequence advance, an effect's claim or settlement, a spill) was refused
    /// before anything of it was stored, and the session's own state is as it was before the
    /// call. An effect whose tool ran while the takeover happened stays `unknown` in the
    /// ledger, for the newer session and an operator; nothing was pushed here.
    #[error(
        "this session holds epoch {epoch} of its agent, but a session opened later holds epoch \
         {newer}: nothing was written; drop this session and open the agent again (the newer \
         session, or a re-opened one, goes on from the newest checkpoint)"
    )]
    Superseded {
        /// The epoch this session took when it opened.
        epoch: u64,
        /// The agent's newest epoch.
        newer: u64,
    },
    /// [`open`](crate::session::SessionBuilder::open) with
    /// [`OpenMode::RefuseIfLive`](crate::fence::OpenMode): another session of the agent wrote
    /// within the lease, so it is presumed alive. Nothing was taken.
    #[error(
        "another session of this agent (epoch {epoch}) wrote {}ms ago, within the lease of \
         {}ms: not opened; open again once it stops, or with OpenMode::TakeOver to fence it",
        renewed_ago.as_millis(),
        lease.as_millis()
    )]
    Live {
        /// The live session's epoch.
        epoch: u64,
        /// How long ago it last wrote.
        renewed_ago: Duration,
        /// The lease asked for.
        lease: Duration,
    },
    /// [`next_request`](crate::session::Session::next_request): the agent's newest checkpoint is
    /// not the one this session loaded or saved last: another writer saved one since (a store
    /// that does not fence, or an operator's write). Nothing was written, and the session is as
    /// before the call: open the agent again to go on from the newest checkpoint.
    #[error(
        "the agent's newest checkpoint is not the one this session built on (another writer \
         saved since): nothing was written; open the agent again"
    )]
    CheckpointConflict {
        /// The row checksum this session built on (`None`: it started fresh).
        expected: Option<String>,
        /// The row checksum the store holds (`None`: none).
        found: Option<String>,
    },
}

impl SessionError {
    /// The session's refusal of a write fenced by a newer session.
    pub(crate) fn superseded(refusal: Superseded) -> SessionError {
        SessionError::Superseded {
            epoch: refusal.epoch,
            newer: refusal.newer,
        }
    }

    /// The session's refusal to open an agent whose session is live.
    pub(crate) fn live(live: AgentLive) -> SessionError {
        SessionError::Live {
            epoch: live.epoch,
            renewed_ago: live.renewed_ago,
            lease: live.lease,
        }
    }

    /// A checkpoint store's error as the session reports it.
    pub(crate) fn from_checkpoint(error: CheckpointError) -> SessionError {
        match error {
            CheckpointError::Superseded(refusal) => SessionError::superseded(refusal),
            CheckpointError::Live(live) => SessionError::live(live),
            CheckpointError::Conflict {
                expected, found, ..
            } => SessionError::CheckpointConflict { expected, found },
            other => fence_error(other.into()),
        }
    }
}

/// A compaction error as the session reports it: a fence refusal anywhere in it (a fenced
/// store's spill, a checkpoint save) is [`SessionError::Superseded`].
pub(crate) fn fence_error(error: CompactionError) -> SessionError {
    match superseded_in(&error) {
        Some(refusal) => SessionError::superseded(refusal),
        None => SessionError::Compaction(error),
    }
}

/// The [`Superseded`] in `error` or its chain of sources, whichever of the library's error
/// types carries it.
fn superseded_in(error: &(dyn std::error::Error + 'static)) -> Option<Superseded> {
    let mut current = Some(error);
    while let Some(e) = current {
        let found = if let Some(s) = e.downcast_ref::<Superseded>() {
            Some(s)
        } else if let Some(EffectError::Superseded(s)) = e.downcast_ref::<EffectError>() {
            Some(s)
        } else if let Some(StoreError::Superseded(s)) = e.downcast_ref::<StoreError>() {
            Some(s)
        } else if let Some(CheckpointError::Superseded(s)) = e.downcast_ref::<CheckpointError>() {
            Some(s)
        } else if let Some(CompactionError::Store(StoreError::Superseded(s))) =
            e.downcast_ref::<CompactionError>()
        {
            Some(s)
        } else {
            None
        };
        if let Some(found) = found {
            return Some(found.clone());
        }
        current = e.source();
    }
    None
}

/// Why [`push_response`](crate::session::Session::push_response) refused a reply
/// ([`SessionError::InvalidResponse`]): each would make the transcript invalid for good (a chat
/// API refuses it, and a transcript is never edited), so it is refused before it is pushed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseProblem {
    /// A call without an id (empty or blank): no result could say which call it answers.
    #[error("call {position} (tool `{tool}`) has no id")]
    EmptyCallId {
        /// The call's position in the reply (0-based).
        position: usize,
        /// The tool it calls.
        tool: String,
    },
    /// Two calls of the reply share an id.
    #[error("two calls share the id `{call_id}`")]
    RepeatedCallId {
        /// The repeated id.
        call_id: String,
    },
    /// A call reuses the id of a call earlier in the conversation.
    #[error("call id `{call_id}` was already used by an earlier call")]
    CallIdUsed {
        /// The id.
        call_id: String,
    },
    /// Calls of the model's last message still wait for their results: a reply now would leave
    /// them unanswered.
    #[error("calls {call_ids:?} of the model's last message have no result yet")]
    CallsPending {
        /// The calls without a result, in order.
        call_ids: Vec<String>,
    },
    /// The reply carries a `tool_call_id` (only a tool result may).
    #[error("the model's message carries a tool_call_id (only a tool result may)")]
    CallIdOnReply,
    /// A reply of several assistant turns (a Responses API output with text or reasoning after
    /// its calls) whose calls are not in its last turn: they would wait for results while the
    /// reply goes on.
    #[error("the reply calls {call_ids:?} and then goes on with another turn")]
    CallsBeforeMore {
        /// The calls of the earlier turn.
        call_ids: Vec<String>,
    },
}

impl ResponseProblem {
    /// What the caller does next, in words.
    pub(crate) fn what_next(&self) -> &'static str {
        match self {
            ResponseProblem::CallsPending { .. } => {
                "answer the pending calls first (answer, run_effect, answer_pointer_calls), then \
                 push_response again"
            }
            _ => {
                "ask the model again (or give its calls fresh, unique ids) and push_response \
                 again; the session is unchanged"
            }
        }
    }
}

/// What the caller does after a compaction error, in words (the session is unchanged).
fn compaction_next(error: &CompactionError) -> &'static str {
    match error {
        CompactionError::Store(_) => {
            "nothing was committed: call next_request again once the store answers"
        }
        CompactionError::Ledger { .. } | CompactionError::CheckpointSequence { .. } => {
            "nothing was committed: call next_request again once the ledger answers"
        }
        CompactionError::Summarizer(_) => {
            "nothing was committed: call next_request again once the summarizer answers (or \
             build the compactor with .evict_on_summarizer_error(true))"
        }
        CompactionError::ProtectedOverBudget { .. }
        | CompactionError::TranscriptOverBudget { .. } => {
            "nothing was committed: raise the budget, or make the protected state smaller \
             (state_mut), then call next_request again"
        }
        CompactionError::EffectNotInLedger { .. } => {
            "nothing was committed: record the effect through the ledger (or sync the state's \
             log), then call next_request again"
        }
        CompactionError::UnknownEffect { .. } => {
            "nothing was committed: an operator reconciles the unknown effect (compaction \
             reconcile), then call next_request again"
        }
        CompactionError::InvalidTranscript { .. } | CompactionError::AmbiguousEffect { .. } => {
            "nothing was committed: an operator must repair the conversation pushed with push; \
             the transcript is never edited by the session"
        }
        CompactionError::Integrity { .. }
        | CompactionError::ForeignCheckpoint { .. }
        | CompactionError::CheckpointRollback { .. }
        | CompactionError::CheckpointFormat { .. }
        | CompactionError::SchemaChanged { .. }
        | CompactionError::WrongStateType { .. } => {
            "nothing was committed: an operator checks the store and its checkpoints before \
             the agent goes on"
        }
        _ => "nothing was committed: fix the cause, then call next_request again",
    }
}
