use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[effect]
    migrations: EffectLog,
}

fn main() {}
