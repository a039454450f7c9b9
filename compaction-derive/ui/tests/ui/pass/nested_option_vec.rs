//! `#[nested]` on a struct, and on `Option`, `Vec` and `Box` of it: the inner fields keep their paths.
use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Subtask {
    #[protected]
    title: String,
    #[protected]
    blocked_on: Option<String>,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct State {
    #[nested]
    current: Subtask,
    #[nested]
    next: Option<Subtask>,
    #[nested]
    subtasks: Vec<Subtask>,
    #[nested]
    boxed: Box<Subtask>,
}

#[test]
fn nested_option_vec_box() {
    let schema = State::schema();
    assert!(schema.field("current.blocked_on").is_some());
    assert!(schema.field("next.title").is_some());
    assert!(schema.field("subtasks[].title").is_some());
    assert!(schema.field("boxed.title").is_some());
}
