//! One turn of one agent as a Temporal activity: what it takes and returns, the agent code a
//! worker runs ([`AgentTurns`]), and the standard turn on a `Session` ([`run_turn`]).
//!
//! An activity is at least once: a worker that dies mid-turn has the turn retried on another
//! while the first may still run. Every step is safe to repeat: a user message is pushed only
//! if the conversation does not hold it yet (by its number), a request is made from the saved
//! checkpoint, an effect runs under the ledger (claimed before it runs: a retry finds it claimed
//! and reports `unknown` to the model instead of running it again), and the attempt that opened
//! the session last holds the agent's fence, so the earlier one can no longer save.

use crate::workflow::UserMessage;
use compaction::session::{ModelResponse, Session, SessionError, SessionRequest, ToolFailure};
use compaction::{HasTranscript, Message, Role, ToolCall};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::error::Error;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// What a turn activity receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnInput {
    /// The agent.
    pub agent_id: String,
    /// User messages to push first (those the conversation holds already are skipped).
    pub messages: Vec<UserMessage>,
}

/// Where the agent stands after a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TurnOutcome {
    /// The model answered without calling a tool: the agent waits for its user.
    AwaitingUser,
    /// The model called tools (their results are in the conversation): the next turn asks it
    /// again.
    ModelWorking,
}

/// What a turn returns to the workflow: small, so the workflow's history stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnSummary {
    /// Where the agent stands.
    pub outcome: TurnOutcome,
    /// The checkpoint the turn's request was saved as (0 when it made none).
    pub sequence: u64,
    /// The request's tokens (0 when it made none).
    pub request_tokens: usize,
}

/// Why a turn failed (the activity is then retried).
#[derive(Debug)]
pub struct TurnError(Box<dyn Error + Send + Sync>);

impl TurnError {
    /// A turn error from any error.
    pub fn new(error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        TurnError(error.into())
    }
}

impl std::fmt::Display for TurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Error for TurnError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

impl From<SessionError> for TurnError {
    fn from(error: SessionError) -> Self {
        TurnError(Box::new(error))
    }
}

/// Records the activity's heartbeats (a worker that stops sending them is taken to be dead and
/// the turn is retried elsewhere). The activity heartbeats every second on its own while the
/// turn runs; a long tool may also call [`beat`](Self::beat).
#[derive(Clone)]
pub struct Heartbeat(Option<ActivityContext>);

impl Heartbeat {
    /// A heartbeat that records nothing (a turn run outside an activity: tests, a local loop).
    pub fn none() -> Self {
        Heartbeat(None)
    }

    /// Records one heartbeat now.
    pub async fn beat(&self) {
        if let Some(ctx) = &self.0 {
            // A heartbeat that cannot be recorded is retried by the next one.
            let _ = ctx.record_heartbeat(()).await;
        }
    }
}

/// The agent code a worker runs: one turn of the agent named in the input. Implement it by
/// opening the agent's `Session` (from PostgreSQL: `PgStore`, `PgLedger`) and calling
/// [`run_turn`] with your model call and tools.
pub trait AgentTurns: Send + Sync + 'static {
    /// Runs one turn.
    fn turn(
        &self,
        input: TurnInput,
        heartbeat: Heartbeat,
    ) -> BoxFuture<'_, Result<TurnSummary, TurnError>>;
}

/// The activities a worker registers: [`turn`](Self::turn), by the worker's [`AgentTurns`].
pub struct TurnActivities {
    turns: Arc<dyn AgentTurns>,
}

impl TurnActivities {
    /// The activities of `turns`.
    pub fn new(turns: impl AgentTurns) -> Self {
        TurnActivities {
            turns: Arc::new(turns),
        }
    }
}

/// How often the activity heartbeats while a turn runs.
const BEAT: Duration = Duration::from_secs(1);

/// The heartbeat task of one turn, stopped when the turn ends however it ends: returned, failed,
/// unwound by a panic, or dropped by the worker. A ticker left running would keep a dead turn
/// alive at the server (no retry until the start-to-close timeout).
struct Ticker(tokio::task::JoinHandle<()>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// The macro adds an undocumented constant per activity (its definition), which `missing_docs`
// would refuse; the method's own docs say what it is.
#[allow(missing_docs)]
mod methods {
    use super::*;

    #[activities]
    impl TurnActivities {
        /// One turn of the agent `input.agent_id` (see [`AgentTurns`]), heartbeating while it runs.
        #[activity]
        pub async fn turn(
            self: Arc<Self>,
            ctx: ActivityContext,
            input: TurnInput,
        ) -> Result<TurnSummary, ActivityError> {
            let beats = ctx.clone();
            let _ticker = Ticker(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(BEAT).await;
                    let _ = beats.record_heartbeat(()).await;
                }
            }));
            Ok(self.turns.turn(input, Heartbeat(Some(ctx))).await?)
        }
    }
}

/// Pushes the messages of `messages` the conversation does not hold yet: the user's message
/// number `seq` is pushed when the transcript holds fewer than `seq` user messages (a retried
/// turn whose first attempt saved it finds it there). Returns how many were pushed.
pub fn push_new_messages<S: HasTranscript + Send + Sync>(
    session: &mut Session<S>,
    messages: &[UserMessage],
) -> usize {
    let mut held = session
        .transcript()
        .messages()
        .iter()
        .filter(|m| m.role == Role::User)
        .count() as u64;
    let mut pushed = 0;
    for message in messages {
        if message.seq > held {
            session.push(Message::user(message.text.clone()));
            held += 1;
            pushed += 1;
        }
    }
    pushed
}

/// The standard turn on an open `session`: push the user's new messages; if none was new and
/// the model's answer is already saved (an attempt that died before the engine heard of it),
/// the turn is done; if the model's last reply has calls without results (an attempt died in
/// its tools), run them first; else make
/// the next request (compacted and checkpointed), ask the model with `model`, push its reply
/// and run its tools with `tool` (`Session::run_tools`: effects under the ledger). The
/// conversation is saved before the turn returns.
pub async fn run_turn<S, F, Fut, R, E, T, TFut, TE>(
    session: &mut Session<S>,
    messages: &[UserMessage],
    model: F,
    tool: T,
) -> Result<TurnSummary, TurnError>
where
    S: HasTranscript + Send + Sync,
    F: FnOnce(SessionRequest) -> Fut,
    Fut: Future<Output = Result<R, E>>,
    R: ModelResponse,
    E: Into<Box<dyn Error + Send + Sync>>,
    T: Fn(ToolCall) -> TFut,
    TFut: Future<Output = Result<String, TE>>,
    TE: Into<ToolFailure>,
{
    let pushed = push_new_messages(session, messages);
    if pushed == 0 && session.awaiting_user() {
        // An attempt that saved the model's answer and died before the engine heard of it:
        // the turn is done, and asking the model again would answer twice.
        return Ok(TurnSummary {
            outcome: TurnOutcome::AwaitingUser,
            sequence: 0,
            request_tokens: 0,
        });
    }
    let (mut sequence, mut request_tokens) = (0, 0);
    if session.pending_calls().is_empty() {
        let request = session.next_request().await?;
        sequence = request.sequence();
        request_tokens = request.tokens();
        let reply = model(request).await.map_err(TurnError::new)?;
        session.push_response(reply)?;
    }
    session.run_tools(tool).await?;
    session.finish().await?;
    let outcome = if session.awaiting_user() {
        TurnOutcome::AwaitingUser
    } else {
        TurnOutcome::ModelWorking
    };
    Ok(TurnSummary {
        outcome,
        sequence,
        request_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction::{Compactable, Compactor, Tokenizer, Transcript};
    use serde::{Deserialize, Serialize};

    #[derive(Compactable, Serialize, Deserialize, Default)]
    struct Chat {
        #[transcript]
        chat: Transcript,
    }

    fn message(seq: u64) -> UserMessage {
        UserMessage {
            seq,
            text: format!("message {seq}"),
        }
    }

    /// A turn whose code panics stops heartbeating, so the server retries it elsewhere at the
    /// heartbeat timeout rather than at the start-to-close timeout.
    #[test]
    fn a_turn_that_panics_stops_its_heartbeats() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let (alive, gone) = tokio::sync::oneshot::channel::<()>();
            let turn = async move {
                let _ticker = Ticker(tokio::spawn(async move {
                    let _alive = alive; // dropped only when the task ends
                    loop {
                        tokio::time::sleep(BEAT).await;
                    }
                }));
                panic!("the agent's code panicked");
            };
            let unwound = tokio::spawn(turn).await;
            assert!(unwound.unwrap_err().is_panic());
            let ended = tokio::time::timeout(Duration::from_secs(5), gone).await;
            assert!(ended.expect("the heartbeat task ended").is_err());
        });
    }

    #[test]
    fn a_retried_turn_pushes_only_the_messages_the_conversation_lacks() {
        let compactor = Compactor::builder()
            .budget(4_000)
            .token_counter(Tokenizer::O200kBase);
        let mut session = Session::builder("agent")
            .compactor(compactor)
            .open_blocking(Chat::default)
            .unwrap();
        assert_eq!(
            push_new_messages(&mut session, &[message(1), message(2)]),
            2
        );
        // The same turn again (its first attempt pushed both): nothing; then one more.
        assert_eq!(
            push_new_messages(&mut session, &[message(1), message(2)]),
            0
        );
        assert_eq!(
            push_new_messages(&mut session, &[message(2), message(3)]),
            1
        );
        let users: Vec<&str> = (session.transcript().messages().iter())
            .filter(|m| m.role == Role::User)
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(users, ["message 1", "message 2", "message 3"]);
    }
}
