//! The checkpoint: the [`Compacted`] a compaction returns (the window and everything needed to
//! rehydrate it), the schema fingerprint that ties it to its state type, its seals (plain and
//! keyed), the binding to its agent that the keyed seal covers, the checks it passes before
//! use, and where it is kept: the [`CheckpointStore`] every backend implements, over the
//! [`CheckpointRow`] they store (whole, or as a manifest over parts that checkpoints share).

mod backend;
mod codec;
mod compacted;
mod fields;
mod fingerprint;
mod memory;
mod owner;
mod parts;
mod row;
mod seal;
mod transcript_record;
mod typed;
mod verify;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use backend::{check_agent_id, check_parent};
pub use backend::{CheckpointError, CheckpointStore, TakenEpoch};
pub use compacted::Compacted;
pub(crate) use compacted::FORMAT;
pub(crate) use fingerprint::SchemaFingerprint;
pub(crate) use owner::Owner;
#[cfg(feature = "postgres")]
pub(crate) use parts::gc_parts;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use parts::{is_manifest, referenced_by_manifest};
pub use row::{CheckpointInfo, CheckpointPart, CheckpointRow};
pub(crate) use seal::SealKeys;
pub use seal::{SealKey, SealKeyError};
pub(crate) use transcript_record::{
    CompactedTranscript, FrontFields, MessageDigests, WindowRecord,
};
#[cfg(feature = "sqlite")]
pub(crate) use typed::MAX_PART_ROUNDS;
pub(crate) use verify::{check_checkpoint, check_restorable};
