//! The ledger conformance suite: random sequences of `record`, `begin`, `begin_effect`,
//! `commit`, `fail`, `reconcile`, `sync_log` and `set_payload` over a small key set and several
//! scopes, run against a backend and against the in-memory `EffectLog` (one per scope), which
//! is the reference. After every step the outcome (ok, the exact refusal, the sync summary) and
//! the status of every key in every scope must agree; at the end every scope's records and every
//! key's history (`op`, `from`, `to`, compared with a `MemoryLedger` run beside it).

use compaction::SyncSummary;
use compaction::{Effect, EffectError, EffectLedger, EffectLog, EffectStatus, MemoryLedger};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

/// The scopes the operations use (`""` is a ledger's default scope).
pub const SCOPES: [&str; 3] = ["", "charges", "refunds"];
/// The keys, few enough that operations collide.
pub const KEYS: [&str; 3] = ["k0", "k1", "k2"];

/// One operation on one scope.
#[derive(Debug, Clone)]
pub enum Op {
    Record(&'static str, Effect),
    Begin(&'static str, &'static str),
    BeginEffect(&'static str, Effect),
    Commit(&'static str, &'static str),
    Fail(&'static str, &'static str),
    Reconcile(&'static str, &'static str, EffectStatus),
    SetPayload(&'static str, &'static str, serde_json::Value),
    Sync(&'static str, Vec<Effect>),
}

/// What an operation returned, backend errors aside.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done,
    Refused(EffectError),
    Synced(SyncSummary),
}

fn status() -> impl Strategy<Value = EffectStatus> {
    prop_oneof![
        Just(EffectStatus::NotStarted),
        Just(EffectStatus::Committed),
        Just(EffectStatus::Unknown),
    ]
}

fn scope() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&SCOPES[..])
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&KEYS[..])
}

fn payload() -> impl Strategy<Value = serde_json::Value> {
    (0u8..4).prop_map(|n| serde_json::json!({ "result": n }))
}

/// An effect under `key`: details from a small set (empty ones make placeholders), so
/// re-records are often identical, often different.
fn effect_for(key: &'static str) -> impl Strategy<Value = Effect> {
    (
        prop::sample::select(&["", "charge", "refund"][..]),
        prop::sample::select(&["", "stripe://cus_1"][..]),
        prop::collection::vec(prop::sample::select(&KEYS[..]), 0..2),
        prop::option::of(payload()),
        status(),
    )
        .prop_map(move |(action, target, deps, payload, status)| {
            let mut effect = Effect::new(action, target, key).with_status(status);
            for dep in deps {
                effect = effect.depends_on(dep);
            }
            effect.payload = payload;
            effect
        })
}

fn effect() -> impl Strategy<Value = Effect> {
    key().prop_flat_map(effect_for)
}

/// A log to sync: each key at most once.
fn sync_log() -> impl Strategy<Value = Vec<Effect>> {
    prop::sample::subsequence(&KEYS[..], 0..=KEYS.len())
        .prop_flat_map(|keys| keys.into_iter().map(effect_for).collect::<Vec<_>>())
}

/// One random operation.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (scope(), effect()).prop_map(|(s, e)| Op::Record(s, e)),
        3 => (scope(), key()).prop_map(|(s, k)| Op::Begin(s, k)),
        1 => (scope(), effect()).prop_map(|(s, e)| Op::BeginEffect(s, e)),
        2 => (scope(), key()).prop_map(|(s, k)| Op::Commit(s, k)),
        2 => (scope(), key()).prop_map(|(s, k)| Op::Fail(s, k)),
        1 => (scope(), key(), status()).prop_map(|(s, k, st)| Op::Reconcile(s, k, st)),
        1 => (scope(), key(), payload()).prop_map(|(s, k, p)| Op::SetPayload(s, k, p)),
        2 => (scope(), sync_log()).prop_map(|(s, log)| Op::Sync(s, log)),
    ]
}

/// The reference backend: one in-memory `EffectLog` per scope, driven by its own methods.
#[derive(Debug, Default)]
pub struct Reference {
    logs: BTreeMap<&'static str, EffectLog>,
}

impl Reference {
    pub fn apply(&mut self, op: &Op) -> Outcome {
        let done = |r: Result<(), EffectError>| match r {
            Ok(()) => Outcome::Done,
            Err(e) => Outcome::Refused(e),
        };
        match op {
            Op::Record(s, e) => done(self.log(s).record(e.clone()).map(drop)),
            Op::Begin(s, k) => done(self.log(s).begin(k)),
            Op::BeginEffect(s, e) => done(self.log(s).begin_effect(e)),
            Op::Commit(s, k) => done(self.log(s).commit(k)),
            Op::Fail(s, k) => done(self.log(s).fail(k)),
            Op::Reconcile(s, k, st) => done(self.log(s).reconcile(k, *st)),
            Op::SetPayload(s, k, p) => done(self.log(s).set_payload(k, p.clone())),
            Op::Sync(s, effects) => {
                let incoming = EffectLog::from_effects(effects.clone()).expect("unique keys");
                Outcome::Synced(self.log(s).sync(&incoming))
            }
        }
    }

    fn log(&mut self, scope: &'static str) -> &mut EffectLog {
        self.logs.entry(scope).or_default()
    }

    pub fn status(&self, scope: &str, key: &str) -> Option<EffectStatus> {
        self.logs.get(scope).and_then(|log| log.status(key))
    }

    /// Every non-empty scope's log.
    pub fn all(&self) -> BTreeMap<String, EffectLog> {
        self.logs
            .iter()
            .filter(|(_, log)| !log.is_empty())
            .map(|(s, log)| (s.to_string(), log.clone()))
            .collect()
    }
}

/// Applies `op` to a backend through the `EffectLedger` trait.
pub async fn apply<L: EffectLedger>(ledger: &L, op: &Op) -> Result<Outcome, TestCaseError> {
    let result = match op {
        Op::Record(s, e) => ledger.record(s, e).await.map(|()| Outcome::Done),
        Op::Begin(s, k) => ledger.begin(s, k).await.map(|()| Outcome::Done),
        Op::BeginEffect(s, e) => ledger.begin_effect(s, e).await.map(|()| Outcome::Done),
        Op::Commit(s, k) => ledger.commit(s, k).await.map(|()| Outcome::Done),
        Op::Fail(s, k) => ledger.fail(s, k).await.map(|()| Outcome::Done),
        Op::Reconcile(s, k, st) => ledger.reconcile(s, k, *st).await.map(|()| Outcome::Done),
        Op::SetPayload(s, k, p) => ledger.set_payload(s, k, p).await.map(|()| Outcome::Done),
        Op::Sync(s, effects) => {
            let incoming = EffectLog::from_effects(effects.clone()).expect("unique keys");
            ledger.sync_log(s, &incoming).await.map(Outcome::Synced)
        }
    };
    match result {
        Ok(outcome) => Ok(outcome),
        Err(e) => match L::refusal(&e) {
            Some(refusal) => Ok(Outcome::Refused(refusal.clone())),
            None => Err(TestCaseError::fail(format!(
                "backend failed on {op:?}: {e}"
            ))),
        },
    }
}

fn history_ops<E: std::fmt::Display>(
    history: Result<Vec<compaction::Transition>, E>,
) -> Result<Vec<(String, Option<EffectStatus>, EffectStatus)>, TestCaseError> {
    let history = history.map_err(|e| TestCaseError::fail(format!("history failed: {e}")))?;
    Ok(history.into_iter().map(|t| (t.op, t.from, t.to)).collect())
}

/// Runs `ops` against `ledger`, the `EffectLog` reference and a `MemoryLedger`, comparing every
/// step. Public so every backend (and a backend's own tests) runs exactly this.
pub async fn run<L: EffectLedger>(ledger: &L, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut reference = Reference::default();
    let memory = MemoryLedger::new();
    for (step, op) in ops.iter().enumerate() {
        let expected = reference.apply(op);
        let in_memory = apply(&memory, op).await?;
        prop_assert_eq!(
            &in_memory,
            &expected,
            "MemoryLedger, step {}: {:?}",
            step,
            op
        );
        let got = apply(ledger, op).await?;
        prop_assert_eq!(&got, &expected, "step {}: {:?}", step, op);
        for scope in SCOPES {
            for key in KEYS {
                let status = ledger
                    .status(scope, key)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let want = reference.status(scope, key);
                prop_assert_eq!(
                    status,
                    want,
                    "after step {} ({:?}): {:?}/{}",
                    step,
                    op,
                    scope,
                    key
                );
            }
        }
    }
    let all = ledger
        .load_all()
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&all, &reference.all());
    for (scope, log) in &all {
        let loaded = ledger
            .load_log(scope)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&loaded, log);
    }
    for scope in SCOPES {
        for key in KEYS {
            let got = history_ops(ledger.history(scope, key).await)?;
            let want = history_ops(memory.history(scope, key).await)?;
            prop_assert_eq!(&got, &want, "history of {:?}/{}", scope, key);
            // The history is a chain ending at the current status.
            for pair in got.windows(2) {
                prop_assert_eq!(pair[1].1, Some(pair[0].2), "broken chain {:?}", got);
            }
            prop_assert_eq!(got.last().map(|t| t.2), reference.status(scope, key));
        }
    }
    Ok(())
}

/// A backend under test, with whatever must live as long as it (a temporary directory, a
/// database cluster).
pub struct Fixture<L> {
    pub ledger: L,
    pub keep: Box<dyn Any>,
}

impl<L> Fixture<L> {
    pub fn new(ledger: L, keep: impl Any) -> Self {
        Fixture {
            ledger,
            keep: Box::new(keep),
        }
    }
}

/// A boxed test future, for [`check_on`]'s executor.
pub type TestFuture<'a> = Pin<Box<dyn Future<Output = Result<(), TestCaseError>> + 'a>>;

/// The suite on `compaction::block_on` (enough for backends whose futures need no runtime).
pub fn check<L: EffectLedger>(make: impl Fn() -> Fixture<L>) {
    check_on(make, |future| compaction::block_on(future))
}

/// The suite with the caller's executor (e.g. a tokio runtime's `block_on` for a network
/// backend): `cases()` random sequences of 1 to 40 operations, a fresh backend for each.
pub fn check_on<L: EffectLedger>(
    make: impl Fn() -> Fixture<L>,
    block_on: impl for<'a> Fn(TestFuture<'a>) -> Result<(), TestCaseError>,
) {
    super::run_cases("ledger", prop::collection::vec(op(), 1..40), |ops| {
        let fixture = make();
        block_on(Box::pin(run(&fixture.ledger, &ops)))
    });
}
