//! The checkpoint suite every `CheckpointStore` runs, through the trait object
//! (`&dyn CheckpointStore`), as the CLI and a session hold it:
//!
//! - listing: save, replace, list (by agent id, with state type and size), load, delete; agent
//!   ids made of quotes, wildcards, newlines and other scripts come back exactly;
//! - refusals: a checkpoint pointing at a blob the store does not hold, or with a broken seal,
//!   is refused and nothing is saved;
//! - tampering: a changed byte anywhere in a stored row, a changed checksum, or a changed blob
//!   behind a loaded checkpoint is `Integrity` (on load, or on rehydrate), never a wrong state;
//! - swapped rows: another agent's JSON under this agent's checksum is refused; another type's
//!   whole row is refused by type on rehydrate;
//! - namespaces: the handle reports its namespace (`""` without), and a backend with
//!   namespaces keeps each one's checkpoints and blobs apart.
//!
//! A backend joins with one line in `tests/backends/conformance_checkpoint.rs` and its fixture: the raw
//! hooks that read and write its stored rows and blobs, bypassing every check, as an attacker
//! or a bad disk would.

use crate::common::{spilling_state, MigrationState};
use compaction::{
    block_on, CheckpointError, CheckpointStore, Compactable, Compacted, CompactionError, Compactor,
    ContentHash, FieldOutcome, FnReacquire, MemoryStore, NoReacquire, Store, StoreError,
};
use serde::{Deserialize, Serialize};
use std::any::Any;

/// Reads an agent's stored row raw: its JSON and its checksum.
pub type ReadRow = Box<dyn Fn(&str) -> Option<(Vec<u8>, Option<String>)>>;
/// Writes an agent's stored row raw (JSON, checksum), unchecked.
pub type WriteRow = Box<dyn Fn(&str, &[u8], &str)>;
/// Writes a blob's bytes raw, unchecked.
pub type WriteBlob = Box<dyn Fn(&ContentHash, &[u8])>;

/// A backend under test: its store (blobs and checkpoints), its raw hooks, and for a backend
/// with namespaces a second handle on another namespace of the same database.
pub struct Fixture<T> {
    pub store: T,
    pub read_row: ReadRow,
    pub write_row: WriteRow,
    pub write_blob: WriteBlob,
    /// The namespace `store` must report.
    pub namespace: String,
    /// The same database in another namespace; `None` for a backend without namespaces.
    pub sibling: Option<T>,
    pub keep: Box<dyn Any>,
}

use crate::common::spilling_compactor as compactor_for;

/// Re-reads the two derivable fields `spilling_state()` evicts.
fn reacquire() -> FnReacquire<
    impl Fn(&str, &str) -> Result<serde_json::Value, compaction::ReacquireError> + Send + Sync,
> {
    FnReacquire::new(|field: &str, pointer: &str| {
        Ok(match (field, pointer) {
            ("config_contents", "file:///srv/app/config.toml") => {
                serde_json::json!("[db]\nurl = \"postgres://db/app\"\n")
            }
            ("ci_log", "https://ci.example/runs/6") => serde_json::json!("step ok\n".repeat(400)),
            other => return Err(format!("unexpected {other:?}").into()),
        })
    })
}

/// What a rehydration of `spilling_state()` gives back: everything but the redundant tool
/// output, which compaction drops.
fn restored_state() -> MigrationState {
    MigrationState {
        tool_output: Vec::new(),
        ..spilling_state()
    }
}

fn save<S>(
    store: &dyn CheckpointStore,
    agent: &str,
    c: &Compacted<S>,
) -> Result<(), CheckpointError> {
    block_on(store.save(agent, c))
}

fn load<S>(
    store: &dyn CheckpointStore,
    agent: &str,
) -> Result<Option<Compacted<S>>, CheckpointError> {
    block_on(store.load(agent))
}

fn ids(store: &dyn CheckpointStore) -> Vec<String> {
    let listed = block_on(store.list()).unwrap();
    listed.into_iter().map(|i| i.agent_id).collect()
}

/// Runs every part of the suite, each on a fresh fixture.
pub fn check<T, F>(make: F)
where
    T: CheckpointStore + Store + Clone + 'static,
    F: Fn() -> Fixture<T>,
{
    listing(make());
    hostile_ids(make());
    refusals(make());
    tampered_row(make());
    tampered_blob(make());
    swapped_rows(make());
    namespaces(make());
    nul_agent_ids(make());
}

/// An agent id with a NUL is refused alike by every backend (SQLite would store it, PostgreSQL
/// reported its text as corrupt): save, load and delete, before anything is read or written.
fn nul_agent_ids<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor_for(&fixture.store);
    let compacted = compactor.compact_blocking(&Counter { step: 1 }).unwrap();
    for agent in ["agent\0", "\0", "a\0b"] {
        let refused = |e: &CheckpointError| matches!(e, CheckpointError::NulAgentId { agent_id } if agent_id == agent);
        let saved = block_on(store.save(agent, &compacted)).unwrap_err();
        assert!(refused(&saved), "save {agent:?}: {saved:?}");
        let loaded = block_on(store.load::<Counter>(agent)).unwrap_err();
        assert!(refused(&loaded), "load {agent:?}: {loaded:?}");
        let deleted = block_on(store.delete(agent)).unwrap_err();
        assert!(refused(&deleted), "delete {agent:?}: {deleted:?}");
        assert!(!saved.to_string().contains('\0'), "{saved}");
    }
    assert!(ids(store).is_empty());
    // The id without its NUL is another id, and works.
    save(store, "agent", &compacted).unwrap();
    assert_eq!(ids(store), ["agent"]);
}

fn listing<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor_for(&fixture.store);
    let compacted = compactor.compact_blocking(&spilling_state()).unwrap();
    assert!(ids(store).is_empty());
    assert!(load::<MigrationState>(store, "agent-1").unwrap().is_none());
    save(store, "agent-1", &compacted).unwrap();
    save(store, "agent-2", &compacted).unwrap();
    save(store, "agent-1", &compacted).unwrap(); // replaces
    let infos = block_on(store.list()).unwrap();
    let listed: Vec<&str> = infos.iter().map(|i| i.agent_id.as_str()).collect();
    assert_eq!(listed, ["agent-1", "agent-2"]);
    let whole_len = serde_json::to_string(&compacted).unwrap().len();
    for info in &infos {
        // The size of the stored row: every built-in store keeps a manifest over parts, smaller
        // than the whole checkpoint's JSON.
        let row = block_on(store.load_row(&info.agent_id)).unwrap().unwrap();
        assert!(row.is_manifest(), "{info:?}");
        assert_eq!(info.size, row.json().len(), "{info:?}");
        assert!(info.size < whole_len, "{info:?}: whole {whole_len}");
        assert!(info.state_type.contains("MigrationState"), "{info:?}");
    }

    let loaded = load::<MigrationState>(store, "agent-1").unwrap().unwrap();
    assert!(loaded.verify_seal());
    assert_eq!(loaded.render(), compacted.render());
    let restored = compactor.rehydrate_blocking(&loaded, &reacquire()).unwrap();
    assert_eq!(restored, restored_state());

    assert!(block_on(store.delete("agent-2")).unwrap());
    assert!(!block_on(store.delete("agent-2")).unwrap());
    assert!(load::<MigrationState>(store, "agent-2").unwrap().is_none());
    assert_eq!(ids(store), ["agent-1"]);
}

/// A small state of its own type, for ids and swaps.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Counter {
    #[protected]
    step: u32,
}

fn hostile_ids<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor_for(&fixture.store);
    let agents = [
        "quote'\"",
        "percent%_wild*card",
        "line\nbreak\r\tand tab",
        "agent'); DELETE FROM checkpoints; --",
        "ünïcødé-агент-代理",
        " leading and trailing ",
        "\\back\\slash",
    ];
    for (step, agent) in agents.iter().enumerate() {
        let state = Counter { step: step as u32 };
        let compacted = compactor.compact_blocking(&state).unwrap();
        save(store, agent, &compacted).unwrap();
    }
    let mut listed = ids(store);
    listed.sort();
    let mut expected: Vec<String> = agents.iter().map(|a| a.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected);
    for (step, agent) in agents.iter().enumerate() {
        let loaded = load::<Counter>(store, agent).unwrap().unwrap();
        let state = compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap();
        assert_eq!(state.step, step as u32, "{agent:?}");
    }
    // A prefix or a near miss of an id is another id.
    assert!(load::<Counter>(store, "quote").unwrap().is_none());
    assert!(!block_on(store.delete("percent%")).unwrap());
    assert_eq!(ids(store).len(), agents.len());
}

fn refusals<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    // Compacted into another store: its spilled values are not in this one.
    let elsewhere = compactor_for(&MemoryStore::new());
    let compacted = elsewhere.compact_blocking(&spilling_state()).unwrap();
    assert!(!compacted.pointers().is_empty());
    let err = save(store, "agent", &compacted).unwrap_err();
    assert!(
        matches!(err, CheckpointError::Store(StoreError::NotFound { .. })),
        "{err:?}"
    );
    assert!(matches!(
        CompactionError::from(err),
        CompactionError::Store(StoreError::NotFound { .. })
    ));
    assert!(ids(store).is_empty());

    // A checkpoint edited after its seal was made.
    let ours = compactor_for(&fixture.store);
    let compacted = ours.compact_blocking(&spilling_state()).unwrap();
    let json = serde_json::to_string(&compacted).unwrap();
    let edited = json.replacen("never touch", "always touch", 1);
    assert_ne!(edited, json);
    let edited: Compacted<MigrationState> = serde_json::from_str(&edited).unwrap();
    let err = save(store, "agent", &edited).unwrap_err();
    assert!(matches!(err, CheckpointError::Integrity), "{err:?}");
    assert!(matches!(
        CompactionError::from(err),
        CompactionError::Integrity { field } if field == "<checkpoint>"
    ));
    assert!(ids(store).is_empty());
}

/// The load of `agent` must refuse (`Integrity`) or give a checkpoint no rehydration accepts.
fn assert_refused(store: &dyn CheckpointStore, compactor: &Compactor, agent: &str, label: &str) {
    match load::<MigrationState>(store, agent) {
        Err(CheckpointError::Integrity) => {}
        Err(other) => panic!("{label}: unexpected error {other:?}"),
        Ok(None) => panic!("{label}: checkpoint vanished"),
        Ok(Some(loaded)) => {
            assert!(!loaded.verify_seal(), "{label}: seal still verifies");
            let err = compactor
                .rehydrate_blocking(&loaded, &reacquire())
                .unwrap_err();
            assert!(
                matches!(err, CompactionError::Integrity { .. }),
                "{label}: {err:?}"
            );
        }
    }
}

fn tampered_row<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor_for(&fixture.store);
    let compacted = compactor.compact_blocking(&spilling_state()).unwrap();
    save(store, "agent", &compacted).unwrap();
    let (original, sha) = (fixture.read_row)("agent").expect("the saved row");
    let sha = sha.expect("a saved row has its checksum");

    // Positions over the whole row, plus the seal's hex digits (a changed case there parses to
    // the same hash: only the row checksum catches it). Changes stay printable ASCII, which
    // every backend's column holds.
    let step = (original.len() / 40).max(1);
    let mut positions: Vec<usize> = (0..original.len()).step_by(step).collect();
    let text = std::str::from_utf8(&original).unwrap();
    let seal_at = text.find("\"seal\":\"").unwrap() + 8;
    positions.extend((seal_at..seal_at + 64).step_by(5));
    let mut tried = 0;
    for position in positions {
        for change in [0x01u8, 0x20] {
            let mut bad = original.clone();
            bad[position] ^= change;
            if !(0x20..0x7f).contains(&bad[position]) || !original[position].is_ascii() {
                continue;
            }
            (fixture.write_row)("agent", &bad, &sha);
            assert_refused(
                store,
                &compactor,
                "agent",
                &format!("byte {position} ^ {change:#x}"),
            );
            tried += 1;
        }
    }
    assert!(tried > 40, "only {tried} changes tried");

    // The checksum itself changed, the JSON intact.
    let mut bad_sha = sha.clone().into_bytes();
    bad_sha[10] = if bad_sha[10] == b'0' { b'1' } else { b'0' };
    (fixture.write_row)("agent", &original, std::str::from_utf8(&bad_sha).unwrap());
    assert_refused(store, &compactor, "agent", "checksum");

    // Put back, it is whole again.
    (fixture.write_row)("agent", &original, &sha);
    let loaded = load::<MigrationState>(store, "agent").unwrap().unwrap();
    assert_eq!(
        compactor.rehydrate_blocking(&loaded, &reacquire()).unwrap(),
        restored_state()
    );
}

fn tampered_blob<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor_for(&fixture.store);
    let compacted = compactor.compact_blocking(&spilling_state()).unwrap();
    save(store, "agent", &compacted).unwrap();
    // The blobs rehydrate reads: spilled protected values and spilled effect records.
    let spilled: Vec<_> = compacted
        .report()
        .fields
        .iter()
        .filter_map(|f| match &f.outcome {
            FieldOutcome::Spilled { pointer } => Some(pointer.hash()),
            _ => None,
        })
        .collect();
    assert_eq!(spilled.len(), 2, "{}", compacted.report());
    for hash in spilled {
        let original = block_on(fixture.store.get(&hash)).unwrap();
        for position in [0, original.len() / 2, original.len() - 1] {
            let mut bad = original.clone();
            bad[position] ^= 0x01;
            (fixture.write_blob)(&hash, &bad);
            let loaded = load::<MigrationState>(store, "agent").unwrap().unwrap();
            let err = compactor
                .rehydrate_blocking(&loaded, &reacquire())
                .unwrap_err();
            assert!(
                matches!(err, CompactionError::Integrity { .. }),
                "{hash} byte {position}: {err:?}"
            );
        }
        (fixture.write_blob)(&hash, &original);
    }
    let loaded = load::<MigrationState>(store, "agent").unwrap().unwrap();
    compactor.rehydrate_blocking(&loaded, &reacquire()).unwrap();
}

fn swapped_rows<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    let compactor = compactor_for(&fixture.store);
    let migration = compactor.compact_blocking(&spilling_state()).unwrap();
    let counter = compactor.compact_blocking(&Counter { step: 7 }).unwrap();
    save(store, "migrating", &migration).unwrap();
    save(store, "counting", &counter).unwrap();
    let (migration_json, migration_sha) = (fixture.read_row)("migrating").unwrap();
    let (counter_json, counter_sha) = (fixture.read_row)("counting").unwrap();

    // One agent's JSON under the other's checksum: the bytes are not the ones saved there.
    (fixture.write_row)("counting", &migration_json, counter_sha.as_deref().unwrap());
    assert_refused(
        store,
        &compactor,
        "counting",
        "JSON under another row's checksum",
    );

    // Another type's whole row (JSON and checksum): it loads as what it is, and restores into
    // no other type. (A whole row of the same type under another agent id is bound by the keyed
    // seal's agent binding, issue 21.)
    (fixture.write_row)(
        "counting",
        &migration_json,
        migration_sha.as_deref().unwrap(),
    );
    let swapped = load::<Counter>(store, "counting").unwrap().unwrap();
    assert!(swapped.verify_seal());
    let err = compactor
        .rehydrate_blocking(&swapped, &NoReacquire)
        .unwrap_err();
    assert!(
        matches!(err, CompactionError::WrongStateType { .. }),
        "{err:?}"
    );
    (fixture.write_row)("migrating", &counter_json, counter_sha.as_deref().unwrap());
    let swapped = load::<MigrationState>(store, "migrating").unwrap().unwrap();
    let err = compactor
        .rehydrate_blocking(&swapped, &reacquire())
        .unwrap_err();
    assert!(
        matches!(err, CompactionError::WrongStateType { .. }),
        "{err:?}"
    );
}

fn namespaces<T: CheckpointStore + Store + Clone + 'static>(fixture: Fixture<T>) {
    let store: &dyn CheckpointStore = &fixture.store;
    assert_eq!(store.namespace(), fixture.namespace);
    let Some(sibling) = &fixture.sibling else {
        assert_eq!(
            store.namespace(),
            "",
            "a backend without a sibling has no namespaces"
        );
        return;
    };
    let theirs: &dyn CheckpointStore = sibling;
    assert_ne!(theirs.namespace(), store.namespace());
    let ours = compactor_for(&fixture.store);
    let compacted = ours.compact_blocking(&spilling_state()).unwrap();
    save(store, "agent", &compacted).unwrap();
    // Invisible from the other namespace, and out of its reach.
    assert!(load::<MigrationState>(theirs, "agent").unwrap().is_none());
    assert!(ids(theirs).is_empty());
    assert!(!block_on(theirs.delete("agent")).unwrap());
    // Our blobs are not theirs: they cannot save a checkpoint that needs them.
    let err = save(theirs, "agent", &compacted).unwrap_err();
    assert!(
        matches!(err, CheckpointError::Store(StoreError::NotFound { .. })),
        "{err:?}"
    );
    // Their own checkpoint under the same id leaves ours as it was.
    let their_compactor = compactor_for(sibling);
    let their_state = Counter { step: 3 };
    save(
        theirs,
        "agent",
        &their_compactor.compact_blocking(&their_state).unwrap(),
    )
    .unwrap();
    let loaded = load::<MigrationState>(store, "agent").unwrap().unwrap();
    assert_eq!(loaded.render(), compacted.render());
    assert_eq!(ids(store), ["agent"]);
    assert!(block_on(store.delete("agent")).unwrap());
    let kept = load::<Counter>(theirs, "agent").unwrap().unwrap();
    assert_eq!(
        their_compactor
            .rehydrate_blocking(&kept, &NoReacquire)
            .unwrap(),
        their_state
    );
}
