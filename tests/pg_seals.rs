//! Keyed checkpoint seals (`CompactorBuilder::seal_key`) on PostgreSQL checkpoints: someone with
//! write access to the database forges a row with recomputed hashes, rewrites key ids, strips
//! the seal, copies a row across agents and across namespaces, puts an older row back;
//! rotation and a wrong key. The scenarios are shared with `keyed_seals.rs`.

mod common;
mod pg;
mod seals;

use common::MigrationState;
use compaction::{block_on, CompactionError, Compactor, ContentHash, PgLedger, PgStore};
use pg::harness::TestDb;
use pg::{hex, store};
use seals::Backend;

/// A namespace of a fresh database; the forger writes the rows with plain SQL.
struct Postgres {
    db: TestDb,
    store: PgStore,
}

impl Postgres {
    fn new(tag: &str) -> Postgres {
        let db = TestDb::new(tag);
        let store = store(db.url(), "tenant-a");
        Postgres { db, store }
    }
}

impl Backend for Postgres {
    fn builder(&self) -> compaction::CompactorBuilder {
        compaction::Compactor::builder().store(self.store.clone())
    }
    fn save(&self, agent: &str, compacted: &compaction::Compacted<MigrationState>) {
        block_on(self.store.save_checkpoint(agent, compacted)).unwrap();
    }
    fn try_load(
        &self,
        agent: &str,
    ) -> Result<compaction::Compacted<MigrationState>, compaction::CompactionError> {
        Ok(block_on(self.store.load_checkpoint(agent))?.expect("a checkpoint"))
    }
    fn namespace(&self) -> &str {
        "tenant-a"
    }
    fn row(&self, agent: &str) -> Vec<u8> {
        seals::whole_row(&self.store, agent)
    }
    fn write_row(&self, agent: &str, json: &[u8]) {
        let rows = self.db.sql(&format!(
            "UPDATE compaction.checkpoints
             SET json = convert_from(decode('{}', 'hex'), 'UTF8'), sha256 = '{}'
             WHERE namespace = 'tenant-a' AND agent_id = '{agent}' RETURNING 1",
            hex(json),
            ContentHash::of(json).to_hex()
        ));
        assert_eq!(rows.len(), 1, "one row rewritten");
    }
}

#[test]
fn forged_checkpoint_with_recomputed_hashes_is_refused() {
    seals::forged_checkpoint_with_recomputed_hashes_is_refused(&Postgres::new("sealforge"));
}

#[test]
fn rotation() {
    seals::rotation(&Postgres::new("sealrotation"));
}

#[test]
fn wrong_key() {
    seals::wrong_key(&Postgres::new("sealwrongkey"));
}

#[test]
fn missing_seal() {
    seals::missing_seal(&Postgres::new("sealmissing"));
}

#[test]
fn row_copied_across_agents_is_refused() {
    seals::row_copied_across_agents_is_refused(&Postgres::new("sealacross"));
}

#[test]
fn unbound_keyed_checkpoints_need_the_migration_switch() {
    seals::unbound_keyed_checkpoints_need_the_migration_switch(&Postgres::new("sealunbound"));
}

/// The ledger's `checkpoint_sequences` row is the reference; the forger rewrites the checkpoint
/// row only (the ledger's table refuses to go back: see the next test).
#[test]
fn rolled_back_checkpoint_is_refused() {
    let backend = Postgres::new("sealrollback");
    let ledger = block_on(PgLedger::connect(backend.db.url(), "tenant-a")).unwrap();
    seals::rolled_back_checkpoint_is_refused(&backend, &ledger);
}

#[test]
fn checkpoint_sequences_only_go_forward_in_the_database_itself() {
    let backend = Postgres::new("sealseqtrigger");
    let ledger = block_on(PgLedger::connect(backend.db.url(), "tenant-a")).unwrap();
    compaction::block_on(compaction::EffectLedger::advance_checkpoint(
        &ledger, "a", 5,
    ))
    .unwrap();
    for sql in [
        "UPDATE compaction.checkpoint_sequences SET sequence = 4 WHERE agent_id = 'a'",
        "DELETE FROM compaction.checkpoint_sequences WHERE agent_id = 'a'",
        "TRUNCATE compaction.checkpoint_sequences",
    ] {
        let refused = pg::harness::try_sql(backend.db.url(), sql).expect_err(sql);
        let refused = format!("{refused:?}");
        assert!(refused.contains("forward only"), "{sql}: {refused}");
    }
    backend
        .db
        .sql("UPDATE compaction.checkpoint_sequences SET sequence = 6 WHERE agent_id = 'a'");
    assert_eq!(
        compaction::block_on(compaction::EffectLedger::newest_checkpoint(&ledger, "a")).unwrap(),
        Some(6)
    );
}

/// Tenant A's row of agent `agent-7` copied over tenant B's row of the same agent id (JSON and
/// checksum, with SQL): B's load refuses it, and B's compactor would too.
#[test]
fn row_copied_across_namespaces_is_refused() {
    let db = pg::harness::TestDb::new("sealnamespaces");
    let (store_a, store_b) = (store(db.url(), "tenant-a"), store(db.url(), "tenant-b"));
    let compactor = |store: &PgStore, namespace: &str| {
        Compactor::builder()
            .budget(4000)
            .store(store.clone())
            .seal_key(seals::key("k1", 1))
            .agent_id("agent-7")
            .namespace(namespace)
            .build()
            .unwrap()
    };
    let (a, b) = (
        compactor(&store_a, "tenant-a"),
        compactor(&store_b, "tenant-b"),
    );
    let saved_a = a.compact_blocking(&seals::state_at(1)).unwrap();
    block_on(store_a.save_checkpoint("agent-7", &saved_a)).unwrap();
    let saved_b = b.compact_blocking(&seals::state_at(2)).unwrap();
    block_on(store_b.save_checkpoint("agent-7", &saved_b)).unwrap();
    let rows = db.sql(
        "UPDATE compaction.checkpoints AS b SET json = a.json, sha256 = a.sha256
         FROM compaction.checkpoints AS a
         WHERE a.namespace = 'tenant-a' AND a.agent_id = 'agent-7'
           AND b.namespace = 'tenant-b' AND b.agent_id = 'agent-7' RETURNING 1",
    );
    assert_eq!(rows.len(), 1, "the row was copied");
    match block_on(store_b.load_checkpoint::<MigrationState>("agent-7")) {
        Err(CompactionError::ForeignCheckpoint {
            agent_id,
            namespace,
            found,
        }) => {
            assert_eq!(agent_id.as_deref(), Some("agent-7"));
            assert_eq!(namespace, "tenant-b");
            let found = found.expect("bound");
            assert_eq!(
                (found.agent_id(), found.namespace()),
                ("agent-7", "tenant-a")
            );
        }
        other => panic!("tenant A's checkpoint loaded in tenant B: {other:?}"),
    }
    // Read raw, B's compactor refuses it as well; A's own row still loads in A.
    let json = pg::harness::scalar(
        db.url(),
        "SELECT json FROM compaction.checkpoints WHERE namespace = 'tenant-b'",
    )
    .unwrap();
    // The row is a manifest: its parts are tenant A's, read from there into the whole JSON.
    let row = compaction::CheckpointRow::stored(json.into_bytes(), None);
    let from_a: &dyn compaction::CheckpointStore = &store_a;
    let whole = block_on(from_a.read_parts(row))
        .unwrap()
        .whole_json()
        .unwrap();
    let copied: compaction::Compacted<MigrationState> = serde_json::from_slice(&whole).unwrap();
    seals::assert_foreign(
        b.rehydrate_blocking(&copied, &compaction::NoReacquire),
        Some("agent-7"),
        Some("agent-7"),
        "B's compactor",
    );
    let own = block_on(store_a.load_checkpoint::<MigrationState>("agent-7"))
        .unwrap()
        .unwrap();
    assert_eq!(
        a.rehydrate_blocking(&own, &compaction::NoReacquire)
            .unwrap(),
        seals::state_at(1)
    );
}
