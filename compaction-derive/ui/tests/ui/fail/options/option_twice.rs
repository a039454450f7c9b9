use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant(summarize, summarize)]
    output: String,
}

fn main() {}
