use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Ledgered {
    #[effect(idempotent = true)]
    log: EffectLog,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant]
    inner: Option<Ledgered>,
}

fn main() {}
