use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    path: String,
    #[derivable(pointer = "file://{path}", pointer = "https://mirror/{path}")]
    contents: String,
}

fn main() {}
