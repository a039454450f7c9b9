//! `#[cfg]`-gated fields: a compiled-out field is absent from the schema, a compiled-in one present.
use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct State {
    #[protected]
    goal: String,
    #[cfg(any())]
    #[protected]
    never_compiled: NotEvenAType,
    #[cfg(test)]
    #[redundant]
    always_compiled: Vec<String>,
    // Compiled out, and unclassified: the derive never sees a field the compiler removed.
    #[cfg(any())]
    unclassified_but_gone: String,
}

#[test]
fn cfg_gated_fields_follow_the_compiler() {
    let schema = State::schema();
    assert!(schema.field("goal").is_some());
    assert!(schema.field("never_compiled").is_none());
    assert!(schema.field("always_compiled").is_some());
    assert_eq!(schema.fields().len(), 2);
}
