//! The [`Store`] trait a backend implements, its object-safe form, and the verified read every
//! engine read goes through.

use crate::future::BoxFuture;
use crate::store::{ContentHash, StoreError};
use std::future::Future;
use std::sync::Arc;

/// Durable storage for spilled protected state and summary sources.
///
/// Blobs are content-addressed: `put` stores bytes under their SHA-256, `get` returns them. The
/// engine verifies every blob it reads against its hash, so a store that returns wrong bytes is
/// caught (`Integrity`), but a store should verify too. Both methods return `Send` futures so
/// compaction can run on any executor.
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
}

/// Object-safe form of [`Store`], so a `Compactor` needs no type parameter.
pub(crate) trait DynStore: Send + Sync {
    fn put_dyn<'a>(
        &'a self,
        hash: &'a ContentHash,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn get_dyn<'a>(&'a self, hash: &'a ContentHash) -> BoxFuture<'a, Result<Vec<u8>, StoreError>>;
}

impl<T: Store> DynStore for T {
    fn put_dyn<'a>(
        &'a self,
        hash: &'a ContentHash,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.put(hash, bytes))
    }
    fn get_dyn<'a>(&'a self, hash: &'a ContentHash) -> BoxFuture<'a, Result<Vec<u8>, StoreError>> {
        Box::pin(self.get(hash))
    }
}

/// Reads a blob and proves it is the one the pointer names.
pub(crate) async fn get_verified(
    store: &dyn DynStore,
    hash: &ContentHash,
) -> Result<Vec<u8>, StoreError> {
    let bytes = store.get_dyn(hash).await?;
    if !hash.matches(&bytes) {
        return Err(StoreError::Integrity { hash: *hash });
    }
    Ok(bytes)
}
