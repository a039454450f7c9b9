//! A carrier under `summarize` is refused twice over: it may not be evicted, and a summarizer may
//! never see it.
use compaction::Compactable;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Step {
    #[protected]
    number: u32,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    id: u32,
    #[redundant(summarize)]
    mutex: Mutex<Step>,
    #[derivable(pointer = "runs://{id}", summarize)]
    tuple: (String, Step),
}

fn main() {}
