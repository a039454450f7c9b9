//! [`EffectLedger`]: the trait every durable effect ledger implements (SQLite, PostgreSQL, the
//! in-memory [`MemoryLedger`](crate::effects::memory::MemoryLedger)).
//!
//! A ledger holds effects in *scopes*: each `#[effect]` field of a state has its own (its field
//! path, or `#[effect(scope = "...")]`), and an idempotency key is unique within its scope.
//! Every implementation applies the transitions of `machine`, so all
//! of them answer every operation alike; `tests/backends/conformance_ledger.rs` proves it on random
//! operation sequences.
//!
//! Beside the effects, a ledger keeps the newest checkpoint sequence number of each agent
//! ([`advance_checkpoint`](EffectLedger::advance_checkpoint)), forward only, so a checkpoint
//! older than one the agent already saved (a rolled-back row) is refused.

use crate::effects::error::EffectError;
use crate::effects::record::{Effect, EffectLog, EffectStatus};
use crate::effects::transition::{AnnotatedTransition, Settlement, SyncSummary, Transition};
use crate::fence::{Fence, FenceRecord};
use crate::future::BoxFuture;
use std::collections::BTreeMap;

/// A durable effect ledger: the source of truth that `#[effect]` fields are views of.
///
/// Every method works in one `scope` (an `#[effect]` field's scope; `""` is the default scope
/// of a ledger used without scopes) and applies the transitions of
/// `machine`, atomically: of any number of callers racing to
/// [`begin`](Self::begin) one key, exactly one wins. The methods return boxed `Send` futures
/// (like [`Store`](crate::store::Store)'s object-safe form) so network backends can be async
/// and the trait stays usable as `dyn EffectLedger<Error = E>`.
///
/// A new backend applies the machine inside one transaction per operation and joins the
/// conformance suite (`tests/backends/conformance_ledger.rs`) with one line.
pub trait EffectLedger: Send + Sync {
    /// The backend's error: a guard refusal ([`EffectError`]) or a backend failure.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The guard's refusal inside `error`, or `None` when the backend failed.
    fn refusal(error: &Self::Error) -> Option<&EffectError>
    where
        Self: Sized;

    /// Records an effect (`machine::record`: an identical
    /// re-record is a no-op, different details are [`EffectError::DuplicateKey`], a
    /// placeholder `begin` created takes the details).
    fn record<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), Self::Error>>;

    /// Claims `effect`'s key before it runs (`NotStarted -> Unknown`; a new key is created
    /// `Unknown` with the effect's details). Refuses a committed or unknown key.
    fn begin_effect<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), Self::Error>>;

    /// [`begin_effect`](Self::begin_effect) for a bare key (a new key gets empty details).
    fn begin<'a>(&'a self, scope: &'a str, key: &'a str) -> BoxFuture<'a, Result<(), Self::Error>> {
        Box::pin(async move {
            let placeholder = Effect::new("", "", key);
            self.begin_effect(scope, &placeholder).await
        })
    }

    /// Settles an in-flight key as done (`Unknown -> Committed`).
    fn commit<'a>(&'a self, scope: &'a str, key: &'a str)
        -> BoxFuture<'a, Result<(), Self::Error>>;

    /// Records that an in-flight effect did not happen (`Unknown -> NotStarted`).
    fn fail<'a>(&'a self, scope: &'a str, key: &'a str) -> BoxFuture<'a, Result<(), Self::Error>>;

    /// Sets the status an operator established by checking the outside world.
    fn reconcile<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        status: EffectStatus,
    ) -> BoxFuture<'a, Result<(), Self::Error>>;

    /// Sets the payload (a tool's result) of a recorded key.
    fn set_payload<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        payload: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), Self::Error>>;

    /// The effect under `key` in `scope`, if recorded.
    fn get<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Effect>, Self::Error>>;

    /// The status of `key` in `scope`, if recorded.
    fn status<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<EffectStatus>, Self::Error>> {
        Box::pin(async move { Ok(self.get(scope, key).await?.map(|e| e.status)) })
    }

    /// The records of `scope`, in record order, as the value of the `#[effect]` field it backs.
    fn load_log<'a>(&'a self, scope: &'a str) -> BoxFuture<'a, Result<EffectLog, Self::Error>>;

    /// Every non-empty scope's log, by scope name.
    fn load_all(&self) -> BoxFuture<'_, Result<BTreeMap<String, EffectLog>, Self::Error>>;

    /// Merges an in-memory log into `scope`, forward only and never erasing
    /// (`machine::sync`), in one transaction.
    fn sync_log<'a>(
        &'a self,
        scope: &'a str,
        log: &'a EffectLog,
    ) -> BoxFuture<'a, Result<SyncSummary, Self::Error>>;

    /// Every recorded transition of `key` in `scope`, oldest first.
    fn history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Transition>, Self::Error>>;

    /// An operator's settlement of `key` in `scope` after checking the outside world: its
    /// status becomes `settlement.status` (any status to any status, like
    /// [`reconcile`](Self::reconcile); with `only_unknown`, a key that is not `unknown` is
    /// refused with [`EffectError::NotInFlight`], checked in the same transaction), and the
    /// history keeps who settled it and what they checked beside the `reconcile` event. It is
    /// the one operation that may act on a key whose status its history does not explain
    /// (see [`history_problem`](crate::effects::history_problem)): that is how such a key is
    /// repaired.
    fn settle<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        settlement: &'a Settlement,
    ) -> BoxFuture<'a, Result<(), Self::Error>>;

    /// Every recorded transition of `key` in `scope`, oldest first, with the operator's name
    /// and note on the ones [`settle`](Self::settle) made.
    fn annotated_history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AnnotatedTransition>, Self::Error>>;

    /// Records that `agent_id` has a checkpoint numbered `sequence` (its
    /// [`CheckpointBinding::sequence`](crate::CheckpointBinding::sequence)), forward only, in
    /// one transaction, and returns the newest sequence held for the agent afterwards: the
    /// larger of `sequence` and what was held. A result above `sequence` means the checkpoint
    /// is older than one this agent already recorded (a rolled-back checkpoint): refuse it.
    /// [`Compactor::advance_checkpoint`](crate::Compactor::advance_checkpoint) calls this and
    /// does that. Durable backends store the sequence in a signed 64-bit column and refuse one
    /// above `i64::MAX` (no compactor counts that far) as a backend failure; their table also
    /// refuses, in the database itself, any change that moves a sequence back or deletes it.
    fn advance_checkpoint<'a>(
        &'a self,
        agent_id: &'a str,
        sequence: u64,
    ) -> BoxFuture<'a, Result<u64, Self::Error>>;

    /// The newest checkpoint sequence recorded for `agent_id`; `None` before the first.
    fn newest_checkpoint<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, Self::Error>>;

    /// What this ledger holds of `agent_id`'s fence (see [`crate::fence`]): its newest epoch
    /// and when a session of it last wrote here. `None` before the agent's first fenced
    /// session, and for a ledger that does not fence (the default, for a ledger of your own:
    /// forward to the ledger you wrap).
    fn fence_record<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FenceRecord>, Self::Error>> {
        let _ = agent_id;
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Opening a session: raises `fence`'s agent to `fence`'s epoch (taken in the checkpoint
    /// store), so every write through a ledger handle fenced at an older epoch is refused from
    /// then on; refused with [`EffectError::Superseded`] when the ledger already holds a newer
    /// epoch (another session opened meanwhile). Returns whether this ledger fences (`false`:
    /// the default, for a ledger of your own).
    fn raise_epoch<'a>(&'a self, fence: &'a Fence) -> BoxFuture<'a, Result<bool, Self::Error>> {
        let _ = fence;
        Box::pin(std::future::ready(Ok(false)))
    }

    /// A handle on the same ledger whose every write (record, claim, settle, reconcile,
    /// payload, sync, sequence advance) is conditional on `fence` holding its agent's newest
    /// epoch, checked in the write's own transaction, and renews its lease; a refused write is
    /// [`EffectError::Superseded`] and changes nothing. `None`: this ledger does not fence
    /// (the default).
    fn fenced(&self, fence: &Fence) -> Option<Self>
    where
        Self: Sized,
    {
        let _ = fence;
        None
    }
}
