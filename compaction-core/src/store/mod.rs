//! Where spilled state lives: content-addressed blobs behind verifiable pointers.
//!
//! This file holds the vocabulary every layer names (hashes, pointers, the store's error);
//! `backend.rs` the [`Store`] trait a backend implements, `memory.rs` the in-process store.

mod backend;
pub(crate) mod canonical;
mod finite;
pub(crate) mod memory;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use backend::entry_name_shown;
pub use backend::Store;
pub(crate) use backend::{get_verified, DynStore};
pub use memory::MemoryStore;

use crate::fence::Superseded;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

#[cfg(test)]
thread_local! {
    /// Bytes hashed on this thread: what the tests count to prove a compaction hashes a value
    /// once, and never the values it only evicts.
    static HASHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Nodes walked by the round-trip check (either walk) on this thread.
    static WALKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one node walked by the round-trip check (tests only).
#[cfg(test)]
pub(crate) fn count_walked() {
    WALKED.with(|w| w.set(w.get() + 1));
}

/// The work counted on this thread since the last call: (bytes hashed, nodes walked).
#[cfg(test)]
pub(crate) fn take_work() -> (usize, usize) {
    (HASHED.with(|h| h.replace(0)), WALKED.with(|w| w.replace(0)))
}

/// SHA-256 of a value's canonical bytes: the fingerprint of protected state and the address of
/// spilled state.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 32]);

impl ContentHash {
    /// Hashes `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        #[cfg(test)]
        HASHED.with(|h| h.set(h.get() + bytes.len()));
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
    /// A write through a handle fenced for a session (see [`crate::fence`]) after a newer
    /// session of the agent opened: nothing was written.
    #[error("{0}")]
    Superseded(Superseded),
}

impl StoreError {
    /// The name of the error's kind (`not_found`, `integrity`, `invalid_pointer`, `backend`,
    /// `superseded`),
    /// for logs and metrics that must not quote what the message says.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::NotFound { .. } => "not_found",
            StoreError::Integrity { .. } => "integrity",
            StoreError::InvalidPointer { .. } => "invalid_pointer",
            StoreError::Backend { .. } => "backend",
            StoreError::Superseded(_) => "superseded",
        }
    }

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
}
