//! [`FaultyLedger`]: any effect ledger behind the fault plan (failures, lost
//! acknowledgements, crashes before or after the write), fence included.

use super::{die, Decision, Faults, Op};
use crate::sabotage::Sabotage;
use compaction::fence::{Fence, FenceRecord};
use compaction::{BoxFuture, Effect, EffectError, EffectLedger, EffectLog, EffectStatus};
use std::collections::BTreeMap;

/// A ledger error: the inner ledger's, or an injected one.
#[derive(Debug)]
pub enum SimLedgerError<E> {
    /// The inner ledger's error (a refusal or its own failure).
    Inner(E),
    /// An injected failure (for a lost acknowledgement: the operation was applied).
    Injected(&'static str),
}

impl<E: std::fmt::Display> std::fmt::Display for SimLedgerError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimLedgerError::Inner(e) => e.fmt(f),
            SimLedgerError::Injected(what) => write!(f, "injected ledger fault: {what}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for SimLedgerError<E> {}

/// A ledger behind the fault plan.
#[derive(Clone)]
pub struct FaultyLedger<L> {
    /// The durable ledger (survives every crash).
    pub inner: L,
    faults: Faults,
}

impl<L> FaultyLedger<L> {
    /// `inner` behind `faults`.
    pub fn new(inner: L, faults: Faults) -> Self {
        FaultyLedger { inner, faults }
    }
}

type Res<T, L> = Result<T, SimLedgerError<<L as EffectLedger>::Error>>;

impl<L: EffectLedger> FaultyLedger<L> {
    /// Runs the inner operation `op` (made only if it is to be applied: the memory ledger
    /// applies a transition when the method is called, not when its future is polled).
    fn guarded<'a, T: Send + 'a, F>(&'a self, kind: Op, op: F) -> BoxFuture<'a, Res<T, L>>
    where
        F: FnOnce() -> BoxFuture<'a, Result<T, L::Error>> + Send + 'a,
    {
        Box::pin(async move {
            match self.faults.decide(kind) {
                Decision::Fail | Decision::Corrupt => Err(SimLedgerError::Injected("failure")),
                Decision::Torn => {
                    let _ = op().await;
                    Err(SimLedgerError::Injected("applied, acknowledgement lost"))
                }
                Decision::Crash(applied) => {
                    if applied {
                        let _ = op().await;
                    }
                    die().await
                }
                _ => op().await.map_err(SimLedgerError::Inner),
            }
        })
    }
}

impl<L: EffectLedger> EffectLedger for FaultyLedger<L> {
    type Error = SimLedgerError<L::Error>;

    fn refusal(error: &Self::Error) -> Option<&EffectError> {
        match error {
            SimLedgerError::Inner(e) => L::refusal(e),
            SimLedgerError::Injected(_) => None,
        }
    }

    fn record<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> BoxFuture<'a, Res<(), L>> {
        self.guarded(Op::LedgerWrite, move || self.inner.record(scope, effect))
    }

    fn begin_effect<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> BoxFuture<'a, Res<(), L>> {
        self.guarded(Op::LedgerWrite, move || {
            self.inner.begin_effect(scope, effect)
        })
    }

    fn commit<'a>(&'a self, scope: &'a str, key: &'a str) -> BoxFuture<'a, Res<(), L>> {
        if self.faults.sabotage() == Some(Sabotage::LedgerLosesCommit) {
            return Box::pin(std::future::ready(Ok(())));
        }
        self.guarded(Op::LedgerWrite, move || self.inner.commit(scope, key))
    }

    fn fail<'a>(&'a self, scope: &'a str, key: &'a str) -> BoxFuture<'a, Res<(), L>> {
        self.guarded(Op::LedgerWrite, move || self.inner.fail(scope, key))
    }

    fn reconcile<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        status: EffectStatus,
    ) -> BoxFuture<'a, Res<(), L>> {
        self.guarded(Op::LedgerWrite, move || {
            self.inner.reconcile(scope, key, status)
        })
    }

    fn set_payload<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        payload: &'a serde_json::Value,
    ) -> BoxFuture<'a, Res<(), L>> {
        self.guarded(Op::LedgerWrite, move || {
            self.inner.set_payload(scope, key, payload)
        })
    }

    fn get<'a>(&'a self, scope: &'a str, key: &'a str) -> BoxFuture<'a, Res<Option<Effect>, L>> {
        self.guarded(Op::LedgerRead, move || self.inner.get(scope, key))
    }

    fn load_log<'a>(&'a self, scope: &'a str) -> BoxFuture<'a, Res<EffectLog, L>> {
        self.guarded(Op::LedgerRead, move || self.inner.load_log(scope))
    }

    fn load_all(&self) -> BoxFuture<'_, Res<BTreeMap<String, EffectLog>, L>> {
        self.guarded(Op::LedgerRead, move || self.inner.load_all())
    }

    fn sync_log<'a>(
        &'a self,
        scope: &'a str,
        log: &'a EffectLog,
    ) -> BoxFuture<'a, Res<compaction::SyncSummary, L>> {
        self.guarded(Op::LedgerWrite, move || self.inner.sync_log(scope, log))
    }

    fn history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Res<Vec<compaction::Transition>, L>> {
        self.guarded(Op::LedgerRead, move || self.inner.history(scope, key))
    }

    fn settle<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        settlement: &'a compaction::Settlement,
    ) -> BoxFuture<'a, Res<(), L>> {
        if self.faults.sabotage() == Some(Sabotage::LedgerLosesCommit) {
            return Box::pin(std::future::ready(Ok(())));
        }
        self.guarded(Op::LedgerWrite, move || {
            self.inner.settle(scope, key, settlement)
        })
    }

    fn annotated_history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Res<Vec<compaction::AnnotatedTransition>, L>> {
        self.guarded(Op::LedgerRead, move || {
            self.inner.annotated_history(scope, key)
        })
    }

    fn advance_checkpoint<'a>(
        &'a self,
        agent_id: &'a str,
        sequence: u64,
    ) -> BoxFuture<'a, Res<u64, L>> {
        self.guarded(Op::LedgerWrite, move || {
            self.inner.advance_checkpoint(agent_id, sequence)
        })
    }

    fn newest_checkpoint<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Res<Option<u64>, L>> {
        self.guarded(Op::LedgerRead, move || {
            self.inner.newest_checkpoint(agent_id)
        })
    }

    fn fence_record<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Res<Option<FenceRecord>, L>> {
        self.guarded(Op::LedgerRead, move || self.inner.fence_record(agent_id))
    }

    fn raise_epoch<'a>(&'a self, fence: &'a Fence) -> BoxFuture<'a, Res<bool, L>> {
        self.guarded(Op::LedgerWrite, move || self.inner.raise_epoch(fence))
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        if self.faults.sabotage() == Some(Sabotage::UnfencedWrappers) {
            return None;
        }
        let inner = self.inner.fenced(fence)?;
        Some(FaultyLedger::new(inner, self.faults.clone()))
    }
}
