//! Property tests of the engine's promise (issue 6): random states from a family that covers
//! every field class, random budgets from far too small to ample, random summarizers from the
//! adversarial family. After any compaction, every protected value is in the window byte for
//! byte or behind a pointer whose content is byte-identical, or the compaction returned the
//! right error and the caller's state is unchanged. Effect records keep their exact status.
//!
//! `PROPTEST_CASES=20000 cargo test --test engine prop_compact::` raises the case count (default 2000).

use crate::support;

use compaction::{
    Compacted, CompactionError, Compactor, Effect, EffectLog, EffectStatus, FieldOutcome,
    MemoryStore, TokenCounter, Tokenizer,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use support::shards::run_sharded;
use support::states::{
    derivable_values, oracle_reacquirer, pinned_values, protected_values, PropState,
};
use support::strategies::state;
use support::summarizers::Adversary;
use support::{canonical, cases, fingerprint, records};
// (fixtures are used by the regression tests)

pub(crate) fn budget() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => 1usize..60,         // far too small
        2 => 60usize..400,       // tight
        4 => 400usize..2_000,    // some eviction
        1 => 2_000usize..50_000, // ample
    ]
}

pub(crate) fn adversary() -> impl Strategy<Value = Adversary> {
    prop::sample::select(&Adversary::ALL[..])
}

pub(crate) fn counter() -> impl Strategy<Value = Tokenizer> {
    prop_oneof![3 => Just(Tokenizer::Heuristic), 1 => Just(Tokenizer::O200kBase)]
}

// ---------------------------------------------------------------------------------------------
// Checks

pub(crate) fn compactor(
    budget: usize,
    counter: Tokenizer,
    adversary: Adversary,
    store: &MemoryStore,
) -> (Compactor, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let builder = Compactor::builder()
        .budget(budget)
        .token_counter(counter)
        .store(store.clone());
    let (builder, calls) = adversary.install(builder);
    (builder.build().expect("valid config"), calls)
}

/// Everything `Ok` must imply.
pub(crate) fn check_ok(
    state: &PropState,
    compacted: &Compacted<PropState>,
    compactor: &Compactor,
    counter: Tokenizer,
    budget: usize,
) -> Result<(), TestCaseError> {
    let window = compacted.render();
    let report = compacted.report();
    prop_assert!(
        compacted.tokens() <= budget,
        "{} tokens > budget {budget}",
        compacted.tokens()
    );
    prop_assert_eq!(compacted.tokens(), counter.count(window));
    prop_assert_eq!(report.tokens_after, compacted.tokens());

    // Fingerprints: exactly the protected fields, each the hash of its canonical JSON.
    let protected = protected_values(state);
    let expected: BTreeMap<_, _> = protected
        .iter()
        .map(|(k, v)| (k.clone(), compaction::ContentHash::of(v.as_bytes())))
        .collect();
    prop_assert_eq!(&report.fingerprints, &expected);

    // Pinned values are in the window, byte for byte.
    for (path, json) in pinned_values(state) {
        prop_assert!(
            window.contains(&json),
            "pinned `{path}` = {json} not verbatim in window"
        );
        prop_assert_eq!(report.outcome(&path), Some(&FieldOutcome::Kept));
    }
    // Live records of the non-idempotent ledger are in the window, byte for byte.
    for e in state.migrations.iter().filter(|e| e.status.is_live()) {
        let json = serde_json::to_string(&e.record()).unwrap();
        prop_assert!(
            window.contains(&json),
            "live record {json} not verbatim in window"
        );
    }
    // Every field that left the window leaves a trace, and spilled values resolve to their
    // exact bytes.
    for f in &report.fields {
        match &f.outcome {
            FieldOutcome::Kept => {}
            FieldOutcome::Spilled { pointer } => {
                prop_assert!(
                    window.contains(&pointer.to_string()),
                    "no pointer for {}",
                    f.field
                );
                let bytes = compactor.resolve_blocking(pointer.to_string());
                prop_assert!(
                    bytes.is_ok(),
                    "spilled {} does not resolve: {:?}",
                    f.field,
                    bytes
                );
                if let Some(json) = protected.get(&f.field) {
                    prop_assert_eq!(bytes.unwrap(), json.as_bytes().to_vec());
                } else if let Some(path) = f.field.strip_suffix(".payloads") {
                    // Spilled payloads: every payload of the log, verbatim, behind the pointer.
                    let log = if path == "migrations" {
                        &state.migrations
                    } else {
                        &state.reads
                    };
                    let payloads: Vec<_> = log.iter().filter_map(|e| e.payload.clone()).collect();
                    let line = format!(
                        "[SPILLED payloads of {} records -> {pointer}]",
                        payloads.len()
                    );
                    prop_assert!(window.contains(&line), "no payloads line {line}");
                    let stored: Vec<serde_json::Value> =
                        serde_json::from_slice(&bytes.unwrap()).unwrap();
                    let stored: Vec<_> = stored.iter().map(|p| p["value"].clone()).collect();
                    prop_assert_eq!(stored, payloads);
                } else {
                    // Spilled effect records: the count line is exact. A non-idempotent log
                    // spills its settled records only; an idempotent one may spill them all.
                    let (log, all) = match f.field.as_str() {
                        "migrations" => (&state.migrations, false),
                        _ => (&state.reads, true),
                    };
                    let moved: Vec<_> = log.iter().filter(|e| all || !e.status.is_live()).collect();
                    let count = |s: EffectStatus| moved.iter().filter(|e| e.status == s).count();
                    let line = format!(
                        "[SPILLED {} records: {} committed, {} not_started, {} unknown -> {pointer}]",
                        moved.len(),
                        count(EffectStatus::Committed),
                        count(EffectStatus::NotStarted),
                        count(EffectStatus::Unknown),
                    );
                    prop_assert!(window.contains(&line), "no exact count line {line}");
                }
            }
            FieldOutcome::Evicted { pointer } => {
                let (expected, _) = &derivable_values(state)[&f.field];
                prop_assert_eq!(pointer, expected);
                // The window shows it escaped, so no value in it can start a line.
                prop_assert!(
                    window.contains(&*compaction::render::escape_pointer(pointer)),
                    "no pointer for {}",
                    f.field
                );
            }
            FieldOutcome::Summarized { source, .. } => {
                let bytes = compactor.resolve_blocking(source.to_string());
                prop_assert!(
                    bytes.is_ok(),
                    "summary source of {} does not resolve",
                    f.field
                );
                prop_assert!(window.contains(&source.to_string()));
            }
            FieldOutcome::Tombstoned => {
                let leaf = f.field.trim_end_matches(".payloads");
                prop_assert!(window.contains(leaf), "no tombstone naming {}", f.field);
            }
        }
    }

    // Rehydrate: protected values equal, derivable re-acquired through the right pointer,
    // redundant values kept or defaulted, effect records identical.
    let restored = compactor
        .rehydrate_blocking(compacted, &oracle_reacquirer(state))
        .map_err(|e| TestCaseError::fail(format!("rehydrate failed: {e:?}")))?;
    prop_assert_eq!(protected_values(&restored), protected.clone());
    prop_assert_eq!(&restored.config, &state.config);
    prop_assert_eq!(&restored.ci_log, &state.ci_log);
    prop_assert_eq!(
        restored.maybe.as_ref().map(|m| &m.doc),
        state.maybe.as_ref().map(|m| &m.doc)
    );
    prop_assert_eq!(records(&restored.migrations), records(&state.migrations));
    prop_assert_eq!(records(&restored.reads), records(&state.reads));
    // Payloads come back whether kept or spilled: the store holds them verbatim.
    for (log, original) in [
        (&restored.migrations, &state.migrations),
        (&restored.reads, &state.reads),
    ] {
        for (r, o) in log.iter().zip(original.iter()) {
            prop_assert_eq!(&r.payload, &o.payload);
        }
    }
    let kept = |path: &str| report.outcome(path) == Some(&FieldOutcome::Kept);
    let kept_or_default = |path: &str, same: bool, default: bool| same || (!kept(path) && default);
    prop_assert!(kept_or_default(
        "transcript",
        restored.transcript == state.transcript,
        restored.transcript.is_empty()
    ));
    prop_assert!(kept_or_default(
        "tool_output",
        restored.tool_output == state.tool_output,
        restored.tool_output.is_empty()
    ));
    prop_assert_eq!(restored.subs.len(), state.subs.len());
    prop_assert_eq!(restored.maybe.is_some(), state.maybe.is_some());

    // Re-compacting the restored state reproduces every fingerprint.
    let ample = Compactor::builder()
        .budget(10_000_000)
        .token_counter(Tokenizer::Heuristic)
        .build()
        .unwrap();
    let again = ample
        .compact_blocking(&restored)
        .map_err(|e| TestCaseError::fail(format!("recompaction failed: {e:?}")))?;
    prop_assert_eq!(&again.report().fingerprints, &report.fingerprints);
    Ok(())
}

/// The state with every evictable value emptied and no payloads: only what must or may stay
/// verbatim (protected values, effect records, the shape of nested state).
pub(crate) fn emptied(state: &PropState) -> PropState {
    let mut s = state.clone();
    s.config.clear();
    s.ci_log.clear();
    s.transcript.clear();
    s.tool_output.clear();
    let strip = |log: &EffectLog| {
        EffectLog::from_effects(log.iter().map(Effect::record).collect()).expect("same keys")
    };
    s.migrations = strip(&s.migrations);
    s.reads = strip(&s.reads);
    s.sub.notes.clear();
    s.subs.iter_mut().for_each(|l| l.notes.clear());
    if let Some(m) = &mut s.maybe {
        m.doc.clear();
        m.leaf.notes.clear();
    }
    s
}

/// Tokens of a window that keeps every guarantee for `state`: the emptied state rendered whole
/// (protected values and records verbatim), plus, per the documented format, a pointer or
/// tombstone line and a "left the window" entry for every evictable field, and some slack for
/// token merges at line joins.
pub(crate) fn verbatim_upper_bound(state: &PropState, counter: Tokenizer) -> usize {
    let whole = Compactor::builder()
        .budget(usize::MAX / 2)
        .token_counter(counter)
        .build()
        .unwrap()
        .compact_blocking(&emptied(state))
        .expect("an ample budget fits");
    assert!(whole.report().nothing_evicted());
    let mut extra = String::from("left the window: \n");
    for (path, (pointer, _)) in derivable_values(state) {
        extra +=
            &format!("{path} (pointer), [EVICTED {path} recover=reacquire pointer={pointer}]\n");
    }
    let mut redundant = vec![
        "transcript".to_owned(),
        "tool_output".into(),
        "sub.notes".into(),
    ];
    redundant.extend((0..state.subs.len()).map(|i| format!("subs[{i}].notes")));
    if state.maybe.is_some() {
        redundant.push("maybe.leaf.notes".into());
    }
    for path in redundant {
        extra += &format!("{path} (evicted), [EVICTED {path} recover=no]\n");
    }
    for (path, log) in [("migrations", &state.migrations), ("reads", &state.reads)] {
        let n = log.iter().filter(|e| e.payload.is_some()).count();
        let pointer = format!("store://sha256:{}", "0".repeat(64));
        extra +=
            &format!("{path} (payloads spilled), [SPILLED payloads of {n} records -> {pointer}]\n");
    }
    whole.tokens() + counter.count(&extra) + 16
}

/// Everything `Err` must imply.
pub(crate) fn check_err(
    state: &PropState,
    error: &CompactionError,
    adversary: Adversary,
    calls: usize,
    counter: Tokenizer,
    budget: usize,
) -> Result<(), TestCaseError> {
    match error {
        CompactionError::ProtectedOverBudget {
            required_tokens,
            budget: reported,
            ..
        } => {
            prop_assert_eq!(*reported, budget);
            prop_assert!(*required_tokens > budget);
            // `required_tokens` is the smallest window that keeps every guarantee: one token
            // less still refuses, exactly that much succeeds (no summarizer, fresh store).
            let store = MemoryStore::new();
            let (at_floor, _) = compactor(*required_tokens, counter, Adversary::None, &store);
            let fits = at_floor.compact_blocking(state);
            prop_assert!(
                fits.is_ok(),
                "budget {required_tokens} (reported floor) fails: {fits:?}"
            );
            let (below, _) = compactor(*required_tokens - 1, counter, Adversary::None, &store);
            let refused = below.compact_blocking(state);
            prop_assert!(
                matches!(refused, Err(CompactionError::ProtectedOverBudget { .. })),
                "budget {} (one below the floor) does not refuse: {refused:?}",
                required_tokens - 1
            );
            // And the refusal is justified: the same state with everything evictable emptied,
            // kept whole, plus a pointer or tombstone line for each evictable field, is a window
            // that keeps every guarantee. A budget that holds it must not be refused.
            let upper = verbatim_upper_bound(state, counter);
            prop_assert!(
                budget < upper,
                "refused at budget {budget} although a {upper}-token window keeps every guarantee \
                 (engine floor: {required_tokens})"
            );
        }
        CompactionError::Summarizer(_) => {
            prop_assert!(
                adversary.misbehaves(),
                "{adversary:?} is well-behaved but: {error}"
            );
            prop_assert!(calls > 0, "summarizer error without a summarizer call");
        }
        other => prop_assert!(false, "unexpected error: {other:?}"),
    }
    Ok(())
}

/// What a case ended in, for the coverage check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Outcome {
    KeptWhole,
    Evicted,
    Summarized,
    SpilledProtected,
    SpilledRecords,
    RefusedOverBudget,
    RefusedSummarizer,
}

pub(crate) fn outcomes(c: &Compacted<PropState>) -> Vec<Outcome> {
    let r = c.report();
    let mut out = Vec::new();
    if r.nothing_evicted() {
        out.push(Outcome::KeptWhole);
    } else {
        out.push(Outcome::Evicted);
    }
    for f in &r.fields {
        match f.outcome {
            FieldOutcome::Summarized { .. } => out.push(Outcome::Summarized),
            FieldOutcome::Spilled { .. } if r.fingerprints.contains_key(&f.field) => {
                out.push(Outcome::SpilledProtected)
            }
            FieldOutcome::Spilled { .. } => out.push(Outcome::SpilledRecords),
            _ => {}
        }
    }
    out
}

pub(crate) fn run_case(
    state: PropState,
    budget: usize,
    adversary: Adversary,
    counter: Tokenizer,
) -> Result<Vec<Outcome>, TestCaseError> {
    let before = state.clone();
    let store = MemoryStore::new();
    let (compactor, calls) = compactor(budget, counter, adversary, &store);
    let result = compactor.compact_blocking(&state);
    prop_assert_eq!(&state, &before, "compact changed its input");
    let calls = calls.load(Ordering::SeqCst);
    let seen = match result {
        Ok(compacted) => {
            // A misbehaving summarizer that was called can never lead to `Ok`.
            prop_assert!(
                !(adversary.misbehaves() && calls > 0),
                "{adversary:?} was called {calls} times and compaction still succeeded"
            );
            check_ok(&state, &compacted, &compactor, counter, budget)?;
            outcomes(&compacted)
        }
        Err(error) => {
            check_err(&state, &error, adversary, calls, counter, budget)?;
            // A refused compaction leaves nothing in the store that is not content-addressed.
            for hash in store.hashes() {
                prop_assert!(hash.matches(&store.raw(&hash).unwrap()));
            }
            vec![match error {
                CompactionError::ProtectedOverBudget { .. } => Outcome::RefusedOverBudget,
                _ => Outcome::RefusedSummarizer,
            }]
        }
    };
    prop_assert_eq!(&state, &before, "the state changed");
    Ok(seen)
}

pub(crate) fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(2000),
        max_shrink_iters: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The main invariant over the whole family. Also checks that the generators reach every
/// outcome (else the property would hold vacuously).
#[test]
fn compaction_never_loses_protected_state() {
    let seen = std::sync::Mutex::new(BTreeMap::<Outcome, usize>::new());
    // The cases in one shard per core (the same count, each shard seeded apart).
    let result = run_sharded(
        &config(),
        || (state(), budget(), adversary(), counter()),
        |(state, budget, adversary, counter)| {
            let outcomes = run_case(state, budget, adversary, counter)?;
            let mut seen = seen.lock().unwrap();
            for o in outcomes {
                *seen.entry(o).or_default() += 1;
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    let seen = seen.into_inner().unwrap();
    println!("{} cases; outcomes: {seen:?}", config().cases);
    if config().cases >= 500 {
        for o in [
            Outcome::KeptWhole,
            Outcome::Evicted,
            Outcome::Summarized,
            Outcome::SpilledProtected,
            Outcome::SpilledRecords,
            Outcome::RefusedOverBudget,
            Outcome::RefusedSummarizer,
        ] {
            assert!(
                seen.get(&o).copied().unwrap_or(0) >= 5,
                "outcome {o:?} barely reached: {seen:?}"
            );
        }
    }
}

#[test]
fn fingerprint_oracle_matches_the_engine_on_a_known_state() {
    // The oracle above is only useful if it agrees with the engine on a state we can read.
    let state = PropState {
        constraints: vec!["never touch /etc/prod".into()],
        plan_step: 6,
        ..PropState::default()
    };
    let compacted = Compactor::builder()
        .budget(10_000)
        .build()
        .unwrap()
        .compact_blocking(&state)
        .unwrap();
    assert_eq!(
        compacted.report().fingerprints["plan_step"],
        fingerprint(&6u32)
    );
    assert_eq!(
        compacted.report().fingerprints["constraints"],
        fingerprint(&state.constraints)
    );
    assert_eq!(
        canonical(&state.constraints),
        r#"["never touch /etc/prod"]"#
    );
}
