use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
enum Phase {
    Planning,
    Running { step: u32 },
}

fn main() {}
