use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
#[compaction(crate = "agent_compaction")]
struct State {
    #[protected]
    goal: String,
}

fn main() {}
