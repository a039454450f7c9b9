//! Faulty wrappers around a `Store` and a `Summarizer`: fail on the n-th call, return garbage,
//! never complete in time, panic.

use compaction::{
    ContentHash, MemoryStore, Store, StoreError, Summarizer, SummarizerError, SummaryRequest,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// What a faulty store does when its fault triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFault {
    /// Works.
    None,
    /// The n-th `put` (0-based) returns a `Backend` error.
    FailPut(usize),
    /// The n-th `get` returns a `Backend` error.
    FailGet(usize),
    /// The n-th `get` returns `NotFound` (a store that lost the blob).
    LoseGet(usize),
    /// The n-th `get` returns garbage bytes instead of the blob.
    GarbageGet(usize),
    /// The n-th `get` returns the blob with one byte flipped.
    FlipGet(usize),
    /// The n-th `put` stays pending for `polls` polls, then times out with a `Backend` error.
    TimeoutPut(usize, usize),
    /// The n-th `get` stays pending for `polls` polls, then times out with a `Backend` error.
    TimeoutGet(usize, usize),
    /// The n-th `put` panics.
    PanicPut(usize),
    /// The n-th `get` panics.
    PanicGet(usize),
}

/// A store that injects one fault, and counts calls.
#[derive(Clone)]
pub struct FaultyStore {
    pub inner: MemoryStore,
    pub fault: StoreFault,
    pub puts: Arc<AtomicUsize>,
    pub gets: Arc<AtomicUsize>,
}

impl FaultyStore {
    /// Wraps `inner`.
    pub fn new(inner: MemoryStore, fault: StoreFault) -> Self {
        FaultyStore {
            inner,
            fault,
            puts: Arc::default(),
            gets: Arc::default(),
        }
    }
}

/// A future that is pending `polls` times (waking itself each time, as a real timer would),
/// then resolves with a deadline error.
pub struct Deadline {
    pub polls: usize,
}

impl Future for Deadline {
    type Output = StoreError;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<StoreError> {
        if self.polls == 0 {
            return Poll::Ready(StoreError::Backend {
                message: "deadline exceeded: store did not answer in time".into(),
                source: None,
            });
        }
        self.polls -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn backend(what: &str, n: usize) -> StoreError {
    StoreError::backend(format!("injected {what} fault on call {n}"), "disk on fire")
}

impl Store for FaultyStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        let n = self.puts.fetch_add(1, Ordering::SeqCst);
        match self.fault {
            StoreFault::FailPut(at) if at == n => return Err(backend("put", n)),
            StoreFault::TimeoutPut(at, polls) if at == n => return Err(Deadline { polls }.await),
            StoreFault::PanicPut(at) if at == n => panic!("injected panic in Store::put"),
            _ => {}
        }
        self.inner.put(hash, bytes).await
    }

    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        let n = self.gets.fetch_add(1, Ordering::SeqCst);
        match self.fault {
            StoreFault::FailGet(at) if at == n => Err(backend("get", n)),
            StoreFault::LoseGet(at) if at == n => Err(StoreError::NotFound { hash: *hash }),
            StoreFault::GarbageGet(at) if at == n => {
                Ok(b"\xff\xfe garbage \x00{\"not\":json".to_vec())
            }
            StoreFault::FlipGet(at) if at == n => {
                // Read the raw bytes, bypassing MemoryStore's own check: the engine must catch it.
                let mut bytes = self
                    .inner
                    .raw(hash)
                    .ok_or(StoreError::NotFound { hash: *hash })?;
                let mid = bytes.len() / 2;
                if let Some(b) = bytes.get_mut(mid) {
                    *b ^= 0x01;
                }
                Ok(bytes)
            }
            StoreFault::TimeoutGet(at, polls) if at == n => Err(Deadline { polls }.await),
            StoreFault::PanicGet(at) if at == n => panic!("injected panic in Store::get"),
            _ => self.inner.get(hash).await,
        }
    }
}

/// What a faulty summarizer does when its fault triggers (on the n-th call, 0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummarizerFault {
    /// Fails with `SummarizerError::Failed`.
    Fail(usize),
    /// Returns an empty string.
    Empty(usize),
    /// Returns more tokens than the target.
    OverLong(usize),
    /// Returns garbage that fits the target (control bytes, lookalike pointers).
    Garbage(usize),
    /// Panics.
    Panic(usize),
}

/// A summarizer that answers `"ok"` except for one injected fault.
#[derive(Clone)]
pub struct FaultySummarizer {
    pub fault: SummarizerFault,
    pub calls: Arc<AtomicUsize>,
}

impl FaultySummarizer {
    /// A summarizer with `fault`.
    pub fn new(fault: SummarizerFault) -> Self {
        FaultySummarizer {
            fault,
            calls: Arc::default(),
        }
    }
}

/// Garbage that fits any target of at least 8 tokens, byte for byte.
pub const GARBAGE: &str = "\u{0}\u{1b}[2J\u{202e}]store";

impl Summarizer for FaultySummarizer {
    async fn summarize(&self, req: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        match self.fault {
            SummarizerFault::Fail(at) if at == n => {
                Err(SummarizerError::failed(req.field, "injected failure"))
            }
            SummarizerFault::Empty(at) if at == n => Ok(String::new()),
            SummarizerFault::OverLong(at) if at == n => {
                Ok("overflow ".repeat(req.target_tokens + 8))
            }
            SummarizerFault::Garbage(at) if at == n => {
                Ok(super::summarizers::cut(GARBAGE, req.target_tokens).to_owned())
            }
            SummarizerFault::Panic(at) if at == n => panic!("injected panic in Summarizer"),
            _ => Ok("ok".into()),
        }
    }
}
