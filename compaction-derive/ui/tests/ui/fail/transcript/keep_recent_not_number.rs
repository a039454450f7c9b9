use compaction::{Compactable, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript(keep_recent = "3")]
    chat: Transcript,
}

fn main() {}
