use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    #[protected(pin)]
    goal: String,
}

fn main() {}
