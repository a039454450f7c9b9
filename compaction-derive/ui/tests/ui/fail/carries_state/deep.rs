//! State buried in containers of containers is still found: each field below is refused.
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

#[derive(Compactable, Serialize, Deserialize, Default, Clone)]
struct Step {
    #[protected]
    number: u32,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant]
    pairs: Vec<(String, Mutex<Step>)>,
    #[redundant]
    by_name: HashMap<String, Vec<Option<Box<Step>>>>,
    #[redundant]
    shared_log: Option<Arc<RwLock<EffectLog>>>,
    #[redundant]
    outcomes: BTreeMap<String, Result<u32, Vec<Step>>>,
    #[redundant]
    batches: [(u8, Cow<'static, [Step]>); 1],
}

fn main() {}
