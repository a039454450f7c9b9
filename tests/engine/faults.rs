//! Fault injection (issue 6): a store and a summarizer that fail on the n-th call, return
//! garbage, never answer within a deadline, or panic, at every call of a compaction that spills
//! protected values and effect records and summarizes. Every injected fault ends in a typed
//! error with the caller's state untouched; panics propagate (the engine does not catch them)
//! and leave the state as it was, and the same compactor works afterwards.

use crate::support;

use compaction::{
    Compacted, CompactionError, Compactor, FieldOutcome, FnReacquire, MemoryStore, ReacquireError,
    StoreError, SummarizerError, Tokenizer,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use support::faulty::{FaultyStore, FaultySummarizer, StoreFault, SummarizerFault};
use support::fixtures::{covers_every_form, rich_state, spilling_compaction};
use support::states::{oracle_reacquirer, protected_values, PropState};
use support::{checkpoint_bytes, records};

/// A summarizer fault that never triggers.
const HEALTHY: SummarizerFault = SummarizerFault::Fail(usize::MAX);

struct Baseline {
    budget: usize,
    compacted: Compacted<PropState>,
    store: MemoryStore,
    puts: usize,
    gets: usize,
    summaries: usize,
}

/// A healthy run with counting wrappers: how many puts, gets and summarizer calls there are to
/// inject faults into.
/// Healthy runs at the budget that spills every form and at larger ones (more summaries,
/// fewer spills), each with counting wrappers: the calls to inject faults into.
fn baselines() -> Vec<Baseline> {
    let (found, _) = spilling_compaction(&MemoryStore::new(), &FaultySummarizer::new(HEALTHY));
    let spilling = found.budget();
    let all: Vec<Baseline> = [spilling, spilling + 150, spilling + 600, spilling + 1_200]
        .into_iter()
        .filter_map(baseline)
        .collect();
    assert!(all.iter().any(|b| covers_every_form(&b.compacted)));
    assert!(all.iter().map(|b| b.summaries).sum::<usize>() >= 2);
    all
}

fn baseline(budget: usize) -> Option<Baseline> {
    let store = MemoryStore::new();
    let counting = FaultyStore::new(store.clone(), StoreFault::None);
    let summarizer = FaultySummarizer::new(HEALTHY);
    let compactor = compactor_with(budget, counting.clone(), summarizer.clone());
    let state = rich_state();
    let compacted = compactor.compact_blocking(&state).ok()?;
    let puts = counting.puts.load(Ordering::SeqCst);
    let summaries = summarizer.calls.load(Ordering::SeqCst);
    let restored = compactor
        .rehydrate_blocking(&compacted, &oracle_reacquirer(&state))
        .unwrap();
    assert_eq!(protected_values(&restored), protected_values(&state));
    let gets = counting.gets.load(Ordering::SeqCst);
    Some(Baseline {
        budget,
        compacted,
        store,
        puts,
        gets,
        summaries,
    })
}

fn compactor_with(budget: usize, store: FaultyStore, summarizer: FaultySummarizer) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(summarizer)
        .store(store)
        .build()
        .unwrap()
}

fn assert_backend(result: &Result<Compacted<PropState>, CompactionError>, what: &str) {
    assert!(
        matches!(
            result,
            Err(CompactionError::Store(StoreError::Backend { .. }))
        ),
        "{what}: expected a Store(Backend) error, got {result:?}"
    );
}

#[test]
fn every_store_put_fault_is_a_typed_error_and_leaves_the_state_untouched() {
    for base in baselines() {
        let state = rich_state();
        let before = state.clone();
        let mut injected = 0;
        for n in 0..base.puts {
            for fault in [StoreFault::FailPut(n), StoreFault::TimeoutPut(n, 3)] {
                let inner = MemoryStore::new();
                let store = FaultyStore::new(inner.clone(), fault);
                let compactor = compactor_with(base.budget, store, FaultySummarizer::new(HEALTHY));
                let result = compactor.compact_blocking(&state);
                assert_backend(&result, &format!("{fault:?}"));
                assert_eq!(state, before, "{fault:?} changed the state");
                // Whatever was written before the fault is content-addressed and intact.
                for hash in inner.hashes() {
                    assert!(hash.matches(&inner.raw(&hash).unwrap()));
                }
                // The same compactor succeeds once the store answers again.
                let again = compactor.compact_blocking(&state).unwrap();
                assert_eq!(
                    again.report().fingerprints,
                    base.compacted.report().fingerprints
                );
                injected += 1;
            }
        }
        println!("injected {injected} put faults over {} puts", base.puts);
    }
}

#[test]
fn every_store_get_fault_during_rehydrate_is_a_typed_error() {
    for base in baselines() {
        let state = rich_state();
        let reacquire = oracle_reacquirer(&state);
        let checkpoint = checkpoint_bytes(&base.compacted);
        let mut injected = 0;
        for n in 0..base.gets {
            for fault in [
                StoreFault::FailGet(n),
                StoreFault::LoseGet(n),
                StoreFault::GarbageGet(n),
                StoreFault::FlipGet(n),
                StoreFault::TimeoutGet(n, 5),
            ] {
                let store = FaultyStore::new(base.store.clone(), fault);
                let compactor = compactor_with(base.budget, store, FaultySummarizer::new(HEALTHY));
                let result = compactor.rehydrate_blocking(&base.compacted, &reacquire);
                let ok = match fault {
                    StoreFault::FailGet(_) | StoreFault::TimeoutGet(..) => {
                        matches!(
                            result,
                            Err(CompactionError::Store(StoreError::Backend { .. }))
                        )
                    }
                    StoreFault::LoseGet(_) => {
                        matches!(
                            result,
                            Err(CompactionError::Store(StoreError::NotFound { .. }))
                        )
                    }
                    _ => matches!(result, Err(CompactionError::Integrity { .. })),
                };
                assert!(ok, "{fault:?}: got {result:?}");
                assert_eq!(
                    checkpoint_bytes(&base.compacted),
                    checkpoint,
                    "{fault:?} changed the checkpoint"
                );
                // The same compactor rehydrates once the store answers again.
                let restored = compactor
                    .rehydrate_blocking(&base.compacted, &reacquire)
                    .unwrap();
                assert_eq!(protected_values(&restored), protected_values(&state));
                assert_eq!(records(&restored.migrations), records(&state.migrations));
                injected += 1;
            }
        }
        // `resolve` reports the same faults.
        let pointer = base.compacted.pointers()[0].clone();
        for (fault, expect_integrity) in [
            (StoreFault::GarbageGet(0), true),
            (StoreFault::FlipGet(0), true),
            (StoreFault::FailGet(0), false),
            (StoreFault::TimeoutGet(0, 2), false),
        ] {
            let store = FaultyStore::new(base.store.clone(), fault);
            let compactor = compactor_with(base.budget, store, FaultySummarizer::new(HEALTHY));
            let r = compactor.resolve_blocking(pointer.to_string());
            if expect_integrity {
                assert!(
                    matches!(r, Err(CompactionError::Integrity { .. })),
                    "{fault:?}: {r:?}"
                );
            } else {
                assert!(
                    matches!(r, Err(CompactionError::Store(_))),
                    "{fault:?}: {r:?}"
                );
            }
            injected += 1;
        }
        println!(
            "injected {injected} get faults over {} gets (+ resolve)",
            base.gets
        );
    }
}

#[test]
fn every_summarizer_fault_is_a_typed_error_and_writes_nothing() {
    for base in baselines() {
        let state = rich_state();
        let before = state.clone();
        let mut injected = 0;
        for n in 0..base.summaries {
            for fault in [
                SummarizerFault::Fail(n),
                SummarizerFault::Empty(n),
                SummarizerFault::OverLong(n),
            ] {
                let inner = MemoryStore::new();
                let store = FaultyStore::new(inner.clone(), StoreFault::None);
                let compactor = compactor_with(base.budget, store, FaultySummarizer::new(fault));
                let result = compactor.compact_blocking(&state);
                let ok = matches!(
                    (fault, &result),
                    (
                        SummarizerFault::Fail(_),
                        Err(CompactionError::Summarizer(SummarizerError::Failed { .. })),
                    ) | (
                        SummarizerFault::Empty(_),
                        Err(CompactionError::Summarizer(SummarizerError::Empty { .. })),
                    ) | (
                        SummarizerFault::OverLong(_),
                        Err(CompactionError::Summarizer(
                            SummarizerError::OverLong { .. }
                        )),
                    )
                );
                assert!(ok, "{fault:?}: got {result:?}");
                assert_eq!(state, before, "{fault:?} changed the state");
                // Nothing is spilled before every summary is made: a refused compaction leaves
                // nothing behind.
                assert!(inner.is_empty(), "{fault:?} left {} blobs", inner.len());
                injected += 1;
            }
            // Garbage within the target is accepted as a summary (it is marked not authoritative
            // and never used to rehydrate): protected state and records are unaffected.
            let store = FaultyStore::new(MemoryStore::new(), StoreFault::None);
            let compactor = compactor_with(
                base.budget,
                store,
                FaultySummarizer::new(SummarizerFault::Garbage(n)),
            );
            let compacted = compactor.compact_blocking(&state).unwrap();
            assert!(compacted.render().contains("[SUMMARY not authoritative"));
            let restored = compactor
                .rehydrate_blocking(&compacted, &oracle_reacquirer(&state))
                .unwrap();
            assert_eq!(protected_values(&restored), protected_values(&state));
            assert_eq!(
                restored.ci_log, state.ci_log,
                "a derivable field is re-acquired, not read from its summary"
            );
            injected += 1;
        }
        println!(
            "injected {injected} summarizer faults over {} calls",
            base.summaries
        );
    }
}

/// Runs `f`, which must panic, and returns the panic message.
fn must_panic<T: std::fmt::Debug>(f: impl FnOnce() -> T) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => panic!("expected the injected panic to propagate, got {value:?}"),
        Err(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default(),
    }
}

#[test]
fn panics_propagate_and_leave_the_state_as_it_was() {
    for base in baselines() {
        let state = rich_state();
        let before = state.clone();
        let reacquire = oracle_reacquirer(&state);
        let mut injected = 0;
        // A panicking store on every put, and a panicking summarizer on every call.
        let mut faults: Vec<(StoreFault, SummarizerFault)> = (0..base.puts)
            .map(|n| (StoreFault::PanicPut(n), HEALTHY))
            .collect();
        faults.extend((0..base.summaries).map(|n| (StoreFault::None, SummarizerFault::Panic(n))));
        for (store_fault, summarizer_fault) in faults {
            let store = FaultyStore::new(MemoryStore::new(), store_fault);
            let compactor =
                compactor_with(base.budget, store, FaultySummarizer::new(summarizer_fault));
            let message = must_panic(|| compactor.compact_blocking(&state));
            assert!(message.contains("injected panic"), "{message}");
            assert_eq!(
                state, before,
                "a panic in {store_fault:?}/{summarizer_fault:?} changed the state"
            );
            // The fault fired once; the same compactor now compacts and rehydrates fine.
            let compacted = compactor.compact_blocking(&state).unwrap();
            let restored = compactor
                .rehydrate_blocking(&compacted, &reacquire)
                .unwrap();
            assert_eq!(protected_values(&restored), protected_values(&state));
            injected += 1;
        }
        // A panicking store on every get during rehydrate.
        for n in 0..base.gets {
            let store = FaultyStore::new(base.store.clone(), StoreFault::PanicGet(n));
            let compactor = compactor_with(base.budget, store, FaultySummarizer::new(HEALTHY));
            let checkpoint = checkpoint_bytes(&base.compacted);
            let message = must_panic(|| compactor.rehydrate_blocking(&base.compacted, &reacquire));
            assert!(message.contains("injected panic"), "{message}");
            assert_eq!(checkpoint_bytes(&base.compacted), checkpoint);
            let restored = compactor
                .rehydrate_blocking(&base.compacted, &reacquire)
                .unwrap();
            assert_eq!(protected_values(&restored), protected_values(&state));
            injected += 1;
        }
        println!("injected {injected} panics");
    }
}

#[test]
fn a_failing_reacquire_is_returned_not_swallowed() {
    let mut checked = 0;
    for base in baselines() {
        // Only a field evicted behind its pointer is re-acquired: a summarized one comes back
        // from the store (its value is stored beside its summary).
        let evicted = base
            .compacted
            .report()
            .fields
            .iter()
            .any(|f| matches!(f.outcome, FieldOutcome::Evicted { .. }));
        if !evicted {
            continue;
        }
        checked += 1;
        let state = rich_state();
        let failing = FnReacquire::new(
            |field: &str, pointer: &str| -> Result<serde_json::Value, ReacquireError> {
                Err(format!("{field} via {pointer}: connection reset").into())
            },
        );
        let store = FaultyStore::new(base.store.clone(), StoreFault::None);
        let compactor = compactor_with(base.budget, store, FaultySummarizer::new(HEALTHY));
        match compactor.rehydrate_blocking(&base.compacted, &failing) {
            Err(CompactionError::Reacquire {
                field,
                pointer,
                source,
            }) => {
                assert!(source.to_string().contains("connection reset"));
                assert!(pointer.contains("://"), "{field}: {pointer}");
            }
            other => panic!("expected Reacquire, got {other:?}"),
        }
        // Mistyped re-acquired values are a typed error too, never a panic.
        let mistyped = FnReacquire::new(
            |_: &str, _: &str| -> Result<serde_json::Value, ReacquireError> {
                Ok(serde_json::json!({ "not": "a string" }))
            },
        );
        let r = compactor.rehydrate_blocking(&base.compacted, &mistyped);
        assert!(matches!(r, Err(CompactionError::Rebuild(_))), "{r:?}");
        let _ = state;
    }
    assert!(checked > 0, "no baseline evicted a derivable field");
}
