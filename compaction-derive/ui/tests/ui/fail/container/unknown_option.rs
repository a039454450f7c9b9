use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
#[compaction(krate = "compaction")]
struct State {
    #[protected]
    goal: String,
}

fn main() {}
