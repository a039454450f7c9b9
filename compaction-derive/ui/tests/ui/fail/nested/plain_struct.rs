use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Plain {
    x: u32,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[nested]
    plain: Vec<Plain>,
}

fn main() {}
