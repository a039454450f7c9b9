use compaction::{Compactable, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript(pin_user = true)]
    chat: Transcript,
}

fn main() {}
