//! Shared by the `pg_*` tests: the throwaway cluster, and small helpers on top of it.
#![allow(dead_code)]

pub mod harness;

use compaction::postgres::PgOptions;
use compaction::{PgError, PgErrorKind, PgStore, StoreError};
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
    PgStore::connect(url, namespace)
        .unwrap_or_else(|e| panic!("{e}\nserver log:\n{}", harness::cluster().log()))
}

/// Hex of `bytes`, for SQL literals (`decode('..', 'hex')`): no quoting of hostile text needed.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
