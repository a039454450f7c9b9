use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[derivable(pointer = "https://ci.example/{url}")]
    url: String,
}

fn main() {}
