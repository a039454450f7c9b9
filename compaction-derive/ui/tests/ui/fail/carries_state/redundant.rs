//! Every std container of protected or effect state carries that state: as a `#[redundant]`
//! field it would be evicted whole, so each field below is refused, each with its own error.
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, LinkedList, VecDeque};
use std::rc::Rc;
use std::sync::{Arc, Mutex, RwLock};

#[derive(Compactable, Serialize, Deserialize, Default)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Step {
    #[protected]
    number: u32,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Ledgered {
    #[effect(idempotent = true)]
    log: EffectLog,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[redundant]
    direct: Step,
    #[redundant]
    effect_log: EffectLog,
    #[redundant]
    effect_only_state: Option<Ledgered>,
    #[redundant]
    boxed_step: Box<Step>,
    #[redundant]
    maybe_step: Option<Step>,
    #[redundant]
    option_box: Option<Box<Step>>,
    #[redundant]
    steps: Vec<Step>,
    #[redundant]
    box_vec: Box<Vec<Step>>,
    #[redundant]
    boxed_slice: Box<[Step]>,
    #[redundant]
    step_pair: [Step; 2],
    #[redundant]
    step_queue: VecDeque<Step>,
    #[redundant]
    step_list: LinkedList<Step>,
    #[redundant]
    step_heap: BinaryHeap<Step>,
    #[redundant]
    step_set: BTreeSet<Step>,
    #[redundant]
    step_hash_set: HashSet<Step>,
    #[redundant]
    btree_map_value: BTreeMap<u32, Step>,
    #[redundant]
    hash_map_value: HashMap<String, Step>,
    #[redundant]
    hash_map_key: HashMap<Step, String>,
    #[redundant]
    tuple: (u32, String, Step),
    #[redundant]
    tuple_two_carriers: (Step, EffectLog),
    #[redundant]
    mutex: Mutex<Step>,
    #[redundant]
    rw_lock: RwLock<EffectLog>,
    #[redundant]
    step_cell: Cell<Step>,
    #[redundant]
    ref_cell: RefCell<Step>,
    #[redundant]
    shared_step: Rc<Step>,
    #[redundant]
    arc: Arc<EffectLog>,
    #[redundant]
    cow: Cow<'static, [Step]>,
}

fn main() {}
