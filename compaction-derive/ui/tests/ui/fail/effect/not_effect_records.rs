use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[effect(idempotent = false)]
    migrations: Vec<String>,
}

fn main() {}
