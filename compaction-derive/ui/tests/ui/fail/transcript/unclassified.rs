//! An unclassified `Transcript` field: the error says `#[transcript]`.
use compaction::{Compactable, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    chat: Transcript,
}

fn main() {}
