//! The checkpoint: the [`Compacted`] a compaction returns (the window and everything needed to
//! rehydrate it), the schema fingerprint that ties it to its state type, its seals (plain and
//! keyed), the checks it passes before use, and the row every backend stores it as.

mod compacted;
mod fields;
mod fingerprint;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod row;
mod seal;
mod verify;

pub use compacted::Compacted;
pub(crate) use compacted::{CompactedTranscript, FORMAT};
pub(crate) use fingerprint::SchemaFingerprint;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub use row::CheckpointInfo;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use row::{decode, encode};
pub(crate) use seal::SealKeys;
pub use seal::{SealKey, SealKeyError};
pub(crate) use verify::{check_checkpoint, check_restorable};
