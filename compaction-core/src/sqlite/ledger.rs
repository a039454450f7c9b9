//! `SqliteLedger`: the effect guard of [`EffectLog`], durable and shared between processes.

use super::db::Db;
use super::error::{SqliteError, SqliteErrorKind};
use super::ledger_rows::{guard, load_every, load_one, load_scope, store_change, TxError};
use super::options::{SqliteOptions, SyncMode};
use crate::effects::error::EffectError;
use crate::effects::ledger::EffectLedger;
use crate::effects::machine;
use crate::effects::record::{Effect, EffectLog, EffectStatus};
use crate::effects::transition::{
    AnnotatedTransition, Change, Settlement, SyncSummary, Transition,
};
use crate::fence::{Fence, FenceRecord};
use crate::future::BoxFuture;
use rusqlite::{Connection, TransactionBehavior};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The agent's fence as the ledger sees it (a child module: it runs on this ledger's
/// transactions).
mod fences;
/// Operator notes on reconciliations (a child module: it runs on this ledger's transaction).
mod notes;
/// The newest checkpoint sequence of each agent (a child module: it runs on this ledger's
/// transactions).
mod sequences;

/// Why a [`SqliteLedger`] operation failed: the guard refused (the same [`EffectError`] the
/// in-memory [`EffectLog`] returns), or the database failed (with its path).
#[derive(Debug, thiserror::Error)]
pub enum SqliteLedgerError {
    /// The guard refused the transition: e.g. `begin` on a committed key
    /// ([`EffectError::AlreadyCommitted`]) or on one whose outcome is unknown
    /// ([`EffectError::OutcomeUnknown`]: reconcile it first).
    #[error(transparent)]
    Effect(#[from] EffectError),
    /// The database failed; nothing was changed.
    #[error(transparent)]
    Backend(#[from] SqliteError),
}

impl SqliteLedgerError {
    /// The guard's refusal, if this is one.
    pub fn as_effect(&self) -> Option<&EffectError> {
        match self {
            SqliteLedgerError::Effect(e) => Some(e),
            SqliteLedgerError::Backend(_) => None,
        }
    }

    /// The database failure, if this is one.
    pub fn as_backend(&self) -> Option<&SqliteError> {
        match self {
            SqliteLedgerError::Backend(e) => Some(e),
            SqliteLedgerError::Effect(_) => None,
        }
    }
}

/// A durable effect ledger with the guard semantics of [`EffectLog`], safe to share between
/// threads and processes.
///
/// Every operation is one `BEGIN IMMEDIATE` transaction synced to disk before it returns, so:
/// - `begin(key)` atomically claims a key: of any number of threads and processes calling it
///   at once, exactly one succeeds. The key is stored as `Unknown` while the effect is in
///   flight, so a crash (even `SIGKILL`) leaves it `Unknown`: never retried by accident.
/// - `commit` / `fail` settle an in-flight key (`Committed` / back to `NotStarted`).
/// - `begin` on a committed key returns [`EffectError::AlreadyCommitted`], on an unknown one
///   [`EffectError::OutcomeUnknown`]: check the outside world and
///   [`reconcile`](Self::reconcile).
/// - Every transition is appended to `effect_events` ([`history`](Self::history)).
///
/// ```
/// use compaction::{Effect, EffectError, EffectStatus};
/// use compaction::sqlite::{SqliteLedgerError, SqliteLedger};
///
/// let path = std::env::temp_dir().join(format!("compaction-doc-ledger-{}.db", std::process::id()));
/// let ledger = SqliteLedger::open(&path)?;
/// ledger.record(&Effect::new("apply_migration", "db://prod/users", "mig-0042"))?;
/// ledger.begin("mig-0042")?;                 // claimed: Unknown until settled
/// // ... apply the migration ...
/// ledger.commit("mig-0042")?;
///
/// // After a restart (here: a new handle), the guard still refuses to run it again.
/// let reopened = SqliteLedger::open(&path)?;
/// assert_eq!(reopened.status("mig-0042")?, Some(EffectStatus::Committed));
/// assert!(matches!(
///     reopened.begin("mig-0042"),
///     Err(SqliteLedgerError::Effect(EffectError::AlreadyCommitted { .. }))
/// ));
///
/// // An `#[effect]` field reads its records from the ledger (here: the default scope "").
/// let log = reopened.load_log("")?;
/// assert_eq!(log.status("mig-0042"), Some(EffectStatus::Committed));
/// # drop((ledger, reopened));
/// # for suffix in ["", "-wal", "-shm"] {
/// #     let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
/// # }
/// # Ok::<(), SqliteLedgerError>(())
/// ```
///
/// # Backing an `EffectLog` field
///
/// The ledger is the source of truth; the `EffectLog` in the agent's state is a view of it.
/// Records live in *scopes* (one per `#[effect]` field: its path, or
/// `#[effect(scope = "...")]`); a key is unique within its scope. A handle works in one scope
/// (`""` for [`open`](Self::open); [`scope`](Self::scope) gives a handle on another). Run each
/// effect through the ledger (`begin`, do it, `commit` or `fail`) and compact with
/// [`Compactor::compact_with_ledger`](crate::Compactor::compact_with_ledger), which reads every
/// `#[effect]` field from its scope, so the window cannot show a stale view. Without it:
/// `state.migrations = ledger.load_log("migrations")?` before compacting. An agent that
/// changed its in-memory log instead can push it with [`sync_log`](Self::sync_log), which
/// only ever adds information.
///
/// The same operations are available through the [`EffectLedger`] trait (async, with the
/// scope as an argument), which every ledger backend implements.
#[derive(Debug, Clone)]
pub struct SqliteLedger {
    db: Arc<Db>,
    scope: Arc<str>,
    /// The session this handle writes for, when fenced: every write checks it in its own
    /// transaction (see [`crate::fence`]).
    fence: Option<Arc<Fence>>,
}

impl SqliteLedger {
    /// Opens the ledger in the database at `path`, creating the file and schema when missing.
    /// The file may be the one a [`SqliteStore`](super::SqliteStore) uses. The handle works in
    /// the default scope `""`.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteLedger, SqliteLedgerError> {
        Self::open_with(path, &SqliteOptions::default())
    }

    /// [`open`](Self::open) with options (busy timeout, read-only, sync mode).
    pub fn open_with(
        path: impl AsRef<Path>,
        options: &SqliteOptions,
    ) -> Result<SqliteLedger, SqliteLedgerError> {
        let db = Db::open(path.as_ref(), options, SyncMode::Full)?;
        Ok(SqliteLedger {
            db: Arc::new(db),
            scope: Arc::from(""),
            fence: None,
        })
    }

    /// A handle on the same database working in `scope` (an `#[effect]` field's scope): its
    /// operations see and change only that scope's records.
    pub fn scope(&self, scope: &str) -> SqliteLedger {
        SqliteLedger {
            db: self.db.clone(),
            scope: Arc::from(scope),
            fence: self.fence.clone(),
        }
    }

    /// The scope this handle works in.
    pub fn scope_name(&self) -> &str {
        &self.scope
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// Records an effect (usually `NotStarted`) with its action, target, `depends_on` edges and
    /// payload. Recording the same key again with the same action, target and edges is a no-op
    /// (so an agent can re-record its plan after a restart); with different ones it is
    /// [`EffectError::DuplicateKey`]. A key that `begin` created on the spot (empty action and
    /// target) takes the recorded details, keeping its status.
    pub fn record(&self, effect: &Effect) -> Result<(), SqliteLedgerError> {
        self.record_in(&self.scope, effect)
    }

    /// Claims `key` before running its effect: `NotStarted -> Unknown` (a key not yet recorded
    /// is recorded on the spot, with empty action and target). Atomic across threads and
    /// processes; refuses a committed or unknown key.
    pub fn begin(&self, key: &str) -> Result<(), SqliteLedgerError> {
        self.begin_effect(&Effect::new("", "", key))
    }

    /// [`begin`](Self::begin) that also records the effect's action, target and edges when
    /// the key is new (one transaction).
    pub fn begin_effect(&self, effect: &Effect) -> Result<(), SqliteLedgerError> {
        self.begin_in(&self.scope, effect)
    }

    /// Settles an in-flight effect as done: `Unknown -> Committed`.
    pub fn commit(&self, key: &str) -> Result<(), SqliteLedgerError> {
        self.commit_in(&self.scope, key)
    }

    /// Records that an in-flight effect certainly did not happen: `Unknown -> NotStarted`, so
    /// it may be retried.
    pub fn fail(&self, key: &str) -> Result<(), SqliteLedgerError> {
        self.fail_in(&self.scope, key)
    }

    /// Sets the status an operator established by checking the outside world (any status to
    /// any status; recorded in the history as `reconcile`).
    pub fn reconcile(&self, key: &str, status: EffectStatus) -> Result<(), SqliteLedgerError> {
        self.reconcile_in(&self.scope, key, status)
    }

    /// Sets the payload (a tool's result) of `key`.
    pub fn set_payload(
        &self,
        key: &str,
        payload: &serde_json::Value,
    ) -> Result<(), SqliteLedgerError> {
        self.set_payload_in(&self.scope, key, payload)
    }

    /// The status of `key`, if recorded.
    pub fn status(&self, key: &str) -> Result<Option<EffectStatus>, SqliteLedgerError> {
        Ok(self.get(key)?.map(|e| e.status))
    }

    /// The effect under `key`, if recorded.
    pub fn get(&self, key: &str) -> Result<Option<Effect>, SqliteLedgerError> {
        self.get_in(&self.scope, key)
    }

    /// The effects of this handle's scope with `status`, in record order.
    /// `list(EffectStatus::Unknown)` is the operator's to-do list after a crash (see
    /// [`load_all`](Self::load_all) for every scope's).
    pub fn list(&self, status: EffectStatus) -> Result<Vec<Effect>, SqliteLedgerError> {
        self.read(format!("listing {status} effects"), |conn| {
            load_scope(conn, &self.scope, Some(status))
        })
    }

    /// Every effect of this handle's scope, in record order.
    pub fn effects(&self) -> Result<Vec<Effect>, SqliteLedgerError> {
        self.read("listing effects", |conn| {
            load_scope(conn, &self.scope, None)
        })
    }

    /// The records of `scope` as an [`EffectLog`] (in order, with payloads): the value of the
    /// `#[effect]` field with that scope. Other scopes' records are not in it.
    pub fn load_log(&self, scope: &str) -> Result<EffectLog, SqliteLedgerError> {
        let effects = self.read(format!("loading effect scope `{scope}`"), |conn| {
            load_scope(conn, scope, None)
        })?;
        EffectLog::from_effects(effects).map_err(SqliteLedgerError::from)
    }

    /// Every non-empty scope's log, by scope name.
    pub fn load_all(&self) -> Result<BTreeMap<String, EffectLog>, SqliteLedgerError> {
        let rows = self.read("loading every effect scope", load_every)?;
        let mut scopes: BTreeMap<String, Vec<Effect>> = BTreeMap::new();
        for (scope, effect) in rows {
            scopes.entry(scope).or_default().push(effect);
        }
        scopes
            .into_iter()
            .map(|(scope, effects)| Ok((scope, EffectLog::from_effects(effects)?)))
            .collect()
    }

    /// Merges an in-memory [`EffectLog`] into this handle's scope, in one transaction, never
    /// erasing anything the ledger knows: records the ledger lacks are inserted with their
    /// status; for known keys the status moves *forward* only (`not_started -> unknown`,
    /// `not_started -> committed`, `unknown -> committed`), a placeholder's empty action,
    /// target and edges are filled in and a missing payload is added, while stored details
    /// and payloads are kept (the log may be stale: another process may know more). A status
    /// that would move the ledger backwards is reported in [`SyncSummary::kept`]; use
    /// [`fail`](Self::fail) or [`reconcile`](Self::reconcile) for those transitions.
    pub fn sync_log(&self, log: &EffectLog) -> Result<SyncSummary, SqliteLedgerError> {
        self.sync_in(&self.scope, log)
    }

    /// Every recorded transition of `key` in this handle's scope, oldest first.
    pub fn history(&self, key: &str) -> Result<Vec<Transition>, SqliteLedgerError> {
        self.history_in(&self.scope, key)
    }

    fn record_in(&self, scope: &str, effect: &Effect) -> Result<(), SqliteLedgerError> {
        machine::check_effect(scope, effect)?;
        let key = &effect.idempotency_key;
        self.transition(format!("recording effect `{key}`"), scope, key, |current| {
            machine::record(current, effect)
        })
    }

    fn begin_in(&self, scope: &str, effect: &Effect) -> Result<(), SqliteLedgerError> {
        machine::check_effect(scope, effect)?;
        let key = &effect.idempotency_key;
        self.transition(format!("claiming effect `{key}`"), scope, key, |current| {
            machine::begin(current, effect)
        })
    }

    fn commit_in(&self, scope: &str, key: &str) -> Result<(), SqliteLedgerError> {
        self.transition(
            format!("committing effect `{key}`"),
            scope,
            key,
            |current| machine::commit(current, key),
        )
    }

    fn fail_in(&self, scope: &str, key: &str) -> Result<(), SqliteLedgerError> {
        self.transition(format!("failing effect `{key}`"), scope, key, |current| {
            machine::fail(current, key)
        })
    }

    fn reconcile_in(
        &self,
        scope: &str,
        key: &str,
        status: EffectStatus,
    ) -> Result<(), SqliteLedgerError> {
        self.settle_in(scope, key, status, None, false)
    }

    fn set_payload_in(
        &self,
        scope: &str,
        key: &str,
        payload: &serde_json::Value,
    ) -> Result<(), SqliteLedgerError> {
        let context = format!("setting the payload of effect `{key}`");
        self.transition(context, scope, key, |current| {
            machine::set_payload(current, key, payload)
        })
    }

    fn get_in(&self, scope: &str, key: &str) -> Result<Option<Effect>, SqliteLedgerError> {
        // No ledger stores a NUL: such a key is not there.
        if machine::check_key(scope, key).is_err() {
            return Ok(None);
        }
        self.read(format!("reading effect `{key}`"), |conn| {
            load_one(conn, scope, key)
        })
    }

    fn sync_in(&self, scope: &str, log: &EffectLog) -> Result<SyncSummary, SqliteLedgerError> {
        for effect in log {
            machine::check_effect(scope, effect)?;
        }
        self.write("syncing an effect log", |tx| {
            let mut summary = SyncSummary::default();
            for effect in log {
                let key = effect.idempotency_key.as_str();
                let current = load_one(tx, scope, key)?;
                if let Some(current) = &current {
                    guard(tx, scope, key, current)?;
                }
                let (change, verdict) = machine::sync(current.as_ref(), effect);
                store_change(tx, scope, key, current.is_some(), change, None)?;
                summary.add(key, verdict);
            }
            Ok(summary)
        })
    }

    fn history_in(&self, scope: &str, key: &str) -> Result<Vec<Transition>, SqliteLedgerError> {
        Ok(self
            .annotated_in(scope, key)?
            .into_iter()
            .map(|a| a.transition)
            .collect())
    }

    /// One state machine transition of `key` in `scope`, in one `BEGIN IMMEDIATE` transaction:
    /// read the stored record, check that its status is where its history led, let the
    /// machine decide, store what it decided.
    fn transition(
        &self,
        context: String,
        scope: &str,
        key: &str,
        decide: impl FnOnce(Option<&Effect>) -> Result<Change, EffectError>,
    ) -> Result<(), SqliteLedgerError> {
        machine::check_key(scope, key)?;
        self.write(context, |tx| {
            let current = load_one(tx, scope, key)?;
            if let Some(current) = &current {
                guard(tx, scope, key, current)?;
            }
            let change = decide(current.as_ref())?;
            store_change(tx, scope, key, current.is_some(), change, None)
        })
    }

    fn read<T>(
        &self,
        context: impl Into<String>,
        f: impl FnOnce(&Connection) -> Result<T, TxError>,
    ) -> Result<T, SqliteLedgerError> {
        let conn = self.db.lock();
        f(&conn).map_err(|e| self.ledger_error(context.into(), e))
    }

    fn write<T>(
        &self,
        context: impl Into<String>,
        f: impl FnOnce(&Connection) -> Result<T, TxError>,
    ) -> Result<T, SqliteLedgerError> {
        let mut conn = self.db.lock();
        let result = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if let Some(fence) = &self.fence {
                super::fence::check(&tx, fence)?.map_err(EffectError::Superseded)?;
            }
            let value = f(&tx)?; // on error, dropping `tx` rolls back
            tx.commit()?;
            Ok(value)
        })();
        result.map_err(|e| self.ledger_error(context.into(), e))
    }

    fn ledger_error(&self, context: String, e: TxError) -> SqliteLedgerError {
        match e {
            TxError::Effect(e) => SqliteLedgerError::Effect(e),
            TxError::Sql(e) => SqliteLedgerError::Backend(self.db.error(context, e)),
            TxError::Corrupt(detail) => SqliteLedgerError::Backend(SqliteError::without_source(
                self.db.path(),
                SqliteErrorKind::Corrupt,
                format!("{context}: {detail}"),
            )),
        }
    }
}

/// The async trait form, for code written against any ledger backend. Each call runs the
/// synchronous operation (one short local transaction) and returns a ready future.
impl EffectLedger for SqliteLedger {
    type Error = SqliteLedgerError;

    fn refusal(error: &SqliteLedgerError) -> Option<&EffectError> {
        error.as_effect()
    }

    fn record<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), SqliteLedgerError>> {
        ready(self.record_in(scope, effect))
    }

    fn begin_effect<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), SqliteLedgerError>> {
        ready(self.begin_in(scope, effect))
    }

    fn commit<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), SqliteLedgerError>> {
        ready(self.commit_in(scope, key))
    }

    fn fail<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), SqliteLedgerError>> {
        ready(self.fail_in(scope, key))
    }

    fn reconcile<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        status: EffectStatus,
    ) -> BoxFuture<'a, Result<(), SqliteLedgerError>> {
        ready(self.reconcile_in(scope, key, status))
    }

    fn set_payload<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        payload: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), SqliteLedgerError>> {
        ready(self.set_payload_in(scope, key, payload))
    }

    fn get<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Effect>, SqliteLedgerError>> {
        ready(self.get_in(scope, key))
    }

    fn load_log<'a>(
        &'a self,
        scope: &'a str,
    ) -> BoxFuture<'a, Result<EffectLog, SqliteLedgerError>> {
        ready(SqliteLedger::load_log(self, scope))
    }

    fn load_all(&self) -> BoxFuture<'_, Result<BTreeMap<String, EffectLog>, SqliteLedgerError>> {
        ready(SqliteLedger::load_all(self))
    }

    fn sync_log<'a>(
        &'a self,
        scope: &'a str,
        log: &'a EffectLog,
    ) -> BoxFuture<'a, Result<SyncSummary, SqliteLedgerError>> {
        ready(self.sync_in(scope, log))
    }

    fn history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Transition>, SqliteLedgerError>> {
        ready(self.history_in(scope, key))
    }

    fn settle<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        settlement: &'a Settlement,
    ) -> BoxFuture<'a, Result<(), SqliteLedgerError>> {
        let note = Some((settlement.actor.as_str(), settlement.note.as_str()));
        let (status, only_unknown) = (settlement.status, settlement.only_unknown);
        ready(self.settle_in(scope, key, status, note, only_unknown))
    }

    fn annotated_history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AnnotatedTransition>, SqliteLedgerError>> {
        ready(self.annotated_in(scope, key))
    }

    fn advance_checkpoint<'a>(
        &'a self,
        agent_id: &'a str,
        sequence: u64,
    ) -> BoxFuture<'a, Result<u64, SqliteLedgerError>> {
        ready(self.advance_checkpoint_in(agent_id, sequence))
    }

    fn newest_checkpoint<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, SqliteLedgerError>> {
        ready(self.newest_checkpoint_in(agent_id))
    }

    fn fence_record<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FenceRecord>, SqliteLedgerError>> {
        ready(self.fence_record_in(agent_id))
    }

    fn raise_epoch<'a>(
        &'a self,
        fence: &'a Fence,
    ) -> BoxFuture<'a, Result<bool, SqliteLedgerError>> {
        ready(self.raise_epoch_in(fence).map(|()| true))
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        Some(SqliteLedger {
            fence: Some(Arc::new(fence.clone())),
            ..self.clone()
        })
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}
