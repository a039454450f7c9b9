//! [`FaultyStore`]: the run's store (memory, SQLite or PostgreSQL) behind the fault plan.
//! Torn blobs exist only on memory; on SQLite and PostgreSQL, whose writes are transactions, a
//! torn write is one that landed whole with its acknowledgement lost.

use super::{die, flip, injected, Decision, Faults, Op};
use crate::backend::Durable;
use crate::sabotage::Sabotage;
use compaction::fence::Fence;
use compaction::{
    BoxFuture, CheckpointError, CheckpointInfo, CheckpointPart, CheckpointRow, CheckpointStore,
    ContentHash, Store, StoreError, TakenEpoch,
};
use std::time::Duration;

/// The run's store (on whichever backend it chose) behind the fault plan: blobs, entries,
/// checkpoints and the fence.
#[derive(Clone)]
pub struct FaultyStore {
    /// The durable store (survives every crash).
    pub inner: Durable,
    faults: Faults,
}

impl FaultyStore {
    /// `inner` behind `faults`.
    pub fn new(inner: Durable, faults: Faults) -> Self {
        FaultyStore { inner, faults }
    }

    fn sabotaged(&self, what: Sabotage) -> bool {
        self.faults.sabotage() == Some(what)
    }
}

/// A blob write that also repairs a blob torn by an earlier write (only the memory store can
/// hold one: SQLite and PostgreSQL write a blob in one transaction). The store's own write
/// comes first, so a superseded handle is refused before anything is touched.
async fn put_repairing(
    store: &Durable,
    hash: &ContentHash,
    bytes: &[u8],
) -> Result<(), StoreError> {
    store.put(hash, bytes).await?;
    if let Some(memory) = store.as_memory() {
        let torn = memory.raw(hash).is_some_and(|held| !hash.matches(&held));
        if torn && hash.matches(bytes) {
            memory.overwrite_unchecked(*hash, bytes.to_vec());
        }
    }
    Ok(())
}

impl Store for FaultyStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        match self.faults.decide(Op::StoreWrite) {
            Decision::Fail => Err(injected("write failure")),
            Decision::Torn => {
                match self.inner.as_memory() {
                    Some(memory) if memory.raw(hash).is_none() => {
                        // Written (past the fence), then torn on the way to the disk.
                        self.inner.put(hash, bytes).await?;
                        let torn = bytes[..bytes.len() / 2].to_vec();
                        memory.overwrite_unchecked(*hash, torn);
                    }
                    Some(_) => {}
                    // A transactional store is never torn: its write lands whole, its
                    // acknowledgement is lost.
                    None => put_repairing(&self.inner, hash, bytes).await?,
                }
                Err(injected("torn write"))
            }
            Decision::Crash(applied) => {
                if applied {
                    let _ = put_repairing(&self.inner, hash, bytes).await;
                }
                die().await
            }
            _ if self.sabotaged(Sabotage::LoseBlobWrites) && !self.faults.is_suspended() => Ok(()),
            _ => put_repairing(&self.inner, hash, bytes).await,
        }
    }

    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        match self.faults.decide(Op::StoreRead) {
            Decision::Fail => Err(injected("read failure")),
            Decision::Corrupt => Ok(flip(self.inner.get(hash).await?)),
            Decision::Crash(_) => die().await,
            _ => self.inner.get(hash).await,
        }
    }

    async fn put_entry(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        match self.faults.decide(Op::StoreWrite) {
            Decision::Fail => Err(injected("entry write failure")),
            Decision::Torn => {
                let torn = &bytes[..bytes.len() / 2];
                self.inner.put_entry(name, torn).await?;
                Err(injected("torn entry write"))
            }
            Decision::Crash(applied) => {
                if applied {
                    let _ = self.inner.put_entry(name, bytes).await;
                }
                die().await
            }
            _ => self.inner.put_entry(name, bytes).await,
        }
    }

    async fn get_entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.faults.decide(Op::StoreRead) {
            Decision::Fail => Err(injected("entry read failure")),
            Decision::Corrupt => Ok(self.inner.get_entry(name).await?.map(flip)),
            Decision::Crash(_) => die().await,
            _ => self.inner.get_entry(name).await,
        }
    }
}

fn corrupt_row(row: CheckpointRow) -> CheckpointRow {
    CheckpointRow::stored(flip(row.json().to_vec()), row.sha256().map(Into::into))
}

impl FaultyStore {
    /// A checkpoint write (`save` is the inner write) behind the fault plan.
    async fn saving<F>(&self, save: impl Fn() -> F) -> Result<(), CheckpointError>
    where
        F: std::future::Future<Output = Result<(), CheckpointError>>,
    {
        match self.faults.decide(Op::CheckpointSave) {
            Decision::Fail => Err(injected("checkpoint save failure").into()),
            Decision::Torn => {
                save().await?;
                Err(injected("checkpoint saved, acknowledgement lost").into())
            }
            Decision::Crash(applied) => {
                if applied {
                    let _ = save().await;
                }
                die().await
            }
            _ if self.sabotaged(Sabotage::LoseCheckpointSaves) => Ok(()),
            _ => save().await,
        }
    }
}

impl CheckpointStore for FaultyStore {
    fn namespace(&self) -> &str {
        self.inner.namespace()
    }

    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(self.saving(move || self.inner.save_row(agent_id, row)))
    }

    fn save_row_over<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
        parent: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(self.saving(move || self.inner.save_row_over(agent_id, row, parent)))
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        Box::pin(async move {
            match self.faults.decide(Op::CheckpointLoad) {
                Decision::Fail => Err(injected("checkpoint load failure").into()),
                Decision::Corrupt => Ok(self.inner.load_row(agent_id).await?.map(corrupt_row)),
                Decision::Crash(_) => die().await,
                _ => self.inner.load_row(agent_id).await,
            }
        })
    }

    fn stores_parts(&self) -> bool {
        self.inner.stores_parts()
    }

    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        Box::pin(async move {
            match self.faults.decide(Op::CheckpointLoad) {
                Decision::Fail => Err(injected("checkpoint parts read failure").into()),
                // One part's bytes altered in storage: loading must refuse it.
                Decision::Corrupt => {
                    let mut parts = self.inner.load_parts(hashes).await?;
                    if let Some(part) = parts.pop() {
                        let bytes = flip(part.bytes().to_vec());
                        parts.push(CheckpointPart::stored(*part.hash(), bytes));
                    }
                    Ok(parts)
                }
                Decision::Crash(_) => die().await,
                _ => self.inner.load_parts(hashes).await,
            }
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        self.inner.list()
    }

    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        self.inner.delete(agent_id)
    }

    fn take_epoch<'a>(
        &'a self,
        agent_id: &'a str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> BoxFuture<'a, Result<Option<TakenEpoch>, CheckpointError>> {
        Box::pin(async move {
            let take = || self.inner.take_epoch(agent_id, at_least, lease);
            match self.faults.decide(Op::CheckpointLoad) {
                Decision::Fail => Err(injected("epoch and checkpoint read failure").into()),
                Decision::Corrupt => Ok(take().await?.map(|taken| TakenEpoch {
                    row: taken.row.map(corrupt_row),
                    ..taken
                })),
                Decision::Crash(applied) => {
                    if applied {
                        let _ = take().await;
                    }
                    die().await
                }
                _ => take().await,
            }
        })
    }

    fn renew<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            match self.faults.decide(Op::StoreWrite) {
                Decision::Fail => Err(injected("lease renewal failure").into()),
                Decision::Crash(_) => die().await,
                _ => self.inner.renew(agent_id).await,
            }
        })
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        if self.sabotaged(Sabotage::UnfencedWrappers) {
            return None;
        }
        let inner = self.inner.fenced(fence)?;
        Some(FaultyStore::new(inner, self.faults.clone()))
    }
}
