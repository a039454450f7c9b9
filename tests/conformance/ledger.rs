//! The ledger conformance suite: random sequences of `record`, `begin`, `begin_effect`,
//! `commit`, `fail`, `reconcile`, `sync_log` and `set_payload` over a small key set and several
//! scopes, run against a backend and against the in-memory `EffectLog` (one per scope), which
//! is the reference. After every step the outcome (ok, the exact refusal, the sync summary) and
//! the status of every key in every scope must agree; at the end every scope's records and every
//! key's history (`op`, `from`, `to`, compared with a `MemoryLedger` run beside it).
//! Interleaved with them, `advance_checkpoint` on a few agents: the newest checkpoint sequence
//! each agent's ledger holds only goes forward, whatever order the sequences come in.

use compaction::SyncSummary;
use compaction::{
    history_problem, Effect, EffectError, EffectLedger, EffectLog, EffectStatus, MemoryLedger,
    Settlement,
};
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
/// The agents whose checkpoint sequences the operations advance.
pub const AGENTS: [&str; 2] = ["agent-a", "agent-b"];

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
    /// `advance_checkpoint(agent, sequence)`.
    Advance(&'static str, u64),
}

/// What an operation returned, backend errors aside.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done,
    Refused(EffectError),
    Synced(SyncSummary),
    /// The newest sequence the ledger holds for the agent after an `Advance`.
    Newest(u64),
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
        2 => (prop::sample::select(&AGENTS[..]), 0..8u64).prop_map(|(a, n)| Op::Advance(a, n)),
    ]
}

/// The reference backend: one in-memory `EffectLog` per scope, driven by its own methods.
#[derive(Debug, Default)]
pub struct Reference {
    logs: BTreeMap<&'static str, EffectLog>,
    newest: BTreeMap<&'static str, u64>,
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
            Op::Advance(agent, sequence) => {
                let newest = self.newest.entry(agent).or_insert(*sequence);
                *newest = (*newest).max(*sequence);
                Outcome::Newest(*newest)
            }
        }
    }

    /// The newest checkpoint sequence recorded for `agent`.
    pub fn newest(&self, agent: &str) -> Option<u64> {
        self.newest.get(agent).copied()
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
        Op::Advance(agent, sequence) => ledger
            .advance_checkpoint(agent, *sequence)
            .await
            .map(Outcome::Newest),
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
        for agent in AGENTS {
            let newest = ledger
                .newest_checkpoint(agent)
                .await
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(
                newest,
                reference.newest(agent),
                "after step {}: {}",
                step,
                agent
            );
        }
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
/// backend): [`rules`] once, then `cases()` random sequences of 1 to 40 operations, a fresh
/// backend for each.
pub fn check_on<L: EffectLedger>(
    make: impl Fn() -> Fixture<L>,
    block_on: impl for<'a> Fn(TestFuture<'a>) -> Result<(), TestCaseError>,
) {
    let fixture = make();
    if let Err(e) = block_on(Box::pin(rules(&fixture.ledger))) {
        panic!("ledger conformance failed: {e}");
    }
    super::run_cases("ledger", prop::collection::vec(op(), 1..40), |ops| {
        let fixture = make();
        block_on(Box::pin(run(&fixture.ledger, &ops)))
    });
}

/// What every ledger refuses, and an operator's settlement, alike on every backend:
/// - a NUL in a scope, key, action, target or dependency is `EffectError::Nul` (naming the
///   part), for every operation, before anything is stored; reads find nothing under it;
/// - `settle` keeps who and why beside its `reconcile` event, refuses a key that is not
///   `unknown` unless forced (`NotInFlight`), and leaves a history that explains the status.
pub async fn rules<L: EffectLedger>(ledger: &L) -> Result<(), TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    let refusal = |result: Result<(), L::Error>| match result {
        Err(e) => L::refusal(&e).cloned(),
        Ok(()) => None,
    };
    let nul_part = |refused: Option<EffectError>| match refused {
        Some(EffectError::Nul { part, .. }) => Some(part),
        _ => None,
    };
    let good = Effect::new("charge", "psp://cards/1", "k");
    let cases: Vec<(&str, Effect, &str)> = vec![
        ("", Effect::new("charge", "psp://cards/1", "k\0x"), "key"),
        ("sc\0ope", good.clone(), "scope"),
        ("", Effect::new("char\0ge", "psp://cards/1", "k"), "action"),
        ("", Effect::new("charge", "psp://\0", "k"), "target"),
        ("", good.clone().depends_on("q\0"), "dependency"),
    ];
    for (scope, effect, part) in &cases {
        let got = nul_part(refusal(ledger.record(scope, effect).await));
        prop_assert_eq!(got, Some(*part), "record {:?}", effect);
        let got = nul_part(refusal(ledger.begin_effect(scope, effect).await));
        prop_assert_eq!(got, Some(*part), "begin_effect {:?}", effect);
        let mut log = EffectLog::new();
        log.record(effect.clone()).map_err(|e| fail(&e))?;
        let got = match ledger.sync_log(scope, &log).await {
            Err(e) => nul_part(L::refusal(&e).cloned()),
            Ok(_) => None,
        };
        prop_assert_eq!(got, Some(*part), "sync_log {:?}", effect);
    }
    for (scope, key, part) in [("", "k\0x", "key"), ("sc\0ope", "k", "scope")] {
        for (name, result) in [
            ("begin", ledger.begin(scope, key).await),
            ("commit", ledger.commit(scope, key).await),
            ("fail", ledger.fail(scope, key).await),
            (
                "reconcile",
                ledger.reconcile(scope, key, EffectStatus::Committed).await,
            ),
            (
                "set_payload",
                ledger.set_payload(scope, key, &serde_json::json!(1)).await,
            ),
            (
                "settle",
                ledger
                    .settle(
                        scope,
                        key,
                        &Settlement::of_unknown(EffectStatus::Committed, "ana", "n"),
                    )
                    .await,
            ),
        ] {
            prop_assert_eq!(nul_part(refusal(result)), Some(part), "{} {:?}", name, key);
        }
        let found = ledger.get(scope, key).await.map_err(|e| fail(&e))?;
        prop_assert_eq!(found, None);
        let history = ledger.history(scope, key).await.map_err(|e| fail(&e))?;
        prop_assert!(history.is_empty());
    }
    let all = ledger.load_all().await.map_err(|e| fail(&e))?;
    prop_assert!(
        all.is_empty(),
        "a refused operation stored something: {:?}",
        all
    );

    // An operator's settlement.
    ledger
        .record("charges", &good)
        .await
        .map_err(|e| fail(&e))?;
    ledger.begin("charges", "k").await.map_err(|e| fail(&e))?;
    let settlement = Settlement::of_unknown(EffectStatus::Committed, "oncall-ana", "seen in PSP");
    ledger
        .settle("charges", "k", &settlement)
        .await
        .map_err(|e| fail(&e))?;
    let history = ledger
        .annotated_history("charges", "k")
        .await
        .map_err(|e| fail(&e))?;
    let last = history.last().expect("a history");
    prop_assert_eq!(last.transition.op.as_str(), "reconcile");
    prop_assert_eq!(last.actor.as_deref(), Some("oncall-ana"));
    prop_assert_eq!(last.note.as_deref(), Some("seen in PSP"));
    prop_assert!(history[..history.len() - 1]
        .iter()
        .all(|a| a.actor.is_none() && a.note.is_none()));
    let again = refusal(ledger.settle("charges", "k", &settlement).await);
    prop_assert_eq!(
        again,
        Some(EffectError::NotInFlight {
            key: "k".into(),
            status: EffectStatus::Committed
        })
    );
    let forced = settlement.clone().forced();
    let forced = Settlement {
        status: EffectStatus::NotStarted,
        ..forced
    };
    ledger
        .settle("charges", "k", &forced)
        .await
        .map_err(|e| fail(&e))?;
    let status = ledger.status("charges", "k").await.map_err(|e| fail(&e))?;
    prop_assert_eq!(status, Some(EffectStatus::NotStarted));
    let plain = ledger.history("charges", "k").await.map_err(|e| fail(&e))?;
    prop_assert_eq!(history_problem(EffectStatus::NotStarted, &plain), None);
    prop_assert_eq!(plain.len(), 4); // record, begin, two settlements
    Ok(())
}
