//! Every store backend keeps blobs byte for byte and catches tampering alike, and keeps named
//! entries (`tests/conformance/store.rs`). A new backend: one line per suite, with its tamper
//! hook.

use crate::common;
use crate::conformance;
#[cfg(feature = "postgres")]
use crate::pg;

use common::TempDir;
use compaction::sqlite::rusqlite::Connection;
use compaction::{MemoryStore, SqliteStore};
use conformance::store::{check, check_entries, Fixture};

fn memory_fixture() -> Fixture<MemoryStore> {
    let store = MemoryStore::new();
    let raw = store.clone();
    Fixture::new(
        store,
        move |h, b| raw.overwrite_unchecked(*h, b.to_vec()),
        (),
    )
}

fn sqlite_fixture() -> Fixture<SqliteStore> {
    let dir = TempDir::new("conformance-store");
    let path = dir.db("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let tamper = move |hash: &compaction::ContentHash, bytes: &[u8]| {
        let sql = "UPDATE blobs SET bytes = ?1 WHERE hash = ?2";
        let conn = Connection::open(&path).unwrap();
        assert_eq!(conn.execute(sql, (bytes, hash.to_hex())).unwrap(), 1);
    };
    Fixture::new(store, tamper, dir)
}

#[test]
fn memory_store_conforms() {
    check(memory_fixture);
}

#[test]
fn memory_store_keeps_entries() {
    check_entries(memory_fixture);
}

#[test]
fn sqlite_store_conforms() {
    check(sqlite_fixture);
}

#[test]
fn sqlite_store_keeps_entries() {
    check_entries(sqlite_fixture);
}

#[cfg(feature = "postgres")]
fn postgres_fixture() -> Fixture<compaction::PgStore> {
    let (store, tamper) = pg::fresh_store();
    Fixture::new(store, tamper, ())
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_store_conforms() {
    check(postgres_fixture);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_store_keeps_entries() {
    check_entries(postgres_fixture);
}

/// Entries are scoped like blobs: another namespace of the same database sees none of them.
#[cfg(feature = "postgres")]
#[test]
fn postgres_entries_are_per_namespace() {
    use compaction::Store;
    let ours = postgres_fixture().store;
    let theirs = postgres_fixture().store;
    assert_ne!(ours.namespace(), theirs.namespace());
    compaction::block_on(ours.put_entry("summary-cache/x", b"ours")).unwrap();
    let seen = compaction::block_on(theirs.get_entry("summary-cache/x")).unwrap();
    assert_eq!(seen, None);
    compaction::block_on(theirs.put_entry("summary-cache/x", b"theirs")).unwrap();
    let kept = compaction::block_on(ours.get_entry("summary-cache/x")).unwrap();
    assert_eq!(kept.as_deref(), Some(&b"ours"[..]));
}
