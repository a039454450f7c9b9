//! A checkpoint restores only into the type that wrote it: another type of the same name,
//! another instantiation of a generic type, or the same type with another field set is refused
//! with a typed error that says what differs; a format-1 checkpoint (no schema fingerprint) is
//! refused with `CheckpointFormat`.

use crate::support;

use compaction::{Compactable, Compacted, CompactionError, Compactor, NoReacquire};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use support::{checkpoint_bytes, reseal_bytes};

mod v1 {
    use super::*;
    #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
    pub struct State {
        #[protected(pin)]
        pub goal: String,
        #[protected]
        pub step: u32,
        #[redundant]
        pub log: Vec<String>,
    }
}

mod v2 {
    use super::*;
    /// The next version: same name, one field fewer. Restoring a v1 checkpoint into it would
    /// drop `step` in silence.
    #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
    pub struct State {
        #[protected(pin)]
        pub goal: String,
        #[redundant]
        pub log: Vec<String>,
    }
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Wrapper<T> {
    #[protected]
    inner: T,
}

fn compactor() -> Compactor {
    Compactor::builder().budget(2000).build().unwrap()
}

fn v1_checkpoint() -> Vec<u8> {
    let state = v1::State {
        goal: "ship".into(),
        step: 4,
        log: vec!["ok".into()],
    };
    checkpoint_bytes(&compactor().compact_blocking(&state).unwrap())
}

#[test]
fn another_type_of_the_same_name_is_refused_naming_both() {
    let loaded: Compacted<v2::State> = serde_json::from_slice(&v1_checkpoint()).unwrap();
    match compactor().rehydrate_blocking(&loaded, &NoReacquire) {
        Err(CompactionError::WrongStateType { expected, found }) => {
            assert!(expected.ends_with("v2::State"), "{expected}");
            assert!(found.ends_with("v1::State"), "{found}");
        }
        other => panic!("restored into another type: {:?}", other.err()),
    }
}

#[test]
fn another_instantiation_of_a_generic_type_is_refused() {
    let compacted = compactor()
        .compact_blocking(&Wrapper { inner: 7u64 })
        .unwrap();
    let bytes = checkpoint_bytes(&compacted);
    let loaded: Compacted<Wrapper<u32>> = serde_json::from_slice(&bytes).unwrap();
    match compactor().rehydrate_blocking(&loaded, &NoReacquire) {
        Err(CompactionError::WrongStateType { expected, found }) => {
            assert!(expected.contains("Wrapper<u32>"), "{expected}");
            assert!(found.contains("Wrapper<u64>"), "{found}");
        }
        other => panic!("restored into another instantiation: {:?}", other.err()),
    }
    let same: Compacted<Wrapper<u64>> = serde_json::from_slice(&bytes).unwrap();
    let restored = compactor().rehydrate_blocking(&same, &NoReacquire).unwrap();
    assert_eq!(restored, Wrapper { inner: 7u64 });
}

/// The checkpoint's recorded field lines, as JSON strings.
fn field_lines(bytes: &[u8]) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    value["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The same type with another field set (a field dropped, added or reclassified in the
    /// checkpoint, resealed as its storage's owner could) is refused, naming the field.
    #[test]
    fn a_changed_field_set_is_refused_naming_the_field(which in 0usize..3, how in 0usize..3) {
        let bytes = v1_checkpoint();
        let lines = field_lines(&bytes);
        let line = &lines[which % lines.len()];
        let quoted = serde_json::to_string(line).unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        let field = line.split(':').next().unwrap().to_owned();
        let (forged, named) = match how {
            // Dropped.
            0 => (text.replacen(&format!("{quoted},"), "", 1).replacen(&format!(",{quoted}"), "", 1), field),
            // Reclassified.
            1 => {
                let changed = line.replace("Protected", "Redundant").replace("Redundant { summarize: false }", "Protected { pin: false }");
                (text.replacen(&quoted, &serde_json::to_string(&changed).unwrap(), 1), field)
            }
            // Another field added.
            _ => {
                let extra = serde_json::to_string("extra: Protected { pin: false } as `u8`").unwrap();
                (text.replacen(&quoted, &format!("{quoted},{extra}"), 1), "extra".to_owned())
            }
        };
        prop_assume!(forged != text);
        let resealed = reseal_bytes(forged.as_bytes()).unwrap();
        let loaded: Compacted<v1::State> = serde_json::from_slice(&resealed).unwrap();
        prop_assert!(loaded.verify_seal());
        match compactor().rehydrate_blocking(&loaded, &NoReacquire) {
            Err(CompactionError::SchemaChanged { state_type, difference }) => {
                prop_assert!(state_type.ends_with("v1::State"));
                prop_assert!(difference.contains(&format!("`{named}`")), "{}", difference);
            }
            other => prop_assert!(false, "changed field set accepted: {:?}", other.err()),
        }
    }
}

#[test]
fn a_format_1_checkpoint_is_refused_with_its_format() {
    let bytes = v1_checkpoint();
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let object = value.as_object_mut().unwrap();
    object.remove("schema");
    object.insert("format".into(), 1.into());
    let old = serde_json::to_vec(&value).unwrap();
    let loaded: Compacted<v1::State> = serde_json::from_slice(&old).unwrap();
    match compactor().rehydrate_blocking(&loaded, &NoReacquire) {
        Err(CompactionError::CheckpointFormat { found, supported }) => {
            assert_eq!((found, supported), (1, 4));
        }
        other => panic!("format-1 checkpoint accepted: {:?}", other.err()),
    }
}
