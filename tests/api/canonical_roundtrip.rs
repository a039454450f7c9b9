//! Canonical means canonical, and what compacts, restores: equal states (sets and maps built in
//! any order) get equal fingerprints and one stored blob; a value JSON cannot bring back (a
//! non-finite float anywhere inside it) is refused at compaction, naming the field.

use compaction::{Compactable, CompactionError, Compactor, MemoryStore, NoReacquire, Tokenizer};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

#[derive(Serialize, Deserialize, Default, Debug, PartialEq, Clone)]
struct Tagged {
    set: HashSet<i64>,
    order: Vec<i64>,
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Sets {
    #[protected]
    tags: HashSet<String>,
    #[protected]
    index: HashMap<String, HashSet<u32>>,
    #[protected]
    nested: Vec<Tagged>,
    #[redundant]
    log: Vec<String>,
}

/// Builds the same state from the same items, inserting them in an order given by `rotate`:
/// every call makes fresh hash sets, each with its own iteration order.
fn sets(items: &[String], numbers: &[i64], rotate: usize) -> Sets {
    let mut items = items.to_vec();
    let mut numbers = numbers.to_vec();
    if !items.is_empty() {
        let r = rotate % items.len();
        items.rotate_left(r);
    }
    if !numbers.is_empty() {
        let r = rotate % numbers.len();
        numbers.rotate_left(r);
    }
    let index = items
        .iter()
        .map(|k| (k.clone(), numbers.iter().map(|n| *n as u32).collect()))
        .collect();
    Sets {
        tags: items.iter().cloned().collect(),
        index,
        nested: vec![Tagged {
            set: numbers.iter().copied().collect(),
            order: vec![3, 1, 2],
        }],
        log: vec!["ok".into()],
    }
}

fn compactor(budget: usize, store: &MemoryStore) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .store(store.clone())
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Equal states, built independently and in different insertion orders, have equal
    /// fingerprints; spilled, they are stored once; restored, they are equal again.
    #[test]
    fn equal_sets_and_maps_have_one_fingerprint(
        items in prop::collection::hash_set("[a-z]{1,6}", 0..12),
        numbers in prop::collection::hash_set(-1000i64..1000, 0..12),
        rotations in prop::collection::vec(0usize..50, 2..5),
        spill in any::<bool>(),
    ) {
        let items: Vec<String> = items.into_iter().collect();
        let numbers: Vec<i64> = numbers.into_iter().collect();
        let store = MemoryStore::new();
        // A window too small for the sets spills them (they are not pinned).
        let budget = if spill { 260 } else { 20_000 };
        let compactor = compactor(budget, &store);
        let first = compactor.compact_blocking(&sets(&items, &numbers, 0)).unwrap();
        let blobs = store.len();
        if spill && items.len() > 6 && numbers.len() > 6 {
            prop_assert!(!first.pointers().is_empty(), "{}", first.render());
        }
        for rotate in rotations {
            let state = sets(&items, &numbers, rotate);
            let again = compactor.compact_blocking(&state).unwrap();
            prop_assert_eq!(&again.report().fingerprints, &first.report().fingerprints);
            prop_assert_eq!(again.pointers(), first.pointers());
            prop_assert_eq!(store.len(), blobs, "identical state stored a new blob");
            let restored = compactor.rehydrate_blocking(&again, &NoReacquire).unwrap();
            prop_assert_eq!(restored, state);
        }
    }
}

#[test]
fn sequences_keep_their_order_in_the_fingerprint() {
    let compactor = compactor(20_000, &MemoryStore::new());
    let mut a = sets(&["x".into()], &[1, 2], 0);
    let first = compactor.compact_blocking(&a).unwrap();
    a.nested[0].order.reverse();
    let second = compactor.compact_blocking(&a).unwrap();
    assert_ne!(
        first.report().fingerprints.get("nested"),
        second.report().fingerprints.get("nested"),
        "a Vec's order is data: reordering it must change its fingerprint"
    );
}

#[derive(Serialize, Deserialize, Default, Debug, PartialEq, Clone)]
struct Reading {
    label: String,
    values: Vec<f64>,
    scale: Option<f32>,
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Floats {
    #[protected(pin)]
    pinned: Vec<Reading>,
    #[protected]
    spillable: Reading,
    #[protected]
    path: String,
    #[derivable(pointer = "file://{path}")]
    derived: Vec<Reading>,
    #[redundant]
    scratch: Option<Reading>,
}

const FIELDS: [&str; 4] = ["pinned", "spillable", "derived", "scratch"];

fn non_finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-f64::NAN)
    ]
}

fn reading() -> impl Strategy<Value = Reading> {
    (
        "[a-z]{0,5}",
        prop::collection::vec(-1e6f64..1e6, 1..4),
        prop::option::of(-1e3f32..1e3),
    )
        .prop_map(|(label, values, scale)| Reading {
            label,
            values,
            scale,
        })
}

fn floats() -> impl Strategy<Value = Floats> {
    (
        prop::collection::vec(reading(), 1..3),
        reading(),
        prop::collection::vec(reading(), 1..3),
        reading(),
    )
        .prop_map(|(pinned, spillable, derived, scratch)| Floats {
            pinned,
            spillable,
            path: "/tmp/x".into(),
            derived,
            scratch: Some(scratch),
        })
}

/// Puts `bad` somewhere inside field `which`: a list element or the optional scale.
fn poison(state: &mut Floats, which: usize, at: usize, bad: f64) {
    let reading = match which {
        0 => {
            let n = state.pinned.len();
            &mut state.pinned[at % n]
        }
        1 => &mut state.spillable,
        2 => {
            let n = state.derived.len();
            &mut state.derived[at % n]
        }
        _ => state.scratch.as_mut().expect("scratch is set"),
    };
    if at.is_multiple_of(3) {
        reading.scale = Some(bad as f32);
    } else {
        let n = reading.values.len();
        reading.values[at % n] = bad;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Finite values come back exactly; a non-finite float anywhere is refused at compaction,
    /// naming the field, at any budget (kept, spilled or evicted alike).
    #[test]
    fn what_compacts_restores(
        state in floats(),
        which in 0usize..4,
        at in 0usize..12,
        bad in non_finite(),
        budget in prop_oneof![Just(400usize), Just(20_000usize)],
    ) {
        let compactor = compactor(budget, &MemoryStore::new());
        match compactor.compact_blocking(&state) {
            Ok(compacted) => {
                let restored = compactor
                    .rehydrate_blocking(&compacted, &compaction::FnReacquire::new(|_, _| {
                        Ok(serde_json::to_value(&state.derived).unwrap())
                    }))
                    .unwrap();
                prop_assert_eq!(&restored.pinned, &state.pinned);
                prop_assert_eq!(&restored.spillable, &state.spillable);
                prop_assert_eq!(&restored.derived, &state.derived);
            }
            Err(CompactionError::ProtectedOverBudget { .. }) => {}
            Err(other) => prop_assert!(false, "finite state refused: {other}"),
        }
        let mut poisoned = state;
        poison(&mut poisoned, which, at, bad);
        match compactor.compact_blocking(&poisoned) {
            Err(CompactionError::Serialize { field, message }) => {
                prop_assert_eq!(field.as_str(), FIELDS[which]);
                prop_assert!(message.contains("finite"), "{}", message);
            }
            other => prop_assert!(false, "non-finite value not refused: {:?}", other.map(|c| c.render().to_owned())),
        }
    }
}
