//! Repeated compaction (issue 6): random interleavings of mutate -> compact -> rehydrate for
//! 1,000 steps. An oracle copy of the state receives only the test's own mutations; after every
//! round trip the protected values, derivable values and effect records of the working state
//! equal the oracle's, and every compaction reports exactly the oracle's fingerprints. Effect
//! statuses move only through the guard (`begin` / `commit` / `fail`), applied to both.
//!
//! Cases: `PROPTEST_CASES / 250` (at least 1; 8 by default), 1,000 steps each.

use crate::support;

use compaction::{CompactionError, Compactor, ContentHash, Effect, MemoryStore, Tokenizer};
use proptest::prelude::*;
use std::collections::BTreeMap;
use support::shards::run_sharded;
use support::states::{oracle_reacquirer, protected_values, Leaf, Mid, PropState};
use support::summarizers::Adversary;
use support::{cases, records};

const STEPS: usize = 1_000;
const KEYS: [&str; 6] = [
    "mig-0001",
    "mig-O001",
    "mig-0002",
    "req-7f3a",
    "req-7f3а",
    "notify",
];

#[derive(Debug, Clone)]
enum Op {
    /// Change one protected value (which, new text).
    Protected(u8, String),
    /// Change a derivable value (the environment changes with it).
    Derivable(bool, String),
    /// Append redundant output.
    Output(String),
    /// Record an effect under one of the lookalike keys (refused if present).
    Record(usize, usize),
    /// Guard operations.
    Begin(usize),
    Commit(usize),
    Fail(usize),
    /// Compact at one of the budgets, then rehydrate and continue from the restored state.
    Cycle(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let text = prop_oneof![
        "[a-z0-9/._ -]{0,16}",
        Just("never touch /etc/prod".to_owned()),
        Just("numpy<2.0".to_owned()),
        Just("blocked on approval (not yet)".to_owned()),
        (1usize..40).prop_map(|n| "x/".repeat(n * 10)),
    ];
    prop_oneof![
        3 => (0u8..8, text.clone()).prop_map(|(w, t)| Op::Protected(w, t)),
        1 => (any::<bool>(), text.clone()).prop_map(|(w, t)| Op::Derivable(w, t)),
        2 => text.prop_map(Op::Output),
        2 => (0..KEYS.len(), 0..KEYS.len()).prop_map(|(k, d)| Op::Record(k, d)),
        2 => (0..KEYS.len()).prop_map(Op::Begin),
        2 => (0..KEYS.len()).prop_map(Op::Commit),
        1 => (0..KEYS.len()).prop_map(Op::Fail),
        4 => (0usize..4).prop_map(Op::Cycle),
    ]
}

/// Applies a mutation. Protected values change only here.
fn mutate(s: &mut PropState, op: &Op) {
    match op {
        Op::Protected(which, t) => match which {
            0 => s.constraints.push(t.clone()),
            1 => s.config_path = t.clone(),
            2 => s.plan_step = s.plan_step.wrapping_add(1),
            3 => s.blocked_on = (!t.is_empty()).then(|| t.clone()),
            4 => {
                s.amounts.insert(t.clone(), t.len() as i64 - 7);
            }
            5 => s.sub.id = t.clone(),
            6 => {
                if s.subs.len() < 4 {
                    s.subs.push(Leaf {
                        id: t.clone(),
                        qty: t.len() as u64,
                        notes: vec![t.clone()],
                    })
                } else {
                    s.subs.remove(0);
                }
            }
            _ => {
                s.maybe = match s.maybe.take() {
                    Some(_) if t.len().is_multiple_of(2) => None,
                    Some(mut m) => {
                        m.leaf.qty += 1;
                        Some(m)
                    }
                    None => Some(Mid {
                        tag: t.clone(),
                        doc: t.repeat(3),
                        leaf: Leaf::default(),
                    }),
                }
            }
        },
        Op::Derivable(true, t) => s.config = t.clone(),
        Op::Derivable(false, t) => s.ci_log = t.repeat(20),
        Op::Output(t) => {
            s.tool_output.push(t.clone());
            s.transcript.push_str(t);
        }
        _ => {}
    }
}

/// A guard operation on both the working state and the oracle: they must agree.
fn guard(state: &mut PropState, oracle: &mut PropState, op: &Op) -> Result<(), TestCaseError> {
    let (a, b) = match op {
        Op::Record(k, d) => {
            let e = Effect::new("apply", "db://x", KEYS[*k])
                .depends_on(KEYS[*d])
                .with_payload(serde_json::json!({ "rows": k }));
            (
                state.migrations.record(e.clone()).map(|_| ()),
                oracle.migrations.record(e).map(|_| ()),
            )
        }
        Op::Begin(k) => (
            state.migrations.begin(KEYS[*k]),
            oracle.migrations.begin(KEYS[*k]),
        ),
        Op::Commit(k) => (
            state.migrations.commit(KEYS[*k]),
            oracle.migrations.commit(KEYS[*k]),
        ),
        Op::Fail(k) => (
            state.migrations.fail(KEYS[*k]),
            oracle.migrations.fail(KEYS[*k]),
        ),
        _ => return Ok(()),
    };
    prop_assert_eq!(
        a,
        b,
        "the guard answered differently after compaction ({:?})",
        op
    );
    Ok(())
}

fn fingerprints(s: &PropState) -> BTreeMap<String, ContentHash> {
    protected_values(s)
        .into_iter()
        .map(|(k, v)| (k, ContentHash::of(v.as_bytes())))
        .collect()
}

fn run(ops: Vec<Op>) -> Result<(usize, usize), TestCaseError> {
    let store = MemoryStore::new();
    let compactors: Vec<Compactor> = [400usize, 1_000, 3_000, 100_000]
        .into_iter()
        .map(|budget| {
            let builder = Compactor::builder()
                .budget(budget)
                .token_counter(Tokenizer::Heuristic)
                .store(store.clone());
            Adversary::Paraphrase.install(builder).0.build().unwrap()
        })
        .collect();
    let mut state = PropState::default();
    let mut oracle = PropState::default();
    let (mut cycles, mut refused) = (0, 0);
    for op in &ops {
        match op {
            Op::Cycle(which) => {
                let compactor = &compactors[*which];
                let before = state.clone();
                match compactor.compact_blocking(&state) {
                    Ok(compacted) => {
                        prop_assert!(compacted.tokens() <= compactor.budget());
                        prop_assert_eq!(&compacted.report().fingerprints, &fingerprints(&oracle));
                        let restored = compactor
                            .rehydrate_blocking(&compacted, &oracle_reacquirer(&oracle))
                            .map_err(|e| TestCaseError::fail(format!("rehydrate: {e:?}")))?;
                        prop_assert_eq!(protected_values(&restored), protected_values(&oracle));
                        prop_assert_eq!(records(&restored.migrations), records(&oracle.migrations));
                        prop_assert_eq!(&restored.config, &oracle.config);
                        prop_assert_eq!(&restored.ci_log, &oracle.ci_log);
                        // Redundant state and payloads may be gone: that is the only
                        // difference the oracle takes over.
                        state = restored;
                        oracle.tool_output = state.tool_output.clone();
                        oracle.transcript = state.transcript.clone();
                        oracle.sub.notes = state.sub.notes.clone();
                        for (o, r) in oracle.subs.iter_mut().zip(&state.subs) {
                            o.notes = r.notes.clone();
                        }
                        if let (Some(o), Some(r)) = (&mut oracle.maybe, &state.maybe) {
                            o.leaf.notes = r.leaf.notes.clone();
                        }
                        oracle.migrations = state.migrations.clone();
                        prop_assert_eq!(&state, &oracle);
                        cycles += 1;
                    }
                    Err(CompactionError::ProtectedOverBudget { .. }) => {
                        prop_assert_eq!(&state, &before);
                        refused += 1;
                    }
                    Err(e) => prop_assert!(false, "unexpected error: {e:?}"),
                }
            }
            Op::Record(..) | Op::Begin(_) | Op::Commit(_) | Op::Fail(_) => {
                guard(&mut state, &mut oracle, op)?
            }
            _ => {
                mutate(&mut state, op);
                mutate(&mut oracle, op);
            }
        }
    }
    // Statuses moved only through the guard: the oracle saw nothing else.
    prop_assert_eq!(records(&state.migrations), records(&oracle.migrations));
    Ok((cycles, refused))
}

#[test]
fn a_thousand_round_trips_change_only_what_the_author_changed() {
    let config = ProptestConfig {
        cases: (cases(2000) / 250).max(1),
        failure_persistence: None,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    };
    let totals = std::sync::Mutex::new((0usize, 0usize));
    // The cases in one shard per core (the same count, each shard seeded apart).
    let result = run_sharded(
        &config,
        || prop::collection::vec(op(), STEPS),
        |ops| {
            let (c, r) = run(ops)?;
            let mut t = totals.lock().unwrap();
            t.0 += c;
            t.1 += r;
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    let (cycles, refused) = totals.into_inner().unwrap();
    println!(
        "{} cases x {STEPS} steps: {cycles} compact+rehydrate round trips, {refused} refusals",
        config.cases
    );
    assert!(
        cycles >= 100 * config.cases as usize,
        "too few round trips: {cycles}"
    );
}
