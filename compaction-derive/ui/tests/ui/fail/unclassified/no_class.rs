use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    goal: String,
    scratch: String,
}

fn main() {}
