//! `#[transcript]` on plain data: the message says a chat history is a `Transcript` and names
//! the classes plain data takes.
use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript]
    notes: String,
}

fn main() {}
