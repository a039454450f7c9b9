use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Subtask {
    #[protected]
    blocked_on: String,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    run: u32,
    #[derivable(pointer = "https://ci.example/runs/{run}", summarize)]
    subtask: Subtask,
}

fn main() {}
