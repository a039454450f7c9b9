//! Shared by the `pg_*` tests: the throwaway cluster, and small helpers on top of it.
#![allow(dead_code)]

pub mod harness;

use compaction::postgres::PgOptions;
use compaction::{block_on, PgError, PgErrorKind, PgStore, StoreError};
use std::time::Duration;

/// The `PgError` inside a store error, or a panic naming what came instead.
pub fn pg_error(e: &StoreError) -> &PgError {
    PgError::from_store_error(e).unwrap_or_else(|| panic!("not a postgres error: {e:?}"))
}

/// The store error is a backend error of `kind` that names the namespace.
pub fn assert_store_kind(e: &StoreError, kind: PgErrorKind, namespace: &str) {
    let StoreError::Backend { message, .. } = e else {
        panic!("expected a backend error, got {e:?}");
    };
    let inner = pg_error(e);
    assert_eq!(inner.kind(), kind, "{message}");
    assert_eq!(inner.namespace(), namespace, "{message}");
    assert!(message.contains(namespace), "{message}");
}

/// A store with a short connect timeout, so a test of an unreachable server is quick.
pub fn quick_options() -> PgOptions {
    PgOptions::new()
        .connect_timeout(Duration::from_secs(2))
        .wait_timeout(Duration::from_secs(5))
}

/// Connects a store or panics with the server log.
pub fn store(url: &str, namespace: &str) -> PgStore {
    block_on(PgStore::connect(url, namespace))
        .unwrap_or_else(|e| panic!("{e}\nserver log:\n{}", harness::cluster().log()))
}

/// Hex of `bytes`, for SQL literals (`decode('..', 'hex')`): no quoting of hostile text needed.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One database for the whole test binary, for suites that isolate by namespace instead.
pub fn shared_db() -> &'static harness::TestDb {
    static DB: std::sync::OnceLock<harness::TestDb> = std::sync::OnceLock::new();
    DB.get_or_init(|| harness::TestDb::new("shared"))
}

/// A namespace no other handle of this process has used.
pub fn fresh_namespace(tag: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{tag}-{}-{n}", std::process::id())
}

/// A ledger in a fresh namespace of the shared database: a new, empty backend.
pub fn fresh_ledger() -> compaction::PgLedger {
    let namespace = fresh_namespace("ledger");
    block_on(compaction::PgLedger::connect(shared_db().url(), &namespace))
        .unwrap_or_else(|e| panic!("{e}\nserver log:\n{}", harness::cluster().log()))
}

/// A store in a fresh namespace of the shared database, with the conformance suite's tamper
/// hook: raw SQL that overwrites the bytes of one of its blobs.
pub fn fresh_store() -> (PgStore, impl Fn(&compaction::ContentHash, &[u8]) + 'static) {
    let namespace = fresh_namespace("store");
    let store = store(shared_db().url(), &namespace);
    let overwrite = move |hash: &compaction::ContentHash, bytes: &[u8]| {
        let updated = shared_db().sql(&format!(
            "UPDATE compaction.blobs SET bytes = decode('{}', 'hex')
             WHERE namespace = '{namespace}' AND hash = '{}' RETURNING 1",
            hex(bytes),
            hash.to_hex()
        ));
        assert_eq!(updated.len(), 1, "tamper hook found no blob {hash}");
    };
    (store, overwrite)
}
