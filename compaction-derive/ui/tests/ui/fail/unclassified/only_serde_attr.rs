use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[serde(rename = "goalText")]
    goal: String,
}

fn main() {}
