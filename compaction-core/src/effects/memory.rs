//! [`MemoryLedger`]: an [`EffectLedger`] in process memory, for tests and single-process agents
//! that need scopes and history but no durability.

use crate::effects::error::EffectError;
use crate::effects::ledger::EffectLedger;
use crate::effects::machine;
use crate::effects::record::{Effect, EffectLog, EffectStatus};
use crate::effects::transition::{
    AnnotatedTransition, Change, Settlement, SyncSummary, SyncVerdict, Transition,
};
use crate::fence::{now_ms, Fence, FenceRecord};
use crate::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// An in-memory effect ledger: one [`EffectLog`] per scope behind a mutex, with the same state
/// machine and history as the durable ledgers, and nothing that survives the process.
///
/// Clones share the same records. A handle [`fenced`](EffectLedger::fenced) for a session
/// checks its epoch under the same lock as each write (see [`crate::fence`]).
///
/// ```
/// use compaction::{Effect, EffectError, EffectLedger, EffectStatus, MemoryLedger};
///
/// let ledger = MemoryLedger::new();
/// compaction::block_on(async {
///     ledger.record("charges", &Effect::new("charge", "stripe://cus_42", "pay-1")).await?;
///     ledger.begin("charges", "pay-1").await?;
///     assert_eq!(ledger.status("charges", "pay-1").await?, Some(EffectStatus::Unknown));
///     // The same key in another scope is another effect.
///     assert_eq!(ledger.status("refunds", "pay-1").await?, None);
///     Ok::<(), EffectError>(())
/// })?;
/// # Ok::<(), EffectError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryLedger {
    inner: Arc<Mutex<Scopes>>,
    /// The session this handle writes for, when fenced.
    fence: Option<Fence>,
}

#[derive(Debug, Default)]
struct Scopes {
    logs: BTreeMap<String, EffectLog>,
    history: BTreeMap<(String, String), Vec<AnnotatedTransition>>,
    /// The newest checkpoint sequence of each agent.
    checkpoints: BTreeMap<String, u64>,
    /// The newest epoch of each agent, and when a session of it last wrote.
    fences: BTreeMap<String, FenceRecord>,
}

impl MemoryLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// The records. A panic elsewhere cannot leave a half-applied transition (each one is a
    /// single assignment), so a poisoned lock is reused.
    fn lock(&self) -> MutexGuard<'_, Scopes> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The records, for a write: refused when this handle is fenced and its epoch is no longer
    /// its agent's newest, renewed otherwise. The lock is held for the whole write, so the
    /// check and the write are one step.
    fn write(&self) -> Result<MutexGuard<'_, Scopes>, EffectError> {
        let mut scopes = self.lock();
        if let Some(fence) = &self.fence {
            let held = scopes.fences.get(fence.agent_id()).copied();
            if let Some(renewed) =
                FenceRecord::check(held, fence, now_ms()).map_err(EffectError::Superseded)?
            {
                scopes.fences.insert(fence.agent_id().to_owned(), renewed);
            }
        }
        Ok(scopes)
    }

    fn apply(
        &self,
        scope: &str,
        key: &str,
        transition: impl FnOnce(Option<&Effect>) -> Result<Change, EffectError>,
    ) -> Result<(), EffectError> {
        self.write()?.apply(scope, key, None, transition)
    }

    fn history_of(&self, scope: &str, key: &str) -> Vec<AnnotatedTransition> {
        self.lock()
            .history
            .get(&(scope.to_string(), key.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    fn ready<T: Send + 'static>(
        value: Result<T, EffectError>,
    ) -> BoxFuture<'static, Result<T, EffectError>> {
        Box::pin(std::future::ready(value))
    }
}

impl Scopes {
    fn apply(
        &mut self,
        scope: &str,
        key: &str,
        note: Option<(&str, &str)>,
        transition: impl FnOnce(Option<&Effect>) -> Result<Change, EffectError>,
    ) -> Result<(), EffectError> {
        self.apply_near(scope, None, key, note, transition)
    }

    /// [`apply`](Self::apply) looking for `key` at position `near` of the scope's log first
    /// (see [`EffectLog::apply_near`]).
    fn apply_near(
        &mut self,
        scope: &str,
        near: Option<usize>,
        key: &str,
        note: Option<(&str, &str)>,
        transition: impl FnOnce(Option<&Effect>) -> Result<Change, EffectError>,
    ) -> Result<(), EffectError> {
        machine::check_key(scope, key)?;
        let Scopes { logs, history, .. } = self;
        let mut fresh = EffectLog::new();
        let log = logs.get_mut(scope).unwrap_or(&mut fresh);
        let (_, event) = log.apply_near(near, key, transition)?;
        if !fresh.is_empty() {
            logs.insert(scope.to_string(), fresh);
        }
        if let Some(event) = event {
            history
                .entry((scope.to_string(), key.to_string()))
                .or_default()
                .push(AnnotatedTransition {
                    transition: Transition::now(key, event),
                    actor: note.map(|(actor, _)| actor.to_owned()),
                    note: note.map(|(_, note)| note.to_owned()),
                });
        }
        Ok(())
    }
}

impl EffectLedger for MemoryLedger {
    type Error = EffectError;

    fn refusal(error: &EffectError) -> Option<&EffectError> {
        Some(error)
    }

    fn record<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), EffectError>> {
        let key = &effect.idempotency_key;
        if let Err(e) = machine::check_effect(scope, effect) {
            return Self::ready(Err(e));
        }
        Self::ready(self.apply(scope, key, |current| machine::record(current, effect)))
    }

    fn begin_effect<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), EffectError>> {
        let key = &effect.idempotency_key;
        if let Err(e) = machine::check_effect(scope, effect) {
            return Self::ready(Err(e));
        }
        Self::ready(self.apply(scope, key, |current| machine::begin(current, effect)))
    }

    fn commit<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), EffectError>> {
        Self::ready(self.apply(scope, key, |current| machine::commit(current, key)))
    }

    fn fail<'a>(&'a self, scope: &'a str, key: &'a str) -> BoxFuture<'a, Result<(), EffectError>> {
        Self::ready(self.apply(scope, key, |current| machine::fail(current, key)))
    }

    fn reconcile<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        status: EffectStatus,
    ) -> BoxFuture<'a, Result<(), EffectError>> {
        Self::ready(self.apply(scope, key, |current| {
            machine::reconcile(current, key, status)
        }))
    }

    fn set_payload<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        payload: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), EffectError>> {
        Self::ready(self.apply(scope, key, |current| {
            machine::set_payload(current, key, payload)
        }))
    }

    fn get<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Effect>, EffectError>> {
        let found = self
            .lock()
            .logs
            .get(scope)
            .and_then(|log| log.get(key).cloned());
        Self::ready(Ok(found))
    }

    fn load_log<'a>(&'a self, scope: &'a str) -> BoxFuture<'a, Result<EffectLog, EffectError>> {
        let log = self.lock().logs.get(scope).cloned().unwrap_or_default();
        Self::ready(Ok(log))
    }

    fn load_all(&self) -> BoxFuture<'_, Result<BTreeMap<String, EffectLog>, EffectError>> {
        Self::ready(Ok(self.lock().logs.clone()))
    }

    fn sync_log<'a>(
        &'a self,
        scope: &'a str,
        log: &'a EffectLog,
    ) -> BoxFuture<'a, Result<SyncSummary, EffectError>> {
        if let Some(e) = log
            .iter()
            .find_map(|e| machine::check_effect(scope, e).err())
        {
            return Self::ready(Err(e));
        }
        let mut summary = SyncSummary::default();
        // One lock for the whole log: a sync is one atomic step, as in the durable ledgers.
        let mut scopes = match self.write() {
            Ok(scopes) => scopes,
            Err(e) => return Self::ready(Err(e)),
        };
        for (i, effect) in log.iter().enumerate() {
            let key = effect.idempotency_key.as_str();
            let mut verdict = SyncVerdict::Unchanged;
            let applied = scopes.apply_near(scope, Some(i), key, None, |current| {
                let (change, v) = machine::sync(current, effect);
                verdict = v;
                Ok(change)
            });
            if let Err(e) = applied {
                return Self::ready(Err(e));
            }
            summary.add(key, verdict);
        }
        Self::ready(Ok(summary))
    }

    fn history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Transition>, EffectError>> {
        let history = self.history_of(scope, key);
        Self::ready(Ok(history.into_iter().map(|a| a.transition).collect()))
    }

    fn settle<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        settlement: &'a Settlement,
    ) -> BoxFuture<'a, Result<(), EffectError>> {
        let note = Some((settlement.actor.as_str(), settlement.note.as_str()));
        let settled = self.write().and_then(|mut scopes| {
            scopes.apply(scope, key, note, |current| {
                machine::settled(current, key, settlement.status, settlement.only_unknown)
            })
        });
        Self::ready(settled)
    }

    fn annotated_history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AnnotatedTransition>, EffectError>> {
        Self::ready(Ok(self.history_of(scope, key)))
    }

    fn advance_checkpoint<'a>(
        &'a self,
        agent_id: &'a str,
        sequence: u64,
    ) -> BoxFuture<'a, Result<u64, EffectError>> {
        let mut scopes = match self.write() {
            Ok(scopes) => scopes,
            Err(e) => return Self::ready(Err(e)),
        };
        let newest = scopes
            .checkpoints
            .entry(agent_id.to_string())
            .or_insert(sequence);
        *newest = (*newest).max(sequence);
        Self::ready(Ok(*newest))
    }

    fn newest_checkpoint<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, EffectError>> {
        Self::ready(Ok(self.lock().checkpoints.get(agent_id).copied()))
    }

    fn fence_record<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FenceRecord>, EffectError>> {
        Self::ready(Ok(self.lock().fences.get(agent_id).copied()))
    }

    fn raise_epoch<'a>(&'a self, fence: &'a Fence) -> BoxFuture<'a, Result<bool, EffectError>> {
        let mut scopes = self.lock();
        let held = scopes.fences.get(fence.agent_id()).copied();
        let raised = FenceRecord::raise(held, fence, now_ms()).map(|record| {
            scopes.fences.insert(fence.agent_id().to_owned(), record);
            true
        });
        Self::ready(raised.map_err(EffectError::Superseded))
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        Some(MemoryLedger {
            inner: Arc::clone(&self.inner),
            fence: Some(fence.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_as_a_trait_object() {
        // The trait's docs promise `dyn EffectLedger<Error = E>`: a backend chosen at run time.
        let memory = MemoryLedger::new();
        let ledger: &dyn EffectLedger<Error = EffectError> = &memory;
        crate::future::block_on(ledger.begin("", "k")).unwrap();
        assert!(matches!(
            crate::future::block_on(ledger.begin("", "k")),
            Err(EffectError::OutcomeUnknown { .. })
        ));
    }

    /// `sync_log` looks each record up at its own position first (the common case: the same
    /// log grown); a log in another order merges the same.
    #[test]
    fn sync_log_merges_a_log_in_any_order() {
        use crate::future::block_on;
        let ledger = MemoryLedger::new();
        let mut log = EffectLog::new();
        for k in ["a", "b", "c"] {
            log.record(Effect::new("deploy", "svc", k)).unwrap();
        }
        block_on(ledger.sync_log("s", &log)).unwrap();
        log.begin("b").unwrap();
        log.commit("b").unwrap();
        log.record(Effect::new("mail", "ops", "d")).unwrap();
        let mut reversed: Vec<Effect> = log.iter().cloned().collect();
        reversed.reverse();
        let reversed = EffectLog::from_effects(reversed).unwrap();
        block_on(ledger.sync_log("s", &reversed)).unwrap();
        let stored = block_on(ledger.load_log("s")).unwrap();
        assert_eq!(stored.len(), 4);
        assert_eq!(stored.status("b"), Some(EffectStatus::Committed));
        assert_eq!(stored.status("d"), Some(EffectStatus::NotStarted));
        assert_eq!(stored.status("a"), Some(EffectStatus::NotStarted));
    }
}
