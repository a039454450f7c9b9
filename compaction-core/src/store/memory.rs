//! [`MemoryStore`]: the in-process store, for tests and short-lived agents.

use crate::fence::{now_ms, Fence, FenceRecord};
use crate::store::backend::Store;
use crate::store::{ContentHash, StoreError};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// An in-process store. Fast and simple, but gone when the process exits: use a durable store
/// (SQLite) for anything an agent must survive a restart with.
///
/// Clones share the same blobs, named entries (the summary cache) and checkpoints (it is a
/// `CheckpointStore` too, without namespaces). A handle
/// [`fenced`](crate::checkpoint::CheckpointStore::fenced) for a session checks its epoch under
/// the fences' lock, held through each write (see [`crate::fence`]).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    blobs: Arc<Mutex<HashMap<ContentHash, Vec<u8>>>>,
    entries: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    checkpoints: Arc<Mutex<BTreeMap<String, MemoryCheckpoint>>>,
    /// Each agent's newest epoch. Locked first, before any other of the store's locks.
    fences: Arc<Mutex<BTreeMap<String, FenceRecord>>>,
    /// The session this handle writes for, when fenced.
    fence: Option<Fence>,
}

/// The fences' lock, held through a write: the proof that the handle's epoch was the newest
/// when the write was made (none for an unfenced handle).
pub(crate) struct WriteLock<'a> {
    _held: Option<MutexGuard<'a, BTreeMap<String, FenceRecord>>>,
}

/// One agent's checkpoint as the memory store keeps it: a checkpoint row's stored parts
/// (`checkpoint/memory.rs` reads and writes them).
#[derive(Debug, Clone)]
pub(crate) struct MemoryCheckpoint {
    pub json: Vec<u8>,
    pub sha256: Option<String>,
    pub state_type: String,
    pub saved_at: SystemTime,
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

    /// Stores the parts of an incremental checkpoint row (address and bytes) that this store
    /// does not hold yet.
    pub(crate) fn insert_parts<'a>(
        &self,
        parts: impl IntoIterator<Item = (&'a ContentHash, &'a [u8])>,
    ) {
        let mut blobs = self.lock();
        for (hash, bytes) in parts {
            blobs.entry(*hash).or_insert_with(|| bytes.to_vec());
        }
    }

    /// The raw bytes under `hash`, unverified.
    pub fn raw(&self, hash: &ContentHash) -> Option<Vec<u8>> {
        self.lock().get(hash).cloned()
    }

    /// The names of the named entries ([`Store::put_entry`]), sorted.
    pub fn entry_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.lock_entries().keys().cloned().collect();
        names.sort();
        names
    }

    /// Overwrites the named entry `name`, as [`Store::put_entry`] does: for tests that tamper
    /// with an entry to prove its reader catches it.
    pub fn overwrite_entry(&self, name: &str, bytes: Vec<u8>) {
        self.lock_entries().insert(name.to_owned(), bytes);
    }

    /// The stored JSON and checksum of `agent_id`'s checkpoint, as they are: for tests that
    /// tamper with a checkpoint to prove loading catches it.
    pub fn raw_checkpoint(&self, agent_id: &str) -> Option<(Vec<u8>, Option<String>)> {
        let checkpoints = self.checkpoints();
        let saved = checkpoints.get(agent_id)?;
        Some((saved.json.clone(), saved.sha256.clone()))
    }

    /// Overwrites the stored JSON and checksum of `agent_id`'s checkpoint (creating it, with an
    /// empty state type, when there is none), unchecked: for tests that tamper with a
    /// checkpoint to prove loading catches it.
    pub fn overwrite_checkpoint(&self, agent_id: &str, json: Vec<u8>, sha256: Option<String>) {
        let mut checkpoints = self.checkpoints();
        let saved = checkpoints
            .entry(agent_id.to_owned())
            .or_insert_with(|| MemoryCheckpoint {
                json: Vec::new(),
                sha256: None,
                state_type: String::new(),
                saved_at: SystemTime::now(),
            });
        saved.json = json;
        saved.sha256 = sha256;
    }

    /// The fences, by agent id.
    pub(crate) fn fences(&self) -> MutexGuard<'_, BTreeMap<String, FenceRecord>> {
        // Each change is one insert: a panic cannot leave half a record.
        self.fences.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks (and renews) this handle's fence for a write, holding the fences' lock until the
    /// returned guard drops: refused with [`StoreError::Superseded`] once a newer session of
    /// the agent opened. An unfenced handle writes freely.
    pub(crate) fn write_lock(&self) -> Result<WriteLock<'_>, StoreError> {
        let Some(fence) = &self.fence else {
            return Ok(WriteLock { _held: None });
        };
        let mut fences = self.fences();
        let held = fences.get(fence.agent_id()).copied();
        if let Some(renewed) =
            FenceRecord::check(held, fence, now_ms()).map_err(StoreError::Superseded)?
        {
            fences.insert(fence.agent_id().to_owned(), renewed);
        }
        Ok(WriteLock {
            _held: Some(fences),
        })
    }

    /// This store, with every write conditional on `fence`.
    pub(crate) fn with_fence(&self, fence: &Fence) -> MemoryStore {
        MemoryStore {
            fence: Some(fence.clone()),
            ..self.clone()
        }
    }

    /// The fence this handle writes under.
    pub(crate) fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    /// Whether a blob is stored under `hash` (unverified).
    pub(crate) fn holds(&self, hash: &ContentHash) -> bool {
        self.lock().contains_key(hash)
    }

    /// The checkpoints, by agent id.
    pub(crate) fn checkpoints(&self) -> MutexGuard<'_, BTreeMap<String, MemoryCheckpoint>> {
        // Each change is one insert or remove: a panic cannot leave half a checkpoint.
        self.checkpoints.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContentHash, Vec<u8>>> {
        // A panic while holding the lock cannot leave a half-written blob: insert is atomic.
        self.blobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Store for MemoryStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        // Content-addressed: an address already held has nothing to write, and an agent that
        // compacts every turn re-spills the same blobs, so skip re-hashing those (a fenced
        // handle is still refused once superseded, as on every backend). A new blob is verified
        // before it is stored (and every `get` verifies again).
        if self.lock().contains_key(hash) {
            return self.write_lock().map(drop);
        }
        if !hash.matches(bytes) {
            return Err(StoreError::Integrity { hash: *hash });
        }
        let _fenced = self.write_lock()?;
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

    /// `get` hashes what it read.
    fn verifies_reads(&self) -> bool {
        true
    }

    async fn put_entry(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let _fenced = self.write_lock()?;
        self.overwrite_entry(name, bytes.to_vec());
        Ok(())
    }

    async fn get_entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock_entries().get(name).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::future::block_on;
    use crate::store::{ContentHash, StoreError};

    #[test]
    fn memory_store_detects_tamper() {
        let store = MemoryStore::new();
        let h = ContentHash::of(b"value");
        block_on(store.put(&h, b"value")).unwrap();
        assert_eq!(block_on(store.get(&h)).unwrap(), b"value");
        store.overwrite_unchecked(h, b"valuf".to_vec());
        assert!(matches!(
            block_on(store.get(&h)),
            Err(StoreError::Integrity { .. })
        ));
        // A new blob under an address that is not its hash is refused.
        let wrong = ContentHash::of(b"something else");
        assert!(matches!(
            block_on(store.put(&wrong, b"value")),
            Err(StoreError::Integrity { .. })
        ));
        assert!(store.raw(&wrong).is_none());
    }
}
