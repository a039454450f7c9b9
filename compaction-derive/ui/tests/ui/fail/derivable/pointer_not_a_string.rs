use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[derivable(pointer = 42)]
    contents: String,
}

fn main() {}
