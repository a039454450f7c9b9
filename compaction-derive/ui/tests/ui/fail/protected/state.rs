//! `#[protected]` on a type with compaction classes of its own (a forgotten `#[nested]`) would
//! keep or spill it whole, pinned fields and live effects included: each field below is refused.
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Subtask {
    #[protected(pin)]
    title: String,
    #[effect(idempotent = false)]
    writes: EffectLog,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    subtask: Subtask,
    #[protected(pin)]
    pinned: Subtask,
    #[protected]
    maybe: Option<Subtask>,
    #[protected]
    all: Vec<Subtask>,
    #[protected]
    in_box: Box<Subtask>,
    #[protected]
    log: EffectLog,
    #[protected]
    mutex: Mutex<Subtask>,
    #[protected]
    tuple: (u32, Subtask),
}

fn main() {}
