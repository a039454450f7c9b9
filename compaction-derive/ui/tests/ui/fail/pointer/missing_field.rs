use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    config_path: String,
    #[derivable(pointer = "file://{config_pth}")]
    config_contents: String,
}

fn main() {}
