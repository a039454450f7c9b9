use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    goal: String,
    #[protected]
    #[redundant]
    plan_step: u32,
    #[derivable(pointer = "file://{config_path}")]
    config_contents: String,
    #[redundant(sumarize)]
    tool_output: Vec<String>,
    #[effect]
    migrations: EffectLog,
}

fn main() {}
