//! Fixture of the checkpoint fuzz target: the workspace's shared state with every field class
//! (`compaction-fixtures`, also used by the tests and benches), a store filled by compacting its
//! rich value at several budgets, and a `Reacquire` that answers any pointer.

pub use compaction_fixtures::checkpoint::reseal;
pub use compaction_fixtures::every_class::PropState;
use compaction::{Compactor, Extractive, FnReacquire, MemoryStore, ReacquireError, Tokenizer};
use compaction_fixtures::every_class::rich_state;
use std::sync::OnceLock;

/// The compactor, its store and the seed checkpoints.
pub struct Fixture {
    /// Rehydrates with the shared store.
    pub compactor: Compactor,
    /// Serialized checkpoints of `rich_state()` at several budgets.
    pub seeds: Vec<Vec<u8>>,
}

/// Budgets from ample to tight.
pub const BUDGETS: [usize; 5] = [100_000, 3_000, 1_500, 1_000, 700];

/// Builds the fixture once.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let store = MemoryStore::new();
        let state = rich_state();
        let mut seeds = Vec::new();
        for budget in BUDGETS {
            let compactor = build(budget, store.clone());
            if let Ok(c) = compactor.compact_blocking(&state) {
                seeds.push(serde_json::to_vec(&c).expect("serialize"));
            }
        }
        Fixture {
            compactor: build(100_000, store),
            seeds,
        }
    })
}

fn build(budget: usize, store: MemoryStore) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::Heuristic)
        .summarizer(Extractive)
        .store(store)
        .build()
        .expect("valid config")
}

/// The closure type behind [`reacquirer`].
pub type ReacquireFn = fn(&str, &str) -> Result<serde_json::Value, ReacquireError>;

/// A `Reacquire` that answers every pointer with a string.
pub fn reacquirer() -> FnReacquire<ReacquireFn> {
    fn answer(_field: &str, pointer: &str) -> Result<serde_json::Value, ReacquireError> {
        if pointer.contains("fail") {
            return Err("refused".into());
        }
        Ok(serde_json::Value::String(format!("re-read from {pointer}")))
    }
    FnReacquire::new(answer as ReacquireFn)
}
