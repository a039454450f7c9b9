use compaction::{Compactable, Message};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript]
    chat: Vec<Message>,
}

fn main() {}
