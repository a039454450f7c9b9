//! Tenants on one PostgreSQL database: every read, list, write and existence probe of one
//! namespace's blobs, checkpoints, ledger keys and events is refused or invisible from another,
//! also for namespaces that imitate SQL wildcards and quoting.

mod common;
mod pg;

use common::*;
use compaction::{
    block_on, CompactionError, Compactor, ContentHash, Effect, EffectError, EffectLog,
    EffectStatus, Extractive, PgLedger, PgLedgerError, PgStore, Store, StoreError,
};
use pg::harness::{scalar, TestDb};
use pg::{hex, store};

/// Pairs of namespaces that a `LIKE`, a prefix match, a case fold or spliced quoting would
/// confuse.
const PAIRS: [(&str, &str); 4] = [
    ("acme", "globex"),
    ("acme", "acme%"),
    ("a_me", "acme"),
    ("x' OR '1'='1", "x"),
];

fn compactor_for(store: &PgStore) -> Compactor {
    Compactor::builder()
        .budget(450)
        .summarizer(Extractive)
        .store(store.clone())
        .build()
        .unwrap()
}

fn not_found(e: PgLedgerError) -> bool {
    matches!(e, PgLedgerError::Effect(EffectError::NotFound { .. }))
}

#[test]
fn blobs_are_invisible_and_untouchable_across_namespaces() {
    let db = TestDb::new("tenantblobs");
    for (a_name, b_name) in PAIRS {
        let (a, b) = (store(db.url(), a_name), store(db.url(), b_name));
        let bytes = format!("secret of {a_name}: store://sha256:{}", "0".repeat(64)).into_bytes();
        let hash = ContentHash::of(&bytes);
        block_on(a.put(&hash, &bytes)).unwrap();
        // Read, probe, count: nothing.
        assert!(matches!(
            block_on(b.get(&hash)),
            Err(StoreError::NotFound { .. })
        ));
        assert!(
            !block_on(b.contains(&hash)).unwrap(),
            "{b_name} probes {a_name}"
        );
        assert_eq!(block_on(b.blob_count()).unwrap(), 0);
        // The same content stored by the other tenant is a second row.
        block_on(b.put(&hash, &bytes)).unwrap();
        assert_eq!(
            scalar(
                db.url(),
                &format!(
                    "SELECT count(*) FROM compaction.blobs WHERE hash = '{}'",
                    hash.to_hex()
                )
            ),
            Some("2".into())
        );
        // Damage to one tenant's row is not the other's problem, and a put by one does not
        // repair (overwrite) the other's.
        let mut bad = bytes.clone();
        bad[0] ^= 1;
        let literal = a_name.replace('\'', "''");
        db.sql(&format!(
            "UPDATE compaction.blobs SET bytes = decode('{}', 'hex')
             WHERE namespace = '{literal}' AND hash = '{}'",
            hex(&bad),
            hash.to_hex()
        ));
        assert_eq!(block_on(b.get(&hash)).unwrap(), bytes);
        block_on(b.put(&hash, &bytes)).unwrap();
        assert!(matches!(
            block_on(a.get(&hash)),
            Err(StoreError::Integrity { .. })
        ));
        block_on(a.put(&hash, &bytes)).unwrap();
        assert_eq!(block_on(a.get(&hash)).unwrap(), bytes);
        db.sql("DELETE FROM compaction.blobs");
    }
}

#[test]
fn checkpoints_are_invisible_and_untouchable_across_namespaces() {
    let db = TestDb::new("tenantcheckpoints");
    for (a_name, b_name) in PAIRS {
        let (a, b) = (store(db.url(), a_name), store(db.url(), b_name));
        let state = spilling_state();
        let a_checkpoint = compactor_for(&a).compact_blocking(&state).unwrap();
        block_on(a.save_checkpoint("agent", &a_checkpoint)).unwrap();
        // Load, list, delete: nothing.
        assert!(block_on(b.load_checkpoint::<MigrationState>("agent"))
            .unwrap()
            .is_none());
        assert!(block_on(b.list_checkpoints()).unwrap().is_empty());
        assert!(!block_on(b.delete_checkpoint("agent")).unwrap());
        // A checkpoint whose blobs only the other tenant holds cannot be saved: it would
        // borrow (and reveal) the other tenant's data.
        let err = block_on(b.save_checkpoint("agent", &a_checkpoint)).unwrap_err();
        assert!(
            matches!(err, CompactionError::Store(StoreError::NotFound { .. })),
            "{err:?}"
        );
        // B's own checkpoint under the same agent id does not overwrite A's.
        let mut other = state.clone();
        other.plan_step = 99;
        let b_checkpoint = compactor_for(&b).compact_blocking(&other).unwrap();
        block_on(b.save_checkpoint("agent", &b_checkpoint)).unwrap();
        let loaded = block_on(a.load_checkpoint::<MigrationState>("agent"))
            .unwrap()
            .unwrap();
        assert_eq!(loaded.render(), a_checkpoint.render());
        assert_eq!(block_on(a.list_checkpoints()).unwrap().len(), 1);
        assert!(block_on(b.delete_checkpoint("agent")).unwrap());
        assert!(block_on(a.load_checkpoint::<MigrationState>("agent"))
            .unwrap()
            .is_some());
        db.sql("DELETE FROM compaction.checkpoints; DELETE FROM compaction.blobs");
    }
}

#[test]
fn ledger_keys_and_events_are_invisible_and_untouchable_across_namespaces() {
    for (a_name, b_name) in PAIRS {
        // A database per pair: the history is append-only, so it cannot be cleared.
        let db = TestDb::new("tenantledger");
        let a = block_on(PgLedger::connect(db.url(), a_name))
            .unwrap()
            .scope("charges");
        let b = block_on(PgLedger::connect(db.url(), b_name))
            .unwrap()
            .scope("charges");
        block_on(a.record(&Effect::new("charge", "stripe://cus_1", "charge-1"))).unwrap();
        block_on(a.begin("charge-1")).unwrap();
        // Read, list, history, load: nothing.
        assert_eq!(block_on(b.status("charge-1")).unwrap(), None);
        assert_eq!(block_on(b.get("charge-1")).unwrap(), None);
        assert!(block_on(b.effects()).unwrap().is_empty());
        assert!(block_on(b.list(EffectStatus::Unknown)).unwrap().is_empty());
        assert!(block_on(b.history("charge-1")).unwrap().is_empty());
        assert!(block_on(b.load_log("charges")).unwrap().is_empty());
        assert!(block_on(b.load_all()).unwrap().is_empty());
        // Write: every transition of an existing key is NotFound, and changes nothing of A's.
        assert!(not_found(block_on(b.commit("charge-1")).unwrap_err()));
        assert!(not_found(block_on(b.fail("charge-1")).unwrap_err()));
        assert!(not_found(
            block_on(b.reconcile("charge-1", EffectStatus::Committed)).unwrap_err()
        ));
        assert!(not_found(
            block_on(b.set_payload("charge-1", &serde_json::json!(1))).unwrap_err()
        ));
        // B's own effect under the same key is independent: its claim does not collide.
        block_on(b.record(&Effect::new("refund", "other", "charge-1"))).unwrap();
        block_on(b.begin("charge-1")).unwrap();
        block_on(b.commit("charge-1")).unwrap();
        let mut log = EffectLog::new();
        log.record(Effect::new("x", "y", "charge-1").with_status(EffectStatus::Committed))
            .unwrap();
        log.record(Effect::new("x", "y", "charge-2")).unwrap();
        block_on(b.sync_log(&log)).unwrap();
        // A sees exactly what it did.
        let mine = block_on(a.get("charge-1")).unwrap().unwrap();
        assert_eq!(mine.status, EffectStatus::Unknown);
        assert_eq!(mine.action, "charge");
        assert_eq!(block_on(a.effects()).unwrap().len(), 1);
        let ops: Vec<_> = block_on(a.history("charge-1"))
            .unwrap()
            .into_iter()
            .map(|t| t.op)
            .collect();
        assert_eq!(ops, ["record", "begin"]);
        assert!(matches!(
            block_on(a.begin("charge-1")),
            Err(PgLedgerError::Effect(EffectError::OutcomeUnknown { .. }))
        ));
    }
}
