//! A conversation in a field of any other class is refused with the class it takes:
//! `#[transcript]`.
use compaction::{Compactable, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct State {
    #[protected]
    repo_root: String,
    #[redundant]
    evicted: Transcript,
    #[protected]
    kept: Transcript,
    #[derivable(pointer = "file://{repo_root}/chat.json")]
    saved: Transcript,
    #[nested]
    nested: Transcript,
    #[effect(idempotent = true)]
    writes: Transcript,
}

fn main() {}
