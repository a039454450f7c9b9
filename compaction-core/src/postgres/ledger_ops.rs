//! How a [`PgLedger`] operation runs: one transaction on the backend's runtime that locks the
//! key's row, checks that its status is where its history led, lets the state machine decide
//! and stores the decision with its event (retried when a concurrent transaction made it roll
//! back); and the [`EffectLedger`] trait, which every inherent method goes through.

use super::db::{spawn, Db};
use super::error::{Cause, PgErrorKind};
use super::fence;
use super::hidden::hidden;
use super::ledger::{PgLedger, PgLedgerError};
use super::ledger_rows::{
    guard, load_every, load_history, load_locked, load_one, load_scope, store_change, TxError,
};
use crate::effects::error::EffectError;
use crate::effects::ledger::EffectLedger;
use crate::effects::machine;
use crate::effects::record::EffectLog;
use crate::effects::record::{Effect, EffectStatus};
use crate::effects::transition::Transition;
use crate::effects::transition::{AnnotatedTransition, Settlement};
use crate::effects::transition::{Change, SyncSummary};
use crate::fence::{Fence, FenceRecord};
use crate::future::BoxFuture;
use deadpool_postgres::GenericClient;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

/// How often an operation is run again after a concurrent transaction made it roll back
/// (deadlock, or two first inserts of one key). Each attempt is a fresh transaction.
const ATTEMPTS: usize = 8;

/// A ledger operation's future.
pub(super) type Pending<'a, T> = BoxFuture<'a, Result<T, PgLedgerError>>;

type Decide = dyn Fn(Option<&Effect>) -> Result<Change, EffectError> + Send + Sync;

/// One state machine step on one key: the decision, whether the stored status must match its
/// history first (every operation but an operator's settlement), and an operator's note.
struct Step {
    decide: Box<Decide>,
    guarded: bool,
    note: Option<(String, String)>,
}

impl Step {
    fn new(
        decide: impl Fn(Option<&Effect>) -> Result<Change, EffectError> + Send + Sync + 'static,
    ) -> Step {
        Step {
            decide: Box::new(decide),
            guarded: true,
            note: None,
        }
    }

    /// An operator's settlement: it may act on a key whose status its history does not
    /// explain (that is how such a key is repaired), and records what it found.
    fn settling(mut self) -> Step {
        self.guarded = false;
        self
    }

    /// Keeps who made the step and why with its event.
    fn with_note(mut self, actor: &str, note: &str) -> Step {
        self.note = Some((actor.to_owned(), note.to_owned()));
        self
    }
}

fn refused<T: Send + 'static>(refusal: EffectError) -> Pending<'static, T> {
    Box::pin(std::future::ready(Err(PgLedgerError::Effect(refusal))))
}

fn ready<T: Send + 'static>(value: T) -> Pending<'static, T> {
    Box::pin(std::future::ready(Ok(value)))
}

impl PgLedger {
    pub(super) fn scope_in(
        &self,
        scope: &str,
        status: Option<EffectStatus>,
    ) -> Pending<'static, Vec<Effect>> {
        // No ledger stores a NUL: a scope holding one has no records.
        if scope.contains('\0') {
            return ready(Vec::new());
        }
        let scope = scope.to_string();
        self.run(
            format!("loading effect scope `{scope}`"),
            move |db| async move {
                let client = db.client().await?;
                load_scope(&client, db.namespace(), &scope, status).await
            },
        )
    }

    fn annotated_in(&self, scope: &str, key: &str) -> Pending<'static, Vec<AnnotatedTransition>> {
        if machine::check_key(scope, key).is_err() {
            return ready(Vec::new());
        }
        let (scope, key) = (scope.to_string(), key.to_string());
        let context = format!("reading the history of effect `{key}`");
        self.run(context, move |db| async move {
            let client = db.client().await?;
            load_history(&client, db.namespace(), &scope, &key).await
        })
    }

    /// One state machine step of `key` in `scope`, in one transaction (retried when a
    /// concurrent one made it roll back).
    fn transition(
        &self,
        context: String,
        scope: &str,
        key: &str,
        step: Step,
    ) -> Pending<'static, ()> {
        if let Err(refusal) = machine::check_key(scope, key) {
            return refused(refusal);
        }
        let (scope, key) = (scope.to_string(), key.to_string());
        let fence = self.fence.clone();
        self.run(context, move |db| async move {
            retrying(|| transition_once(&db, fence.as_deref(), &scope, &key, &step)).await
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

/// Checks (and renews) a fenced handle's epoch as the first statement of a write transaction
/// (see `postgres/fence.rs`): the fence row is locked before any effect row, in every write,
/// so writers never deadlock on each other. A refusal is the guard's
/// ([`EffectError::Superseded`]): never retried, the transaction rolls back.
async fn check_fence(
    client: &impl GenericClient,
    namespace: &str,
    fence: Option<&Fence>,
) -> Result<(), TxError> {
    fence::check(client, namespace, fence)
        .await?
        .map_err(|refusal| TxError::Effect(EffectError::Superseded(refusal)))
}

/// Runs `attempt` until it succeeds, is refused, or fails for a reason other than a
/// concurrent transaction (at most [`ATTEMPTS`] times). A refusal (the guard's, a fence's)
/// is final: only [`TxError::is_retryable`] database conflicts run again.
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

async fn transition_once(
    db: &Db,
    fence: Option<&Fence>,
    scope: &str,
    key: &str,
    step: &Step,
) -> Result<(), TxError> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    check_fence(&tx, db.namespace(), fence).await?;
    let locked = load_locked(&tx, db.namespace(), scope, key).await?;
    if let (true, Some((current, last))) = (step.guarded, &locked) {
        guard(key, current, *last)?;
    }
    let current = locked.map(|(effect, _)| effect);
    // A refusal returns here: dropping `tx` rolls back, nothing was written.
    let change = (step.decide)(current.as_ref())?;
    let note = step.note.as_ref().map(|(a, n)| (a.as_str(), n.as_str()));
    store_change(
        &tx,
        db.namespace(),
        scope,
        key,
        current.is_some(),
        change,
        note,
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

async fn sync_once(
    db: &Db,
    fence: Option<&Fence>,
    scope: &str,
    log: &EffectLog,
) -> Result<SyncSummary, TxError> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    check_fence(&tx, db.namespace(), fence).await?;
    let mut summary = SyncSummary::default();
    for effect in log {
        let key = effect.idempotency_key.as_str();
        let locked = load_locked(&tx, db.namespace(), scope, key).await?;
        if let Some((current, last)) = &locked {
            guard(key, current, *last)?;
        }
        let current = locked.map(|(effect, _)| effect);
        let (change, verdict) = machine::sync(current.as_ref(), effect);
        store_change(
            &tx,
            db.namespace(),
            scope,
            key,
            current.is_some(),
            change,
            None,
        )
        .await?;
        summary.add(key, verdict);
    }
    tx.commit().await?;
    Ok(summary)
}

/// The trait form: the same operations, with the scope as an argument; truly async (the
/// futures wait on the network without blocking the caller's executor). The inherent methods
/// are these with the handle's scope.
impl EffectLedger for PgLedger {
    type Error = PgLedgerError;

    fn refusal(error: &PgLedgerError) -> Option<&EffectError> {
        error.as_effect()
    }

    fn record<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> Pending<'a, ()> {
        if let Err(refusal) = machine::check_effect(scope, effect) {
            return refused(refusal);
        }
        let effect = effect.clone();
        let key = effect.idempotency_key.clone();
        let context = format!("recording effect `{key}`");
        let step = Step::new(move |c| machine::record(c, &effect));
        self.transition(context, scope, &key, step)
    }

    fn begin_effect<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> Pending<'a, ()> {
        if let Err(refusal) = machine::check_effect(scope, effect) {
            return refused(refusal);
        }
        let effect = effect.clone();
        let key = effect.idempotency_key.clone();
        let context = format!("claiming effect `{key}`");
        let step = Step::new(move |c| machine::begin(c, &effect));
        self.transition(context, scope, &key, step)
    }

    fn commit<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, ()> {
        let owned = key.to_string();
        let context = format!("committing effect `{key}`");
        let step = Step::new(move |c| machine::commit(c, &owned));
        self.transition(context, scope, key, step)
    }

    fn fail<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, ()> {
        let owned = key.to_string();
        let context = format!("failing effect `{key}`");
        let step = Step::new(move |c| machine::fail(c, &owned));
        self.transition(context, scope, key, step)
    }

    fn reconcile<'a>(&'a self, scope: &'a str, key: &'a str, to: EffectStatus) -> Pending<'a, ()> {
        let owned = key.to_string();
        let context = format!("reconciling effect `{key}`");
        let step = Step::new(move |c| machine::reconcile(c, &owned, to)).settling();
        self.transition(context, scope, key, step)
    }

    fn set_payload<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        payload: &'a serde_json::Value,
    ) -> Pending<'a, ()> {
        let (owned, payload) = (key.to_string(), payload.clone());
        let context = format!("setting the payload of effect `{key}`");
        let step = Step::new(move |c| machine::set_payload(c, &owned, &payload));
        self.transition(context, scope, key, step)
    }

    fn get<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, Option<Effect>> {
        if machine::check_key(scope, key).is_err() {
            return ready(None);
        }
        let (scope, key) = (scope.to_string(), key.to_string());
        self.run(format!("reading effect `{key}`"), move |db| async move {
            let client = db.client().await?;
            load_one(&client, db.namespace(), &scope, &key).await
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
        if let Some(refusal) = log
            .iter()
            .find_map(|e| machine::check_effect(scope, e).err())
        {
            return refused(refusal);
        }
        let (scope, log) = (scope.to_string(), log.clone());
        let fence = self.fence.clone();
        self.run("syncing an effect log".into(), move |db| async move {
            retrying(|| sync_once(&db, fence.as_deref(), &scope, &log)).await
        })
    }

    fn settle<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        settlement: &'a Settlement,
    ) -> Pending<'a, ()> {
        let owned = key.to_string();
        let (status, only_unknown) = (settlement.status, settlement.only_unknown);
        let step = Step::new(move |current: Option<&Effect>| {
            machine::settled(current, &owned, status, only_unknown)
        })
        .settling()
        .with_note(&settlement.actor, &settlement.note);
        self.transition(format!("reconciling effect `{key}`"), scope, key, step)
    }

    fn annotated_history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> Pending<'a, Vec<AnnotatedTransition>> {
        self.annotated_in(scope, key)
    }

    fn history<'a>(&'a self, scope: &'a str, key: &'a str) -> Pending<'a, Vec<Transition>> {
        let annotated = self.annotated_in(scope, key);
        Box::pin(async move { Ok(annotated.await?.into_iter().map(|a| a.transition).collect()) })
    }

    fn advance_checkpoint<'a>(&'a self, agent_id: &'a str, sequence: u64) -> Pending<'a, u64> {
        let agent = agent_id.to_string();
        let fence = self.fence.clone();
        let context = format!("advancing the checkpoint sequence of agent `{agent_id}`");
        self.run(context, move |db| async move {
            let sequence = i64::try_from(sequence).map_err(|_| {
                let detail = format!("checkpoint sequence {sequence} is above i64::MAX");
                Cause::Found(PgErrorKind::Other, detail)
            })?;
            retrying(|| advance_once(&db, fence.as_deref(), &agent, sequence)).await
        })
    }

    fn newest_checkpoint<'a>(&'a self, agent_id: &'a str) -> Pending<'a, Option<u64>> {
        let agent = agent_id.to_string();
        let context = format!("reading the checkpoint sequence of agent `{agent_id}`");
        self.run(context, move |db| async move {
            let client = db.client().await?;
            let row = client
                .query_opt(
                    "SELECT sequence FROM compaction.checkpoint_sequences
                     WHERE namespace = $1 AND agent_id = $2",
                    hidden![db.namespace(), agent],
                )
                .await?;
            Ok(match row {
                Some(row) => Some(row.try_get::<_, i64>(0)?.max(0) as u64),
                None => None,
            })
        })
    }

    fn fence_record<'a>(&'a self, agent_id: &'a str) -> Pending<'a, Option<FenceRecord>> {
        let agent = agent_id.to_string();
        let context = format!("reading the fence of agent `{agent_id}`");
        self.run(context, move |db| async move {
            let client = db.client().await?;
            Ok(fence::record(&client, db.namespace(), &agent).await?)
        })
    }

    fn raise_epoch<'a>(&'a self, to: &'a Fence) -> Pending<'a, bool> {
        let to = to.clone();
        let context = format!("opening a session of agent `{}`", to.agent_id());
        // Unfenced whatever this handle is: raising is how a session starts writing here.
        self.run(context, move |db| async move {
            retrying(|| async {
                let mut client = db.client().await?;
                let tx = client.transaction().await?;
                fence::raise(&tx, db.namespace(), &to)
                    .await?
                    .map_err(|refusal| TxError::Effect(EffectError::Superseded(refusal)))?;
                tx.commit().await?;
                Ok(true)
            })
            .await
        })
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        Some(PgLedger {
            fence: Some(Arc::new(fence.clone())),
            ..self.clone()
        })
    }
}

/// One advance of `agent`'s checkpoint sequence, in a transaction of its own (the fence, when
/// given, checked in it).
async fn advance_once(
    db: &Db,
    fence: Option<&Fence>,
    agent: &str,
    sequence: i64,
) -> Result<u64, TxError> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    check_fence(&tx, db.namespace(), fence).await?;
    // One statement: the row lock of the upsert serializes racing advances.
    let row = tx
        .query_one(
            "INSERT INTO compaction.checkpoint_sequences AS s
                 (namespace, agent_id, sequence, updated_at_ms)
             VALUES ($1, $2, $3, compaction.now_ms())
             ON CONFLICT (namespace, agent_id) DO UPDATE SET
                 sequence = greatest(s.sequence, excluded.sequence),
                 updated_at_ms = excluded.updated_at_ms
             RETURNING sequence",
            hidden![db.namespace(), agent, sequence],
        )
        .await?;
    tx.commit().await?;
    Ok(row.try_get::<_, i64>(0)?.max(0) as u64)
}
