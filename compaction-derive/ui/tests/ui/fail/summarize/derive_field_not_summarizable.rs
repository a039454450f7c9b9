use compaction::{EffectLog, Summarizable};
use serde::Serialize;

#[derive(Summarizable, Serialize)]
struct Note {
    text: String,
    log: EffectLog,
}

fn main() {}
