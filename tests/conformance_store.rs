//! Every store backend keeps blobs byte for byte and catches tampering alike
//! (`tests/conformance/store.rs`). A new backend: one line with its tamper hook.

mod common;
mod conformance;
#[cfg(feature = "postgres")]
mod pg;

use common::TempDir;
use compaction::sqlite::rusqlite::Connection;
use compaction::{MemoryStore, SqliteStore};
use conformance::store::{check, Fixture};

#[test]
fn memory_store_conforms() {
    check(|| {
        let store = MemoryStore::new();
        let raw = store.clone();
        Fixture::new(
            store,
            move |h, b| raw.overwrite_unchecked(*h, b.to_vec()),
            (),
        )
    });
}

#[test]
fn sqlite_store_conforms() {
    check(|| {
        let dir = TempDir::new("conformance-store");
        let path = dir.db("store.db");
        let store = SqliteStore::open(&path).unwrap();
        let tamper = move |hash: &compaction::ContentHash, bytes: &[u8]| {
            let sql = "UPDATE blobs SET bytes = ?1 WHERE hash = ?2";
            let conn = Connection::open(&path).unwrap();
            assert_eq!(conn.execute(sql, (bytes, hash.to_hex())).unwrap(), 1);
        };
        Fixture::new(store, tamper, dir)
    });
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_store_conforms() {
    check(|| {
        let (store, tamper) = pg::fresh_store();
        Fixture::new(store, tamper, ())
    });
}
