use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
#[compaction(crate = "not a path")]
struct State {
    #[protected]
    goal: String,
}

fn main() {}
