use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[effect(idempotent = true)]
    #[nested]
    log: EffectLog,
}

fn main() {}
