//! A conversation is a `#[transcript]`: evicted whole (`#[redundant]`, `#[derivable]`), inside a
//! container, or kept whole (`#[protected]`), its user messages would be dropped or never
//! planned as a chat: each field below is refused.
use compaction::{Compactable, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct State {
    #[protected]
    repo_root: String,
    #[redundant]
    chat: Transcript,
    #[derivable(pointer = "file://{repo_root}/chat.json")]
    saved_chat: Transcript,
    #[redundant]
    old_chats: Vec<Transcript>,
    #[protected]
    kept_chat: Transcript,
}

fn main() {}
