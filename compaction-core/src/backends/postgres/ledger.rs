//! `PgLedger`: the effect state machine on PostgreSQL, one source of truth for a fleet of
//! agent processes on many machines, confined to one namespace.

use super::db::{spawn, Db};
use super::error::PgError;
use super::ledger_rows::{load_every, load_history, load_one, load_scope, store_change, TxError};
use super::PgOptions;
use crate::effects::error::EffectError;
use crate::effects::ledger::EffectLedger;
use crate::effects::machine;
use crate::effects::record::EffectLog;
use crate::effects::record::{Effect, EffectStatus};
use crate::effects::transition::Transition;
use crate::effects::transition::{Change, SyncSummary};
use crate::future::BoxFuture;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

/// How often an operation is run again after a concurrent transaction made it roll back
/// (deadlock, or two first inserts of one key). Each attempt is a fresh transaction.
const ATTEMPTS: usize = 8;

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

/// A ledger operation's future.
type Pending<'a, T> = BoxFuture<'a, Result<T, PgLedgerError>>;

type Decide = dyn Fn(Option<&Effect>) -> Result<Change, EffectError> + Send + Sync;

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
/// - `commit` / `fail` settle an in-flight key; `reconcile` records what an operator found.
/// - Every transition is appended to `effect_events` ([`history`](Self::history)), which the
///   database keeps append-only (a trigger refuses `UPDATE` and `DELETE`).
/// - A connection lost mid-operation is [`PgLedgerError::Backend`] with
///   [`PgErrorKind::ConnectionLost`](super::PgErrorKind::ConnectionLost); the transaction
///   either committed whole or not at all, never half.
///
/// Like [`SqliteLedger`](crate::SqliteLedger), records live in scopes (one per
/// `#[effect]` field); a handle works in one (`""` for [`connect`](Self::connect); see
/// [`scope`](Self::scope)), and the [`EffectLedger`] trait takes the scope as an argument.
///
/// ```no_run
/// use compaction::{Effect, EffectError, EffectStatus, PgLedger, PgLedgerError};
///
/// let url = "postgres://agent@db.internal/agents";
/// let charges = PgLedger::connect(url, "acme")?.scope("charges");
/// charges.record(&Effect::new("charge", "stripe://cus_42", "charge-2026-11-001"))?;
/// charges.begin("charge-2026-11-001")?;        // claimed, fleet-wide: Unknown until settled
/// // ... call the payment API ...
/// charges.commit("charge-2026-11-001")?;
///
/// // Any other worker, on any machine, is refused.
/// let elsewhere = PgLedger::connect(url, "acme")?.scope("charges");
/// assert!(matches!(
///     elsewhere.begin("charge-2026-11-001"),
///     Err(PgLedgerError::Effect(EffectError::AlreadyCommitted { .. }))
/// ));
/// assert_eq!(elsewhere.status("charge-2026-11-001")?, Some(EffectStatus::Committed));
/// # Ok::<(), PgLedgerError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PgLedger {
    db: Arc<Db>,
    scope: Arc<str>,
}

impl PgLedger {
    /// Connects to the database `url` names for `namespace`, creating the schema when missing,
    /// with the default [`PgOptions`]. The handle works in the default scope `""`.
    pub fn connect(url: &str, namespace: &str) -> Result<PgLedger, PgLedgerError> {
        Self::connect_with(url, namespace, &PgOptions::default())
    }

    /// [`connect`](Self::connect) with options (pool size, timeouts).
    pub fn connect_with(
        url: &str,
        namespace: &str,
        options: &PgOptions,
    ) -> Result<PgLedger, PgLedgerError> {
        Ok(PgLedger {
            db: Db::connect(url, namespace, options)?,
            scope: Arc::from(""),
        })
    }

    /// A handle on the same pool working in `scope` (an `#[effect]` field's scope): its
    /// operations see and change only that scope's records.
    pub fn scope(&self, scope: &str) -> PgLedger {
        PgLedger {
            db: Arc::clone(&self.db),
            scope: Arc::from(scope),
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
    pub fn record(&self, effect: &Effect) -> Result<(), PgLedgerError> {
        crate::future::block_on(EffectLedger::record(self, &self.scope, effect))
    }

    /// Claims `key` before running its effect: `NotStarted -> Unknown` (a new key is created
    /// `Unknown` with empty details). Exactly one of any number of concurrent callers wins.
    pub fn begin(&self, key: &str) -> Result<(), PgLedgerError> {
        self.begin_effect(&Effect::new("", "", key))
    }

    /// [`begin`](Self::begin) that also records the effect's details when the key is new.
    pub fn begin_effect(&self, effect: &Effect) -> Result<(), PgLedgerError> {
        crate::future::block_on(EffectLedger::begin_effect(self, &self.scope, effect))
    }

    /// Settles an in-flight effect as done: `Unknown -> Committed`.
    pub fn commit(&self, key: &str) -> Result<(), PgLedgerError> {
        crate::future::block_on(EffectLedger::commit(self, &self.scope, key))
    }

    /// Records that an in-flight effect certainly did not happen: `Unknown -> NotStarted`.
    pub fn fail(&self, key: &str) -> Result<(), PgLedgerError> {
        crate::future::block_on(EffectLedger::fail(self, &self.scope, key))
    }

    /// Sets the status an operator established by checking the outside world.
    pub fn reconcile(&self, key: &str, status: EffectStatus) -> Result<(), PgLedgerError> {
        crate::future::block_on(EffectLedger::reconcile(self, &self.scope, key, status))
    }

    /// Sets the payload (a tool's result) of `key`.
    pub fn set_payload(&self, key: &str, payload: &serde_json::Value) -> Result<(), PgLedgerError> {
        crate::future::block_on(EffectLedger::set_payload(self, &self.scope, key, payload))
    }

    /// The status of `key`, if recorded.
    pub fn status(&self, key: &str) -> Result<Option<EffectStatus>, PgLedgerError> {
        Ok(self.get(key)?.map(|e| e.status))
    }

    /// The effect under `key`, if recorded.
    pub fn get(&self, key: &str) -> Result<Option<Effect>, PgLedgerError> {
        crate::future::block_on(EffectLedger::get(self, &self.scope, key))
    }

    /// The effects of this handle's scope with `status`, in record order.
    /// `list(EffectStatus::Unknown)` is the operator's to-do list after a crash.
    pub fn list(&self, status: EffectStatus) -> Result<Vec<Effect>, PgLedgerError> {
        crate::future::block_on(self.scope_in(&self.scope, Some(status)))
    }

    /// Every effect of this handle's scope, in record order.
    pub fn effects(&self) -> Result<Vec<Effect>, PgLedgerError> {
        crate::future::block_on(self.scope_in(&self.scope, None))
    }

    /// The records of `scope` as an [`EffectLog`]: the value of the `#[effect]` field with that
    /// scope. Other scopes' (and other namespaces') records are not in it.
    pub fn load_log(&self, scope: &str) -> Result<EffectLog, PgLedgerError> {
        crate::future::block_on(EffectLedger::load_log(self, scope))
    }

    /// Every non-empty scope's log in this namespace, by scope name.
    pub fn load_all(&self) -> Result<BTreeMap<String, EffectLog>, PgLedgerError> {
        crate::future::block_on(EffectLedger::load_all(self))
    }

    /// Merges an in-memory [`EffectLog`] into this handle's scope in one transaction, forward
    /// only and never erasing (`machine::sync`).
    pub fn sync_log(&self, log: &EffectLog) -> Result<SyncSummary, PgLedgerError> {
        crate::future::block_on(EffectLedger::sync_log(self, &self.scope, log))
    }

    /// Every recorded transition of `key` in this handle's scope, oldest first.
    pub fn history(&self, key: &str) -> Result<Vec<Transition>, PgLedgerError> {
        crate::future::block_on(EffectLedger::history(self, &self.scope, key))
    }

    fn scope_in(&self, scope: &str, status: Option<EffectStatus>) -> Pending<'static, Vec<Effect>> {
        let scope = scope.to_string();
        self.run(
            format!("loading effect scope `{scope}`"),
            move |db| async move {
                let client = db.client().await?;
                load_scope(&client, db.namespace(), &scope, status).await
            },
        )
    }

    /// One state machine transition of `key` in `scope`, in one transaction (retried when a
    /// concurrent one made it roll back).
    fn transition(
        &self,
        context: String,
        scope: &str,
        key: &str,
        decide: impl Fn(Option<&Effect>) -> Result<Change, EffectError> + Send + Sync + 'static,
    ) -> Pending<'static, ()> {
        let (scope, key) = (scope.to_string(), key.to_string());
        self.run(context, move |db| async move {
            retrying(|| transition_once(&db, &scope, &key, &decide)).await
        })
    }

    /// Runs `op` on the backend's runtime (when first polled) with this handle's pool.
    fn run<T, Op, Fut>(&self, context: String, op: Op) -> Pending<'static, T>
    where
        T: Send + 'static,
        Op: FnOnce(Arc<Db>) -> Fut,
        Fut: Future<Output = Result<T, TxError>> + Send + 'static,
    {
        let db = Arc::clone(&self.db);
        let task = op(Arc::clone(&db));
        Box::pin(async move {
            spawn(async move {
                task.await.map_err(|e| match e {
                    TxError::Effect(refusal) => PgLedgerError::Effect(refusal),
                    TxError::Db(cause) => PgLedgerError::Backend(db.error(context, cause)),
                })
            })
            .await
        })
    }
}

/// Runs `attempt` until it succeeds, is refused, or fails for a reason other than a
/// concurrent transaction (at most [`ATTEMPTS`] times).
async fn retrying<T, Fut>(mut attempt: impl FnMut() -> Fut) -> Result<T, TxError>
where
    Fut: Future<Output = Result<T, TxError>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(e) if e.is_retryable() && tries < ATTEMPTS => tries += 1,
            done => return done,
        }
    }
}

async fn transition_once(db: &Db, scope: &str, key: &str, decide: &Decide) -> Result<(), TxError> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    let current = load_one(&tx, db.namespace(), scope, key, true).await?;
    // A refusal returns here: dropping `tx` rolls back, nothing was written.
    let change = decide(current.as_ref())?;
    store_change(&tx, db.namespace(), scope, key, current.is_some(), change).await?;
    tx.commit().await?;
    Ok(())
}

async fn sync_once(db: &Db, scope: &str, log: &EffectLog) -> Result<SyncSummary, TxError> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    let mut summary = SyncSummary::default();
    for effect in log {
        let key = effect.idempotency_key.as_str();
        let current = load_one(&tx, db.namespace(), scope, key, true).await?;
        let (change, verdict) = machine::sync(current.as_ref(), effect);
        store_change(&tx, db.namespace(), scope, key, current.is_some(), change).await?;
        summary.add(key, verdict);
    }
    tx.commit().await?;
    Ok(summary)
}

/// The trait form: the same operations, with the scope as an argument; truly async (the
/// futures wait on the network without blocking the caller's executor). The inherent methods
/// above are these, run to completion on the calling thread.
impl EffectLedger for PgLedger {
    type Error = PgLedgerError;

    fn refusal(error: &PgLedgerError) -> Option<&EffectError> {
        error.as_effect()
    }

    fn record<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> Pending<'a, ()> {
        let effect = effect.clone();
        let key = effect.idempotency_key.clone();
        let context = format!("recording effect `{key}`");
        self.transition(context, scope, &key, move |c| machine::record(c, &effect))
    }

    fn begin_effect<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> Pending<'a, ()> {
        let effect = effect.clone();
        let key = effect.idempotency_key.clone();
        let context = format!("claiming effect `{key}`");
        self.transition(context, scope, &key, move |c| machine::begin(c, &effect))
    }

    fn commit<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, ()> {
        let owned = key.to_string();
        let context = format!("committing effect `{key}`");
        self.transition(context, scope, key, move |c| machine::commit(c, &owned))
    }

    fn fail<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, ()> {
        let owned = key.to_string();
        let context = format!("failing effect `{key}`");
        self.transition(context, scope, key, move |c| machine::fail(c, &owned))
    }

    fn reconcile<'a>(&'a self, scope: &'a str, key: &'a str, to: EffectStatus) -> Pending<'a, ()> {
        let owned = key.to_string();
        let context = format!("reconciling effect `{key}`");
        self.transition(context, scope, key, move |c| {
            machine::reconcile(c, &owned, to)
        })
    }

    fn set_payload<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        payload: &'a serde_json::Value,
    ) -> Pending<'a, ()> {
        let (owned, payload) = (key.to_string(), payload.clone());
        let context = format!("setting the payload of effect `{key}`");
        self.transition(context, scope, key, move |c| {
            machine::set_payload(c, &owned, &payload)
        })
    }

    fn get<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, Option<Effect>> {
        let (scope, key) = (scope.to_string(), key.to_string());
        self.run(format!("reading effect `{key}`"), move |db| async move {
            let client = db.client().await?;
            load_one(&client, db.namespace(), &scope, &key, false).await
        })
    }

    fn load_log<'a>(&'a self, scope: &'a str) -> Pending<'a, EffectLog> {
        let effects = self.scope_in(scope, None);
        Box::pin(async move { Ok(EffectLog::from_effects(effects.await?)?) })
    }

    fn load_all(&self) -> Pending<'_, BTreeMap<String, EffectLog>> {
        let rows = self.run("loading every effect scope".into(), |db| async move {
            let client = db.client().await?;
            load_every(&client, db.namespace()).await
        });
        Box::pin(async move {
            let mut scopes: BTreeMap<String, Vec<Effect>> = BTreeMap::new();
            for (scope, effect) in rows.await? {
                scopes.entry(scope).or_default().push(effect);
            }
            let logs = scopes
                .into_iter()
                .map(|(scope, effects)| EffectLog::from_effects(effects).map(|log| (scope, log)));
            Ok(logs.collect::<Result<_, _>>()?)
        })
    }

    fn sync_log<'a>(&'a self, scope: &'a str, log: &'a EffectLog) -> Pending<'a, SyncSummary> {
        let (scope, log) = (scope.to_string(), log.clone());
        self.run("syncing an effect log".into(), move |db| async move {
            retrying(|| sync_once(&db, &scope, &log)).await
        })
    }

    fn history<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, Vec<Transition>> {
        let (scope, key) = (scope.to_string(), key.to_string());
        let context = format!("reading the history of effect `{key}`");
        self.run(context, move |db| async move {
            let client = db.client().await?;
            load_history(&client, db.namespace(), &scope, &key).await
        })
    }
}
