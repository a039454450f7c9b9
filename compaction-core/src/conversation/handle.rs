//! Short handles (`p17`) and the table that maps them to full content addresses: what a
//! marker names, what the pointer tool resolves, and what a checkpoint keeps.

use crate::store::Pointer;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

// Short handles: what the model reads in a marker (`p17`, a few tokens) instead of a full
// `store://sha256:<64 hex>` pointer (about 38 tokens), and the table that maps them back. One
// table per agent: numbering only goes up (a handle is never reused for another address, so it
// is never ambiguous within an agent), and an address that is still referenced keeps its
// handle from one request to the next (stable bytes, cache-friendly). The checkpoint keeps the
// table's referenced part with full addresses, so every read is still verified against the
// full hash.

/// A short name for a stored blob, as markers show it: `p` and a positive number (`p17`).
///
/// Parsing accepts `p17` and `⟦p17⟧` (surrounding whitespace ignored); leading zeros are
/// refused, so every handle has exactly one spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Handle(NonZeroU64);

impl Handle {
    /// The handle numbered `n` (`None` for 0).
    pub fn new(n: u64) -> Option<Self> {
        NonZeroU64::new(n).map(Handle)
    }

    /// Its number.
    pub fn number(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}

/// Why a text is not a handle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a handle (expected p followed by a number, like p17)")]
pub struct HandleParseError;

impl FromStr for Handle {
    type Err = HandleParseError;

    fn from_str(text: &str) -> Result<Self, HandleParseError> {
        let text = text.trim();
        let text = text
            .strip_prefix('⟦')
            .and_then(|t| t.strip_suffix('⟧'))
            .unwrap_or(text);
        let digits = text.strip_prefix('p').ok_or(HandleParseError)?;
        if digits.is_empty()
            || digits.len() > 19
            || digits.starts_with('0')
            || !digits.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(HandleParseError);
        }
        digits
            .parse()
            .ok()
            .and_then(Handle::new)
            .ok_or(HandleParseError)
    }
}

impl TryFrom<String> for Handle {
    type Error = HandleParseError;
    fn try_from(text: String) -> Result<Self, HandleParseError> {
        text.parse()
    }
}

impl From<Handle> for String {
    fn from(handle: Handle) -> String {
        handle.to_string()
    }
}

/// The handles of one agent's compactions and the full addresses they stand for.
///
/// Handles are numbered from 1 up; [`assign`](Self::assign) gives an address its existing handle
/// or the next number. [`retain`](Self::retain) forgets the handles no longer referenced (their
/// numbers are never given out again). Serialized as `{"next": n, "handles": {"p1": "store://…"}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StoredTable", into = "StoredTable")]
pub struct HandleTable {
    next: u64,
    by_handle: BTreeMap<Handle, Pointer>,
    by_pointer: HashMap<Pointer, Handle>,
}

#[derive(Serialize, Deserialize)]
struct StoredTable {
    next: u64,
    handles: BTreeMap<Handle, Pointer>,
}

/// Why a stored handle table was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleTableError {
    /// A handle is at or above the next number to give out.
    #[error("handle {handle} is not below the table's next number {next}")]
    Ahead {
        /// The handle.
        handle: Handle,
        /// The table's next number.
        next: u64,
    },
    /// Two handles name one address.
    #[error("handles {first} and {second} name the same address")]
    Duplicate {
        /// The first.
        first: Handle,
        /// The second.
        second: Handle,
    },
}

impl TryFrom<StoredTable> for HandleTable {
    type Error = HandleTableError;

    fn try_from(stored: StoredTable) -> Result<Self, HandleTableError> {
        let mut by_pointer = HashMap::with_capacity(stored.handles.len());
        for (handle, pointer) in &stored.handles {
            if handle.number() >= stored.next.max(1) {
                return Err(HandleTableError::Ahead {
                    handle: *handle,
                    next: stored.next,
                });
            }
            if let Some(first) = by_pointer.insert(pointer.clone(), *handle) {
                return Err(HandleTableError::Duplicate {
                    first,
                    second: *handle,
                });
            }
        }
        Ok(HandleTable {
            next: stored.next,
            by_handle: stored.handles,
            by_pointer,
        })
    }
}

impl From<HandleTable> for StoredTable {
    fn from(table: HandleTable) -> StoredTable {
        StoredTable {
            next: table.next,
            handles: table.by_handle,
        }
    }
}

impl HandleTable {
    /// An empty table: the first handle will be `p1`.
    pub fn new() -> Self {
        HandleTable {
            next: 1,
            ..Self::default()
        }
    }

    /// The handle of `pointer`: its existing one, or the next number.
    pub fn assign(&mut self, pointer: &Pointer) -> Handle {
        if let Some(handle) = self.by_pointer.get(pointer) {
            return *handle;
        }
        let handle = Handle::new(self.next.max(1)).expect("above zero");
        self.next = handle.number() + 1;
        self.by_handle.insert(handle, pointer.clone());
        self.by_pointer.insert(pointer.clone(), handle);
        handle
    }

    /// The full address behind `handle`, if the table has it.
    pub fn pointer(&self, handle: Handle) -> Option<&Pointer> {
        self.by_handle.get(&handle)
    }

    /// The handle of `pointer`, if it has one.
    pub fn handle(&self, pointer: &Pointer) -> Option<Handle> {
        self.by_pointer.get(pointer).copied()
    }

    /// Every handle and its address, in handle order.
    pub fn iter(&self) -> impl Iterator<Item = (Handle, &Pointer)> + '_ {
        self.by_handle.iter().map(|(h, p)| (*h, p))
    }

    /// Number of handles held.
    pub fn len(&self) -> usize {
        self.by_handle.len()
    }

    /// Whether the table holds no handle.
    pub fn is_empty(&self) -> bool {
        self.by_handle.is_empty()
    }

    /// The number the next new handle gets.
    pub fn next_number(&self) -> u64 {
        self.next.max(1)
    }

    /// Keeps only the handles `keep` says are still referenced; their numbers stay used.
    pub fn retain(&mut self, mut keep: impl FnMut(Handle) -> bool) {
        self.by_handle.retain(|handle, _| keep(*handle));
        let by_handle = &self.by_handle;
        self.by_pointer
            .retain(|_, handle| by_handle.contains_key(handle));
    }
}

#[cfg(test)]
mod tests;
