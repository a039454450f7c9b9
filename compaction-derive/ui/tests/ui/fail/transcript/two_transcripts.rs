//! A state has one conversation: a second `#[transcript]` field is refused at its name.
use compaction::{Compactable, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript]
    chat: Transcript,
    #[transcript]
    side_chat: Transcript,
}

fn main() {}
