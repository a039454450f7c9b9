//! The store and ledger handles the commands use, on SQLite or PostgreSQL: the same calls,
//! each backend's errors turned into the tool's failures. What only SQLite offers (listing
//! blobs, gc, notes on reconcile) is reached through `sqlite()`, which names the command a
//! PostgreSQL target cannot run yet.

use crate::fail::Failure;
use compaction::sqlite::SqliteStore;
use compaction::CheckpointInfo;
use compaction::Transition;
use compaction::{
    block_on, Compacted, CompactionError, ContentHash, Effect, EffectLog, EffectStatus,
    SqliteLedger, Store as _, StoreError,
};
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

/// The refusal for a command PostgreSQL targets do not support yet.
#[cfg(feature = "postgres")]
fn sqlite_only(command: &str) -> Failure {
    Failure::new(
        crate::fail::Exit::Usage,
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

/// A blob store with checkpoints.
pub enum Store {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL namespace.
    #[cfg(feature = "postgres")]
    Postgres(compaction::PgStore),
}

impl Store {
    /// Every checkpoint, by agent id.
    pub fn list_checkpoints(&self) -> Result<Vec<CheckpointInfo>, Failure> {
        match self {
            Store::Sqlite(store) => store.list_checkpoints(),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => block_on(store.list_checkpoints()),
        }
        .map_err(|e| Failure::store(&e))
    }

    /// The latest checkpoint of `agent`.
    pub fn load_checkpoint(&self, agent: &str) -> Result<Option<AnyCheckpoint>, CompactionError> {
        match self {
            Store::Sqlite(store) => store.load_checkpoint(agent),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => block_on(store.load_checkpoint(agent)),
        }
    }

    /// The verified bytes of a blob.
    pub fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        match self {
            Store::Sqlite(store) => block_on(store.get(hash)),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => block_on(store.get(hash)),
        }
    }

    /// The SQLite store, for what only it offers; `command` names the refused command.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub fn sqlite(&self, command: &str) -> Result<&SqliteStore, Failure> {
        match self {
            Store::Sqlite(store) => Ok(store),
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => Err(sqlite_only(command)),
        }
    }
}

/// An effect ledger.
pub enum Ledger {
    /// A SQLite file.
    Sqlite(SqliteLedger),
    /// A PostgreSQL namespace.
    #[cfg(feature = "postgres")]
    Postgres(compaction::PgLedger),
}

/// Runs the same call on either ledger, mapping its error.
macro_rules! on_ledger {
    ($ledger:expr, $handle:ident => $call:expr) => {
        match $ledger {
            Ledger::Sqlite($handle) => $call.map_err(|e| Failure::ledger(&e)),
            #[cfg(feature = "postgres")]
            Ledger::Postgres($handle) => block_on($call).map_err(|e| Failure::pg_ledger(&e)),
        }
    };
}

impl Ledger {
    /// A handle on one scope.
    pub fn scope(&self, scope: &str) -> Ledger {
        match self {
            Ledger::Sqlite(ledger) => Ledger::Sqlite(ledger.scope(scope)),
            #[cfg(feature = "postgres")]
            Ledger::Postgres(ledger) => Ledger::Postgres(ledger.scope(scope)),
        }
    }

    /// The scope's effects with `status`, in record order.
    pub fn list(&self, status: EffectStatus) -> Result<Vec<Effect>, Failure> {
        on_ledger!(self, ledger => ledger.list(status))
    }

    /// The scope's effects, in record order.
    pub fn effects(&self) -> Result<Vec<Effect>, Failure> {
        on_ledger!(self, ledger => ledger.effects())
    }

    /// The effect under `key` in this scope.
    pub fn get(&self, key: &str) -> Result<Option<Effect>, Failure> {
        on_ledger!(self, ledger => ledger.get(key))
    }

    /// Every scope's log.
    pub fn load_all(&self) -> Result<BTreeMap<String, EffectLog>, Failure> {
        on_ledger!(self, ledger => ledger.load_all())
    }

    /// The history of `key` in this scope, oldest first, with operators' notes (SQLite keeps
    /// them; PostgreSQL has none to show).
    pub fn history(&self, key: &str) -> Result<Vec<Event>, Failure> {
        match self {
            Ledger::Sqlite(ledger) => ledger
                .annotated_history(key)
                .map(|events| {
                    events
                        .into_iter()
                        .map(|a| Event {
                            transition: a.transition,
                            actor: a.actor,
                            note: a.note,
                        })
                        .collect()
                })
                .map_err(|e| Failure::ledger(&e)),
            #[cfg(feature = "postgres")]
            Ledger::Postgres(ledger) => block_on(ledger.history(key))
                .map(|events| {
                    events
                        .into_iter()
                        .map(|transition| Event {
                            transition,
                            actor: None,
                            note: None,
                        })
                        .collect()
                })
                .map_err(|e| Failure::pg_ledger(&e)),
        }
    }

    /// The SQLite ledger, for what only it offers; `command` names the refused command.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub fn sqlite(&self, command: &str) -> Result<&SqliteLedger, Failure> {
        match self {
            Ledger::Sqlite(ledger) => Ok(ledger),
            #[cfg(feature = "postgres")]
            Ledger::Postgres(_) => Err(sqlite_only(command)),
        }
    }
}
