//! What a compaction does with the values it evicts: nothing proportional to them. Counted
//! (bytes hashed, nodes walked by the round-trip check), never timed: the field engine's
//! regression (issue 20, item 7) came from work on every evicted element and on every byte of a
//! summary source done twice, and these counts fail if it comes back.

use crate::compactor::Compactor;
use crate::effects::record::{Effect, EffectLog};
use crate::state::compactable::{Compactable, Parts, Visitor};
use crate::state::path::RebuildError;
use crate::state::schema::{FieldClass, Schema};
use crate::store::{take_work, ContentHash, MemoryStore, Store, StoreError};
use crate::summaries::Extractive;
use crate::tokens::Tokenizer;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// A record the check must walk: it holds a float.
#[derive(Serialize, Deserialize, Default, Clone)]
struct Scored {
    label: String,
    score: f64,
}

/// An agent whose state is mostly what it evicts.
#[derive(Default)]
struct Heavy {
    task: String,
    outputs: Vec<String>,
    scores: Vec<Scored>,
    docs: Vec<String>,
    effects: EffectLog,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        Schema::builder("Heavy")
            .field("task", FieldClass::Protected { pin: true }, "String")
            .field(
                "outputs",
                FieldClass::Redundant { summarize: false },
                "Vec<String>",
            )
            .field(
                "scores",
                FieldClass::Redundant { summarize: false },
                "Vec<Scored>",
            )
            .field(
                "docs",
                FieldClass::Derivable {
                    pointer_template: "file://docs",
                    summarize: true,
                },
                "Vec<String>",
            )
            .field(
                "effects",
                FieldClass::Effect { idempotent: false },
                "EffectLog",
            )
            .build()
    })
}

impl Compactable for Heavy {
    fn schema() -> &'static Schema {
        schema()
    }
    fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V) {
        visitor.protected("task", true, &self.task);
        visitor.redundant("outputs", &self.outputs);
        visitor.redundant("scores", &self.scores);
        visitor.derivable_summarizable(
            "docs",
            &|p: &mut String| p.push_str("file://docs"),
            &self.docs,
        );
        visitor.effect("effects", false, &self.effects);
    }
    fn rebuild(parts: &mut Parts) -> Result<Self, RebuildError> {
        Ok(Heavy {
            task: parts.protected("task")?,
            outputs: parts.redundant("outputs")?,
            scores: parts.redundant("scores")?,
            docs: parts.derivable_or_default("docs")?,
            effects: parts.effect("effects")?,
        })
    }
}

/// `outputs` evicted values of about 200 bytes, 400 scored records, 40 documents of about
/// 2 KB (summarized), 1,000 settled effect records (spilled).
fn heavy(outputs: usize) -> Heavy {
    let line = "test api::tests::retry_after_timeout ... ok; 3 passed, 0 failed in 0.42s; ";
    let mut effects = EffectLog::new();
    for i in 0..1_000 {
        let key = format!("eff-{i:05}");
        effects
            .record(Effect::new(
                "apply_migration",
                format!("db://app/t{i}"),
                &key,
            ))
            .expect("a new key");
        effects.begin(&key).expect("recorded");
        effects.commit(&key).expect("in flight");
    }
    Heavy {
        task: "ship the billing fix; never push to main".into(),
        outputs: (0..outputs).map(|i| format!("{i}: {line}{line}")).collect(),
        scores: (0..400)
            .map(|i| Scored {
                label: format!("benchmark run {i} of the nightly suite"),
                score: f64::from(i) / 7.0,
            })
            .collect(),
        docs: (0..40)
            .map(|i| {
                format!(
                    "Document {i}. {}",
                    "The migration ran once; retry only after approval. ".repeat(40)
                )
            })
            .collect(),
        effects,
    }
}

/// A store that keeps nothing and checks nothing: the engine's own hashing, counted alone
/// (`MemoryStore` verifies every new blob against its address, once more).
struct Discard;

impl Store for Discard {
    async fn put(&self, _: &ContentHash, _: &[u8]) -> Result<(), StoreError> {
        Ok(())
    }
    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        Err(StoreError::NotFound { hash: *hash })
    }
}

/// Bytes hashed and nodes walked by the round-trip check during one compaction.
fn work(state: &Heavy) -> (usize, usize) {
    work_with(state, MemoryStore::new())
}

fn work_with(state: &Heavy, store: impl Store + 'static) -> (usize, usize) {
    let compactor = Compactor::builder()
        .budget(3_000)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(store)
        .build()
        .expect("valid configuration");
    take_work();
    let compacted = compactor.compact_blocking(state).expect("compacts");
    let work = take_work();
    let report = compacted.report().to_string();
    assert!(report.contains("tombstoned: outputs, scores"), "{report}");
    assert!(report.contains("summarized: docs"), "{report}");
    assert!(report.contains("spilled: effects"), "{report}");
    work
}

#[test]
fn evicted_values_are_neither_walked_nor_hashed() {
    let (small, large) = (heavy(2_000), heavy(20_000));
    let (hashed_small, walked_small) = work(&small);
    let (hashed_large, walked_large) = work(&large);
    // 18,000 more evicted strings (about 3.6 MB): not one more node walked, not one more byte
    // hashed beyond the window's own lines.
    assert_eq!(walked_large, walked_small);
    assert!(
        hashed_large.abs_diff(hashed_small) < 1_024,
        "{hashed_small} -> {hashed_large} bytes hashed"
    );
    // The check walks what could hold a float (each scored record and its score), not the
    // strings: 1 + 400 + 400 nodes.
    assert!(walked_small <= 810, "{walked_small} nodes walked");
}

#[test]
fn what_a_compaction_stores_is_hashed_once() {
    let state = heavy(2_000);
    let (hashed, _) = work_with(&state, Discard);
    // The summary source (the documents' JSON) and the spilled records' blob are hashed once
    // each (their addresses; the summary cache's key reuses the source's hash); the seal
    // over the checkpoint and the small blobs are the rest.
    let source = serde_json::to_vec(&state.docs).expect("serializes").len();
    let records = serde_json::to_vec(&state.effects)
        .expect("serializes")
        .len();
    let once = source + records;
    assert!(
        hashed < once + once / 4,
        "{hashed} bytes hashed for {source} B of source and {records} B of records"
    );
}

/// A state that is one conversation.
struct Chat {
    chat: crate::conversation::transcript::Transcript,
}

impl Compactable for Chat {
    fn schema() -> &'static Schema {
        static SCHEMA: OnceLock<Schema> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            Schema::builder("Chat")
                .field(
                    "chat",
                    FieldClass::Transcript {
                        keep_recent: 3,
                        pin_user: false,
                    },
                    "Transcript",
                )
                .build()
        })
    }
    fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V) {
        visitor.transcript("chat", 3, false, &self.chat);
    }
    fn rebuild(parts: &mut Parts) -> Result<Self, RebuildError> {
        Ok(Chat {
            chat: parts.redundant("chat")?,
        })
    }
}

/// Issue 20.6: a re-compaction after one appended turn hashes what is new (the turn, what it
/// pushes out of the window, the markers) and the checkpoint's record, not the window it sends
/// again: the seal covers the messages sent before through the digests the planner kept. What
/// still grows with the window is the record the seal covers: a slot and a digest per message
/// sent (about 120 bytes of JSON each, here a fifth of the messages' bytes).
#[test]
fn a_recompaction_hashes_what_is_new_not_the_window_it_sends_again() {
    use crate::conversation::transcript::{Message, Transcript};
    let reply = |turn: usize| {
        format!("Step {turn}: the migration ran once and the retry waits for approval. ").repeat(14)
    };
    let mut state = Chat {
        chat: Transcript::new(),
    };
    for turn in 0..2_000 {
        state.chat.push(Message::user(format!("and then {turn}?")));
        state.chat.push(Message::assistant(reply(turn)));
    }
    let compactor = Compactor::builder()
        .budget(64_000)
        .token_counter(Tokenizer::O200kBase)
        .store(Discard)
        .build()
        .expect("valid configuration");
    compactor.compact_blocking(&state).expect("compacts");
    for turn in 2_000..2_005 {
        let (user, answer) = (Message::user(format!("and then {turn}?")), reply(turn));
        let appended = user.content.len() + answer.len();
        state.chat.push(user);
        state.chat.push(Message::assistant(answer));
        take_work();
        let compacted = compactor.compact_blocking(&state).expect("compacts");
        let (hashed, _) = take_work();
        let window: usize = compacted.messages().iter().map(|m| m.content.len()).sum();
        assert!(
            hashed < window / 3,
            "turn {turn}: {hashed} bytes hashed for {appended} appended, {window} sent"
        );
    }
}
