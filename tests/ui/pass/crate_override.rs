// A user who renamed the dependency points the derive at it.
extern crate compaction as agent_compaction;

use agent_compaction::{Compactable, Summarizable};
use serde::{Deserialize, Serialize};

// No `compaction` name in scope at all.
mod inner {
    use super::agent_compaction;
    use serde::{Deserialize, Serialize};

    #[derive(agent_compaction::Compactable, Serialize, Deserialize, Default)]
    #[compaction(crate = "agent_compaction")]
    pub struct State {
        #[protected]
        pub goal: String,
        #[redundant(summarize)]
        pub notes: Vec<super::Note>,
        #[effect(idempotent = true)]
        pub log: agent_compaction::EffectLog,
    }
}

#[derive(Summarizable, Serialize, Deserialize, Default)]
#[compaction(crate = "agent_compaction")]
pub struct Note {
    text: String,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
#[compaction(crate = "::agent_compaction")]
struct Absolute {
    #[protected]
    x: u32,
}

fn main() {
    assert_eq!(inner::State::schema().fields().len(), 3);
    assert_eq!(Absolute::schema().fields().len(), 1);
}
