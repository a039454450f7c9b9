//! [`WholeRows`]: the benches' way to run the previous checkpoint format (whole rows) on the
//! same store, for a before/after in one run (`checkpoint_bytes`, `fleet`).

use compaction::fence::Fence;
use compaction::{
    BoxFuture, CheckpointError, CheckpointInfo, CheckpointPart, CheckpointRow, CheckpointStore,
    ContentHash, Store, StoreError, TakenEpoch,
};
use std::time::Duration;

/// A store that saves whole checkpoints: it does not say it keeps parts, so every row is the
/// whole checkpoint's JSON, as every store wrote before format 4. Everything else is the
/// store's own (the fence included).
#[derive(Clone)]
pub struct WholeRows<T>(pub T);

impl<T: Store + Send + Sync> Store for WholeRows<T> {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        self.0.put(hash, bytes).await
    }
    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        self.0.get(hash).await
    }
    async fn put_entry(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.0.put_entry(name, bytes).await
    }
    async fn get_entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.get_entry(name).await
    }
}

impl<T: CheckpointStore> CheckpointStore for WholeRows<T> {
    fn namespace(&self) -> &str {
        self.0.namespace()
    }
    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.0.save_row(agent_id, row)
    }
    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        self.0.load_row(agent_id)
    }
    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        self.0.load_parts(hashes)
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        self.0.list()
    }
    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        self.0.delete(agent_id)
    }
    fn take_epoch<'a>(
        &'a self,
        agent_id: &'a str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> BoxFuture<'a, Result<Option<TakenEpoch>, CheckpointError>> {
        self.0.take_epoch(agent_id, at_least, lease)
    }
    fn save_row_over<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
        parent: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.0.save_row_over(agent_id, row, parent)
    }
    fn renew<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.0.renew(agent_id)
    }
    fn fenced(&self, fence: &Fence) -> Option<Self> {
        self.0.fenced(fence).map(WholeRows)
    }
}
