//! `PgLedger`: the effect state machine on PostgreSQL, one source of truth for a fleet of
//! agent processes on many machines, confined to one namespace.

use super::db::Db;
use super::error::PgError;
use super::PgOptions;
use crate::effects::error::EffectError;
use crate::effects::ledger::EffectLedger;
use crate::effects::record::EffectLog;
use crate::effects::record::{Effect, EffectStatus};
use crate::effects::transition::SyncSummary;
use crate::effects::transition::Transition;
use crate::effects::transition::{AnnotatedTransition, Settlement};
use crate::fence::Fence;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a [`PgLedger`] operation failed: the guard refused (the same [`EffectError`] the
/// in-memory [`EffectLog`] returns), or the database failed (naming server and namespace).
#[derive(Debug, thiserror::Error)]
pub enum PgLedgerError {
    /// The guard refused the transition: e.g. `begin` on a committed key
    /// ([`EffectError::AlreadyCommitted`]) or on one whose outcome is unknown
    /// ([`EffectError::OutcomeUnknown`]: reconcile it first). Nothing was changed.
    #[error(transparent)]
    Effect(#[from] EffectError),
    /// The database failed. The operation's transaction was applied whole or not at all; after
    /// [`PgErrorKind::ConnectionLost`](super::PgErrorKind::ConnectionLost) read the key's status
    /// to learn which.
    #[error(transparent)]
    Backend(#[from] PgError),
}

impl PgLedgerError {
    /// The guard's refusal, if this is one.
    pub fn as_effect(&self) -> Option<&EffectError> {
        match self {
            PgLedgerError::Effect(e) => Some(e),
            PgLedgerError::Backend(_) => None,
        }
    }

    /// The database failure, if this is one.
    pub fn as_backend(&self) -> Option<&PgError> {
        match self {
            PgLedgerError::Backend(e) => Some(e),
            PgLedgerError::Effect(_) => None,
        }
    }
}

/// A durable effect ledger shared by every process and machine that connects to the same
/// database and namespace, with the guard semantics of [`EffectLog`] (it applies the same
/// `machine`).
///
/// Every operation is one transaction that locks the key's row (`SELECT ... FOR UPDATE`), lets
/// the state machine decide, and writes its decision and the history event, so:
/// - `begin(key)` atomically claims a key: of any number of processes on any number of
///   machines calling it at once, exactly one succeeds; the others get
///   [`EffectError::OutcomeUnknown`]. The key is stored as `Unknown` while the effect is in
///   flight, so a crash (even `SIGKILL`, even of the whole machine) leaves it `Unknown`.
/// - `commit` / `fail` settle an in-flight key; `reconcile` records what an operator found,
///   [`reconcile_with_note`](Self::reconcile_with_note) also who and why.
/// - Every transition is appended to `effect_events` ([`history`](Self::history)), which the
///   database keeps append-only (a trigger refuses `UPDATE` and `DELETE`). A key whose status
///   is not where its history led (a row changed with SQL) is refused with
///   [`PgErrorKind::Corrupt`](super::PgErrorKind::Corrupt) by every operation but
///   `reconcile`, so a charge set back to `not_started` is not claimed again.
/// - A scope, key, action, target or dependency holding a NUL character is refused with
///   [`EffectError::Nul`], as by every other ledger.
/// - A handle [`fenced`](EffectLedger::fenced) for a session checks its epoch in the
///   transaction of each of its writes, under a lock on the agent's fence row, and a write
///   after a newer session opened is refused with [`EffectError::Superseded`], changing
///   nothing (see [`crate::fence`]).
/// - A connection lost mid-operation is [`PgLedgerError::Backend`] with
///   [`PgErrorKind::ConnectionLost`](super::PgErrorKind::ConnectionLost); the transaction
///   either committed whole or not at all, never half.
///
/// Every method that talks to the server is `async` and waits on the network without
/// blocking the caller's executor; the futures are `Send` and run on any executor (the backend
/// drives its connections on a runtime of its own). There are no blocking twins: synchronous
/// code (a command-line tool, the `migration_agent` example) runs them with
/// [`compaction::block_on`](crate::block_on).
///
/// Like [`SqliteLedger`](crate::SqliteLedger), records live in scopes (one per
/// `#[effect]` field); a handle works in one (`""` for [`connect`](Self::connect); see
/// [`scope`](Self::scope)), and the [`EffectLedger`] trait takes the scope as an argument.
///
/// ```no_run
/// use compaction::{Effect, EffectError, EffectStatus, PgLedger, PgLedgerError};
///
/// # async fn run() -> Result<(), PgLedgerError> {
/// let url = "postgres://agent@db.internal/agents";
/// let charges = PgLedger::connect(url, "acme").await?.scope("charges");
/// charges.record(&Effect::new("charge", "stripe://cus_42", "charge-2026-11-001")).await?;
/// charges.begin("charge-2026-11-001").await?; // claimed, fleet-wide: Unknown until settled
/// // ... call the payment API ...
/// charges.commit("charge-2026-11-001").await?;
///
/// // Any other worker, on any machine, is refused.
/// let elsewhere = PgLedger::connect(url, "acme").await?.scope("charges");
/// assert!(matches!(
///     elsewhere.begin("charge-2026-11-001").await,
///     Err(PgLedgerError::Effect(EffectError::AlreadyCommitted { .. }))
/// ));
/// assert_eq!(elsewhere.status("charge-2026-11-001").await?, Some(EffectStatus::Committed));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PgLedger {
    pub(super) db: Arc<Db>,
    pub(super) scope: Arc<str>,
    /// The session this handle writes for, when fenced: every write checks it in its own
    /// transaction (see [`crate::fence`]).
    pub(super) fence: Option<Arc<Fence>>,
}

impl PgLedger {
    /// Connects to the database `url` names for `namespace`, creating the schema when missing,
    /// with the default [`PgOptions`]. The handle works in the default scope `""`.
    pub async fn connect(url: &str, namespace: &str) -> Result<PgLedger, PgLedgerError> {
        Self::connect_with(url, namespace, &PgOptions::default()).await
    }

    /// [`connect`](Self::connect) with options (pool size, timeouts).
    pub async fn connect_with(
        url: &str,
        namespace: &str,
        options: &PgOptions,
    ) -> Result<PgLedger, PgLedgerError> {
        Ok(PgLedger {
            db: Db::connect(url, namespace, options).await?,
            scope: Arc::from(""),
            fence: None,
        })
    }

    /// A handle on the same pool working in `scope` (an `#[effect]` field's scope): its
    /// operations see and change only that scope's records. A fenced handle's scope is fenced
    /// alike.
    pub fn scope(&self, scope: &str) -> PgLedger {
        PgLedger {
            db: Arc::clone(&self.db),
            scope: Arc::from(scope),
            fence: self.fence.clone(),
        }
    }

    /// The scope this handle works in.
    pub fn scope_name(&self) -> &str {
        &self.scope
    }

    /// The namespace this handle reads and writes.
    pub fn namespace(&self) -> &str {
        self.db.namespace()
    }

    /// The server and database, as `host:port/dbname`.
    pub fn target(&self) -> &str {
        self.db.target()
    }

    /// Records an effect (`machine::record`: the same details again is a no-op, different
    /// ones are [`EffectError::DuplicateKey`], a placeholder `begin` created takes them).
    pub async fn record(&self, effect: &Effect) -> Result<(), PgLedgerError> {
        EffectLedger::record(self, &self.scope, effect).await
    }

    /// Claims `key` before running its effect: `NotStarted -> Unknown` (a new key is created
    /// `Unknown` with empty details). Exactly one of any number of concurrent callers wins.
    pub async fn begin(&self, key: &str) -> Result<(), PgLedgerError> {
        self.begin_effect(&Effect::new("", "", key)).await
    }

    /// [`begin`](Self::begin) that also records the effect's details when the key is new.
    pub async fn begin_effect(&self, effect: &Effect) -> Result<(), PgLedgerError> {
        EffectLedger::begin_effect(self, &self.scope, effect).await
    }

    /// Settles an in-flight effect as done: `Unknown -> Committed`.
    pub async fn commit(&self, key: &str) -> Result<(), PgLedgerError> {
        EffectLedger::commit(self, &self.scope, key).await
    }

    /// Records that an in-flight effect certainly did not happen: `Unknown -> NotStarted`.
    pub async fn fail(&self, key: &str) -> Result<(), PgLedgerError> {
        EffectLedger::fail(self, &self.scope, key).await
    }

    /// Sets the status an operator established by checking the outside world (any status to
    /// any status; recorded in the history as `reconcile`).
    pub async fn reconcile(&self, key: &str, status: EffectStatus) -> Result<(), PgLedgerError> {
        EffectLedger::reconcile(self, &self.scope, key, status).await
    }

    /// [`reconcile`](Self::reconcile) that also keeps who did it (`actor`) and why (`note`: what
    /// they checked) in the effect's history, in the same transaction.
    pub async fn reconcile_with_note(
        &self,
        key: &str,
        status: EffectStatus,
        note: &str,
        actor: &str,
    ) -> Result<(), PgLedgerError> {
        self.noted(key, status, note, actor, false).await
    }

    /// [`reconcile_with_note`](Self::reconcile_with_note) only when the outcome is unknown: a
    /// key that is `committed` or `not_started` is refused with [`EffectError::NotInFlight`]
    /// (its status says which), checked under the same row lock as the change, so an agent
    /// settling the key meanwhile is never overwritten.
    pub async fn reconcile_unknown_with_note(
        &self,
        key: &str,
        status: EffectStatus,
        note: &str,
        actor: &str,
    ) -> Result<(), PgLedgerError> {
        self.noted(key, status, note, actor, true).await
    }

    async fn noted(
        &self,
        key: &str,
        status: EffectStatus,
        note: &str,
        actor: &str,
        only_unknown: bool,
    ) -> Result<(), PgLedgerError> {
        let settlement = Settlement {
            status,
            actor: actor.to_owned(),
            note: note.to_owned(),
            only_unknown,
        };
        EffectLedger::settle(self, &self.scope, key, &settlement).await
    }

    /// Sets the payload (a tool's result) of `key`.
    pub async fn set_payload(
        &self,
        key: &str,
        payload: &serde_json::Value,
    ) -> Result<(), PgLedgerError> {
        EffectLedger::set_payload(self, &self.scope, key, payload).await
    }

    /// The status of `key`, if recorded.
    pub async fn status(&self, key: &str) -> Result<Option<EffectStatus>, PgLedgerError> {
        Ok(self.get(key).await?.map(|e| e.status))
    }

    /// The effect under `key`, if recorded.
    pub async fn get(&self, key: &str) -> Result<Option<Effect>, PgLedgerError> {
        EffectLedger::get(self, &self.scope, key).await
    }

    /// The effects of this handle's scope with `status`, in record order.
    /// `list(EffectStatus::Unknown)` is the operator's to-do list after a crash.
    pub async fn list(&self, status: EffectStatus) -> Result<Vec<Effect>, PgLedgerError> {
        self.scope_in(&self.scope, Some(status)).await
    }

    /// Every effect of this handle's scope, in record order.
    pub async fn effects(&self) -> Result<Vec<Effect>, PgLedgerError> {
        self.scope_in(&self.scope, None).await
    }

    /// The records of `scope` as an [`EffectLog`]: the value of the `#[effect]` field with that
    /// scope. Other scopes' (and other namespaces') records are not in it.
    pub async fn load_log(&self, scope: &str) -> Result<EffectLog, PgLedgerError> {
        EffectLedger::load_log(self, scope).await
    }

    /// Every non-empty scope's log in this namespace, by scope name.
    pub async fn load_all(&self) -> Result<BTreeMap<String, EffectLog>, PgLedgerError> {
        EffectLedger::load_all(self).await
    }

    /// Merges an in-memory [`EffectLog`] into this handle's scope in one transaction, forward
    /// only and never erasing (`machine::sync`).
    pub async fn sync_log(&self, log: &EffectLog) -> Result<SyncSummary, PgLedgerError> {
        EffectLedger::sync_log(self, &self.scope, log).await
    }

    /// Every recorded transition of `key` in this handle's scope, oldest first.
    pub async fn history(&self, key: &str) -> Result<Vec<Transition>, PgLedgerError> {
        EffectLedger::history(self, &self.scope, key).await
    }

    /// Every recorded transition of `key` in this handle's scope, oldest first, with who made
    /// it and why when an operator said so.
    pub async fn annotated_history(
        &self,
        key: &str,
    ) -> Result<Vec<AnnotatedTransition>, PgLedgerError> {
        EffectLedger::annotated_history(self, &self.scope, key).await
    }
}
