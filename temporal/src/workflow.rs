//! The agent's workflow: user messages in as signals, turns out as activities, continue-as-new
//! every few turns. Deterministic: it only numbers messages, schedules activities and waits.

use crate::turn::{TurnActivities, TurnInput, TurnOutcome};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityOptions, ContinueAsNewOptions, SyncWorkflowContext, WorkflowContext,
    WorkflowContextView, WorkflowResult,
};

/// A message of the agent's user, numbered by the workflow in the order its signals arrived:
/// `seq` is its place among every user message the agent ever received (from 1), so a turn
/// retried after it pushed the message does not push it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Its place among the agent's user messages, from 1 (set by the workflow).
    pub seq: u64,
    /// The text.
    pub text: String,
}

/// How a turn activity is scheduled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnOptions {
    /// The longest one attempt of a turn may take (the model call, the tools and the saves).
    pub start_to_close_timeout: Duration,
    /// A turn heartbeats while it runs; one silent this long is retried elsewhere (its worker
    /// died or stalled: the retry takes the agent's fence, so the stalled one cannot write).
    pub heartbeat_timeout: Duration,
    /// The first retry's delay (doubling, up to [`maximum_retry_interval`](Self::maximum_retry_interval)).
    pub initial_retry_interval: Duration,
    /// The longest delay between two attempts.
    pub maximum_retry_interval: Duration,
}

impl Default for TurnOptions {
    /// Five minutes an attempt, heartbeats within 10 s, retries from 1 s to 30 s, never given up:
    /// a turn is retried until it completes (the ledger makes every retry safe).
    fn default() -> Self {
        TurnOptions {
            start_to_close_timeout: Duration::from_secs(300),
            heartbeat_timeout: Duration::from_secs(10),
            initial_retry_interval: Duration::from_secs(1),
            maximum_retry_interval: Duration::from_secs(30),
        }
    }
}

/// The workflow's input (and what it continues as new with).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInput {
    /// The agent, as its `Session` knows it (and the workflow id).
    pub agent_id: String,
    /// The number the next user message gets (1 for a new agent).
    pub next_seq: u64,
    /// User messages received and not yet handed to a turn.
    pub pending: Vec<UserMessage>,
    /// Turns one run of the workflow makes before it continues as new.
    pub turns_per_run: u32,
    /// Whether the user closed the conversation: the workflow ends once it has nothing pending.
    pub closing: bool,
    /// How turns are scheduled.
    pub turn: TurnOptions,
}

impl AgentInput {
    /// A new agent's input: nothing received yet, 50 turns a run, turns scheduled by default.
    pub fn new(agent_id: impl Into<String>) -> Self {
        AgentInput {
            agent_id: agent_id.into(),
            next_seq: 1,
            pending: Vec::new(),
            turns_per_run: 50,
            closing: false,
            turn: TurnOptions::default(),
        }
    }
}

/// What a finished workflow returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRun {
    /// User messages the agent received over its whole life.
    pub user_messages: u64,
    /// Turns this last run made.
    pub turns: u32,
}

/// What the workflow answers its [`status`](AgentWorkflow::status) query with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// User messages received so far.
    pub user_messages: u64,
    /// Whether the agent waits for its user: nothing pending, no turn running.
    pub idle: bool,
}

/// One agent's workflow (see the crate docs).
#[workflow]
pub struct AgentWorkflow {
    input: AgentInput,
    turns: u32,
    running: bool,
}

// The macro adds an undocumented constant per method (its definition), which `missing_docs`
// would refuse; the methods' own docs say what each is.
#[allow(missing_docs)]
mod methods {
    use super::*;

    #[workflow_methods]
    impl AgentWorkflow {
        #[init]
        fn new(_ctx: &WorkflowContextView, input: AgentInput) -> Self {
            AgentWorkflow {
                input,
                turns: 0,
                running: false,
            }
        }

        /// Runs turns whenever user messages wait, until the user closes the conversation.
        #[run]
        pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<AgentRun> {
            loop {
                ctx.wait_condition(|s| !s.input.pending.is_empty() || s.input.closing)
                    .await?;
                let (agent_id, turn) =
                    ctx.state(|s| (s.input.agent_id.clone(), s.input.turn.clone()));
                let mut messages = ctx.state_mut(|s| {
                    s.running = true;
                    std::mem::take(&mut s.input.pending)
                });
                if messages.is_empty() {
                    let user_messages = ctx.state(|s| s.input.next_seq.saturating_sub(1));
                    let turns = ctx.state(|s| s.turns);
                    return Ok(AgentRun {
                        user_messages,
                        turns,
                    });
                }
                // Turns until the model answers without calling a tool (it waits for the user).
                loop {
                    let input = TurnInput {
                        agent_id: agent_id.clone(),
                        messages: std::mem::take(&mut messages),
                    };
                    let summary = ctx
                        .execute_activity(TurnActivities::turn, input, options(&turn))
                        .await?;
                    ctx.state_mut(|s| s.turns += 1);
                    if summary.outcome != TurnOutcome::ModelWorking {
                        break;
                    }
                }
                ctx.state_mut(|s| s.running = false);
                let (turns, per_run) = ctx.state(|s| (s.turns, s.input.turns_per_run));
                if turns >= per_run || ctx.continue_as_new_suggested() {
                    let next = ctx.state(|s| s.input.clone());
                    ctx.continue_as_new(next, ContinueAsNewOptions::default())?;
                }
            }
        }

        /// A message of the user: numbered, and handed to the next turn.
        #[signal]
        pub fn user_message(&mut self, _ctx: &mut SyncWorkflowContext<Self>, text: String) {
            let seq = self.input.next_seq;
            self.input.next_seq += 1;
            self.input.pending.push(UserMessage { seq, text });
        }

        /// The user closed the conversation: the workflow ends once nothing waits.
        #[signal]
        pub fn close(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _reason: String) {
            self.input.closing = true;
        }

        /// User messages received so far, and whether the agent waits for its user.
        #[query]
        pub fn status(&self, _ctx: &WorkflowContextView) -> AgentStatus {
            AgentStatus {
                user_messages: self.input.next_seq.saturating_sub(1),
                idle: !self.running && self.input.pending.is_empty(),
            }
        }
    }
}

/// A turn's activity options: the timeouts and an unbounded retry policy.
fn options(turn: &TurnOptions) -> ActivityOptions {
    let retry = RetryPolicy::builder()
        .initial_interval(turn.initial_retry_interval)
        .maximum_interval(turn.maximum_retry_interval)
        .build();
    ActivityOptions::with_start_to_close_timeout(turn.start_to_close_timeout)
        .heartbeat_timeout(turn.heartbeat_timeout)
        .retry_policy(retry)
        .build()
}
