use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant(summarize)]
    migrations: Vec<EffectLog>,
}

fn main() {}
