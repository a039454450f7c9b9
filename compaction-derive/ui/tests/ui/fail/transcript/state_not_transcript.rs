//! `#[transcript]` on compaction state names the class it takes: `#[nested]` (an `EffectLog`:
//! `#[effect]`, in the note).
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct Subtask {
    #[protected]
    id: u32,
}

// One struct each: a state has at most one `#[transcript]` field.
#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript]
    subtask: Subtask,
}

#[derive(Compactable, Serialize, Deserialize)]
struct Ledgered {
    #[transcript]
    writes: EffectLog,
}

fn main() {}
