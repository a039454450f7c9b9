//! What every checkpoint backend moves: the row a checkpoint is saved as ([`CheckpointRow`]:
//! its JSON, that JSON's own SHA-256, its state type, the blobs it points at and, for an
//! incremental row, its [`CheckpointPart`]s) and what a listing says about one
//! ([`CheckpointInfo`]). Making a row from a `Compacted` and back (and reading a manifest's
//! parts) is `codec.rs`; the backends (`sqlite/checkpoint.rs`, `postgres/checkpoint.rs`,
//! `memory.rs`) only store rows and parts.

use crate::store::ContentHash;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What is known about a saved checkpoint without loading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The agent id it was saved under.
    pub agent_id: String,
    /// The Rust type of the compacted state.
    pub state_type: String,
    /// When it was saved (the database's clock).
    pub saved_at: SystemTime,
    /// Size of its stored JSON, in bytes (for an incremental row, its manifest's: the parts
    /// it shares with other checkpoints are not counted).
    pub size: usize,
}

impl CheckpointInfo {
    /// A listing row: `saved_at_ms` in milliseconds since the Unix epoch, `size` in bytes
    /// (negative values, which no backend writes, read as 0).
    pub fn from_row(agent_id: String, state_type: String, saved_at_ms: i64, size: i64) -> Self {
        CheckpointInfo {
            agent_id,
            state_type,
            saved_at: UNIX_EPOCH + Duration::from_millis(saved_at_ms.max(0) as u64),
            size: size.max(0) as usize,
        }
    }
}

/// A checkpoint as a backend stores it: the JSON of a [`Compacted`](crate::Compacted), the
/// SHA-256 of exactly those bytes, the state type (for listings) and the blobs it points at
/// (which a backend must hold before it saves the row, or a restart could not rehydrate it).
///
/// For a store that keeps parts ([`CheckpointStore::stores_parts`](crate::checkpoint::CheckpointStore::stores_parts),
/// every built-in one), the JSON is a small manifest and the row carries its
/// [`parts`](Self::parts): the messages, the window's front and the planner memory's growing
/// tables, each addressed by its SHA-256, which the backend stores beside its blobs (only
/// those it does not hold yet) in the save's own transaction. Consecutive checkpoints share
/// most parts, so a request writes what is new.
///
/// Rows are made by `save` on a [`CheckpointStore`](crate::checkpoint::CheckpointStore) from a
/// sealed `Compacted`; a backend reads one back with [`stored`](Self::stored), unchecked:
/// loading checks its bytes, its checksum and then its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRow {
    pub(crate) json: Vec<u8>,
    pub(crate) sha256: Option<String>,
    pub(crate) state_type: String,
    pub(crate) blobs: Vec<ContentHash>,
    pub(crate) parts: Vec<CheckpointPart>,
    /// Parts the checkpoint this row is saved over holds (a session's own last save): a save
    /// over that parent, checked in its transaction, need neither write nor lock them, since
    /// the parent names them until this row replaces it in the same transaction.
    pub(crate) held_by_parent: std::collections::HashSet<ContentHash>,
}

impl CheckpointRow {
    /// A row as a backend read it back: the stored bytes and the stored checksum (`None` when
    /// it is missing), as they are. A row read back carries no state type or blob list.
    pub fn stored(json: Vec<u8>, sha256: Option<String>) -> CheckpointRow {
        CheckpointRow {
            json,
            sha256,
            state_type: String::new(),
            blobs: Vec::new(),
            parts: Vec::new(),
            held_by_parent: Default::default(),
        }
    }

    /// The row with `parts` read back from storage attached beside those it has (unchecked:
    /// loading checks each against its address).
    pub fn with_parts(mut self, parts: Vec<CheckpointPart>) -> CheckpointRow {
        self.parts.extend(parts);
        self
    }

    /// The checkpoint's JSON, the bytes to store.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// The JSON as text: always for a row made from a `Compacted` (it is UTF-8), `None` for
    /// stored bytes that are not.
    pub fn json_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.json).ok()
    }

    /// The SHA-256 of [`json`](Self::json), lowercase hex (for a row read back: what was
    /// stored beside it, if anything).
    pub fn sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }

    /// The Rust type of the compacted state (empty for a row read back).
    pub fn state_type(&self) -> &str {
        &self.state_type
    }

    /// The blobs the checkpoint points at, sorted and without repeats (empty for a row read
    /// back): a backend refuses to save the row unless it holds every one.
    pub fn blobs(&self) -> &[ContentHash] {
        &self.blobs
    }

    /// The parts of an incremental row, each once: every part it names (its runs' messages
    /// included) when it was made from a `Compacted` (a backend stores those it does not hold
    /// yet, in the save's transaction, before it checks [`blobs`](Self::blobs)); for a row read
    /// back, those attached with [`with_parts`](Self::with_parts). Empty for a whole checkpoint.
    pub fn parts(&self) -> &[CheckpointPart] {
        &self.parts
    }
}

/// One part of an incremental row: its bytes and their SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointPart {
    pub(crate) hash: ContentHash,
    pub(crate) bytes: Vec<u8>,
}

impl CheckpointPart {
    /// A part as a backend read it back: the address it is stored under and the stored bytes,
    /// unchecked (loading checks them against the address).
    pub fn stored(hash: ContentHash, bytes: Vec<u8>) -> CheckpointPart {
        CheckpointPart { hash, bytes }
    }

    /// The SHA-256 of [`bytes`](Self::bytes): the part's address.
    pub fn hash(&self) -> &ContentHash {
        &self.hash
    }

    /// The bytes to store under [`hash`](Self::hash).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}
