//! Raw identifiers: `r#type` is `type` in the schema and in pointer placeholders.
use compaction::{Compactable, FieldClass};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct State {
    #[protected]
    r#type: String,
    #[protected]
    r#match: u32,
    #[derivable(pointer = "kind://{type}/{match}")]
    r#ref: String,
}

#[test]
fn raw_identifiers_keep_their_names() {
    let schema = State::schema();
    assert_eq!(
        schema.field("type").unwrap().class,
        FieldClass::Protected { pin: false }
    );
    assert!(schema.field("match").is_some());
    assert!(schema.field("ref").is_some());
}
