use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    path: String,
    #[derivable(pointer = "file://{path}", sumarize)]
    contents: String,
}

fn main() {}
