//! `PgStore` on a real PostgreSQL: blobs, checkpoints, tamper detection, schema versioning and
//! typed errors.

mod common;
mod pg;

use common::*;
use compaction::postgres::{PgOptions, SCHEMA_VERSION};
use compaction::{
    block_on, Compacted, CompactionError, Compactor, ContentHash, Extractive, FieldOutcome,
    FnReacquire, PgError, PgErrorKind, PgStore, Store, StoreError,
};
use pg::harness::{cluster, scalar, TestDb};
use pg::{assert_store_kind, hex, pg_error, quick_options, store};

const BUDGET: usize = 450;

fn compactor_for(store: &PgStore) -> Compactor {
    Compactor::builder()
        .budget(BUDGET)
        .summarizer(Extractive)
        .store(store.clone())
        .build()
        .unwrap()
}

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

/// A store holding the checkpoint of `spilling_state()` under agent id `agent`.
fn checkpointed(db: &TestDb) -> (PgStore, Compactor, Compacted<MigrationState>) {
    let store = store(db.url(), "tenant-a");
    let compactor = compactor_for(&store);
    let compacted = compactor.compact_blocking(&spilling_state()).unwrap();
    block_on(store.save_checkpoint("agent", &compacted)).unwrap();
    (store, compactor, compacted)
}

#[test]
fn handles_are_clone_send_sync_and_futures_send() {
    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
    assert_shareable::<PgStore>();
    fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<PgError>();
    fn assert_send<T: Send>(_: T) {}
    let db = TestDb::new("send");
    let store = store(db.url(), "ns");
    let hash = ContentHash::of(b"x");
    assert_send(store.put(&hash, b"x"));
    assert_send(store.get(&hash));
    assert!(matches!(
        block_on(store.get(&hash)),
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(store.namespace(), "ns");
    assert!(store
        .target()
        .ends_with(&format!("/{}", db.url().rsplit('/').next().unwrap())));
}

#[test]
fn put_get_is_content_addressed_idempotent_and_verified() {
    let db = TestDb::new("putget");
    let store = store(db.url(), "ns");
    // Text that imitates our own pointers and markers is stored as opaque bytes.
    let bytes = b"{\"note\":\"store://sha256:00ff\\n## protected\\n\\u0000\"}".to_vec();
    let hash = ContentHash::of(&bytes);
    assert!(!block_on(store.contains(&hash)).unwrap());
    block_on(store.put(&hash, &bytes)).unwrap();
    block_on(store.put(&hash, &bytes)).unwrap();
    assert_eq!(block_on(store.blob_count()).unwrap(), 1);
    assert!(block_on(store.contains(&hash)).unwrap());
    assert_eq!(block_on(store.get(&hash)).unwrap(), bytes);

    // Bytes that do not hash to the address are refused and nothing is stored.
    let wrong = ContentHash::of(b"something else");
    assert!(matches!(
        block_on(store.put(&wrong, &bytes)),
        Err(StoreError::Integrity { hash }) if hash == wrong
    ));
    assert!(!block_on(store.contains(&wrong)).unwrap());
    assert_eq!(block_on(store.blob_count()).unwrap(), 1);

    // Every byte value and an empty blob round-trip.
    let all: Vec<u8> = (0..=255u8).collect();
    let empty: Vec<u8> = Vec::new();
    for blob in [&all, &empty] {
        let h = ContentHash::of(blob);
        block_on(store.put(&h, blob)).unwrap();
        assert_eq!(&block_on(store.get(&h)).unwrap(), blob);
    }

    // A second connection (another process could) finds them.
    let again = block_on(PgStore::connect(db.url(), "ns")).unwrap();
    assert_eq!(block_on(again.blob_count()).unwrap(), 3);
    assert_eq!(block_on(again.get(&hash)).unwrap(), bytes);
}

#[test]
fn get_detects_a_changed_byte_and_put_repairs_it() {
    let db = TestDb::new("tamperblob");
    let store = store(db.url(), "ns");
    let bytes = b"[\"never touch /etc/prod\",\"numpy<2.0\"]".to_vec();
    let hash = ContentHash::of(&bytes);
    block_on(store.put(&hash, &bytes)).unwrap();
    for position in [0, bytes.len() / 2, bytes.len() - 1] {
        let mut bad = bytes.clone();
        bad[position] ^= 0x01;
        db.sql(&format!(
            "UPDATE compaction.blobs SET bytes = decode('{}', 'hex') WHERE hash = '{}'",
            hex(&bad),
            hash.to_hex()
        ));
        assert!(
            matches!(
                block_on(store.get(&hash)),
                Err(StoreError::Integrity { .. })
            ),
            "byte {position}"
        );
        // Putting the good bytes again repairs the row.
        block_on(store.put(&hash, &bytes)).unwrap();
        assert_eq!(block_on(store.get(&hash)).unwrap(), bytes);
    }
}

#[test]
fn checkpoint_round_trip_list_and_delete() {
    let db = TestDb::new("checkpoint");
    let store = store(db.url(), "ns");
    let compactor = compactor_for(&store);
    let state = spilling_state();
    let compacted = compactor.compact_blocking(&state).unwrap();
    assert!(block_on(store.load_checkpoint::<MigrationState>("agent-1"))
        .unwrap()
        .is_none());
    block_on(store.save_checkpoint("agent-1", &compacted)).unwrap();
    block_on(store.save_checkpoint("agent-2", &compacted)).unwrap();
    block_on(store.save_checkpoint("agent-1", &compacted)).unwrap(); // replaces
    let infos = block_on(store.list_checkpoints()).unwrap();
    let ids: Vec<&str> = infos.iter().map(|i| i.agent_id.as_str()).collect();
    assert_eq!(ids, ["agent-1", "agent-2"]);
    let json_len = serde_json::to_string(&compacted).unwrap().len();
    assert!(infos.iter().all(|i| i.size == json_len));
    assert!(infos[0].state_type.contains("MigrationState"));

    // Another handle (a restarted agent on another machine) resumes from it.
    let reopened = block_on(PgStore::connect(db.url(), "ns")).unwrap();
    let loaded = block_on(reopened.load_checkpoint::<MigrationState>("agent-1"))
        .unwrap()
        .unwrap();
    assert!(loaded.verify_seal());
    assert_eq!(loaded.render(), compacted.render());
    let restored = compactor_for(&reopened)
        .rehydrate_blocking(&loaded, &reacquire())
        .unwrap();
    // Everything but the redundant tool output (which compaction drops) comes back.
    let expected = MigrationState {
        tool_output: Vec::new(),
        ..state
    };
    assert_eq!(restored, expected);

    assert!(block_on(reopened.delete_checkpoint("agent-2")).unwrap());
    assert!(!block_on(reopened.delete_checkpoint("agent-2")).unwrap());
    assert!(
        block_on(reopened.load_checkpoint::<MigrationState>("agent-2"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_checkpoint_pointing_outside_the_store_is_refused() {
    let db = TestDb::new("outside");
    let store = store(db.url(), "ns");
    let memory = Compactor::builder()
        .budget(BUDGET)
        .summarizer(Extractive)
        .store(compaction::MemoryStore::new())
        .build()
        .unwrap();
    let compacted = memory.compact_blocking(&spilling_state()).unwrap();
    assert!(!compacted.pointers().is_empty());
    let err = block_on(store.save_checkpoint("agent", &compacted)).unwrap_err();
    assert!(
        matches!(err, CompactionError::Store(StoreError::NotFound { .. })),
        "{err:?}"
    );
    assert!(block_on(store.list_checkpoints()).unwrap().is_empty());
}

#[test]
fn tampered_blob_makes_rehydrate_fail_with_integrity() {
    let db = TestDb::new("tamperspill");
    let (store, compactor, compacted) = checkpointed(&db);
    let spilled: Vec<_> = compacted
        .report()
        .fields
        .iter()
        .filter_map(|f| match &f.outcome {
            FieldOutcome::Spilled { pointer } => Some(pointer.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(spilled.len(), 2, "{}", compacted.report());
    for pointer in spilled {
        let hash = pointer.hash().to_hex();
        let original = block_on(store.get(&pointer.hash())).unwrap();
        let mut bad = original.clone();
        bad[original.len() / 2] ^= 0x01;
        let set = |bytes: &[u8]| {
            db.sql(&format!(
                "UPDATE compaction.blobs SET bytes = decode('{}', 'hex') WHERE hash = '{hash}'",
                hex(bytes)
            ))
        };
        set(&bad);
        let loaded = block_on(store.load_checkpoint::<MigrationState>("agent"))
            .unwrap()
            .unwrap();
        let err = compactor
            .rehydrate_blocking(&loaded, &reacquire())
            .unwrap_err();
        assert!(
            matches!(err, CompactionError::Integrity { .. }),
            "{pointer}: {err:?}"
        );
        set(&original);
    }
    let loaded = block_on(store.load_checkpoint::<MigrationState>("agent"))
        .unwrap()
        .unwrap();
    compactor.rehydrate_blocking(&loaded, &reacquire()).unwrap();
}

#[test]
fn tampered_checkpoint_row_is_never_accepted() {
    let db = TestDb::new("tamperrow");
    let (store, compactor, _) = checkpointed(&db);
    let json = scalar(
        db.url(),
        "SELECT json FROM compaction.checkpoints WHERE agent_id = 'agent'",
    )
    .unwrap();
    let sha = scalar(
        db.url(),
        "SELECT sha256 FROM compaction.checkpoints WHERE agent_id = 'agent'",
    )
    .unwrap();
    let original = json.into_bytes();
    let set_json = |bytes: &[u8]| {
        db.sql(&format!(
            "UPDATE compaction.checkpoints SET json = convert_from(decode('{}', 'hex'), 'UTF8')
             WHERE agent_id = 'agent'",
            hex(bytes)
        ));
    };
    let check = |label: String| match block_on(store.load_checkpoint::<MigrationState>("agent")) {
        Err(CompactionError::Integrity { field }) => assert_eq!(field, "<checkpoint>"),
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
    };
    // Positions over the whole row, plus the seal's hex digits (a changed case there parses
    // to the same hash: only the row checksum catches it).
    let step = (original.len() / 25).max(1);
    let mut positions: Vec<usize> = (0..original.len()).step_by(step).collect();
    let seal_at = std::str::from_utf8(&original)
        .unwrap()
        .find("\"seal\":\"")
        .unwrap()
        + 8;
    positions.extend((seal_at..seal_at + 64).step_by(7));
    for position in positions {
        for change in [0x01u8, 0x20] {
            let mut bad = original.clone();
            bad[position] ^= change;
            // PostgreSQL text holds UTF-8 without NUL: keep the change inside printable ASCII.
            if !(0x20..0x7f).contains(&bad[position]) || !original[position].is_ascii() {
                continue;
            }
            set_json(&bad);
            check(format!("byte {position} ^ {change:#x}"));
        }
    }
    set_json(&original);
    let mut bad_sha = sha.into_bytes();
    bad_sha[10] = if bad_sha[10] == b'0' { b'1' } else { b'0' };
    db.sql(&format!(
        "UPDATE compaction.checkpoints SET sha256 = '{}' WHERE agent_id = 'agent'",
        String::from_utf8(bad_sha).unwrap()
    ));
    check("sha256 column".into());
}

#[test]
fn a_schema_from_a_newer_version_is_refused() {
    let db = TestDb::new("newer");
    let store = store(db.url(), "ns");
    assert_eq!(
        scalar(
            db.url(),
            "SELECT max(version) FROM compaction.schema_version"
        ),
        Some(SCHEMA_VERSION.to_string())
    );
    // Connecting again (another process) finds the schema current and changes nothing.
    drop(block_on(PgStore::connect(db.url(), "ns")).unwrap());
    assert_eq!(
        scalar(db.url(), "SELECT count(*) FROM compaction.schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
    db.sql(&format!(
        "INSERT INTO compaction.schema_version VALUES ({}, 0, 'from the future')",
        SCHEMA_VERSION + 1
    ));
    let err = block_on(PgStore::connect(db.url(), "ns")).unwrap_err();
    assert_store_kind(&err, PgErrorKind::Schema, "ns");
    assert!(err.to_string().contains("upgrade"), "{err}");
    drop(store);
}

#[test]
fn concurrent_first_connects_migrate_once() {
    let db = TestDb::new("migrate");
    let url = db.url().to_string();
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                block_on(PgStore::connect(&url, &format!("ns{i}"))).map(|_| ())
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    assert_eq!(
        scalar(&url, "SELECT count(*) FROM compaction.schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
}

#[test]
fn bad_configuration_is_a_typed_error() {
    for (url, namespace) in [
        ("postgres://[not a url", "ns"),
        ("host=127.0.0.1 port=notaport", "ns"),
    ] {
        let err = block_on(PgStore::connect(url, namespace)).unwrap_err();
        assert_eq!(pg_error(&err).kind(), PgErrorKind::Config, "{err}");
    }
    let db = TestDb::new("badns");
    for namespace in ["", "a\0b", &"x".repeat(201)] {
        let err = block_on(PgStore::connect(db.url(), namespace)).unwrap_err();
        assert_eq!(pg_error(&err).kind(), PgErrorKind::Config, "{err}");
    }
}

#[test]
fn an_unreachable_server_or_missing_database_is_cannot_connect_without_the_password() {
    // Nothing listens on this port: take a free one and keep it closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres:s3cret-pw@127.0.0.1:{port}/agents");
    let err = block_on(PgStore::connect_with(&url, "ns", &quick_options())).unwrap_err();
    assert_store_kind(&err, PgErrorKind::CannotConnect, "ns");
    let message = format!("{err} {:?}", pg_error(&err));
    assert!(
        message.contains(&format!("127.0.0.1:{port}/agents")),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "password leaked: {message}");

    let missing = cluster().url("no_such_database");
    let err = block_on(PgStore::connect_with(&missing, "ns", &quick_options())).unwrap_err();
    assert_store_kind(&err, PgErrorKind::CannotConnect, "ns");
    assert_eq!(pg_error(&err).sql_state(), Some("3D000"), "{err}");
}

#[test]
fn a_small_pool_serves_many_threads() {
    let db = TestDb::new("pool");
    let store = block_on(PgStore::connect_with(
        db.url(),
        "ns",
        &PgOptions::new().max_connections(2),
    ))
    .unwrap();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    let bytes = format!("thread {t} blob {i}").into_bytes();
                    let hash = ContentHash::of(&bytes);
                    block_on(store.put(&hash, &bytes)).unwrap();
                    assert_eq!(block_on(store.get(&hash)).unwrap(), bytes);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(block_on(store.blob_count()).unwrap(), 80);
}
