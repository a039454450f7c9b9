use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Handle {
    id: u64,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant]
    handle: Handle,
}

fn main() {}
