use compaction::Compactable;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

#[derive(Compactable, Serialize, Deserialize)]
struct Subtask {
    #[protected]
    title: String,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[nested]
    subtasks: HashMap<String, Subtask>,
}

fn main() {}
