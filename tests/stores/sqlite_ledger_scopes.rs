//! `SqliteLedger` scopes, the in-place migration of a version-1 file, and `sync_log` never
//! erasing what the ledger knows.

use crate::common;

use common::TempDir;

use compaction::sqlite::rusqlite::Connection;
use compaction::sqlite::SCHEMA_VERSION;
use compaction::{Effect, EffectError, EffectLog, EffectStatus, SqliteLedger, SqliteLedgerError};

#[test]
fn a_key_is_unique_within_its_scope_and_load_log_reads_one_scope() {
    let dir = TempDir::new("scopes");
    let ledger = SqliteLedger::open(dir.db("ledger.db")).unwrap();
    let charges = ledger.scope("charges");
    let refunds = ledger.scope("refunds");
    assert_eq!(charges.scope_name(), "charges");
    charges
        .record(&Effect::new("charge", "stripe://cus_1", "k"))
        .unwrap();
    // The same key in another scope is another effect, with its own status.
    refunds
        .record(&Effect::new("refund", "stripe://cus_1", "k"))
        .unwrap();
    charges.begin("k").unwrap();
    assert_eq!(charges.status("k").unwrap(), Some(EffectStatus::Unknown));
    assert_eq!(refunds.status("k").unwrap(), Some(EffectStatus::NotStarted));
    assert_eq!(
        ledger.status("k").unwrap(),
        None,
        "the default scope is its own"
    );

    let log = ledger.load_log("charges").unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log.get("k").unwrap().action, "charge");
    let log = ledger.load_log("refunds").unwrap();
    assert_eq!(log.get("k").unwrap().action, "refund");
    assert!(ledger.load_log("nothing-here").unwrap().is_empty());

    let all = ledger.load_all().unwrap();
    assert_eq!(all.keys().collect::<Vec<_>>(), ["charges", "refunds"]);
    assert_eq!(charges.history("k").unwrap().len(), 2);
    assert_eq!(refunds.history("k").unwrap().len(), 1);
    assert_eq!(charges.list(EffectStatus::Unknown).unwrap().len(), 1);
    assert!(refunds.list(EffectStatus::Unknown).unwrap().is_empty());
}

/// The version-1 schema, as the released 0.1 wrote it.
const V1_SCHEMA: &str = r#"
    CREATE TABLE schema_version (
        version INTEGER PRIMARY KEY NOT NULL, applied_at_ms INTEGER NOT NULL,
        description TEXT NOT NULL);
    INSERT INTO schema_version VALUES (1, 0, 'blobs, checkpoints, effects and their event history');
    CREATE TABLE blobs (hash TEXT PRIMARY KEY NOT NULL, bytes BLOB NOT NULL,
        size INTEGER NOT NULL, created_at_ms INTEGER NOT NULL);
    CREATE TABLE checkpoints (agent_id TEXT PRIMARY KEY NOT NULL, state_type TEXT NOT NULL,
        json TEXT NOT NULL, sha256 TEXT NOT NULL, saved_at_ms INTEGER NOT NULL);
    CREATE TABLE effects (
        id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,
        action TEXT NOT NULL DEFAULT '', target TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL CHECK (status IN ('not_started', 'committed', 'unknown')),
        depends_on TEXT NOT NULL DEFAULT '[]', payload TEXT, updated_at_ms INTEGER NOT NULL);
    CREATE INDEX effects_by_status ON effects (status);
    CREATE TABLE effect_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, op TEXT NOT NULL,
        from_status TEXT, to_status TEXT NOT NULL, at_ms INTEGER NOT NULL, pid INTEGER NOT NULL);
    CREATE INDEX effect_events_by_key ON effect_events (key);
    INSERT INTO effects (key, action, target, status, depends_on, payload, updated_at_ms)
        VALUES ('mig-2', 'apply_migration', 'db://app', 'unknown', '["mig-1"]', '{"rows":3}', 1),
               ('mig-1', 'apply_migration', 'db://app', 'committed', '[]', NULL, 1);
    INSERT INTO effect_events (key, op, from_status, to_status, at_ms, pid)
        VALUES ('mig-2', 'begin', NULL, 'unknown', 1, 7);
"#;

#[test]
fn a_version_1_file_is_migrated_in_place_into_the_default_scope() {
    let dir = TempDir::new("migrate");
    let path = dir.db("old.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(V1_SCHEMA)
        .unwrap();

    let ledger = SqliteLedger::open(&path).unwrap();
    let version: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);

    // Every record is kept, in its order, in the default scope "".
    let log = ledger.load_log("").unwrap();
    let keys: Vec<&str> = log.iter().map(|e| e.idempotency_key.as_str()).collect();
    assert_eq!(keys, ["mig-2", "mig-1"]);
    let mig2 = log.get("mig-2").unwrap();
    assert_eq!(mig2.status, EffectStatus::Unknown);
    assert_eq!(mig2.depends_on, ["mig-1"]);
    assert_eq!(mig2.payload, Some(serde_json::json!({"rows": 3})));
    assert_eq!(ledger.history("mig-2").unwrap()[0].pid, 7);
    // The guard still holds after the migration, and scopes now work on the old file.
    assert!(matches!(
        ledger.begin("mig-2"),
        Err(SqliteLedgerError::Effect(
            EffectError::OutcomeUnknown { .. }
        ))
    ));
    ledger.scope("other").begin("mig-2").unwrap();
    assert_eq!(ledger.load_all().unwrap().len(), 2);

    // Opening again finds the schema current and changes nothing.
    drop(ledger);
    let again = SqliteLedger::open(&path).unwrap();
    assert_eq!(again.load_log("").unwrap(), log);
}

#[test]
fn sync_from_a_stale_placeholder_log_erases_nothing() {
    let dir = TempDir::new("stalesync");
    let ledger = SqliteLedger::open(dir.db("ledger.db")).unwrap();
    let full = Effect::new("charge", "stripe://cus_42", "pay-1")
        .depends_on("quote-1")
        .with_payload(serde_json::json!({"charge": "ch_9"}));
    ledger.record(&full).unwrap();

    // An agent that only ever called `begin` in memory holds a placeholder for the key.
    let mut stale = EffectLog::new();
    stale.begin("pay-1").unwrap();
    let summary = ledger.sync_log(&stale).unwrap();
    assert_eq!(summary.advanced, 1, "not_started -> unknown is forward");
    let stored = ledger.get("pay-1").unwrap().unwrap();
    assert_eq!(stored.action, "charge");
    assert_eq!(stored.target, "stripe://cus_42");
    assert_eq!(stored.depends_on, ["quote-1"]);
    assert_eq!(stored.payload, Some(serde_json::json!({"charge": "ch_9"})));
    assert_eq!(stored.status, EffectStatus::Unknown);

    // The other way round: the ledger holds the placeholder, the log the details.
    ledger.begin("pay-2").unwrap();
    let mut detailed = EffectLog::new();
    detailed
        .record(Effect::new("charge", "stripe://cus_7", "pay-2").depends_on("pay-1"))
        .unwrap();
    let summary = ledger.sync_log(&detailed).unwrap();
    assert_eq!(
        summary.kept,
        [(
            "pay-2".to_string(),
            EffectStatus::Unknown,
            EffectStatus::NotStarted
        )]
    );
    let stored = ledger.get("pay-2").unwrap().unwrap();
    assert_eq!(stored.target, "stripe://cus_7", "the placeholder is filled");
    assert_eq!(stored.depends_on, ["pay-1"]);
    assert_eq!(
        stored.status,
        EffectStatus::Unknown,
        "never moved backwards"
    );

    // A log with other details for a known key does not overwrite them.
    let mut other = EffectLog::new();
    other
        .record(Effect::new("refund", "stripe://elsewhere", "pay-1"))
        .unwrap();
    ledger.sync_log(&other).unwrap();
    let stored = ledger.get("pay-1").unwrap().unwrap();
    assert_eq!(
        (stored.action.as_str(), stored.target.as_str()),
        ("charge", "stripe://cus_42")
    );
}
