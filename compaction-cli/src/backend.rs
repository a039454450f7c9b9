//! The store and ledger handles the commands use, whatever the backend: trait objects over the
//! library's traits (`CheckpointStore` and `Store` for a store, `EffectLedger` for a ledger),
//! which `target.rs` opens. A backend's errors become the tool's failures by what they carry
//! (`Failure::backend`). What only SQLite offers (listing blobs, gc, notes on reconcile and in
//! the history) is reached through `sqlite()`, which names the command another backend cannot
//! run yet.

use crate::fail::{Exit, Failure};
use compaction::sqlite::SqliteStore;
use compaction::{
    block_on, CheckpointInfo, CheckpointStore, Compacted, CompactionError, ContentHash, Effect,
    EffectLedger, EffectLog, SqliteLedger, Store as BlobStore, StoreError, Transition,
};
use std::any::Any;
use std::collections::BTreeMap;

/// A checkpoint loaded without its state type (the type is only a marker on `Compacted`).
pub type AnyCheckpoint = Compacted<()>;

/// One transition of an effect's history, with who made it and why when an operator said.
pub struct Event {
    /// The transition.
    pub transition: Transition,
    /// Who.
    pub actor: Option<String>,
    /// Why.
    pub note: Option<String>,
}

/// The refusal for a command only SQLite targets support yet.
fn sqlite_only(command: &str) -> Failure {
    Failure::new(
        Exit::Usage,
        format!("`{command}` is not available on PostgreSQL targets yet"),
    )
    .hint(match command {
        "reconcile" => {
            "settle the key from Rust with `PgLedger::reconcile` (this tool keeps a note with \
             every settlement, which the PostgreSQL ledger cannot store yet)"
        }
        _ => "run it on a SQLite database, or use the library's PgStore from Rust",
    })
}

/// What the commands use of a blob store with checkpoints, for any backend.
pub trait StoreHandle: CheckpointStore {
    /// The verified bytes of a blob.
    fn blob(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError>;
    /// The concrete backend, for what only one offers.
    fn as_any(&self) -> &dyn Any;
}

impl<T: CheckpointStore + BlobStore + Any> StoreHandle for T {
    fn blob(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        block_on(BlobStore::get(self, hash))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A blob store with checkpoints.
pub struct Store(Box<dyn StoreHandle>);

impl Store {
    /// Wraps an opened backend.
    pub fn new(handle: impl StoreHandle + 'static) -> Store {
        Store(Box::new(handle))
    }

    fn checkpoints(&self) -> &dyn CheckpointStore {
        &*self.0
    }

    /// Every checkpoint, by agent id.
    pub fn list_checkpoints(&self) -> Result<Vec<CheckpointInfo>, Failure> {
        block_on(self.checkpoints().list()).map_err(|e| Failure::checkpoint(&e))
    }

    /// The latest checkpoint of `agent`.
    pub fn load_checkpoint(&self, agent: &str) -> Result<Option<AnyCheckpoint>, CompactionError> {
        block_on(self.checkpoints().load(agent)).map_err(CompactionError::from)
    }

    /// The verified bytes of a blob.
    pub fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        self.0.blob(hash)
    }

    /// The SQLite store, when the target is one.
    pub fn as_sqlite(&self) -> Option<&SqliteStore> {
        self.0.as_any().downcast_ref::<SqliteStore>()
    }

    /// The SQLite store, for what only it offers; `command` names the refused command.
    pub fn sqlite(&self, command: &str) -> Result<&SqliteStore, Failure> {
        self.as_sqlite().ok_or_else(|| sqlite_only(command))
    }
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
    /// Every transition of `key` in `scope`, oldest first.
    fn transitions(&self, scope: &str, key: &str) -> Result<Vec<Transition>, Failure>;
    /// The concrete backend, for what only one offers.
    fn as_any(&self) -> &dyn Any;
}

impl<L: EffectLedger + Any> LedgerHandle for L {
    fn log(&self, scope: &str) -> Result<EffectLog, Failure> {
        block_on(self.load_log(scope)).map_err(|e| Failure::backend(&e))
    }

    fn effect(&self, scope: &str, key: &str) -> Result<Option<Effect>, Failure> {
        block_on(EffectLedger::get(self, scope, key)).map_err(|e| Failure::backend(&e))
    }

    fn all(&self) -> Result<BTreeMap<String, EffectLog>, BackendError> {
        block_on(self.load_all()).map_err(|e| Box::new(e) as BackendError)
    }

    fn transitions(&self, scope: &str, key: &str) -> Result<Vec<Transition>, Failure> {
        block_on(EffectLedger::history(self, scope, key)).map_err(|e| Failure::backend(&e))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An effect ledger.
pub struct Ledger(Box<dyn LedgerHandle>);

impl Ledger {
    /// Wraps an opened backend.
    pub fn new(handle: impl LedgerHandle + 'static) -> Ledger {
        Ledger(Box::new(handle))
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
        self.0.all().map_err(|e| Failure::backend(&*e))
    }

    /// Every scope's log, or the backend's own error.
    pub fn try_load_all(&self) -> Result<BTreeMap<String, EffectLog>, BackendError> {
        self.0.all()
    }

    /// The history of `key` in `scope`, oldest first, with operators' notes where the backend
    /// keeps them (SQLite does).
    pub fn history(&self, scope: &str, key: &str) -> Result<Vec<Event>, Failure> {
        if let Some(sqlite) = self.0.as_any().downcast_ref::<SqliteLedger>() {
            let events = sqlite
                .scope(scope)
                .annotated_history(key)
                .map_err(|e| Failure::backend(&e))?;
            return Ok(events
                .into_iter()
                .map(|a| Event {
                    transition: a.transition,
                    actor: a.actor,
                    note: a.note,
                })
                .collect());
        }
        let transitions = self.0.transitions(scope, key)?;
        Ok(transitions
            .into_iter()
            .map(|transition| Event {
                transition,
                actor: None,
                note: None,
            })
            .collect())
    }

    /// The SQLite ledger, for what only it offers; `command` names the refused command.
    pub fn sqlite(&self, command: &str) -> Result<&SqliteLedger, Failure> {
        self.0
            .as_any()
            .downcast_ref::<SqliteLedger>()
            .ok_or_else(|| sqlite_only(command))
    }
}
