use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant]
    config_path: String,
    #[derivable(pointer = "file://{config_path}")]
    config_contents: String,
}

fn main() {}
