//! The warm twin: a second session resumed from a copy of the durable store and ledger, as a
//! restarted process would be, right after the warm session made a request. At the warm
//! session's next request the twin is given what the warm one got since (the same messages,
//! the same notes, the ledger as it is now) and must send byte for byte the same request
//! (`resume_matches_warm`). It runs on its own fault-free copies, so it only compares steps the
//! fault plan left alone.

use crate::agent::{fresh_agent, RecordingSummarizer, SimAgent};
use crate::ctx::{Ctx, AGENT};
use crate::faults::{FaultClasses, Faults};
use compaction::session::{Session, SessionError, SessionRequest};
use compaction::{block_on, EffectLedger, MemoryLedger, MemoryStore, Store};

/// The twin runs on memory copies: only a run on the memory backend has one.
const NOT_MEMORY: &str = "the twin copies a memory store; this run is on another backend";

/// A session resumed from a copy, and how much of the warm transcript it holds.
pub struct Twin {
    session: Session<SimAgent>,
    ledger: MemoryLedger,
    /// The sequence it resumed from.
    pub from: u64,
}

/// A copy of `store`'s blobs, entries and `AGENT`'s checkpoint.
fn copy_store(store: &MemoryStore) -> MemoryStore {
    let copy = MemoryStore::new();
    for hash in store.hashes() {
        if let Some(bytes) = store.raw(&hash) {
            copy.overwrite_unchecked(hash, bytes);
        }
    }
    for name in store.entry_names() {
        if let Ok(Some(bytes)) = block_on(store.get_entry(&name)) {
            copy.overwrite_entry(&name, bytes);
        }
    }
    if let Some((json, sha256)) = store.raw_checkpoint(AGENT) {
        copy.overwrite_checkpoint(AGENT, json, sha256);
    }
    copy
}

/// Brings `twin`'s ledger to what `ledger` holds now (forward only, as a ledger moves).
fn sync(ledger: &impl EffectLedger, twin: &MemoryLedger) -> Result<(), String> {
    let all = block_on(ledger.load_all()).map_err(|e| e.to_string())?;
    for (scope, log) in &all {
        block_on(twin.sync_log(scope, log)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

impl Twin {
    /// Opens a twin from copies of `ctx`'s store and ledger as they are now.
    pub fn open(ctx: &Ctx) -> Result<Twin, String> {
        let store = copy_store(ctx.store.inner.as_memory().ok_or(NOT_MEMORY)?);
        let ledger = MemoryLedger::new();
        sync(&ctx.ledger.inner, &ledger)?;
        let newest =
            block_on(ctx.ledger.inner.newest_checkpoint(AGENT)).map_err(|e| e.to_string())?;
        if let Some(newest) = newest {
            block_on(ledger.advance_checkpoint(AGENT, newest)).map_err(|e| e.to_string())?;
        }
        // Its summarizer answers like the warm one outside the fault window.
        let quiet = RecordingSummarizer::new(Faults::new(ctx.seed, FaultClasses::NONE));
        let session = ctx
            .builder(quiet)
            .store(store)
            .ledger(ledger.clone())
            .open_blocking(fresh_agent)
            .map_err(|e| e.to_string())?;
        let from = session.resumed_from().ok_or("the twin started fresh")?;
        Ok(Twin {
            session,
            ledger,
            from,
        })
    }

    /// Gives the twin what `warm` got since the twin opened, and makes its request.
    pub fn catch_up(
        &mut self,
        ctx: &Ctx,
        warm: &Session<SimAgent>,
    ) -> Result<Result<SessionRequest, SessionError>, String> {
        sync(&ctx.ledger.inner, &self.ledger)?;
        let have = self.session.transcript().len();
        let messages = warm.transcript().messages();
        if have > messages.len() {
            return Err("the twin holds more messages than the warm session".into());
        }
        for message in &messages[have..] {
            self.session.push(message.clone());
        }
        let state = self.session.state_mut();
        state.notes = warm.state().notes.clone();
        state.plan_step = warm.state().plan_step;
        Ok(self.session.next_request_blocking())
    }
}
