//! The [`Store`] trait a backend implements, its object-safe form, and the verified read every
//! engine read goes through.

use crate::future::BoxFuture;
use crate::store::{ContentHash, StoreError};
use std::future::Future;
use std::sync::Arc;
use tracing::Instrument;

/// Durable storage for spilled protected state and summary sources.
///
/// Blobs are content-addressed: `put` stores bytes under their SHA-256, `get` returns them. The
/// engine verifies every blob it reads against its hash, so a store that returns wrong bytes is
/// caught (`Integrity`), but a store should verify too. Both methods return `Send` futures so
/// compaction can run on any executor. Two optional methods keep small named entries (the
/// summary cache's); a store without them works and never caches a summary.
///
/// A store of your own (here: a shared map; `MemoryStore` and `SqliteStore` are built in):
///
/// ```
/// use compaction::{Compactor, ContentHash, Store, StoreError};
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Clone, Default)]
/// struct MapStore(Arc<Mutex<HashMap<ContentHash, Vec<u8>>>>);
///
/// impl Store for MapStore {
///     async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
///         if !hash.matches(bytes) {
///             return Err(StoreError::Integrity { hash: *hash });
///         }
///         self.0.lock().unwrap().insert(*hash, bytes.to_vec());
///         Ok(())
///     }
///     async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
///         let blobs = self.0.lock().unwrap();
///         blobs.get(hash).cloned().ok_or(StoreError::NotFound { hash: *hash })
///     }
/// }
///
/// let store = MapStore::default();
/// let bytes = br#"["never touch /etc/prod"]"#;
/// let hash = ContentHash::of(bytes);
/// compaction::block_on(store.put(&hash, bytes))?;
/// assert_eq!(compaction::block_on(store.get(&hash))?, bytes);
///
/// let compactor = Compactor::builder().budget(32_000).store(store).build()?;
/// # let _ = compactor;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Store: Send + Sync {
    /// Stores `bytes` under `hash` (which the caller computed as `ContentHash::of(bytes)`).
    /// Storing the same content twice is not an error.
    fn put(
        &self,
        hash: &ContentHash,
        bytes: &[u8],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Returns the bytes stored under `hash`.
    fn get(&self, hash: &ContentHash) -> impl Future<Output = Result<Vec<u8>, StoreError>> + Send;

    /// Whether [`get`](Self::get) refuses bytes that do not hash to the address asked for
    /// (`StoreError::Integrity`, never wrong bytes), as every built-in store does (their
    /// conformance suite tampers with stored blobs to prove it). The engine then does not hash
    /// what it reads a second time. The default is `false`: the engine checks every read itself,
    /// so a store that returns what it holds as it is stays safe to use.
    fn verifies_reads(&self) -> bool {
        false
    }

    /// Stores `bytes` under `name`, replacing what was there: a small named entry beside the
    /// blobs (the summary cache keeps one per summary it remembers). Unlike a blob, an entry is
    /// mutable and not content-addressed, so whoever reads one verifies what it holds.
    /// Names are short text without NUL characters (the engine's are ASCII, under 100 bytes).
    ///
    /// The default keeps nothing, so [`get_entry`](Self::get_entry) finds nothing: a store
    /// without entries works, it just never lets a summary be reused. The built-in stores keep
    /// their entries (SQLite and PostgreSQL durably, PostgreSQL per namespace).
    fn put_entry(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (name, bytes);
        std::future::ready(Ok(()))
    }

    /// The bytes last stored under `name` by [`put_entry`](Self::put_entry), or `None`.
    /// The default finds nothing.
    fn get_entry(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send {
        let _ = name;
        std::future::ready(Ok(None))
    }
}

impl<T: Store + ?Sized> Store for Arc<T> {
    fn put(
        &self,
        hash: &ContentHash,
        bytes: &[u8],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).put(hash, bytes)
    }
    fn get(&self, hash: &ContentHash) -> impl Future<Output = Result<Vec<u8>, StoreError>> + Send {
        (**self).get(hash)
    }
    fn verifies_reads(&self) -> bool {
        (**self).verifies_reads()
    }
    fn put_entry(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).put_entry(name, bytes)
    }
    fn get_entry(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send {
        (**self).get_entry(name)
    }
}

/// Object-safe form of [`Store`], so a `Compactor` needs no type parameter.
pub(crate) trait DynStore: Send + Sync {
    fn put_dyn<'a>(
        &'a self,
        hash: &'a ContentHash,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn get_dyn<'a>(&'a self, hash: &'a ContentHash) -> BoxFuture<'a, Result<Vec<u8>, StoreError>>;
    fn verifies_reads_dyn(&self) -> bool;
    fn put_entry_dyn<'a>(
        &'a self,
        name: &'a str,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn get_entry_dyn<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>>;
}

// Every engine read and write goes through here, so this is where the `compaction.store` spans
// are made: the operation and the size, never the bytes, the hash or an entry's name.
impl<T: Store> DynStore for T {
    fn put_dyn<'a>(
        &'a self,
        hash: &'a ContentHash,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let span = store_span("put", bytes.len());
        Box::pin(traced(span, self.put(hash, bytes)))
    }
    fn get_dyn<'a>(&'a self, hash: &'a ContentHash) -> BoxFuture<'a, Result<Vec<u8>, StoreError>> {
        let span = store_span("get", 0);
        Box::pin(traced(span, self.get(hash)))
    }
    fn verifies_reads_dyn(&self) -> bool {
        self.verifies_reads()
    }
    fn put_entry_dyn<'a>(
        &'a self,
        name: &'a str,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let span = store_span("put_entry", bytes.len());
        Box::pin(traced(span, self.put_entry(name, bytes)))
    }
    fn get_entry_dyn<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let span = store_span("get_entry", 0);
        Box::pin(traced(span, self.get_entry(name)))
    }
}

fn store_span(op: &'static str, bytes: usize) -> tracing::Span {
    tracing::trace_span!(
        "compaction.store",
        op,
        bytes,
        refusal = tracing::field::Empty
    )
}

/// Runs a store call in its span and records the kind of its failure.
async fn traced<T>(
    span: tracing::Span,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let result = call.instrument(span.clone()).await;
    if let Err(error) = &result {
        span.record("refusal", error.kind());
    }
    result
}

/// Reads a blob and proves it is the one the pointer names.
pub(crate) async fn get_verified(
    store: &dyn DynStore,
    hash: &ContentHash,
) -> Result<Vec<u8>, StoreError> {
    let bytes = store.get_dyn(hash).await?;
    if !store.verifies_reads_dyn() && !hash.matches(&bytes) {
        return Err(StoreError::Integrity { hash: *hash });
    }
    Ok(bytes)
}

/// An entry's name as an error message shows it: at most 100 characters, escaped.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn entry_name_shown(name: &str) -> String {
    name.chars()
        .take(100)
        .flat_map(char::escape_debug)
        .collect()
}
