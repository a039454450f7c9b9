use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[derivable(summarize)]
    contents: String,
}

fn main() {}
