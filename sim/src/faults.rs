//! The fault plan and the fault-injecting wrappers of the durable parts: a [`FaultyStore`]
//! (blobs, entries and checkpoints: the `Store` and `CheckpointStore` traits over a
//! `MemoryStore`) and a [`FaultyLedger`] (the `EffectLedger` trait over any ledger). Every
//! operation asks the shared [`Faults`] what happens to it: it passes, fails (nothing applied),
//! is torn (see [`Decision::Torn`]), reads corrupt bytes, or the process crashes there (the
//! operation's future never completes, so the simulator drops the session at that await point,
//! with the operation applied or not).

use crate::rng::Rng;
use compaction::{
    BoxFuture, CheckpointStore, ContentHash, Effect, EffectError, EffectLedger, EffectLog,
    EffectStatus, MemoryStore, Store, StoreError,
};
use compaction::{CheckpointError, CheckpointInfo, CheckpointRow};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which classes of fault a run injects (the shrinker turns them off one by one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultClasses {
    /// Crashes at await points (and inside effects).
    pub crash: bool,
    /// Store and checkpoint failures, torn writes and corrupt reads.
    pub store: bool,
    /// Ledger failures and lost acknowledgements.
    pub ledger: bool,
    /// A summarizer that fails or answers garbage.
    pub summarizer: bool,
    /// Malformed model replies (empty or repeated call ids, unknown shapes).
    pub model: bool,
}

impl FaultClasses {
    /// Every class on.
    pub const ALL: FaultClasses = FaultClasses {
        crash: true,
        store: true,
        ledger: true,
        summarizer: true,
        model: true,
    };

    /// Every class off.
    pub const NONE: FaultClasses = FaultClasses {
        crash: false,
        store: false,
        ledger: false,
        summarizer: false,
        model: false,
    };

    /// The names of the classes that are on.
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            (self.crash, "crash"),
            (self.store, "store"),
            (self.ledger, "ledger"),
            (self.summarizer, "summarizer"),
            (self.model, "model"),
        ];
        all.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect()
    }
}

/// An operation of a durable part (or another await point) that a fault may hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A blob or entry write.
    StoreWrite,
    /// A blob or entry read.
    StoreRead,
    /// A checkpoint save.
    CheckpointSave,
    /// A checkpoint load.
    CheckpointLoad,
    /// A ledger transition or sequence advance.
    LedgerWrite,
    /// A ledger read.
    LedgerRead,
    /// A summarizer call.
    Summarize,
    /// A side-effecting tool's run.
    EffectRun,
}

/// What happens to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// It works.
    Pass,
    /// It fails and applies nothing.
    Fail,
    /// A torn write: a blob or entry write leaves a truncated copy behind (a blob's is
    /// repaired by the next write of the same blob); a checkpoint save or ledger write is
    /// applied but its acknowledgement is lost. Either way the caller gets an error.
    Torn,
    /// A read returns the bytes with one bit flipped (a transient read error the engine must
    /// catch by its hashes and checksums).
    Corrupt,
    /// The process dies here: the operation is applied (`true`) or not, and never returns.
    Crash(bool),
    /// A summarizer answers garbage (empty, over-long, or text imitating markers).
    Garbage,
}

/// The shared fault plan of one run.
#[derive(Clone)]
pub struct Faults(Arc<Mutex<FaultState>>);

struct FaultState {
    rng: Rng,
    classes: FaultClasses,
    /// Whether faults are injected now (the fault window, and not while checking).
    active: bool,
    /// Checking invariants: everything passes and nothing is counted.
    suspended: bool,
    /// The operation of the current step at which the process crashes.
    crash_at: Option<u32>,
    step_ops: u32,
    crashed: bool,
    events: Vec<String>,
}

impl Faults {
    /// The plan of `seed`, injecting `classes`.
    pub fn new(seed: u64, classes: FaultClasses) -> Self {
        Faults(Arc::new(Mutex::new(FaultState {
            rng: Rng::new(seed, 0xfa17),
            classes,
            active: false,
            suspended: false,
            crash_at: None,
            step_ops: 0,
            crashed: false,
            events: Vec::new(),
        })))
    }

    fn lock(&self) -> MutexGuard<'_, FaultState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a step: faults on or off, and the operation to crash at (if any).
    pub fn begin_step(&self, active: bool, crash_at: Option<u32>) {
        let mut s = self.lock();
        s.active = active;
        s.crash_at = crash_at.filter(|_| active && s.classes.crash);
        s.step_ops = 0;
        s.crashed = false;
        s.events.clear();
    }

    /// Whether the process crashed in this step.
    pub fn crashed(&self) -> bool {
        self.lock().crashed
    }

    /// What the faults did in this step, for the trace.
    pub fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().events)
    }

    /// Runs `f` with every fault off (the invariant checks read through the wrappers).
    pub fn suspended<T>(&self, f: impl FnOnce() -> T) -> T {
        self.lock().suspended = true;
        let out = f();
        self.lock().suspended = false;
        out
    }

    /// Decides what happens to `op`.
    pub fn decide(&self, op: Op) -> Decision {
        let mut s = self.lock();
        if s.suspended {
            return Decision::Pass;
        }
        s.step_ops += 1;
        let roll = s.rng.below(1000);
        if !s.active {
            return Decision::Pass;
        }
        let c = s.classes;
        let decision = if s.crash_at == Some(s.step_ops) {
            s.crashed = true;
            Decision::Crash(roll.is_multiple_of(2))
        } else {
            match op {
                Op::StoreWrite | Op::CheckpointSave if c.store => match roll {
                    0..=29 => Decision::Fail,
                    30..=49 => Decision::Torn,
                    _ => Decision::Pass,
                },
                Op::StoreRead | Op::CheckpointLoad if c.store => match roll {
                    0..=19 => Decision::Fail,
                    20..=34 => Decision::Corrupt,
                    _ => Decision::Pass,
                },
                Op::LedgerWrite if c.ledger => match roll {
                    0..=24 => Decision::Fail,
                    25..=44 => Decision::Torn,
                    _ => Decision::Pass,
                },
                Op::LedgerRead if c.ledger => match roll {
                    0..=19 => Decision::Fail,
                    _ => Decision::Pass,
                },
                Op::Summarize if c.summarizer => match roll {
                    0..=249 => Decision::Fail,
                    250..=449 => Decision::Garbage,
                    _ => Decision::Pass,
                },
                _ => Decision::Pass,
            }
        };
        if decision != Decision::Pass {
            let at = s.step_ops;
            s.events.push(format!("{op:?}#{at}: {decision:?}"));
        }
        decision
    }
}

/// The process died here: never completes (the simulator drops the future and the session).
pub async fn die<T>() -> T {
    std::future::pending().await
}

fn injected(what: &str) -> StoreError {
    StoreError::backend(format!("injected {what}"), "simulated fault")
}

fn flip(mut bytes: Vec<u8>) -> Vec<u8> {
    let mid = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(mid) {
        *b ^= 0x20;
    }
    bytes
}

/// A `MemoryStore` behind the fault plan: blobs, entries and checkpoints.
#[derive(Clone)]
pub struct FaultyStore {
    /// The durable store (survives every crash).
    pub inner: MemoryStore,
    faults: Faults,
}

impl FaultyStore {
    /// `inner` behind `faults`.
    pub fn new(inner: MemoryStore, faults: Faults) -> Self {
        FaultyStore { inner, faults }
    }
}

impl Store for FaultyStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        let write = || async {
            // A blob torn by an earlier write is repaired by this one.
            match self.inner.raw(hash) {
                Some(held) if !hash.matches(&held) && hash.matches(bytes) => {
                    self.inner.overwrite_unchecked(*hash, bytes.to_vec());
                    Ok(())
                }
                _ => self.inner.put(hash, bytes).await,
            }
        };
        match self.faults.decide(Op::StoreWrite) {
            Decision::Fail => Err(injected("write failure")),
            Decision::Torn => {
                if self.inner.raw(hash).is_none() {
                    let torn = bytes[..bytes.len() / 2].to_vec();
                    self.inner.overwrite_unchecked(*hash, torn);
                }
                Err(injected("torn write"))
            }
            Decision::Crash(applied) => {
                if applied {
                    let _ = write().await;
                }
                die().await
            }
            _ => write().await,
        }
    }

    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        match self.faults.decide(Op::StoreRead) {
            Decision::Fail => Err(injected("read failure")),
            Decision::Corrupt => match self.inner.raw(hash) {
                Some(bytes) => Ok(flip(bytes)),
                None => Err(StoreError::NotFound { hash: *hash }),
            },
            Decision::Crash(_) => die().await,
            _ => self.inner.get(hash).await,
        }
    }

    async fn put_entry(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        match self.faults.decide(Op::StoreWrite) {
            Decision::Fail => Err(injected("entry write failure")),
            Decision::Torn => {
                let torn = &bytes[..bytes.len() / 2];
                self.inner.put_entry(name, torn).await?;
                Err(injected("torn entry write"))
            }
            Decision::Crash(applied) => {
                if applied {
                    let _ = self.inner.put_entry(name, bytes).await;
                }
                die().await
            }
            _ => self.inner.put_entry(name, bytes).await,
        }
    }

    async fn get_entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.faults.decide(Op::StoreRead) {
            Decision::Fail => Err(injected("entry read failure")),
            Decision::Corrupt => Ok(self.inner.get_entry(name).await?.map(flip)),
            Decision::Crash(_) => die().await,
            _ => self.inner.get_entry(name).await,
        }
    }
}

impl CheckpointStore for FaultyStore {
    fn namespace(&self) -> &str {
        self.inner.namespace()
    }

    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            match self.faults.decide(Op::CheckpointSave) {
                Decision::Fail => Err(injected("checkpoint save failure").into()),
                Decision::Torn => {
                    self.inner.save_row(agent_id, row).await?;
                    Err(injected("checkpoint saved, acknowledgement lost").into())
                }
                Decision::Crash(applied) => {
                    if applied {
                        let _ = self.inner.save_row(agent_id, row).await;
                    }
                    die().await
                }
                _ => self.inner.save_row(agent_id, row).await,
            }
        })
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        Box::pin(async move {
            match self.faults.decide(Op::CheckpointLoad) {
                Decision::Fail => Err(injected("checkpoint load failure").into()),
                Decision::Corrupt => Ok(self.inner.load_row(agent_id).await?.map(|row| {
                    CheckpointRow::stored(flip(row.json().to_vec()), row.sha256().map(Into::into))
                })),
                Decision::Crash(_) => die().await,
                _ => self.inner.load_row(agent_id).await,
            }
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        self.inner.list()
    }

    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        self.inner.delete(agent_id)
    }
}

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
}
