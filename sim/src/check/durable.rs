//! The checks read from ground truth, the durable store and ledger themselves (never through a
//! session): what a superseded session may not change ([`DurableView`]), and the agent's newest
//! stored checkpoint opened the way a restarted worker would ([`StoredCheckpoint`]), for
//! `no_message_lost`.

use crate::agent::SimAgent;
use crate::ctx::{Ctx, AGENT};
use compaction::{
    block_on, CheckpointStore, Compactor, EffectLedger, Message, NoReacquire, SealKey,
};

/// What a fenced session must leave as it is: the agent's newest checkpoint row, the ledger's
/// every log and sequence, and (on memory) the blobs held.
#[derive(Debug, PartialEq, Eq)]
pub struct DurableView {
    row: Option<(Vec<u8>, Option<String>)>,
    ledger: String,
    sequence: Option<u64>,
    blobs: Option<usize>,
}

impl DurableView {
    /// Reads it from `ctx`'s durable parts (call with every fault off).
    pub fn read(ctx: &Ctx) -> Result<DurableView, String> {
        let store = &ctx.store.inner;
        let row = block_on(store.load_row(AGENT)).map_err(|e| e.to_string())?;
        let ledger = block_on(ctx.ledger.inner.load_all()).map_err(|e| e.to_string())?;
        let sequence =
            block_on(ctx.ledger.inner.newest_checkpoint(AGENT)).map_err(|e| e.to_string())?;
        Ok(DurableView {
            row: row.map(|r| (r.json().to_vec(), r.sha256().map(str::to_owned))),
            ledger: serde_json::to_string(&ledger).map_err(|e| e.to_string())?,
            sequence,
            blobs: store.as_memory().map(|m| m.hashes().len()),
        })
    }

    /// What differs between `self` (before) and `after`, if anything.
    pub fn changed(&self, after: &DurableView) -> Option<&'static str> {
        if self.row != after.row {
            Some("the checkpoint row")
        } else if self.ledger != after.ledger {
            Some("the ledger's logs")
        } else if self.sequence != after.sequence {
            Some("the checkpoint sequence")
        } else if self.blobs != after.blobs {
            Some("the blobs held")
        } else {
            None
        }
    }
}

/// Opens the agent's newest stored checkpoint as a restarted worker would, without opening a
/// session (which would take an epoch and fence out the one under test).
pub struct StoredCheckpoint {
    compactor: Compactor,
    /// The checksum of the row last opened, so an unchanged row is not opened again.
    last: Option<Option<String>>,
}

impl StoredCheckpoint {
    /// A reader of `ctx`'s store.
    pub fn new(ctx: &Ctx) -> Self {
        let key = SealKey::new("sim", [7u8; 32]).expect("a 32-byte key");
        let compactor = Compactor::builder()
            .budget(ctx.budget)
            .seal_key(key)
            .store(ctx.store.inner.clone())
            .agent_id(AGENT)
            .namespace(CheckpointStore::namespace(&ctx.store.inner))
            .build()
            .expect("the checker's compactor builds");
        StoredCheckpoint {
            compactor,
            last: None,
        }
    }

    /// Opens the newest row at the next call even if it looks unchanged.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// The transcript of the newest stored checkpoint, when its row changed since the last
    /// call (`Ok(None)`: unchanged, or none stored).
    pub fn changed_transcript(&mut self, ctx: &Ctx) -> Result<Option<Vec<Message>>, String> {
        let store: &dyn CheckpointStore = &ctx.store.inner;
        let row = block_on(store.load_row(AGENT)).map_err(|e| format!("load: {e}"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sha = row.sha256().map(str::to_owned);
        if self.last.as_ref() == Some(&sha) {
            return Ok(None);
        }
        self.last = Some(sha);
        let compacted = block_on(store.load::<SimAgent>(AGENT))
            .map_err(|e| format!("the newest checkpoint does not load: {e}"))?
            .ok_or("the newest checkpoint vanished between two reads")?;
        let state = self
            .compactor
            .rehydrate_blocking(&compacted, &NoReacquire)
            .map_err(|e| format!("the newest checkpoint does not open: {e}"))?;
        Ok(Some(state.chat.messages().to_vec()))
    }
}

/// How many leading messages `a` and `b` share.
pub fn common_prefix(a: &[Message], b: &[Message]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
