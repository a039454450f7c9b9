use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[effect(idempotent = "yes")]
    migrations: EffectLog,
}

fn main() {}
