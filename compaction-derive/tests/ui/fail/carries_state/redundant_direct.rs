use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Subtask {
    #[protected]
    blocked_on: String,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant]
    subtask: Subtask,
}

fn main() {}
