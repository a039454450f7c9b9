//! `PgStore` on a real PostgreSQL: blobs, tamper detection, schema versioning and typed
//! errors (its checkpoints run the conformance suite, `tests/backends/conformance_checkpoint.rs`).

mod pg;

use compaction::postgres::{PgOptions, SCHEMA_VERSION};
use compaction::{block_on, ContentHash, PgError, PgErrorKind, PgStore, Store, StoreError};
use pg::harness::{cluster, scalar, TestDb};
use pg::{assert_store_kind, hex, pg_error, quick_options, store};

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
