//! `#[transcript]` on compaction state names the class it takes: `#[nested]` (an `EffectLog`:
//! `#[effect]`, in the note).
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct Subtask {
    #[protected]
    id: u32,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript]
    subtask: Subtask,
    #[transcript]
    writes: EffectLog,
}

fn main() {}
