//! Incremental rows (format 4, issue 45): a checkpoint saved as a small manifest over
//! content-addressed parts that checkpoints share, so a request writes what is new.
//!
//! The parts: each transcript message (its JSON, whose SHA-256 is the digest the seals already
//! cover); the request's index in runs (each entry a message's planner slot and its part's
//! hash; a run ends where a message's digest says so, so an append rewrites only the last run
//! and the manifest names a run per few messages); and, cut into content-defined chunks
//! (`chunks.rs`, so a change rewrites the chunks around it), the front (the window's entries,
//! shapes and text), the window record, and the planner memory's blocks and handle table (the
//! two things that grow with the session). The manifest is the checkpoint's JSON with each of those
//! replaced by its part's hash, and stays flat as the session grows. Parts live beside blobs (a
//! backend stores them in its blob table, written in the save's own transaction), and every
//! rule of blobs holds for them: garbage collection keeps what a saved checkpoint names, a save
//! refuses to name what is missing.
//!
//! Integrity: the row checksum covers the manifest, the manifest covers the runs' and other
//! parts' hashes, each run covers its messages' hashes, and loading checks every part's bytes
//! against its hash ([`verified::check_part`]) before anything is parsed from it; the seals then
//! cover the content as for a whole row.
//!
//! `write.rs` splits a checkpoint (`chunks.rs` cuts the large parts); `read.rs` says which parts a row still needs and assembles the
//! whole checkpoint; `gc.rs` lists what a manifest keeps; `verified.rs` remembers verified parts.

mod chunks;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod gc;
mod read;
mod verified;
mod write;

#[cfg(feature = "postgres")]
pub(crate) use gc::gc_parts;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use gc::referenced_by_manifest;
pub(crate) use read::{assemble, manifest_head, parts_needed, whole_json};
pub(crate) use verified::check_part;
pub(crate) use write::split;

/// The manifest layout this version writes and reads.
const MANIFEST_VERSION: u32 = 1;

/// Whether stored row bytes are a manifest (rather than a whole checkpoint): the key only
/// manifests carry, first in every manifest this version writes.
pub(crate) fn is_manifest(json: &[u8]) -> bool {
    json.starts_with(br#"{"parts":"#)
}
