//! The incremental rows' suite (format 4, issue 45) every `CheckpointStore` runs, through the
//! trait object:
//!
//! - parts shared: a checkpoint row is a manifest; a request that only appends writes the parts
//!   of its new messages and a few of its own (front, window record, planner tables), never the
//!   messages the last checkpoint holds; two agents with the same content share every part;
//! - tampered parts: a changed byte in any part is `Integrity` on load (checked against the
//!   address the manifest names), and the checkpoint loads again once the bytes are put back;
//!   a manifest edited to name another stored part (its checksum recomputed) loads with a
//!   broken seal, which rehydration refuses;
//! - format 3: whole rows stored by the previous version (`tests/fixtures/format3.json`, written
//!   by [`write_format3_fixture`] at the commit before format 4) load and rehydrate to the state
//!   that saved them, and the next save writes a manifest.

use crate::conformance::checkpoint::Fixture;
use compaction::{
    block_on, CheckpointError, CheckpointStore, Compactable, Compacted, CompactionError, Compactor,
    ContentHash, Message, NoReacquire, Store, ToolCall, Transcript,
};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// A coding agent's state: a pinned rule and its conversation.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PartsAgent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    chat: Transcript,
}

/// The budget the suite's compactor plans for: small enough for compaction points.
const BUDGET: usize = 1_500;

fn compactor<T: Store + Clone + 'static>(store: &T) -> Compactor {
    Compactor::builder()
        .budget(BUDGET)
        .store(store.clone())
        .build()
        .unwrap()
}

/// Turn `turn` of a deterministic session: a user ask, a tool call and its result (some large,
/// so older ones are paged or tombstoned), and the answer.
fn play_turn(state: &mut PartsAgent, turn: usize) {
    let chat = &mut state.chat;
    chat.push(Message::user(format!(
        "turn {turn}: check service {}",
        turn % 7
    )));
    let id = format!("call_{turn}");
    chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new(
            &id,
            "read_log",
            serde_json::json!({ "service": format!("svc-{}", turn % 7) }),
        )],
    ));
    let size = if turn.is_multiple_of(3) { 60 } else { 4 };
    chat.push(Message::tool_result(
        &id,
        format!("log line {turn}: status ok\n").repeat(size),
    ));
    chat.push(Message::assistant(format!("svc-{} is healthy", turn % 7)));
}

fn fresh() -> PartsAgent {
    PartsAgent {
        rules: vec!["never touch /etc/prod".into()],
        chat: Transcript::new(),
    }
}

fn row_parts(store: &dyn CheckpointStore, agent: &str) -> Vec<ContentHash> {
    let row = block_on(store.load_row(agent)).unwrap().expect("a row");
    assert!(row.is_manifest(), "every built-in store keeps manifests");
    let row = block_on(store.read_parts(row)).unwrap();
    assert!(row.parts_needed().unwrap().is_empty(), "every part is held");
    row.parts().iter().map(|p| *p.hash()).collect()
}

/// Runs every part of the suite, each on a fresh fixture.
pub fn check<T, F>(make: F)
where
    T: CheckpointStore + Store + Clone + 'static,
    F: Fn() -> Fixture<T>,
{
    parts_shared(make());
    raw_text_kept(make());
    tampered_parts(make());
    format3_rows(make());
}

fn parts_shared<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor(&fixture.store);
    let mut state = fresh();
    let mut last: Option<(HashSet<ContentHash>, usize)> = None;
    let (mut appends, mut points) = (0, 0);
    for turn in 0..40 {
        play_turn(&mut state, turn);
        let compacted = compactor.compact_blocking(&state).unwrap();
        block_on(store.save("agent", &compacted)).unwrap();
        let parts: HashSet<ContentHash> = row_parts(store, "agent").into_iter().collect();
        // A message's part is addressed by the SHA-256 of its JSON.
        let messages: Vec<ContentHash> = compacted.messages()[1..]
            .iter()
            .map(|m| ContentHash::of(&serde_json::to_vec(m).unwrap()))
            .collect();
        let sent = messages.len();
        if let Some((before, sent_before)) = &last {
            let new: Vec<&ContentHash> = parts.difference(before).collect();
            if compacted.is_compaction_point() {
                points += 1;
            } else {
                appends += 1;
                // The turn's messages are new parts; no message the last request sent is
                // written again; beside them, at most the runs the append changed, the front,
                // the window record and the planner's two tables.
                assert!(
                    sent > *sent_before,
                    "turn {turn}: an append grows the request"
                );
                let added = &messages[*sent_before..];
                let new_messages: Vec<&&ContentHash> =
                    new.iter().filter(|h| messages.contains(h)).collect();
                assert!(
                    new_messages.iter().all(|h| added.contains(h)),
                    "turn {turn}: a message the last request sent was written again"
                );
                assert!(!new_messages.is_empty(), "turn {turn}: the new messages");
                let others = new.len() - new_messages.len();
                assert!(
                    others <= 6,
                    "turn {turn}: {others} new parts beside messages"
                );
            }
        }
        last = Some((parts, sent));
    }
    assert!(
        appends > 5 && points > 2,
        "appends {appends}, points {points}"
    );
    // The manifest is small beside the whole checkpoint.
    let row = block_on(store.load_row("agent")).unwrap().unwrap();
    let loaded: Compacted<PartsAgent> = block_on(store.load("agent")).unwrap().unwrap();
    let whole = serde_json::to_vec(&loaded).unwrap().len();
    assert!(
        row.json().len() * 2 < whole,
        "{} of {whole}",
        row.json().len()
    );
    assert_eq!(
        compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap(),
        state
    );
    // Another agent with the same content names the same parts.
    block_on(store.save("twin", &loaded)).unwrap();
    assert_eq!(row_parts(store, "twin"), row_parts(store, "agent"));
}

/// Text a message keeps as it arrived (a model's argument text, a provider's opaque block with
/// its keys in the provider's order) comes back byte for byte through the parts.
fn raw_text_kept<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor(&fixture.store);
    let mut state = fresh();
    state.chat.push(Message::user("deploy it"));
    let arguments =
        compaction::transcript::ToolArguments::from_text(r#"{ "zeta": 1.50,  "alpha" : [2, 1] }"#)
            .unwrap();
    let block = r#"{"type":"thinking","thinking":"zeta before alpha","signature":"c2ln"}"#;
    let thinking = compaction::transcript::OpaquePart::from_block(
        compaction::transcript::OpaqueKind::AnthropicThinking,
        block,
    )
    .unwrap();
    state.chat.push(
        Message::assistant_with_tools("", vec![ToolCall::new("c1", "deploy", arguments)])
            .with_opaque([thinking]),
    );
    state.chat.push(Message::tool_result("c1", "done"));
    let compacted = compactor.compact_blocking(&state).unwrap();
    block_on(store.save("agent", &compacted)).unwrap();
    let loaded: Compacted<PartsAgent> = block_on(store.load("agent")).unwrap().unwrap();
    assert!(loaded.verify_seal());
    assert_eq!(loaded.messages(), compacted.messages());
    let restored = compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap();
    assert_eq!(restored, state);
    let sent = serde_json::to_string(&restored.chat.messages()[1]).unwrap();
    assert!(
        sent.contains(r#"{ "zeta": 1.50,  "alpha" : [2, 1] }"#),
        "{sent}"
    );
    assert!(
        sent.contains(r#""thinking":"zeta before alpha","signature""#),
        "{sent}"
    );
}

fn tampered_parts<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor(&fixture.store);
    let mut state = fresh();
    for turn in 0..12 {
        play_turn(&mut state, turn);
    }
    let compacted = compactor.compact_blocking(&state).unwrap();
    block_on(store.save("agent", &compacted)).unwrap();
    // Loaded once, so this process remembers the parts as verified: a part changed since is
    // still caught.
    assert!(block_on(store.load::<PartsAgent>("agent"))
        .unwrap()
        .is_some());
    let parts = row_parts(store, "agent");
    assert!(parts.len() > 5, "{parts:?}");
    for hash in &parts {
        let bytes = block_on(fixture.store.get(hash)).unwrap();
        let mut flipped = bytes.clone();
        let at = flipped.len() / 2;
        flipped[at] ^= 0x01;
        (fixture.write_blob)(hash, &flipped);
        match block_on(store.load::<PartsAgent>("agent")) {
            Err(CheckpointError::Integrity) => {}
            other => panic!("part {hash} altered: {:?}", other.map(|c| c.is_some())),
        }
        (fixture.write_blob)(hash, &bytes);
    }
    let loaded: Compacted<PartsAgent> = block_on(store.load("agent")).unwrap().unwrap();
    assert_eq!(
        compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap(),
        state
    );

    // The manifest edited to name another stored part in a message's place, its checksum
    // recomputed: every part checks out, the seal does not.
    let (json, _) = (fixture.read_row)("agent").unwrap();
    let text = String::from_utf8(json).unwrap();
    let (first, second) = (parts[1].to_hex(), parts[2].to_hex());
    let swapped = text.replacen(&first, &second, 1);
    assert_ne!(swapped, text);
    let sha = ContentHash::of(swapped.as_bytes()).to_hex();
    (fixture.write_row)("agent", swapped.as_bytes(), &sha);
    match block_on(store.load::<PartsAgent>("agent")) {
        Err(CheckpointError::Integrity) => {}
        Ok(Some(loaded)) => {
            assert!(!loaded.verify_seal());
            let refused = compactor.rehydrate_blocking(&loaded, &NoReacquire);
            assert!(
                matches!(refused, Err(CompactionError::Integrity { .. })),
                "{refused:?}"
            );
        }
        other => panic!("swapped part: {:?}", other.map(|c| c.is_some())),
    }
}

/// A format-3 checkpoint as the previous version stored it, with the blobs it points at and
/// the state and request it was made from.
#[derive(Serialize, Deserialize)]
struct Format3 {
    json: String,
    sha256: String,
    blobs: Vec<(String, String)>,
    state: PartsAgent,
    messages: Vec<Message>,
}

const FORMAT3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/format3.json");

fn format3_rows<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let stored: Format3 = serde_json::from_str(&std::fs::read_to_string(FORMAT3).unwrap()).unwrap();
    assert!(stored.json.starts_with("{\"format\":3,"));
    let store: &dyn CheckpointStore = &fixture.store;
    for (hash, hex) in &stored.blobs {
        let bytes = hex_bytes(hex);
        let hash = ContentHash::from_hex(hash).unwrap();
        block_on(fixture.store.put(&hash, &bytes)).unwrap();
    }
    // The row as the previous version wrote it (a row made here first, then overwritten raw).
    let compactor = compactor(&fixture.store);
    let placeholder = compactor.compact_blocking(&fresh()).unwrap();
    block_on(store.save("legacy", &placeholder)).unwrap();
    (fixture.write_row)("legacy", stored.json.as_bytes(), &stored.sha256);
    let row = block_on(store.load_row("legacy")).unwrap().unwrap();
    assert!(!row.is_manifest());
    let loaded: Compacted<PartsAgent> = block_on(store.load("legacy")).unwrap().unwrap();
    assert!(loaded.verify_seal());
    assert_eq!(loaded.messages(), stored.messages);
    let mut state = compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap();
    assert_eq!(state, stored.state);
    // The next request is saved as a manifest, and loads back to the state that made it.
    play_turn(&mut state, 1_000);
    let next = compactor.compact_blocking(&state).unwrap();
    block_on(store.save("legacy", &next)).unwrap();
    assert!(!row_parts(store, "legacy").is_empty());
    let loaded: Compacted<PartsAgent> = block_on(store.load("legacy")).unwrap().unwrap();
    assert_eq!(
        compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap(),
        state
    );
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Writes `tests/fixtures/format3.json`: not a test here (it asserts nothing), the generator
/// run at the commit before format 4 so the rows are the previous version's own
/// (`git worktree add /tmp/f3 629a315`, this file and its `mod` line copied in, a `#[test]`
/// calling it, `cargo test --test backends write_format3`).
pub fn write_format3_fixture() {
    let store = compaction::MemoryStore::new();
    let compactor = compactor(&store);
    let mut state = fresh();
    let mut compacted = None;
    for turn in 0..16 {
        play_turn(&mut state, turn);
        compacted = Some(compactor.compact_blocking(&state).unwrap());
    }
    let compacted = compacted.unwrap();
    let checkpoints: &dyn CheckpointStore = &store;
    block_on(checkpoints.save("legacy", &compacted)).unwrap();
    let (json, sha256) = store.raw_checkpoint("legacy").unwrap();
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut blobs: Vec<(String, String)> = store
        .hashes()
        .into_iter()
        .map(|h| (h.to_hex(), hex(&store.raw(&h).unwrap())))
        .collect();
    blobs.sort();
    let fixture = Format3 {
        json: String::from_utf8(json).unwrap(),
        sha256: sha256.unwrap(),
        blobs,
        state,
        messages: compacted.messages(),
    };
    std::fs::write(FORMAT3, serde_json::to_string_pretty(&fixture).unwrap()).unwrap();
}

/// A store of one's own that answers every read of parts with a part it was not asked for: a
/// load ends (the part asked for is missing), it does not ask again forever.
pub fn a_store_answering_with_other_parts_is_refused(store: compaction::MemoryStore) {
    struct Wrong(compaction::MemoryStore);
    impl CheckpointStore for Wrong {
        fn namespace(&self) -> &str {
            ""
        }
        fn save_row<'a>(
            &'a self,
            agent_id: &'a str,
            row: &'a compaction::CheckpointRow,
        ) -> compaction::BoxFuture<'a, Result<(), CheckpointError>> {
            self.0.save_row(agent_id, row)
        }
        fn load_row<'a>(
            &'a self,
            agent_id: &'a str,
        ) -> compaction::BoxFuture<'a, Result<Option<compaction::CheckpointRow>, CheckpointError>>
        {
            self.0.load_row(agent_id)
        }
        fn stores_parts(&self) -> bool {
            true
        }
        fn load_parts<'a>(
            &'a self,
            _: &'a [ContentHash],
        ) -> compaction::BoxFuture<'a, Result<Vec<compaction::CheckpointPart>, CheckpointError>>
        {
            let other = b"a part nobody asked for".to_vec();
            let part = compaction::CheckpointPart::stored(ContentHash::of(&other), other);
            Box::pin(std::future::ready(Ok(vec![part])))
        }
        fn list(
            &self,
        ) -> compaction::BoxFuture<'_, Result<Vec<compaction::CheckpointInfo>, CheckpointError>>
        {
            self.0.list()
        }
        fn delete<'a>(
            &'a self,
            agent_id: &'a str,
        ) -> compaction::BoxFuture<'a, Result<bool, CheckpointError>> {
            self.0.delete(agent_id)
        }
    }
    let compactor = compactor(&store);
    let mut state = fresh();
    play_turn(&mut state, 0);
    let compacted = compactor.compact_blocking(&state).unwrap();
    let wrong = Wrong(store);
    let checkpoints: &dyn CheckpointStore = &wrong;
    block_on(checkpoints.save("agent", &compacted)).unwrap();
    match block_on(checkpoints.load::<PartsAgent>("agent")) {
        Err(CheckpointError::Store(compaction::StoreError::NotFound { .. })) => {}
        other => panic!("{:?}", other.map(|c| c.is_some())),
    }
}
