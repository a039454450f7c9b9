//! Keyed checkpoint seals (`CompactorBuilder::seal_key`) on checkpoints kept as JSON in memory
//! and in SQLite: forgery with recomputed hashes, rotation, wrong key, missing seal, a row
//! copied over another agent's, a rolled-back row. The same scenarios run on PostgreSQL in
//! `pg_seals.rs`.

use crate::common;
use crate::seals;

use common::{MigrationState, TempDir};
use compaction::sqlite::rusqlite::{self, Connection};
use compaction::{
    Compacted, CompactionError, Compactor, CompactorBuilder, ContentHash, MemoryLedger,
    MemoryStore, SealKey, SealKeyError, SqliteLedger, SqliteStore,
};
use seals::Backend;
use std::collections::HashMap;
use std::sync::Mutex;

/// Checkpoints as JSON text in a map: what an author without a durable backend keeps.
#[derive(Default)]
struct JsonRows {
    store: MemoryStore,
    rows: Mutex<HashMap<String, Vec<u8>>>,
}

impl Backend for JsonRows {
    fn builder(&self) -> CompactorBuilder {
        Compactor::builder().store(self.store.clone())
    }
    fn save(&self, agent: &str, compacted: &Compacted<MigrationState>) {
        let json = serde_json::to_vec(compacted).unwrap();
        self.rows.lock().unwrap().insert(agent.into(), json);
    }
    fn try_load(&self, agent: &str) -> Result<Compacted<MigrationState>, CompactionError> {
        Ok(serde_json::from_slice(&self.row(agent)).unwrap())
    }
    fn row(&self, agent: &str) -> Vec<u8> {
        self.rows.lock().unwrap()[agent].clone()
    }
    fn write_row(&self, agent: &str, json: &[u8]) {
        self.rows
            .lock()
            .unwrap()
            .insert(agent.into(), json.to_vec());
    }
}

struct Sqlite {
    dir: TempDir,
    path: std::path::PathBuf,
    store: SqliteStore,
}

impl Sqlite {
    fn new() -> Sqlite {
        let dir = TempDir::new("keyed-seals");
        let path = dir.db("agents.db");
        let store = SqliteStore::open(&path).unwrap();
        Sqlite { dir, path, store }
    }
}

impl Backend for Sqlite {
    library_half!();
    fn row(&self, agent: &str) -> Vec<u8> {
        seals::whole_row(&self.store, agent)
    }
    fn write_row(&self, agent: &str, json: &[u8]) {
        let raw = Connection::open(&self.path).unwrap();
        let sha = ContentHash::of(json).to_hex();
        let json = std::str::from_utf8(json).unwrap();
        let n = raw
            .execute(
                "UPDATE checkpoints SET json = ?1, sha256 = ?2 WHERE agent_id = ?3",
                rusqlite::params![json, sha, agent],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
}

#[test]
fn json_in_memory() {
    seals::all(&JsonRows::default());
}

#[test]
fn sqlite_forged_checkpoint_with_recomputed_hashes_is_refused() {
    seals::forged_checkpoint_with_recomputed_hashes_is_refused(&Sqlite::new());
}

#[test]
fn sqlite_rotation() {
    seals::rotation(&Sqlite::new());
}

#[test]
fn sqlite_wrong_key() {
    seals::wrong_key(&Sqlite::new());
}

#[test]
fn sqlite_missing_seal() {
    seals::missing_seal(&Sqlite::new());
}

#[test]
fn sqlite_row_copied_across_agents_is_refused() {
    seals::row_copied_across_agents_is_refused(&Sqlite::new());
}

#[test]
fn sqlite_unbound_keyed_checkpoints_need_the_migration_switch() {
    seals::unbound_keyed_checkpoints_need_the_migration_switch(&Sqlite::new());
}

#[test]
fn json_rolled_back_checkpoint_is_refused_by_the_memory_ledger() {
    seals::rolled_back_checkpoint_is_refused(&JsonRows::default(), &MemoryLedger::new());
}

/// The ledger in its own file, as the guide advises (docs/guarantees.md): whoever can put an
/// old checkpoint row back into `agents.db` cannot move the sequence in `ledger.db` back.
#[test]
fn sqlite_rolled_back_checkpoint_is_refused_by_the_ledger() {
    let backend = Sqlite::new();
    let ledger = SqliteLedger::open(backend.dir.db("ledger.db")).unwrap();
    seals::rolled_back_checkpoint_is_refused(&backend, &ledger);
}

/// The sequence table refuses to go back even to someone writing SQL into the ledger's file
/// (short of dropping its triggers).
#[test]
fn sqlite_checkpoint_sequences_only_go_forward_in_the_database_itself() {
    let backend = Sqlite::new();
    let path = backend.dir.db("ledger.db");
    let ledger = SqliteLedger::open(&path).unwrap();
    compaction::block_on(compaction::EffectLedger::advance_checkpoint(
        &ledger, "a", 5,
    ))
    .unwrap();
    let raw = Connection::open(&path).unwrap();
    for sql in [
        "UPDATE checkpoint_sequences SET sequence = 4 WHERE agent_id = 'a'",
        "DELETE FROM checkpoint_sequences WHERE agent_id = 'a'",
    ] {
        let refused = raw.execute(sql, []).expect_err(sql);
        assert!(
            refused.to_string().contains("forward only"),
            "{sql}: {refused}"
        );
    }
    raw.execute(
        "UPDATE checkpoint_sequences SET sequence = 6 WHERE agent_id = 'a'",
        [],
    )
    .unwrap();
    assert_eq!(
        compaction::block_on(compaction::EffectLedger::newest_checkpoint(&ledger, "a")).unwrap(),
        Some(6)
    );
}

/// `save_checkpoint` files a checkpoint only under the agent (and namespace) it is bound to,
/// and a keyed checkpoint only when it is bound at all.
#[test]
fn sqlite_save_under_another_agent_or_unbound_and_keyed_is_refused() {
    let backend = Sqlite::new();
    let builder = || backend.builder().budget(4000).seal_key(seals::key("k1", 1));
    let a = builder().agent_id("agent-a").build().unwrap();
    let compacted = a.compact_blocking(&seals::state()).unwrap();
    seals::assert_foreign(
        backend.store.save_checkpoint("agent-b", &compacted),
        Some("agent-b"),
        Some("agent-a"),
        "save under B",
    );
    let elsewhere = builder()
        .agent_id("agent-a")
        .namespace("tenant-x")
        .build()
        .unwrap();
    match backend.store.save_checkpoint(
        "agent-a",
        &elsewhere.compact_blocking(&seals::state()).unwrap(),
    ) {
        Err(CompactionError::ForeignCheckpoint {
            namespace, found, ..
        }) => {
            assert_eq!(namespace, "");
            assert_eq!(found.unwrap().namespace(), "tenant-x");
        }
        other => panic!("another namespace must be refused, got {other:?}"),
    }
    let agentless = builder().build().unwrap();
    seals::assert_foreign(
        backend.store.save_checkpoint(
            "agent-a",
            &agentless.compact_blocking(&seals::state()).unwrap(),
        ),
        Some("agent-a"),
        None,
        "keyed, bound to no agent",
    );
    assert!(backend
        .store
        .load_checkpoint::<MigrationState>("agent-b")
        .unwrap()
        .is_none());
    assert!(
        backend.store.list_checkpoints().unwrap().is_empty(),
        "nothing saved"
    );
    // Unkeyed and bound to no agent: saved as before (nothing to bind it with).
    let plain = backend.builder().budget(4000).build().unwrap();
    backend
        .store
        .save_checkpoint("agent-a", &plain.compact_blocking(&seals::state()).unwrap())
        .unwrap();
    backend
        .store
        .save_checkpoint("agent-a", &compacted)
        .unwrap();
}

#[test]
fn keys_never_show_in_debug_output_or_checkpoints() {
    let secret = *b"0123456789abcdef-secret-material";
    let key = SealKey::new("prod-1", secret).unwrap();
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let compactor = Compactor::builder()
        .budget(4000)
        .seal_key(key.clone())
        .build()
        .unwrap();
    let checkpoint =
        serde_json::to_string(&compactor.compact_blocking(&seals::state()).unwrap()).unwrap();
    for shown in [
        format!("{key:?}"),
        format!("{key:#?}"),
        format!("{compactor:?}"),
        checkpoint,
    ] {
        assert!(!shown.contains("secret-material"), "{shown}");
        assert!(!shown.contains(&hex), "{shown}");
        assert!(!shown.contains("48, 49, 50"), "{shown}");
    }
    assert!(format!("{compactor:?}").contains("prod-1"));
    assert_eq!(
        SealKey::from_hex("prod-1", &hex).unwrap().id(),
        key.id(),
        "hex secrets parse"
    );
}

#[test]
fn unusable_keys_are_typed_errors() {
    let refused = |r: Result<SealKey, SealKeyError>| {
        let e = r.expect_err("an unusable key");
        // Converted for `?` in functions returning CompactionError.
        let CompactionError::Config(message) = CompactionError::from(e.clone()) else {
            panic!("not Config: {e:?}");
        };
        assert_eq!(message, e.to_string());
        message
    };
    let short = refused(SealKey::new("k", [1u8; 15]));
    assert!(short.contains("15 bytes"), "{short}");
    assert!(!short.contains("1, 1"), "{short}");
    refused(SealKey::new("", [1u8; 32]));
    refused(SealKey::new("a\nb", [1u8; 32]));
    refused(SealKey::new("x".repeat(65), [1u8; 32]));
    refused(SealKey::from_hex("k", "abc"));
    refused(SealKey::from_hex("k", &"zz".repeat(32)));

    let config = |r: Result<Compactor, CompactionError>| match r {
        Err(CompactionError::Config(message)) => message,
        other => panic!("expected Config, got {other:?}"),
    };
    let k = |id: &str, b: u8| SealKey::new(id, [b; 32]).unwrap();
    let dup = config(
        Compactor::builder()
            .budget(10)
            .seal_key(k("same", 1))
            .verify_key(k("same", 2))
            .build(),
    );
    assert!(dup.contains("`same`"), "{dup}");
    let verify_only = config(
        Compactor::builder()
            .budget(10)
            .verify_key(k("old", 1))
            .build(),
    );
    assert!(verify_only.contains("seal_key"), "{verify_only}");
}
