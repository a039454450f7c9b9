//! A user who renamed the dependency points the derive at it. The rename
//! (`extern crate compaction as agent_compaction;`) sits at the root of the test crate, `ui.rs`,
//! where it puts `agent_compaction` in the extern prelude as a Cargo rename does.
use agent_compaction::{Compactable, Summarizable};
use serde::{Deserialize, Serialize};

// No `compaction` name imported here.
mod inner {
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

#[test]
fn renamed_crate_path() {
    assert_eq!(inner::State::schema().fields().len(), 3);
    assert_eq!(Absolute::schema().fields().len(), 1);
}
