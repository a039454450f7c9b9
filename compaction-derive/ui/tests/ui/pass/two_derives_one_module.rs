//! Two derives side by side: nothing they generate collides.
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct First {
    #[protected]
    goal: String,
    #[effect(idempotent = false)]
    log: EffectLog,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Second {
    #[protected]
    goal: String,
    #[redundant]
    output: String,
    #[nested]
    first: First,
}

#[test]
fn two_derives_side_by_side() {
    assert_eq!(First::schema().type_name(), "First");
    assert_eq!(Second::schema().type_name(), "Second");
    assert!(Second::schema().field("first.log").is_some());
}
