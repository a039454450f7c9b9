//! Faults a session test switches on for one call: a `MemoryStore` whose next blob `put` or
//! checkpoint save fails, a `MemoryLedger` whose next read, claim, commit or sequence write
//! fails (a backend failure, not a refusal), and a summarizer that answers HTTP 429 while told.
// Each test binary uses a part of what is shared.
#![allow(dead_code)]

use compaction::{
    BoxFuture, CheckpointError, CheckpointInfo, CheckpointPart, CheckpointRow, CheckpointStore,
    ContentHash, Effect, EffectError, EffectLedger, EffectLog, EffectStatus, MemoryLedger,
    MemoryStore, Store, StoreError, Summarizer, SummarizerError, SummaryRequest,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// One switch: armed, the next matching call fails (and disarms it).
#[derive(Clone, Default)]
pub struct Switch(Arc<AtomicBool>);

impl Switch {
    pub fn arm(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn fires(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
    pub fn armed(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A `MemoryStore` whose next blob `put` or checkpoint save can be made to fail once (`save`:
/// nothing written; `lost_ack`: written, and the answer lost on the way back).
#[derive(Clone, Default)]
pub struct FlakyStore {
    pub inner: MemoryStore,
    pub put: Switch,
    pub save: Switch,
    pub lost_ack: Switch,
}

impl Store for FlakyStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        if self.put.fires() {
            return Err(StoreError::backend("injected put failure", "disk full"));
        }
        self.inner.put(hash, bytes).await
    }
    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        self.inner.get(hash).await
    }
    async fn put_entry(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.put_entry(name, bytes).await
    }
    async fn get_entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get_entry(name).await
    }
}

impl CheckpointStore for FlakyStore {
    fn namespace(&self) -> &str {
        CheckpointStore::namespace(&self.inner)
    }
    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        if self.save.fires() {
            return Box::pin(async {
                Err(CheckpointError::Store(StoreError::backend(
                    "injected checkpoint save failure",
                    "connection reset",
                )))
            });
        }
        if self.lost_ack.fires() {
            return Box::pin(async move {
                self.inner.save_row(agent_id, row).await?;
                Err(CheckpointError::Store(StoreError::backend(
                    "injected lost acknowledgement",
                    "connection reset after commit",
                )))
            });
        }
        self.inner.save_row(agent_id, row)
    }
    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        self.inner.load_row(agent_id)
    }
    fn stores_parts(&self) -> bool {
        self.inner.stores_parts()
    }
    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        self.inner.load_parts(hashes)
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        self.inner.list()
    }
    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        self.inner.delete(agent_id)
    }
}

/// A ledger failure that is the backend's, not a refusal.
#[derive(Debug)]
pub enum FlakyError {
    Inner(EffectError),
    Injected,
}

impl std::fmt::Display for FlakyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlakyError::Inner(e) => e.fmt(f),
            FlakyError::Injected => f.write_str("injected ledger failure: connection refused"),
        }
    }
}

impl std::error::Error for FlakyError {}

/// A `MemoryLedger` whose next read, claim, settlement or sequence write can fail once.
#[derive(Clone, Default)]
pub struct FlakyLedger {
    pub inner: MemoryLedger,
    pub load: Switch,
    pub record: Switch,
    pub begin: Switch,
    pub commit: Switch,
    pub advance: Switch,
    pub newest: Switch,
}

fn inner<T>(r: Result<T, EffectError>) -> Result<T, FlakyError> {
    r.map_err(FlakyError::Inner)
}

macro_rules! flaky {
    ($switch:expr, $call:expr) => {{
        let fires = $switch.fires();
        Box::pin(async move {
            if fires {
                return Err(FlakyError::Injected);
            }
            inner($call.await)
        })
    }};
}

impl EffectLedger for FlakyLedger {
    type Error = FlakyError;
    fn refusal(error: &FlakyError) -> Option<&EffectError> {
        match error {
            FlakyError::Inner(e) => Some(e),
            FlakyError::Injected => None,
        }
    }
    fn record<'a>(&'a self, s: &'a str, e: &'a Effect) -> BoxFuture<'a, Result<(), FlakyError>> {
        flaky!(self.record, self.inner.record(s, e))
    }
    fn begin_effect<'a>(
        &'a self,
        s: &'a str,
        e: &'a Effect,
    ) -> BoxFuture<'a, Result<(), FlakyError>> {
        flaky!(self.begin, self.inner.begin_effect(s, e))
    }
    fn commit<'a>(&'a self, s: &'a str, k: &'a str) -> BoxFuture<'a, Result<(), FlakyError>> {
        flaky!(self.commit, self.inner.commit(s, k))
    }
    fn fail<'a>(&'a self, s: &'a str, k: &'a str) -> BoxFuture<'a, Result<(), FlakyError>> {
        Box::pin(async move { inner(self.inner.fail(s, k).await) })
    }
    fn reconcile<'a>(
        &'a self,
        s: &'a str,
        k: &'a str,
        status: EffectStatus,
    ) -> BoxFuture<'a, Result<(), FlakyError>> {
        Box::pin(async move { inner(self.inner.reconcile(s, k, status).await) })
    }
    fn set_payload<'a>(
        &'a self,
        s: &'a str,
        k: &'a str,
        p: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), FlakyError>> {
        Box::pin(async move { inner(self.inner.set_payload(s, k, p).await) })
    }
    fn get<'a>(
        &'a self,
        s: &'a str,
        k: &'a str,
    ) -> BoxFuture<'a, Result<Option<Effect>, FlakyError>> {
        Box::pin(async move { inner(self.inner.get(s, k).await) })
    }
    fn load_log<'a>(&'a self, s: &'a str) -> BoxFuture<'a, Result<EffectLog, FlakyError>> {
        flaky!(self.load, self.inner.load_log(s))
    }
    fn load_all(
        &self,
    ) -> BoxFuture<'_, Result<std::collections::BTreeMap<String, EffectLog>, FlakyError>> {
        Box::pin(async move { inner(self.inner.load_all().await) })
    }
    fn sync_log<'a>(
        &'a self,
        s: &'a str,
        log: &'a EffectLog,
    ) -> BoxFuture<'a, Result<compaction::SyncSummary, FlakyError>> {
        Box::pin(async move { inner(self.inner.sync_log(s, log).await) })
    }
    fn history<'a>(
        &'a self,
        s: &'a str,
        k: &'a str,
    ) -> BoxFuture<'a, Result<Vec<compaction::Transition>, FlakyError>> {
        Box::pin(async move { inner(self.inner.history(s, k).await) })
    }
    fn settle<'a>(
        &'a self,
        s: &'a str,
        k: &'a str,
        settlement: &'a compaction::Settlement,
    ) -> BoxFuture<'a, Result<(), FlakyError>> {
        Box::pin(async move { inner(self.inner.settle(s, k, settlement).await) })
    }
    fn annotated_history<'a>(
        &'a self,
        s: &'a str,
        k: &'a str,
    ) -> BoxFuture<'a, Result<Vec<compaction::AnnotatedTransition>, FlakyError>> {
        Box::pin(async move { inner(self.inner.annotated_history(s, k).await) })
    }
    fn advance_checkpoint<'a>(
        &'a self,
        agent: &'a str,
        sequence: u64,
    ) -> BoxFuture<'a, Result<u64, FlakyError>> {
        flaky!(self.advance, self.inner.advance_checkpoint(agent, sequence))
    }
    fn newest_checkpoint<'a>(
        &'a self,
        agent: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, FlakyError>> {
        flaky!(self.newest, self.inner.newest_checkpoint(agent))
    }
}

/// A summarizer that answers HTTP 429 while `failing` is set, and extracts otherwise.
#[derive(Clone, Default)]
pub struct RateLimited {
    pub failing: Arc<AtomicBool>,
    pub calls: Arc<AtomicUsize>,
}

impl Summarizer for RateLimited {
    async fn summarize(&self, request: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(SummarizerError::Http {
                field: request.field.to_owned(),
                status: 429,
                body: "rate limited: ⟦fold f1⟧ store://sha256:00 retry later".into(),
            });
        }
        Ok(compaction::Extractive::extract(
            request.text,
            request.target_tokens,
        ))
    }
}
