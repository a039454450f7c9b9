//! `SqliteStore`: blobs, tamper detection and typed errors on real files (its checkpoints run
//! the conformance suite, `tests/backends/conformance_checkpoint.rs`).

use crate::common;

use common::*;
use compaction::sqlite::rusqlite::{self, Connection};
use compaction::sqlite::{SqliteErrorKind, SCHEMA_VERSION};
use compaction::{
    block_on, CompactionError, Compactor, ContentHash, NoReacquire, SqliteError, SqliteLedger,
    SqliteOptions, SqliteStore, Store, StoreError,
};
use std::path::Path;
use std::time::Duration;

/// A state whose compaction at `SPILLING_BUDGET` spills protected state and effect records to the store
/// and summarizes `ci_log` (its source goes to the store too).
fn sample() -> MigrationState {
    spilling_state()
}

fn compactor_for(store: &SqliteStore) -> Compactor {
    spilling_compactor(store)
}

fn sqlite_error(e: &StoreError) -> &SqliteError {
    SqliteError::from_store_error(e).unwrap_or_else(|| panic!("not a sqlite error: {e:?}"))
}

/// The store error names the path and is of the expected kind.
fn assert_backend(e: &StoreError, path: &Path, kind: SqliteErrorKind) {
    let StoreError::Backend { message, .. } = e else {
        panic!("expected a backend error, got {e:?}");
    };
    assert!(
        message.contains(&path.display().to_string()),
        "message does not name {}: {message}",
        path.display()
    );
    let inner = sqlite_error(e);
    assert_eq!(inner.kind(), kind, "{message}");
    assert_eq!(inner.path(), path);
}

#[test]
fn handles_are_clone_send_sync() {
    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
    assert_shareable::<SqliteStore>();
    assert_shareable::<SqliteLedger>();
    fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<SqliteError>();
    assert_error::<compaction::SqliteLedgerError>();
    // The store's futures are Send, so compaction can run on any executor.
    fn assert_send<T: Send>(_: T) {}
    let dir = TempDir::new("send");
    let store = SqliteStore::open(dir.db("s.db")).unwrap();
    let hash = ContentHash::of(b"x");
    assert_send(store.put(&hash, b"x"));
    assert_send(store.get(&hash));
    assert!(matches!(
        block_on(store.get(&hash)),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn put_get_is_content_addressed_and_idempotent() {
    let dir = TempDir::new("putget");
    let path = dir.db("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let bytes = b"{\"constraint\":\"numpy<2.0\"}".to_vec();
    let hash = ContentHash::of(&bytes);
    block_on(store.put(&hash, &bytes)).unwrap();
    block_on(store.put(&hash, &bytes)).unwrap();
    assert_eq!(store.blob_count().unwrap(), 1);
    assert_eq!(block_on(store.get(&hash)).unwrap(), bytes);

    // Bytes that do not hash to the address are refused, and nothing is stored.
    let other = ContentHash::of(b"other");
    assert!(matches!(
        block_on(store.put(&other, b"not other")),
        Err(StoreError::Integrity { .. })
    ));
    assert!(matches!(
        block_on(store.get(&other)),
        Err(StoreError::NotFound { hash }) if hash == other
    ));
    assert!(!store.contains(&other).unwrap());

    // A second handle (another connection) sees the blob; so does a reopened store.
    let second = SqliteStore::open(&path).unwrap();
    assert_eq!(block_on(second.get(&hash)).unwrap(), bytes);
    drop((store, second));
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(block_on(reopened.get(&hash)).unwrap(), bytes);

    // The schema version table says which schema the file has.
    let raw = Connection::open(&path).unwrap();
    let version: i64 = raw
        .query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode.to_lowercase(), "wal");
}

#[test]
fn get_detects_a_changed_byte_and_put_repairs_it() {
    let dir = TempDir::new("blobtamper");
    let path = dir.db("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let bytes = vec![7u8; 4096];
    let hash = ContentHash::of(&bytes);
    block_on(store.put(&hash, &bytes)).unwrap();
    let raw = Connection::open(&path).unwrap();
    let mut bad = bytes.clone();
    bad[1234] ^= 0x01;
    raw.execute(
        "UPDATE blobs SET bytes = ?1 WHERE hash = ?2",
        rusqlite::params![bad, hash.to_hex()],
    )
    .unwrap();
    assert!(matches!(
        block_on(store.get(&hash)),
        Err(StoreError::Integrity { hash: h }) if h == hash
    ));
    // Storing the good bytes again repairs the blob.
    block_on(store.put(&hash, &bytes)).unwrap();
    assert_eq!(block_on(store.get(&hash)).unwrap(), bytes);
}

#[test]
fn clones_and_threads_share_the_store() {
    let dir = TempDir::new("threads");
    let path = dir.db("store.db");
    let store = SqliteStore::open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            // Half the threads share one connection, half open their own.
            let store = if t % 2 == 0 {
                store.clone()
            } else {
                SqliteStore::open(&path).unwrap()
            };
            s.spawn(move || {
                for i in 0..25 {
                    // Every thread writes the same 25 blobs plus 25 of its own.
                    for content in [format!("shared {i}"), format!("thread {t} blob {i}")] {
                        let hash = ContentHash::of(content.as_bytes());
                        block_on(store.put(&hash, content.as_bytes())).unwrap();
                        assert_eq!(block_on(store.get(&hash)).unwrap(), content.as_bytes());
                    }
                }
            });
        }
    });
    assert_eq!(store.blob_count().unwrap(), 25 + 8 * 25);
}

#[test]
fn a_missing_directory_is_a_typed_error_naming_the_path() {
    let dir = TempDir::new("missing");
    let path = dir.db("no/such/dir/agent.db");
    let err = SqliteStore::open(&path).unwrap_err();
    assert_backend(&err, &path, SqliteErrorKind::CannotOpen);
    let err = SqliteLedger::open(&path).unwrap_err();
    let inner = err.as_backend().expect("backend error");
    assert_eq!(inner.kind(), SqliteErrorKind::CannotOpen);
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    // Read-only on a file that does not exist: cannot open, not created.
    let path = dir.db("absent.db");
    let err = SqliteStore::open_with(&path, &SqliteOptions::new().read_only(true)).unwrap_err();
    assert_backend(&err, &path, SqliteErrorKind::CannotOpen);
    assert!(!path.exists());
}

#[test]
fn a_file_that_is_not_a_database_is_a_typed_error() {
    let dir = TempDir::new("garbage");
    let path = dir.db("agent.db");
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, &garbage).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert_backend(&err, &path, SqliteErrorKind::Corrupt);
    let err = SqliteLedger::open(&path).unwrap_err();
    assert_eq!(err.as_backend().unwrap().kind(), SqliteErrorKind::Corrupt);
    // Nothing was written over the user's file.
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
}

#[test]
fn damaged_pages_never_panic() {
    let dir = TempDir::new("damaged");
    let path = dir.db("agent.db");
    let hashes: Vec<ContentHash> = {
        let store = SqliteStore::open(&path).unwrap();
        (0..40)
            .map(|i| {
                let bytes = format!("blob {i} ").repeat(300).into_bytes();
                let hash = ContentHash::of(&bytes);
                block_on(store.put(&hash, &bytes)).unwrap();
                hash
            })
            .collect()
    };
    // The last connection closed: the WAL is folded into the main file. Damage everything
    // after the first page (which holds the schema).
    let mut file = std::fs::read(&path).unwrap();
    assert!(file.len() > 3 * 4096, "{}", file.len());
    for (i, b) in file.iter_mut().enumerate().skip(4096) {
        *b = (i as u8).wrapping_mul(31) ^ 0x5a;
    }
    std::fs::write(&path, &file).unwrap();
    match SqliteStore::open(&path) {
        Err(e) => assert_backend(&e, &path, SqliteErrorKind::Corrupt),
        Ok(store) => {
            for hash in &hashes {
                match block_on(store.get(hash)) {
                    Ok(_) => panic!("a damaged blob read back as intact"),
                    Err(StoreError::Integrity { .. }) | Err(StoreError::NotFound { .. }) => {}
                    Err(e) => assert_backend(&e, &path, SqliteErrorKind::Corrupt),
                }
            }
        }
    }
}

#[test]
fn a_read_only_database_is_a_typed_error() {
    let dir = TempDir::new("readonly");
    let path = dir.db("agent.db");
    let hash = ContentHash::of(b"one");
    {
        let store = SqliteStore::open(&path).unwrap();
        block_on(store.put(&hash, b"one")).unwrap();
        SqliteLedger::open(&path).unwrap().begin("k").unwrap();
    }
    // Opened read-only: reads work, writes fail with the path.
    let options = SqliteOptions::new().read_only(true);
    let store = SqliteStore::open_with(&path, &options).unwrap();
    assert_eq!(block_on(store.get(&hash)).unwrap(), b"one");
    let two = ContentHash::of(b"two");
    let err = block_on(store.put(&two, b"two")).unwrap_err();
    assert_backend(&err, &path, SqliteErrorKind::ReadOnly);
    let ledger = SqliteLedger::open_with(&path, &options).unwrap();
    assert_eq!(
        ledger.status("k").unwrap(),
        Some(compaction::EffectStatus::Unknown)
    );
    let err = ledger.commit("k").unwrap_err();
    assert_eq!(err.as_backend().unwrap().kind(), SqliteErrorKind::ReadOnly);
    assert!(err.to_string().contains(&path.display().to_string()));
    drop((store, ledger));

    // A file the process may not write (a privileged user, e.g. root, may write anyway, so
    // that case is checked only when the permission actually holds).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let writable = std::fs::OpenOptions::new().write(true).open(&path).is_ok();
    if !writable {
        match SqliteStore::open(&path) {
            Err(e) => {
                let kind = sqlite_error(&e).kind();
                assert!(
                    matches!(
                        kind,
                        SqliteErrorKind::ReadOnly | SqliteErrorKind::CannotOpen
                    ),
                    "{e}"
                );
                assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            }
            Ok(store) => {
                let err = block_on(store.put(&two, b"two")).unwrap_err();
                assert_backend(&err, &path, SqliteErrorKind::ReadOnly);
            }
        }
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn a_locked_database_is_a_typed_error_and_loses_nothing() {
    let dir = TempDir::new("locked");
    let path = dir.db("agent.db");
    let options = SqliteOptions::new().busy_timeout(Duration::from_millis(50));
    let store = SqliteStore::open_with(&path, &options).unwrap();
    let ledger = SqliteLedger::open_with(&path, &options).unwrap();
    let one = ContentHash::of(b"one");
    block_on(store.put(&one, b"one")).unwrap();

    // Another connection holds the write lock.
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let two = ContentHash::of(b"two");
    let err = block_on(store.put(&two, b"two")).unwrap_err();
    assert_backend(&err, &path, SqliteErrorKind::Locked);
    let err = ledger.begin("k").unwrap_err();
    assert_eq!(err.as_backend().unwrap().kind(), SqliteErrorKind::Locked);
    // Readers are not blocked in WAL mode, and a new handle opens (it only reads the schema).
    assert_eq!(block_on(store.get(&one)).unwrap(), b"one");
    let late = SqliteStore::open_with(&path, &options).unwrap();
    assert_eq!(block_on(late.get(&one)).unwrap(), b"one");

    // Compaction through a locked store fails with the typed error; the state is untouched.
    let state = sample();
    let before = state.clone();
    let err = compactor_for(&store).compact_blocking(&state).unwrap_err();
    match &err {
        CompactionError::Store(e) => assert_backend(e, &path, SqliteErrorKind::Locked),
        other => panic!("{other:?}"),
    }
    assert_eq!(state, before);

    // Released: the same calls succeed.
    holder.execute_batch("COMMIT").unwrap();
    block_on(store.put(&two, b"two")).unwrap();
    ledger.begin("k").unwrap();

    // A database in rollback-journal mode held exclusively cannot even be opened.
    let other = dir.db("exclusive.db");
    let holder = Connection::open(&other).unwrap();
    holder
        .execute_batch(
            "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; CREATE TABLE t (x); INSERT INTO t VALUES (1);",
        )
        .unwrap();
    let err = SqliteStore::open_with(&other, &options).unwrap_err();
    assert_backend(&err, &other, SqliteErrorKind::Locked);
    drop(holder);
    SqliteStore::open_with(&other, &options).unwrap();
}

#[test]
fn a_schema_from_a_newer_version_is_refused() {
    let dir = TempDir::new("schema");
    let path = dir.db("agent.db");
    drop(SqliteStore::open(&path).unwrap());
    let raw = Connection::open(&path).unwrap();
    raw.execute(
        "INSERT INTO schema_version (version, applied_at_ms, description) VALUES (?1, 0, 'future')",
        [SCHEMA_VERSION + 1],
    )
    .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert_backend(&err, &path, SqliteErrorKind::Schema);
}

#[test]
fn a_state_that_fits_round_trips_through_a_checkpoint() {
    let dir = TempDir::new("fits");
    let store = SqliteStore::open(dir.db("agent.db")).unwrap();
    let compactor = Compactor::builder()
        .budget(32_000)
        .store(store.clone())
        .build()
        .unwrap();
    let mut state = sample();
    state.subtask.title = "short".into();
    let compacted = compactor.compact_blocking(&state).unwrap();
    store.save_checkpoint("a", &compacted).unwrap();
    let loaded = store
        .load_checkpoint::<MigrationState>("a")
        .unwrap()
        .unwrap();
    assert_eq!(
        compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap(),
        state
    );
}

const STORE_ENV: &str = "COMPACTION_SQLITE_STORE_DB";
const SHARED_BLOBS: usize = 60;
const OWN_BLOBS: usize = 60;

/// Blob content: `shared i` is written by every writer, `own w i` by writer `w` only.
fn blob(owner: Option<&str>, i: usize) -> Vec<u8> {
    match owner {
        None => format!("shared blob {i} ").repeat(40).into_bytes(),
        Some(w) => format!("writer {w} blob {i} ").repeat(40).into_bytes(),
    }
}

fn write_blobs(store: &SqliteStore, writer: &str) {
    for i in 0..SHARED_BLOBS.max(OWN_BLOBS) {
        for bytes in [
            blob(None, i % SHARED_BLOBS),
            blob(Some(writer), i % OWN_BLOBS),
        ] {
            let hash = ContentHash::of(&bytes);
            block_on(store.put(&hash, &bytes)).unwrap();
            assert_eq!(block_on(store.get(&hash)).unwrap(), bytes);
        }
    }
}

/// Child of `processes_and_threads_write_one_file`: writes its blobs and exits. Returns at once
/// when not started as a child.
#[test]
fn child_store_entry() {
    let Ok(spec) = std::env::var(STORE_ENV) else {
        return;
    };
    let (writer, path) = spec.split_once('|').unwrap();
    write_blobs(&SqliteStore::open(path).unwrap(), writer);
}

#[test]
fn processes_and_threads_write_one_file() {
    let dir = TempDir::new("multiprocess");
    let path = dir.db("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|p| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    common::test_name(module_path!(), "child_store_entry").as_str(),
                    "--test-threads=1",
                ])
                .env(STORE_ENV, format!("p{p}|{}", path.display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let path = &path;
            s.spawn(move || write_blobs(&SqliteStore::open(path).unwrap(), &format!("t{t}")));
        }
    });
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(store.blob_count().unwrap(), SHARED_BLOBS + 8 * OWN_BLOBS);
    for writer in ["p0", "p1", "p2", "p3", "t0", "t1", "t2", "t3"] {
        for i in 0..OWN_BLOBS {
            let bytes = blob(Some(writer), i);
            assert_eq!(
                block_on(store.get(&ContentHash::of(&bytes))).unwrap(),
                bytes
            );
        }
    }
}
