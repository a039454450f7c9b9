//! Side effects with an exact tri-state status that compaction copies verbatim: the records
//! ([`Effect`], [`EffectStatus`]), the one state machine every log and ledger applies
//! (`machine.rs`), the in-memory [`EffectLog`], the [`EffectLedger`] trait durable ledgers
//! implement with the [`Transition`]s they record, an in-memory [`MemoryLedger`], and compaction
//! bound to a ledger
//! ([`Compactor::compact_with_ledger`](crate::Compactor::compact_with_ledger)).
//!
//! A summary can say "migrated the users table"; only a ledger can say *which* migration, under
//! which idempotency key, and whether it committed, never started, or timed out with an unknown
//! outcome. Records are never summarized, and an `Unknown` status is never collapsed.

pub(crate) mod error;
pub(crate) mod ledger;
pub(crate) mod log;
pub(crate) mod machine;
pub(crate) mod memory;
pub(crate) mod record;
pub(crate) mod transition;

pub use error::EffectError;
pub use ledger::EffectLedger;
pub use memory::MemoryLedger;
pub use record::{Effect, EffectLog, EffectRecords, EffectStatus};
pub use transition::{SyncSummary, Transition};
