//! Hand-written impls cannot skip elements, and rehydrate is bounded by the data: the fields a
//! traversal visits must be exactly those its schema and recorded shapes call for (checked at
//! compaction, `SchemaMismatch`), and a checkpoint whose shapes claim elements it does not hold
//! is refused before any rebuild work (`Rebuild`), even when its seal was recomputed.

use crate::support;

use compaction::{
    Compactable, Compacted, CompactionError, Compactor, FieldClass, NoReacquire, Parts,
    RebuildError, Schema, Segment, Shape, Visitor,
};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use support::{checkpoint_bytes, reseal_bytes};

/// How the hand-written traversal misbehaves.
#[derive(Debug, Clone, Copy)]
enum Fault {
    None,
    SkipElement(usize),
    ExtraElement,
    Twice(usize),
    SkipShape,
    ShortLength,
}

struct Handwritten {
    items: Vec<u32>,
    fault: Fault,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let item = Schema::builder("Item")
            .field("x", FieldClass::Protected { pin: false }, "u32")
            .build();
        Schema::builder("Handwritten")
            .field("head", FieldClass::Protected { pin: true }, "u32")
            .nested("items", &item, true, true)
            .build()
    })
}

impl Compactable for Handwritten {
    fn schema() -> &'static Schema {
        schema()
    }
    fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V) {
        visitor.protected("head", true, &0u32);
        let n = self.items.len();
        match self.fault {
            Fault::SkipShape => {}
            Fault::ShortLength => visitor.shape("items", Shape::Len(n.saturating_sub(1))),
            _ => visitor.shape("items", Shape::Len(n)),
        }
        visitor.enter(Segment::Field("items"));
        for (i, x) in self.items.iter().enumerate() {
            if matches!(self.fault, Fault::SkipElement(k) if k % n == i) {
                continue;
            }
            let times = if matches!(self.fault, Fault::Twice(k) if k % n == i) {
                2
            } else {
                1
            };
            for _ in 0..times {
                visitor.enter(Segment::Index(i));
                visitor.protected("x", false, x);
                visitor.leave();
            }
        }
        if matches!(self.fault, Fault::ExtraElement) {
            visitor.enter(Segment::Index(n));
            visitor.protected("x", false, &7u32);
            visitor.leave();
        }
        visitor.leave();
    }
    fn rebuild(_: &mut Parts) -> Result<Self, RebuildError> {
        Err(RebuildError {
            path: String::new(),
            reason: "not needed: only compaction is checked here".into(),
        })
    }
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::None),
        any::<usize>().prop_map(Fault::SkipElement),
        Just(Fault::ExtraElement),
        any::<usize>().prop_map(Fault::Twice),
        Just(Fault::SkipShape),
        Just(Fault::ShortLength),
    ]
}

fn compactor() -> Compactor {
    Compactor::builder().budget(4000).build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_traversal_that_skips_or_invents_elements_is_refused(
        items in prop::collection::vec(any::<u32>(), 1..8),
        fault in fault(),
    ) {
        let state = Handwritten { items, fault };
        let result = compactor().compact_blocking(&state);
        match (fault, result) {
            (Fault::None, Ok(_)) => {}
            (Fault::None, Err(e)) => prop_assert!(false, "a correct traversal was refused: {e}"),
            (_, Err(CompactionError::SchemaMismatch { field, .. })) => {
                prop_assert!(field.starts_with("items"), "{}", field);
            }
            (_, other) => prop_assert!(false, "{fault:?} not refused: {:?}", other.err()),
        }
    }
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq, Clone)]
struct Item {
    #[protected]
    x: u32,
    #[redundant]
    note: String,
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq, Clone)]
struct Listed {
    #[protected(pin)]
    head: String,
    #[nested]
    items: Vec<Item>,
    #[nested]
    maybe: Option<Item>,
}

/// Rewrites the recorded length of `items` in a serialized checkpoint and reseals it, as
/// someone who controls the checkpoint's storage could.
fn with_length(bytes: &[u8], from: usize, to: usize) -> Vec<u8> {
    let text = std::str::from_utf8(bytes).unwrap();
    let old = format!(r#"["items",{{"len":{from}}}]"#);
    assert!(text.contains(&old), "{text}");
    let forged = text.replace(&old, &format!(r#"["items",{{"len":{to}}}]"#));
    reseal_bytes(forged.as_bytes()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_checkpoint_claiming_elements_it_does_not_hold_is_refused_before_rebuilding(
        xs in prop::collection::vec(any::<u32>(), 0..6),
        claimed in prop_oneof![
            Just(usize::MAX),
            Just(50_000_000usize),
            Just(u32::MAX as usize),
            0usize..12,
        ],
        maybe in any::<bool>(),
    ) {
        let state = Listed {
            head: "h".into(),
            items: xs.iter().map(|&x| Item { x, note: "n".into() }).collect(),
            maybe: maybe.then(Item::default),
        };
        let compactor = compactor();
        let compacted = compactor.compact_blocking(&state).unwrap();
        let bytes = checkpoint_bytes(&compacted);
        let forged = with_length(&bytes, xs.len(), claimed);
        let loaded: Compacted<Listed> = serde_json::from_slice(&forged).unwrap();
        prop_assert!(loaded.verify_seal());
        match compactor.rehydrate_blocking(&loaded, &NoReacquire) {
            Ok(restored) => {
                prop_assert_eq!(claimed, xs.len());
                prop_assert_eq!(restored, state);
            }
            Err(CompactionError::Rebuild(e)) => {
                prop_assert_ne!(claimed, xs.len());
                prop_assert!(e.path.starts_with("items"), "{}", e);
            }
            Err(other) => prop_assert!(false, "unexpected error: {other}"),
        }
    }
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq, Clone)]
struct Nothing {}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq, Clone)]
struct Empties {
    #[protected(pin)]
    head: String,
    #[nested]
    items: Vec<Nothing>,
}

#[test]
fn a_list_of_fieldless_elements_is_capped_not_spun() {
    let state = Empties {
        head: "h".into(),
        items: vec![Nothing {}; 3],
    };
    let compactor = compactor();
    let compacted = compactor.compact_blocking(&state).unwrap();
    let restored = compactor
        .rehydrate_blocking(&compacted, &NoReacquire)
        .unwrap();
    assert_eq!(restored, state);
    let forged = with_length(&checkpoint_bytes(&compacted), 3, usize::MAX);
    let loaded: Compacted<Empties> = serde_json::from_slice(&forged).unwrap();
    let error = compactor
        .rehydrate_blocking(&loaded, &NoReacquire)
        .unwrap_err();
    assert!(matches!(error, CompactionError::Rebuild(_)), "{error}");
}
