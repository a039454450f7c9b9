//! The store and ledger handles the commands use, whatever the backend: trait objects over the
//! library's traits (`CheckpointStore`, `Store` and `StoreAdmin` for a store, `EffectLedger`
//! for a ledger), which a backend's entry in the registry (`backends/`) opens. A backend's
//! errors become the tool's failures by the entry that knows them: the registry's
//! classification (`backends::failure`), which the handles are given when opened ([`Classify`]),
//! since the backends that open them sit above this file. Every command runs on every backend.

use crate::fail::Failure;
use compaction::{
    block_on, AnnotatedTransition, CheckpointInfo, CheckpointStore, Compacted, CompactionError,
    ContentHash, Effect, EffectError, EffectLedger, EffectLog, Settlement, Store as BlobStore,
    StoreAdmin, StoreError,
};
use std::collections::BTreeMap;

/// How a backend's error becomes a failure: `backends::failure`, handed to a handle when it is
/// opened.
pub type Classify = fn(&(dyn std::error::Error + 'static)) -> Failure;

/// A checkpoint loaded without its state type (the type is only a marker on `Compacted`).
pub type AnyCheckpoint = Compacted<()>;

/// What the commands use of a blob store with checkpoints, for any backend.
pub trait StoreHandle: CheckpointStore {
    /// The verified bytes of a blob.
    fn blob(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError>;
    /// The bytes of a named entry.
    fn entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Listing and garbage collection.
    fn admin(&self) -> &dyn StoreAdmin;
}

impl<T: CheckpointStore + BlobStore + StoreAdmin> StoreHandle for T {
    fn blob(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        block_on(BlobStore::get(self, hash))
    }

    fn entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        block_on(BlobStore::get_entry(self, name))
    }

    fn admin(&self) -> &dyn StoreAdmin {
        self
    }
}

/// A blob store with checkpoints, and how its backend's errors become failures.
pub struct Store(Box<dyn StoreHandle>, Classify);

impl Store {
    /// Wraps an opened backend.
    pub fn new(handle: impl StoreHandle + 'static, failure: Classify) -> Store {
        Store(Box::new(handle), failure)
    }

    fn checkpoints(&self) -> &dyn CheckpointStore {
        &*self.0
    }

    /// The namespace the checkpoints live in (`""` where the backend has none).
    pub fn namespace(&self) -> &str {
        self.checkpoints().namespace()
    }

    /// Every checkpoint, by agent id.
    pub fn list_checkpoints(&self) -> Result<Vec<CheckpointInfo>, Failure> {
        block_on(self.checkpoints().list()).map_err(|e| (self.1)(&e))
    }

    /// The latest checkpoint of `agent`.
    pub fn load_checkpoint(&self, agent: &str) -> Result<Option<AnyCheckpoint>, CompactionError> {
        block_on(self.checkpoints().load(agent)).map_err(CompactionError::from)
    }

    /// The verified bytes of a blob.
    pub fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        self.0.blob(hash)
    }

    /// The bytes of the named entry `name`.
    pub fn entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.entry(name)
    }

    /// Listing and garbage collection.
    pub fn admin(&self) -> &dyn StoreAdmin {
        self.0.admin()
    }
}

/// Why a settlement did not happen: the ledger's guard refused it, or the backend failed.
pub enum Refused {
    /// The guard's refusal (the key is not in flight, or not there).
    Guard(EffectError),
    /// The backend failed.
    Failed(Failure),
}

/// A backend's own error, for commands that look into it (`verify` reports a corrupt ledger as
/// a problem, not a failure).
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the commands read from an effect ledger, for any backend: the library's
/// `EffectLedger` with its errors turned into failures.
pub trait LedgerHandle {
    /// The records of `scope`, in record order.
    fn log(&self, scope: &str) -> Result<EffectLog, Failure>;
    /// The effect under `key` in `scope`.
    fn effect(&self, scope: &str, key: &str) -> Result<Option<Effect>, Failure>;
    /// Every non-empty scope's log; the backend's own error when it fails.
    fn all(&self) -> Result<BTreeMap<String, EffectLog>, BackendError>;
    /// Every transition of `key` in `scope`, oldest first, with operators' notes.
    fn transitions(&self, scope: &str, key: &str) -> Result<Vec<AnnotatedTransition>, Failure>;
    /// An operator's settlement of `key` in `scope`: refused by the ledger's guard, or failed.
    fn settle(&self, scope: &str, key: &str, settlement: &Settlement) -> Result<(), Refused>;
}

/// An opened effect ledger with how its errors become failures.
struct Classified<L> {
    ledger: L,
    failure: Classify,
}

impl<L: EffectLedger> LedgerHandle for Classified<L> {
    fn log(&self, scope: &str) -> Result<EffectLog, Failure> {
        block_on(self.ledger.load_log(scope)).map_err(|e| (self.failure)(&e))
    }

    fn effect(&self, scope: &str, key: &str) -> Result<Option<Effect>, Failure> {
        block_on(EffectLedger::get(&self.ledger, scope, key)).map_err(|e| (self.failure)(&e))
    }

    fn all(&self) -> Result<BTreeMap<String, EffectLog>, BackendError> {
        block_on(self.ledger.load_all()).map_err(|e| Box::new(e) as BackendError)
    }

    fn transitions(&self, scope: &str, key: &str) -> Result<Vec<AnnotatedTransition>, Failure> {
        block_on(EffectLedger::annotated_history(&self.ledger, scope, key))
            .map_err(|e| (self.failure)(&e))
    }

    fn settle(&self, scope: &str, key: &str, settlement: &Settlement) -> Result<(), Refused> {
        block_on(EffectLedger::settle(&self.ledger, scope, key, settlement)).map_err(|e| {
            match L::refusal(&e) {
                Some(refusal) => Refused::Guard(refusal.clone()),
                None => Refused::Failed((self.failure)(&e)),
            }
        })
    }
}

/// An effect ledger, and how its backend's errors become failures.
pub struct Ledger(Box<dyn LedgerHandle>, Classify);

impl Ledger {
    /// Wraps an opened backend.
    pub fn new(ledger: impl EffectLedger + 'static, failure: Classify) -> Ledger {
        Ledger(Box::new(Classified { ledger, failure }), failure)
    }

    /// The effects of `scope`, in record order.
    pub fn effects(&self, scope: &str) -> Result<Vec<Effect>, Failure> {
        Ok(self.0.log(scope)?.iter().cloned().collect())
    }

    /// The effect under `key` in `scope`.
    pub fn get(&self, scope: &str, key: &str) -> Result<Option<Effect>, Failure> {
        self.0.effect(scope, key)
    }

    /// Every scope's log.
    pub fn load_all(&self) -> Result<BTreeMap<String, EffectLog>, Failure> {
        self.0.all().map_err(|e| (self.1)(&*e))
    }

    /// Every scope's log, or the backend's own error.
    pub fn try_load_all(&self) -> Result<BTreeMap<String, EffectLog>, BackendError> {
        self.0.all()
    }

    /// The history of `key` in `scope`, oldest first, with operators' notes.
    pub fn history(&self, scope: &str, key: &str) -> Result<Vec<AnnotatedTransition>, Failure> {
        self.0.transitions(scope, key)
    }

    /// An operator's settlement of `key` in `scope`.
    pub fn settle(&self, scope: &str, key: &str, settlement: &Settlement) -> Result<(), Refused> {
        self.0.settle(scope, key, settlement)
    }
}
