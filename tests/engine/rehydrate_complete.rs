//! Rehydrate restores everything the store holds (issue 14, item 4): every effect payload and
//! every summarized field comes back byte-identical after a compaction that spilled or
//! summarized it, verified against its pointer; a corrupted stored value is a typed error, never
//! a wrong value; an evicted derivable field nobody can re-acquire comes back `Default` only
//! when the caller opts in, and is then named in the result.

use crate::support;

use compaction::{
    CompactionError, Compactor, Extractive, FieldOutcome, MemoryStore, NoReacquire,
    RehydrateOptions, Tokenizer,
};
use proptest::prelude::*;
use support::fixtures::rich_state;
use support::states::PropState;
use support::strategies::state;

fn compactor(budget: usize, store: &MemoryStore) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(store.clone())
        .build()
        .unwrap()
}

/// `state` as JSON with the fields at `paths` (`a.b`, `a[1].b`) reset to their type's empty
/// value (every field emptied here is text or a list).
fn with_defaults(state: &PropState, paths: &[String]) -> Result<serde_json::Value, String> {
    let mut out = serde_json::to_value(state).map_err(|e| e.to_string())?;
    for path in paths {
        let mut at = &mut out;
        for step in path.split('.') {
            let (name, index) = match step.split_once('[') {
                Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
                None => (step, None),
            };
            at = at
                .get_mut(name)
                .ok_or_else(|| format!("no `{path}` in the state"))?;
            if let Some(i) = index {
                at = at
                    .get_mut(i)
                    .ok_or_else(|| format!("no `{path}` in the state"))?;
            }
        }
        *at = match at {
            serde_json::Value::String(_) => serde_json::Value::from(""),
            serde_json::Value::Array(_) => serde_json::Value::Array(Vec::new()),
            other => return Err(format!("`{path}` is {other}, not text or a list")),
        };
    }
    Ok(out)
}

/// What one compaction left in the store, counted: (summarized fields, spilled payload blocks).
fn stored_forms(compacted: &compaction::Compacted<PropState>) -> (usize, usize) {
    let report = compacted.report();
    let summarized = report
        .fields
        .iter()
        .filter(|f| matches!(f.outcome, FieldOutcome::Summarized { .. }))
        .count();
    let payloads = report
        .fields
        .iter()
        .filter(|f| {
            f.field.ends_with(".payloads") && matches!(f.outcome, FieldOutcome::Spilled { .. })
        })
        .count();
    (summarized, payloads)
}

/// Rehydrates with nothing to re-acquire from (opted in to `Default`): everything else must
/// come back byte for byte, so the restored state, serialized, equals the original with only
/// the evicted derivable fields (exactly the ones the result names) and the tombstoned
/// redundant fields emptied.
fn check_restored(
    compactor: &Compactor,
    compacted: &compaction::Compacted<PropState>,
    original: &PropState,
) -> Result<(), String> {
    let options = RehydrateOptions::default().default_unreacquirable(true);
    let rehydrated = compactor
        .rehydrate_with_blocking(compacted, &NoReacquire, options)
        .map_err(|e| format!("rehydrate failed: {e}"))?;
    let mut defaulted: Vec<String> = rehydrated
        .defaulted
        .iter()
        .map(|d| d.field.clone())
        .collect();
    let mut evicted: Vec<String> = compacted
        .report()
        .fields
        .iter()
        .filter(|f| matches!(f.outcome, FieldOutcome::Evicted { .. }))
        .map(|f| f.field.clone())
        .collect();
    defaulted.sort();
    evicted.sort();
    if defaulted != evicted {
        return Err(format!("defaulted {defaulted:?}, evicted {evicted:?}"));
    }
    let tombstoned = compacted
        .report()
        .fields
        .iter()
        .filter(|f| f.outcome == FieldOutcome::Tombstoned)
        .map(|f| f.field.clone());
    let emptied: Vec<String> = defaulted.iter().cloned().chain(tombstoned).collect();
    let expected = with_defaults(original, &emptied)?;
    // Both through `Value`: the same key order, and strings compared byte for byte.
    let restored = serde_json::to_value(&rehydrated.state).map_err(|e| e.to_string())?;
    let restored = serde_json::to_string(&restored).map_err(|e| e.to_string())?;
    let wanted = serde_json::to_string(&expected).map_err(|e| e.to_string())?;
    if restored != wanted {
        return Err(format!("restored {restored}\nexpected {wanted}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(support::cases(48)))]

    #[test]
    fn payloads_and_summarized_fields_come_back_byte_identical(
        mut state in state(),
        budget in 150usize..1_500,
    ) {
        // Text long enough that the summarizable fields are worth summarizing at most budgets.
        state.transcript = state.transcript.repeat(40);
        state.ci_log = state.ci_log.repeat(40);
        let store = MemoryStore::new();
        let compactor = compactor(budget, &store);
        match compactor.compact_blocking(&state) {
            Ok(compacted) => {
                let checked = check_restored(&compactor, &compacted, &state);
                prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
            }
            Err(CompactionError::ProtectedOverBudget { .. }) => {}
            Err(e) => prop_assert!(false, "compaction failed: {e}"),
        }
    }
}

/// The rich state at every 50th budget: some compactions spill payloads, some summarize, and
/// each restores them exactly (so the property above is not vacuous for these forms).
#[test]
fn the_rich_state_restores_exactly_at_budgets_that_spill_and_summarize() {
    let state = rich_state();
    let (mut summaries, mut payload_spills) = (0, 0);
    for budget in (250..2_000).step_by(50) {
        let store = MemoryStore::new();
        let compactor = compactor(budget, &store);
        let Ok(compacted) = compactor.compact_blocking(&state) else {
            continue;
        };
        let (summarized, payloads) = stored_forms(&compacted);
        summaries += summarized;
        payload_spills += payloads;
        check_restored(&compactor, &compacted, &state).unwrap();
    }
    assert!(summaries > 0, "no compaction summarized a field");
    assert!(payload_spills > 0, "no compaction spilled payloads");
}

/// A compaction of the rich state that spilled payloads and summarized a field, with its store.
fn spilled_and_summarized() -> (MemoryStore, Compactor, compaction::Compacted<PropState>) {
    let state = rich_state();
    for budget in (250..2_000).rev().step_by(25) {
        let store = MemoryStore::new();
        let compactor = compactor(budget, &store);
        if let Ok(compacted) = compactor.compact_blocking(&state) {
            let (summarized, payloads) = stored_forms(&compacted);
            if summarized > 0 && payloads > 0 {
                return (store, compactor, compacted);
            }
        }
    }
    panic!("no budget both spills payloads and summarizes");
}

/// A summarized value comes back from its stored source (the summarizer's input, stored
/// verbatim): a changed source is refused, never restored as a wrong value.
#[test]
fn a_corrupted_summary_source_or_payload_block_is_an_integrity_error() {
    let (store, compactor, compacted) = spilled_and_summarized();
    let sources: Vec<_> = compacted
        .report()
        .fields
        .iter()
        .filter_map(|f| match &f.outcome {
            FieldOutcome::Summarized { source, .. } => Some(source.clone()),
            _ => None,
        })
        .collect();
    let payloads: Vec<_> = compacted
        .report()
        .fields
        .iter()
        .filter_map(|f| match &f.outcome {
            FieldOutcome::Spilled { pointer } if f.field.ends_with(".payloads") => {
                Some(pointer.clone())
            }
            _ => None,
        })
        .collect();
    assert!(!sources.is_empty() && !payloads.is_empty());
    let options = RehydrateOptions::default().default_unreacquirable(true);
    for pointer in sources.iter().chain(&payloads) {
        let hash = pointer.hash();
        let original = store.raw(&hash).unwrap();
        // A value that still parses (a changed character inside the text) and one that does
        // not: either way the hash check refuses it before anything is rebuilt.
        let mut changed = original.clone();
        let at = changed.len() / 2;
        changed[at] ^= 0x01;
        for tampered in [changed, original[..original.len() - 1].to_vec()] {
            store.overwrite_unchecked(hash, tampered);
            let r = compactor.rehydrate_with_blocking(&compacted, &NoReacquire, options);
            assert!(
                matches!(r, Err(CompactionError::Integrity { .. })),
                "a tampered {pointer} was accepted: {:?}",
                r.map(|r| r.defaulted)
            );
        }
        store.overwrite_unchecked(hash, original);
    }
    check_restored(&compactor, &compacted, &rich_state()).unwrap();
}

#[test]
fn an_unreacquirable_field_is_an_error_unless_the_caller_opts_in() {
    let state = rich_state();
    let store = MemoryStore::new();
    // No summarizer: derivable fields that leave the window are evicted behind their pointer.
    let (compactor, compacted) = (300..3_000)
        .step_by(50)
        .find_map(|budget| {
            let compactor = Compactor::builder()
                .budget(budget)
                .store(store.clone())
                .build()
                .unwrap();
            let compacted = compactor.compact_blocking(&state).ok()?;
            let evicted = matches!(
                compacted.report().outcome("config"),
                Some(FieldOutcome::Evicted { .. })
            );
            evicted.then_some((compactor, compacted))
        })
        .expect("a budget that evicts config");
    let strict = compactor.rehydrate_blocking(&compacted, &NoReacquire);
    assert!(
        matches!(&strict, Err(CompactionError::Reacquire { field, .. }) if field == "config"),
        "{strict:?}"
    );
    let strict_with =
        compactor.rehydrate_with_blocking(&compacted, &NoReacquire, RehydrateOptions::default());
    assert!(matches!(
        strict_with,
        Err(CompactionError::Reacquire { .. })
    ));
    let options = RehydrateOptions::default().default_unreacquirable(true);
    let rehydrated = compactor
        .rehydrate_with_blocking(&compacted, &NoReacquire, options)
        .unwrap();
    let config = rehydrated
        .defaulted
        .iter()
        .find(|d| d.field == "config")
        .expect("config is reported");
    assert_eq!(config.pointer, "file:///srv/app/config.toml");
    assert!(config.reason.contains("no Reacquire"), "{}", config.reason);
    assert_eq!(rehydrated.state.config, "");
    assert_eq!(rehydrated.state.constraints, state.constraints);
    assert_eq!(rehydrated.state.migrations, state.migrations);
}

/// A summarized value comes back whatever its summary source is: the value's JSON (derived and
/// built-in `Summarizable`, known without comparing), the author's own text (compared with the
/// value's JSON, then the value stored beside it), or the default source of a hand-written
/// impl (compared, found equal).
#[test]
fn every_kind_of_summary_source_brings_its_value_back() {
    use compaction::{Compactable, Summarizable};
    use serde::{Deserialize, Serialize};
    use std::borrow::Cow;

    #[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
    struct Derived {
        title: String,
        body: String,
    }
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
    struct OwnText {
        lines: Vec<String>,
    }
    impl Summarizable for OwnText {
        fn summary_source(&self) -> Cow<'_, str> {
            Cow::Owned(self.lines.join("\n"))
        }
    }
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
    struct DefaultByHand {
        notes: Vec<String>,
    }
    impl Summarizable for DefaultByHand {}

    #[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
    struct Agent {
        #[protected(pin)]
        task: String,
        #[derivable(pointer = "docs://derived", summarize)]
        derived: Vec<Derived>,
        #[derivable(pointer = "docs://own", summarize)]
        own: OwnText,
        #[derivable(pointer = "docs://by-hand", summarize)]
        by_hand: DefaultByHand,
    }
    let text = |seed: usize| {
        (0..60)
            .map(|i| format!("Step {seed}.{i}: the migration ran once; do not retry. "))
            .collect::<String>()
    };
    let state = Agent {
        task: "ship the fix".into(),
        derived: (0..3)
            .map(|i| Derived {
                title: format!("doc {i}"),
                body: text(i),
            })
            .collect(),
        own: OwnText {
            lines: (0..40).map(|i| format!("line {i}: {}", text(i))).collect(),
        },
        by_hand: DefaultByHand {
            notes: (0..20).map(text).collect(),
        },
    };
    let store = MemoryStore::new();
    let compactor = compactor(1_500, &store);
    let compacted = compactor.compact_blocking(&state).unwrap();
    for field in ["derived", "own", "by_hand"] {
        assert!(
            matches!(
                compacted.report().outcome(field),
                Some(FieldOutcome::Summarized { .. })
            ),
            "{field}: {}",
            compacted.report()
        );
    }
    let restored = compactor
        .rehydrate_blocking(&compacted, &NoReacquire)
        .unwrap();
    assert_eq!(restored.derived, state.derived);
    assert_eq!(restored.own, state.own);
    assert_eq!(restored.by_hand, state.by_hand);
}
