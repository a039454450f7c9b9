//! A fleet of compaction agents on [Temporal](https://temporal.io): one workflow per agent, its
//! id the agent id, so the server runs one copy of it at a time; each turn an activity.
//!
//! - [`AgentWorkflow`] (`workflow.rs`): receives the user's messages as signals
//!   ([`AgentWorkflow::user_message`]), numbers them, and hands them to the next turn; runs
//!   turns until the model waits for the user again; continues as new every
//!   [`AgentInput::turns_per_run`] turns so its history stays small. It does no I/O, reads no
//!   clock and draws no random number: the conversation and the agent's state live in
//!   PostgreSQL behind the [`Session`](compaction::session::Session), never in the history, so
//!   replaying the workflow is deterministic.
//! - [`TurnActivities::turn`] (`turn.rs`): one turn of one agent, by the [`AgentTurns`] you give
//!   the worker: open the `Session` from PostgreSQL (taking the agent's fence, so the worker
//!   that ran the previous attempt can no longer write), push the user's messages this turn
//!   carries that the conversation does not hold yet, make the next request, ask the model,
//!   push its reply, run its tools (effects under the ledger, with their idempotency keys), save,
//!   and return a [`TurnSummary`]. It heartbeats while it runs, so a worker that dies mid-turn
//!   is noticed within [`TurnOptions::heartbeat_timeout`] and the turn retried elsewhere.
//!
//! What the engine gives (which worker runs an agent, a retry on another machine when a worker
//! dies, delivery of the user's next message to the right agent) and what the library keeps
//! (a deploy that ran, or may have, never runs again; no pushed message lost; one writer per
//! agent) are in `docs/fleet.md`, with the failure table. The template is
//! `examples/fleet_temporal.rs`.

#![deny(missing_docs)]

mod turn;
mod workflow;

pub use turn::{
    push_new_messages, run_turn, AgentTurns, Heartbeat, TurnActivities, TurnError, TurnInput,
    TurnOutcome, TurnSummary,
};
pub use workflow::{AgentInput, AgentRun, AgentStatus, AgentWorkflow, TurnOptions, UserMessage};
