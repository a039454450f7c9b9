use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    x: String,
    #[derivable(pointer = "file://{x")]
    contents: String,
}

fn main() {}
