//! Carriers of protected or effect state as `#[derivable]` fields: evicted whole (the pointer
//! re-acquires a value, not the classes inside it), so each field below is refused.
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Compactable, Serialize, Deserialize, Default)]
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Subtask {
    #[protected]
    blocked_on: String,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    id: u32,
    #[derivable(pointer = "tasks://{id}")]
    subtask: Subtask,
    #[derivable(pointer = "tasks://{id}")]
    subtasks: Vec<Subtask>,
    #[derivable(pointer = "tasks://{id}/ok")]
    result_ok: Result<Subtask, String>,
    #[derivable(pointer = "tasks://{id}/err")]
    result_err: Result<String, EffectLog>,
    #[derivable(pointer = "tasks://{id}/pair")]
    tuple: (String, Mutex<EffectLog>),
    #[derivable(pointer = "tasks://{id}/index")]
    btree_map_key: BTreeMap<Subtask, u32>,
}

fn main() {}
