//! Shared fixture for the checkpoint fuzz target: a state type with every field class, a store
//! filled by compacting it at several budgets, and a way to re-seal a mutated checkpoint so the
//! fuzzer reaches the checks behind the seal.

use compaction::{
    Compactable, Compacted, Compactor, ContentHash, Effect, EffectLog, EffectStatus, Extractive,
    FnReacquire, MemoryStore, ReacquireError, Tokenizer,
};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// A nested element.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Item {
    /// Protected id.
    #[protected]
    pub id: String,
    /// Redundant notes.
    #[redundant]
    pub notes: Vec<String>,
}

/// Every field class, nested, `Vec<nested>` and `Option<nested>`.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct FuzzState {
    /// Pinned.
    #[protected(pin)]
    pub constraints: Vec<String>,
    /// Protected, spillable.
    #[protected]
    pub path: String,
    /// Protected number.
    #[protected]
    pub step: u32,
    /// Derivable.
    #[derivable(pointer = "file://{path}")]
    pub contents: String,
    /// Derivable, summarizable.
    #[derivable(pointer = "ci://{step}", summarize)]
    pub log: String,
    /// Redundant, summarizable.
    #[redundant(summarize)]
    pub transcript: String,
    /// Redundant.
    #[redundant]
    pub outputs: Vec<String>,
    /// Non-idempotent effects.
    #[effect(idempotent = false)]
    pub effects: EffectLog,
    /// Idempotent effects.
    #[effect(idempotent = true)]
    pub reads: EffectLog,
    /// Nested.
    #[nested]
    pub item: Item,
    /// `Vec<nested>`.
    #[nested]
    pub items: Vec<Item>,
    /// `Option<nested>`.
    #[nested]
    pub maybe: Option<Item>,
}

/// The sample state the seeds are made from.
pub fn sample() -> FuzzState {
    let mut s = FuzzState {
        constraints: vec!["never touch /etc/prod".into(), "numpy<2.0".into()],
        path: "/srv/app/config.toml".into(),
        step: 7,
        contents: "[db]\nurl = \"postgres://db\"\n".repeat(20),
        log: "step ok\n".repeat(200),
        transcript: "user: go on\n".repeat(200),
        outputs: (0..40).map(|i| format!("ls {i}: a b c")).collect(),
        item: Item {
            id: "req-7f3a".into(),
            notes: vec!["n".into()],
        },
        items: vec![
            Item {
                id: "a".into(),
                notes: vec!["x".repeat(100)],
            },
            Item {
                id: "b".into(),
                notes: vec![],
            },
        ],
        maybe: Some(Item {
            id: "m".into(),
            notes: vec!["y".into()],
        }),
        ..FuzzState::default()
    };
    for i in 0..6 {
        let key = format!("mig-{i}");
        let mut e = Effect::new("apply_migration", "db://users", &key)
            .with_payload(serde_json::json!({ "rows": i * 100 }));
        if i > 0 {
            e = e.depends_on(format!("mig-{}", i - 1));
        }
        s.effects.record(e).unwrap();
        if i < 4 {
            s.effects.begin(&key).unwrap();
            s.effects.commit(&key).unwrap();
        } else if i == 4 {
            s.effects.begin(&key).unwrap();
        }
    }
    s.reads
        .record(Effect::new("read", "http://x", "r-1").with_status(EffectStatus::Committed))
        .unwrap();
    s
}

/// The compactor, its store and the seed checkpoints.
pub struct Fixture {
    /// Rehydrates with the shared store.
    pub compactor: Compactor,
    /// Serialized checkpoints of `sample()` at several budgets.
    pub seeds: Vec<Vec<u8>>,
}

/// Budgets from ample to tight.
pub const BUDGETS: [usize; 4] = [100_000, 1500, 900, 700];

/// Builds the fixture once.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let store = MemoryStore::new();
        let state = sample();
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

/// Re-computes the seal of a checkpoint (as a forger who knows the format would), so the
/// checks behind it are reached: the seal is the SHA-256 of the checkpoint's JSON without its
/// trailing `seal` field.
pub fn reseal<S>(compacted: &Compacted<S>) -> Option<Compacted<S>> {
    let bytes = serde_json::to_vec(compacted).ok()?;
    let at = find_last(&bytes, b",\"seal\":\"")?;
    let mut body = bytes[..at].to_vec();
    body.push(b'}');
    let seal = ContentHash::of(&body);
    body.pop();
    body.extend_from_slice(format!(",\"seal\":\"{}\"}}", seal.to_hex()).as_bytes());
    serde_json::from_slice(&body).ok()
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}
