//! Plain data in every std container stays accepted in every class: only a container of
//! protected or effect state is refused (`fail/carries_state`, `fail/protected`). A derived type
//! with only `#[redundant]` fields carries no state either.
use compaction::{Compactable, Compactor, FieldClass, Summarizable};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, LinkedList, VecDeque};
use std::rc::Rc;
use std::sync::{Arc, Mutex, RwLock};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Scratch {
    #[redundant]
    lines: Vec<String>,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[protected]
    pair: (u32, String),
    #[protected]
    result: Result<u32, String>,
    #[protected(pin)]
    locked: Mutex<String>,
    #[protected]
    scratch_kept: Scratch,
    #[redundant]
    mutex: Mutex<String>,
    #[redundant]
    rw_lock: RwLock<Vec<u8>>,
    #[redundant]
    cell: Cell<u32>,
    #[redundant]
    ref_cell: RefCell<String>,
    #[redundant]
    rc: Rc<str>,
    #[redundant]
    arc: Arc<String>,
    #[redundant]
    boxed_slice: Box<[u8]>,
    #[redundant]
    array: [u8; 4],
    #[redundant]
    vec_deque: VecDeque<u8>,
    #[redundant]
    linked_list: LinkedList<String>,
    #[redundant]
    binary_heap: BinaryHeap<u32>,
    #[redundant]
    btree_set: BTreeSet<String>,
    #[redundant]
    hash_set: HashSet<String>,
    #[redundant]
    hash_map: HashMap<String, (u32, Option<String>)>,
    #[redundant]
    cow: Cow<'static, str>,
    #[redundant]
    tuple: (u32, String, Vec<u8>),
    #[redundant]
    scratch: Mutex<Scratch>,
    #[derivable(pointer = "runs://{pair}")]
    outcome: Result<String, u32>,
    #[derivable(pointer = "runs://{pair}/index")]
    index: BTreeMap<String, (u32, String)>,
}

#[derive(Summarizable, Serialize, Deserialize, Default)]
struct Note {
    text: String,
}

/// Generic fields filled in with plain data.
#[derive(Compactable, Serialize, Deserialize, Default)]
struct Generic<R, P> {
    #[protected]
    kept: P,
    #[redundant]
    scratch: R,
}

/// The `Sync` part of the containers above (`compact` takes state that may cross threads).
#[derive(Compactable, Serialize, Deserialize)]
struct Shared {
    #[protected]
    pair: (u32, String),
    #[protected(pin)]
    locked: Mutex<String>,
    #[redundant]
    mutex: Mutex<String>,
    #[redundant]
    rw_lock: RwLock<Vec<String>>,
    #[redundant]
    arc: Arc<String>,
    #[redundant]
    linked_list: LinkedList<String>,
    #[redundant]
    scratch: Mutex<Scratch>,
    #[derivable(pointer = "runs://{pair}/index")]
    index: BTreeMap<String, (u32, String)>,
}

#[test]
fn plain_data_in_every_container_is_accepted() {
    let schema = State::schema();
    assert_eq!(schema.fields().len(), 23);
    assert_eq!(
        schema.field("locked").unwrap().class,
        FieldClass::Protected { pin: true }
    );
    // A plain Compactable kept whole is one protected field, not nested.
    assert!(schema.field("scratch_kept.lines").is_none());
    assert_eq!(
        schema.field("mutex").unwrap().class,
        FieldClass::Redundant { summarize: false }
    );
    // Generic fields filled in with plain data, std's and derived.
    assert_eq!(
        Generic::<Mutex<String>, (u32, String)>::schema()
            .fields()
            .len(),
        2
    );
    assert_eq!(
        Generic::<Mutex<Scratch>, Vec<Note>>::schema()
            .fields()
            .len(),
        2
    );
}

#[test]
fn plain_containers_compact_with_their_values_in_the_window() {
    let compactor = Compactor::builder().budget(4000).build().unwrap();
    let compacted = compaction::block_on(compactor.compact(&shared())).unwrap();
    let window = compacted.render();
    let expected = [
        "numpy < 2.0",
        "scratch in a mutex",
        "locked vec",
        "arc",
        "linked",
        "scratch line",
        "thirteen",
    ];
    for value in expected {
        assert!(window.contains(value), "`{value}` missing from:\n{window}");
    }
}

fn shared() -> Shared {
    Shared {
        pair: (7, "seven".into()),
        locked: Mutex::new("numpy < 2.0".into()),
        mutex: Mutex::new("scratch in a mutex".into()),
        rw_lock: RwLock::new(vec!["locked vec".into()]),
        arc: Arc::new("arc".into()),
        linked_list: LinkedList::from(["linked".to_string()]),
        scratch: Mutex::new(Scratch {
            lines: vec!["scratch line".into()],
        }),
        index: BTreeMap::from([("entry".to_string(), (13, "thirteen".to_string()))]),
    }
}
