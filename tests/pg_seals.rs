//! Keyed checkpoint seals (`CompactorBuilder::seal_key`) on PostgreSQL checkpoints: someone with
//! write access to the database forges a row with recomputed hashes, rewrites key ids, strips
//! the seal; rotation and a wrong key. The scenarios are shared with `keyed_seals.rs`.

mod common;
mod pg;
mod seals;

use common::MigrationState;
use compaction::{block_on, ContentHash, PgStore};
use pg::harness::{scalar, TestDb};
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
    fn load(&self, agent: &str) -> compaction::Compacted<MigrationState> {
        block_on(self.store.load_checkpoint(agent))
            .unwrap()
            .expect("a checkpoint")
    }
    fn row(&self, agent: &str) -> Vec<u8> {
        // Agent ids here are plain ASCII words chosen by the scenarios.
        scalar(
            self.db.url(),
            &format!(
                "SELECT json FROM compaction.checkpoints
                 WHERE namespace = 'tenant-a' AND agent_id = '{agent}'"
            ),
        )
        .expect("a checkpoint row")
        .into_bytes()
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
