use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State(#[protected] String, #[redundant] Vec<String>);

fn main() {}
