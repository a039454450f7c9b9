//! [`CheckpointStore`]: the trait every checkpoint backend implements (SQLite, PostgreSQL, the
//! in-memory store), beside [`Store`](crate::store::Store) for blobs and
//! [`EffectLedger`](crate::effects::EffectLedger) for effects, and its one error type.
//!
//! A backend moves [`CheckpointRow`]s: saving one only when it holds every blob the row points
//! at, in one transaction; loading one back as stored. Encoding, the checksum and the seal are
//! checked here, once for every backend (`codec.rs`), and `tests/backends/conformance_checkpoint.rs`
//! proves each backend alike (round trip, listing, tampering, swapped rows, namespaces).

use crate::binding::{foreign_message, CheckpointBinding};
use crate::checkpoint::row::CheckpointPart;
use crate::checkpoint::row::{CheckpointInfo, CheckpointRow};
use crate::error::{CompactionError, CHECKPOINT_FIELD};
use crate::fence::{AgentLive, Fence, Superseded};
use crate::future::BoxFuture;
use crate::store::{ContentHash, StoreError};
use std::time::Duration;

/// Why a checkpoint could not be saved, loaded, listed or deleted. Converts into
/// [`CompactionError`] (so `?` works in a function returning it): `Integrity` into
/// `Integrity { field: "<checkpoint>" }`, `Foreign` into `ForeignCheckpoint`, the others into
/// `Store` and `Serialize`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A checkpoint whose seal is broken (refused on save), or stored bytes that no longer
    /// parse as a checkpoint (on load). Bytes that parse but differ from what was saved load
    /// with a broken seal instead, which every rehydration refuses.
    #[error("checkpoint integrity: the seal does not match the content, or the stored bytes do not parse")]
    Integrity,
    /// The checkpoint is bound to another agent or namespace than the one it is saved or
    /// loaded for (a row copied over this agent's), or, on save, it has a keyed seal and is
    /// bound to no agent. Converts into `CompactionError::ForeignCheckpoint`.
    #[error("{}", foreign_message(&Some(.agent_id.clone()), .namespace, .found))]
    Foreign {
        /// The agent id it was saved or loaded under.
        agent_id: String,
        /// This store's namespace (`""` where there is none).
        namespace: String,
        /// The binding it carries (`None`: bound to no agent).
        found: Option<Box<CheckpointBinding>>,
    },
    /// The checkpoint could not be serialized.
    #[error("cannot serialize the checkpoint: {0}")]
    Serialize(String),
    /// The agent id holds a NUL character. PostgreSQL text cannot hold one, so no backend
    /// stores one: every backend refuses it alike (save, load and delete), before reading or
    /// writing anything.
    #[error(
        "agent id `{}` contains a NUL character, which no checkpoint store keeps",
        agent_id.escape_debug()
    )]
    NulAgentId {
        /// The agent id given.
        agent_id: String,
    },
    /// The backend failed, or (`StoreError::NotFound`) the checkpoint points at a blob this
    /// store does not hold: such a checkpoint could not be rehydrated after a restart, so it
    /// is never saved (compact with this store first). (A fenced write's refusal converts into
    /// [`Superseded`](Self::Superseded), never into this.)
    #[error(transparent)]
    Store(StoreError),
    /// A write through a fenced handle ([`CheckpointStore::fenced`]) after a newer session of
    /// the agent opened: nothing was written.
    #[error("{0}")]
    Superseded(Superseded),
    /// [`take_epoch`](CheckpointStore::take_epoch) with a lease while another session of the
    /// agent wrote within it: nothing was taken.
    #[error("{0}")]
    Live(AgentLive),
    /// [`save_row_over`](CheckpointStore::save_row_over) over a checkpoint the new one was not
    /// built on: the agent's newest checkpoint is not the one this writer loaded or saved last
    /// (another writer saved since). Nothing was written: open the agent again.
    #[error(
        "agent `{}`: the checkpoint was built on {}, but the store's newest is {}: another \
         writer saved since; nothing was written: open the agent again",
        agent_id.escape_debug(),
        parent_name(.expected),
        parent_name(.found)
    )]
    Conflict {
        /// The agent id.
        agent_id: String,
        /// The row checksum the save was built on (`None`: the agent had no checkpoint).
        expected: Option<String>,
        /// The row checksum held (`None`: the agent has no checkpoint).
        found: Option<String>,
    },
}

/// A store's error as the checkpoint error it is: a fenced handle's refusal is
/// [`CheckpointError::Superseded`] (one place, so no backend reports it as a store failure),
/// anything else the store's failure.
impl From<StoreError> for CheckpointError {
    fn from(error: StoreError) -> CheckpointError {
        match error {
            StoreError::Superseded(refusal) => CheckpointError::Superseded(refusal),
            other => CheckpointError::Store(other),
        }
    }
}

/// Whether a save built on `parent` may go over the row whose checksum is `found`: only when
/// they are the same checkpoint (or both none); [`CheckpointError::Conflict`] otherwise.
pub(crate) fn check_parent(
    agent_id: &str,
    parent: Option<&str>,
    found: Option<String>,
) -> Result<(), CheckpointError> {
    if found.as_deref() == parent {
        return Ok(());
    }
    Err(CheckpointError::conflict(agent_id, parent, found))
}

impl CheckpointError {
    /// The refusal of a save built on `parent` over the row whose checksum is `found`.
    pub(crate) fn conflict(
        agent_id: &str,
        parent: Option<&str>,
        found: Option<String>,
    ) -> CheckpointError {
        CheckpointError::Conflict {
            agent_id: agent_id.to_owned(),
            expected: parent.map(str::to_owned),
            found,
        }
    }
}

/// A parent checkpoint in a [`CheckpointError::Conflict`] message: its checksum's start.
fn parent_name(sha256: &Option<String>) -> String {
    match sha256 {
        Some(hex) => format!("checkpoint {}", hex.chars().take(12).collect::<String>()),
        None => "no checkpoint".to_owned(),
    }
}

/// What [`CheckpointStore::take_epoch`] took: the session's epoch, and the agent's checkpoint
/// row as it was when the epoch was taken (read in the same transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenEpoch {
    /// The epoch now the agent's newest.
    pub epoch: u64,
    /// The agent's newest checkpoint row, as stored; `None` when it has none.
    pub row: Option<CheckpointRow>,
}

impl From<CheckpointError> for CompactionError {
    fn from(error: CheckpointError) -> CompactionError {
        match error {
            CheckpointError::Integrity => CompactionError::checkpoint_integrity(),
            CheckpointError::Foreign {
                agent_id,
                namespace,
                found,
            } => CompactionError::ForeignCheckpoint {
                agent_id: Some(agent_id),
                namespace,
                found,
            },
            CheckpointError::Serialize(message) => CompactionError::Serialize {
                field: CHECKPOINT_FIELD.into(),
                message,
            },
            CheckpointError::Store(error) => CompactionError::Store(error),
            CheckpointError::Superseded(refusal) => {
                CompactionError::Store(StoreError::Superseded(refusal))
            }
            e @ (CheckpointError::Live(_) | CheckpointError::Conflict { .. }) => {
                CompactionError::Store(StoreError::Backend {
                    message: e.to_string(),
                    source: Some(Box::new(e)),
                })
            }
            e @ CheckpointError::NulAgentId { .. } => CompactionError::Config(e.to_string()),
        }
    }
}

/// Refuses an agent id with a NUL character ([`CheckpointError::NulAgentId`]): every backend
/// calls it first, so all of them refuse the same id alike.
pub(crate) fn check_agent_id(agent_id: &str) -> Result<(), CheckpointError> {
    if agent_id.contains('\0') {
        return Err(CheckpointError::NulAgentId {
            agent_id: agent_id.to_owned(),
        });
    }
    Ok(())
}

/// Where an agent's latest checkpoint is kept, so a killed agent resumes from it: one row per
/// agent id (per namespace, where the backend has namespaces).
///
/// Object-safe and async like [`EffectLedger`](crate::effects::EffectLedger): the methods
/// return boxed `Send` futures, so callers hold a `dyn CheckpointStore` whatever the backend.
/// A backend implements the four operations on rows; callers save and load typed checkpoints
/// with `save` and `load` on the trait object (`&dyn CheckpointStore`, `Arc<dyn
/// CheckpointStore>`), which encode, check and decode the rows the same way for every backend.
/// (`SqliteStore` also has synchronous `save_checkpoint` and `load_checkpoint`; `PgStore`'s are
/// `async`, like every method of it that talks to the server.)
///
/// ```
/// use compaction::{Compactable, CheckpointStore, Compactor, MemoryStore};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
/// struct State {
///     #[protected]
///     step: u32,
/// }
///
/// let store = MemoryStore::new();
/// let compactor = Compactor::builder().budget(100).store(store.clone()).build()?;
/// let compacted = compactor.compact_blocking(&State { step: 4 })?;
///
/// // Any backend, held as a trait object.
/// let checkpoints: &dyn CheckpointStore = &store;
/// compaction::block_on(checkpoints.save("agent-1", &compacted))?;
/// let loaded = compaction::block_on(checkpoints.load::<State>("agent-1"))?.expect("saved");
/// assert_eq!(compactor.rehydrate_blocking(&loaded, &compaction::NoReacquire)?, State { step: 4 });
/// assert_eq!(compaction::block_on(checkpoints.list())?.len(), 1);
/// # Ok::<(), compaction::CompactionError>(())
/// ```
pub trait CheckpointStore: Send + Sync {
    /// The namespace this handle's checkpoints live in; `""` for a backend without namespaces
    /// (SQLite, memory).
    fn namespace(&self) -> &str;

    /// Saves `row` as the latest checkpoint of `agent_id` (replacing the previous one), in one
    /// transaction, only if this store holds every blob in [`CheckpointRow::blobs`]
    /// (`Store(NotFound)` otherwise, saving nothing).
    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>>;

    /// The row saved for `agent_id`, as stored ([`CheckpointRow::stored`]); `None` when there
    /// is none.
    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>>;

    /// Whether this store keeps the parts of incremental rows (format 4): then a row saved to it
    /// is a manifest, whose [`CheckpointRow::parts`] [`save_row`](Self::save_row) stores (those
    /// it does not hold yet) in the save's transaction, and [`load_parts`](Self::load_parts)
    /// reads back. Every built-in store does; the default (a store of your own) is `false`,
    /// and its rows stay whole checkpoints. A store that wraps another forwards both.
    fn stores_parts(&self) -> bool {
        false
    }

    /// The parts stored under `hashes`, in any order, for loading a manifest
    /// ([`CheckpointRow::parts_needed`]); a part this store does not hold is left out (loading
    /// then fails with `Store(NotFound)`). The default holds none.
    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        let _ = hashes;
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// The saved checkpoints, by agent id.
    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>>;

    /// Deletes the checkpoint of `agent_id`; whether there was one. The blobs it pointed at
    /// stay (other checkpoints may share them).
    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>>;

    /// Opening a session (see [`crate::fence`]): takes `agent_id`'s next epoch, at least
    /// `at_least`, and reads its checkpoint row, in one transaction; refused with
    /// [`CheckpointError::Live`] while `lease` is given and a session of the agent wrote within
    /// it. Every write through a handle fenced at an older epoch is refused from then on.
    ///
    /// `Ok(None)`: this store does not fence (the default, for a store of your own: forward to
    /// the store you wrap). The built-in stores all fence.
    fn take_epoch<'a>(
        &'a self,
        agent_id: &'a str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> BoxFuture<'a, Result<Option<TakenEpoch>, CheckpointError>> {
        let _ = (agent_id, at_least, lease);
        Box::pin(std::future::ready(Ok(None)))
    }

    /// [`save_row`](Self::save_row), only over the checkpoint it was built on: `parent` is the
    /// [`sha256`](CheckpointRow::sha256) of the row the writer loaded or saved last (`None`:
    /// the agent had none). Refused with [`CheckpointError::Conflict`] when the agent's newest
    /// row is another, so two writers never overwrite each other's checkpoints, not even at the
    /// same sequence. The built-in stores compare and write in one transaction; the default
    /// (for a store of your own) reads, compares and then saves, which narrows the race but
    /// does not close it.
    fn save_row_over<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
        parent: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            let found = self.load_row(agent_id).await?;
            check_parent(agent_id, parent, found.and_then(|row| row.sha256))?;
            self.save_row(agent_id, row).await
        })
    }

    /// Renews the lease of the session this handle is fenced for (see
    /// [`OpenMode::RefuseIfLive`](crate::fence::OpenMode)), writing nothing else; refused with
    /// [`CheckpointError::Superseded`] once a newer session opened. A handle without a fence
    /// (and the default, for a store of your own) has nothing to renew.
    fn renew<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let _ = agent_id;
        Box::pin(std::future::ready(Ok(())))
    }

    /// A handle on the same store whose every write (checkpoint saves and deletes, blob and
    /// entry puts) is conditional on `fence` holding its agent's newest epoch, checked in the
    /// write's own transaction. `None`: this store does not fence (the default).
    fn fenced(&self, fence: &Fence) -> Option<Self>
    where
        Self: Sized,
    {
        let _ = fence;
        None
    }
}
