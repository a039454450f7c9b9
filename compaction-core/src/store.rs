//! Where spilled state lives: content-addressed blobs behind verifiable pointers.

use crate::BoxFuture;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// SHA-256 of a value's canonical bytes: the fingerprint of protected state and the address of
/// spilled state.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 32]);

impl ContentHash {
    /// Hashes `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ContentHash(Sha256::digest(bytes).into())
    }

    /// The raw digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from_digit((b >> 4) as u32, 16).expect("nibble"));
            s.push(char::from_digit((b & 15) as u32, 16).expect("nibble"));
        }
        s
    }

    /// Parses 64 lowercase or uppercase hex characters.
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() != 64 || !hex.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Some(ContentHash(out))
    }

    /// Whether `bytes` hash to this value.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        ContentHash::of(bytes) == *self
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.to_hex())
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.to_hex())
    }
}

impl Serialize for ContentHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ContentHash::from_hex(&s).ok_or_else(|| serde::de::Error::custom("not a sha256 hex digest"))
    }
}

/// The fingerprint of a protected value: the SHA-256 of its canonical JSON bytes.
pub type Fingerprint = ContentHash;

/// A content-addressed pointer into a [`Store`]: `store://sha256:<64 hex>`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Pointer(ContentHash);

/// The scheme prefix of every store pointer.
pub const POINTER_PREFIX: &str = "store://sha256:";

impl Pointer {
    /// The pointer that addresses `hash`.
    pub fn for_hash(hash: ContentHash) -> Self {
        Pointer(hash)
    }

    /// Parses `store://sha256:<hex>`.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        text.trim()
            .strip_prefix(POINTER_PREFIX)
            .and_then(ContentHash::from_hex)
            .map(Pointer)
            .ok_or_else(|| StoreError::InvalidPointer {
                pointer: text.chars().take(200).collect(),
            })
    }

    /// The content hash the pointer names.
    pub fn hash(&self) -> ContentHash {
        self.0
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{POINTER_PREFIX}{}", self.0.to_hex())
    }
}

impl fmt::Debug for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<Pointer> for String {
    fn from(p: Pointer) -> String {
        p.to_string()
    }
}

impl TryFrom<String> for Pointer {
    type Error = StoreError;
    fn try_from(s: String) -> Result<Self, StoreError> {
        Pointer::parse(&s)
    }
}

/// Anything that names a store pointer: `Pointer`, `&str`, `String` (parsed when used).
pub trait AsPointer {
    /// The pointer, or `InvalidPointer` when the text is not one.
    fn to_pointer(&self) -> Result<Pointer, StoreError>;
}

impl AsPointer for Pointer {
    fn to_pointer(&self) -> Result<Pointer, StoreError> {
        Ok(self.clone())
    }
}

impl AsPointer for str {
    fn to_pointer(&self) -> Result<Pointer, StoreError> {
        Pointer::parse(self)
    }
}

impl AsPointer for String {
    fn to_pointer(&self) -> Result<Pointer, StoreError> {
        Pointer::parse(self)
    }
}

impl<T: AsPointer + ?Sized> AsPointer for &T {
    fn to_pointer(&self) -> Result<Pointer, StoreError> {
        (**self).to_pointer()
    }
}

impl std::str::FromStr for Pointer {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        Pointer::parse(s)
    }
}

/// A failure of a [`Store`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No blob under this hash.
    #[error("no blob stored under {hash}")]
    NotFound {
        /// The missing address.
        hash: ContentHash,
    },
    /// The stored bytes do not hash to their address.
    #[error("stored blob {hash} does not match its hash (tampered or corrupt)")]
    Integrity {
        /// The address whose content is wrong.
        hash: ContentHash,
    },
    /// The text is not a `store://sha256:<hex>` pointer.
    #[error("`{pointer}` is not a store pointer (expected store://sha256:<64 hex digits>)")]
    InvalidPointer {
        /// The text (cut to 200 characters).
        pointer: String,
    },
    /// The backend failed (I/O, database, network); the message says where.
    #[error("store backend failed: {message}")]
    Backend {
        /// What failed, with the path or address involved.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl StoreError {
    /// A backend error with a message and an optional cause.
    pub fn backend(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        StoreError::Backend {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

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

/// An in-process store. Fast and simple, but gone when the process exits: use a durable store
/// (SQLite) for anything an agent must survive a restart with.
///
/// Clones share the same blobs.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    blobs: Arc<Mutex<HashMap<ContentHash, Vec<u8>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of blobs.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds no blob.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Every stored address.
    pub fn hashes(&self) -> Vec<ContentHash> {
        self.lock().keys().copied().collect()
    }

    /// Overwrites the bytes under `hash` without checking them: for tests that tamper with
    /// stored state to prove it is detected.
    pub fn overwrite_unchecked(&self, hash: ContentHash, bytes: Vec<u8>) {
        self.lock().insert(hash, bytes);
    }

    /// The raw bytes under `hash`, unverified.
    pub fn raw(&self, hash: &ContentHash) -> Option<Vec<u8>> {
        self.lock().get(hash).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContentHash, Vec<u8>>> {
        // A panic while holding the lock cannot leave a half-written blob: insert is atomic.
        self.blobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Store for MemoryStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        // Content-addressed: an address already held has nothing to write, and an agent that
        // compacts every turn re-spills the same blobs, so skip re-hashing those. A new blob is
        // verified before it is stored (and every `get` verifies again).
        if self.lock().contains_key(hash) {
            return Ok(());
        }
        if !hash.matches(bytes) {
            return Err(StoreError::Integrity { hash: *hash });
        }
        self.lock().entry(*hash).or_insert_with(|| bytes.to_vec());
        Ok(())
    }

    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        let bytes = self
            .lock()
            .get(hash)
            .cloned()
            .ok_or(StoreError::NotFound { hash: *hash })?;
        if !hash.matches(&bytes) {
            return Err(StoreError::Integrity { hash: *hash });
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_round_trips() {
        let h = ContentHash::of(b"abc");
        let p = Pointer::for_hash(h);
        let text = p.to_string();
        assert!(text.starts_with("store://sha256:ba7816bf"));
        assert_eq!(Pointer::parse(&text).unwrap(), p);
        assert!(Pointer::parse("store://sha256:zz").is_err());
        assert!(Pointer::parse("file:///etc").is_err());
    }

    #[test]
    fn memory_store_detects_tamper() {
        let store = MemoryStore::new();
        let h = ContentHash::of(b"value");
        crate::block_on(store.put(&h, b"value")).unwrap();
        assert_eq!(crate::block_on(store.get(&h)).unwrap(), b"value");
        store.overwrite_unchecked(h, b"valuf".to_vec());
        assert!(matches!(
            crate::block_on(store.get(&h)),
            Err(StoreError::Integrity { .. })
        ));
        // A new blob under an address that is not its hash is refused.
        let wrong = ContentHash::of(b"something else");
        assert!(matches!(
            crate::block_on(store.put(&wrong, b"value")),
            Err(StoreError::Integrity { .. })
        ));
        assert!(store.raw(&wrong).is_none());
    }
}
