use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Default)]
struct Listing {
    entries: Vec<String>,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant(summarize)]
    listing: Listing,
}

fn main() {}
