//! The way back: planned messages, their handle table and the verified blobs behind it give the
//! input transcript, byte-identical; and one message of a stored span, by index.

use crate::conversation::handle::{Handle, HandleTable};
use crate::conversation::marker::{self, Parsed};
use crate::conversation::transcript::{Message, Role, Transcript, TranscriptError};
use crate::planner::memory::Manifest;
use crate::planner::span::parse_chunk;
use crate::store::{ContentHash, DynStore, Pointer, Store, StoreError};
use std::collections::HashMap;

/// Why planned messages could not be turned back into their transcript.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptRehydrateError {
    /// A content begins like a marker but is not one compaction wrote (only compaction writes
    /// such contents: kept text whose first visible character is `⟦` is escaped).
    #[error("message {index} begins like a compaction marker but is not a well-formed one")]
    MalformedMarker {
        /// The message.
        index: usize,
    },
    /// A marker shows a handle the table does not have.
    #[error("message {index}: handle {handle} is not in the handle table")]
    UnknownHandle {
        /// The marker message.
        index: usize,
        /// Its handle.
        handle: Handle,
    },
    /// A blob is missing, or its bytes do not hash to its address.
    #[error("message {index}: {source}")]
    Store {
        /// The message whose blob failed.
        index: usize,
        /// The store's error (`NotFound`, `Integrity`, backend).
        #[source]
        source: StoreError,
    },
    /// A blob's bytes are not what its marker says (text for tombstones and pages, the range's
    /// messages for user runs and folds, with the kept messages in place).
    #[error("message {index}: the stored blob does not match its marker: {reason}")]
    BlobMismatch {
        /// The marker message.
        index: usize,
        /// What did not match.
        reason: String,
    },
    /// The rehydrated messages are not a valid transcript (the planned messages were edited).
    #[error("the rehydrated transcript is invalid: {0}")]
    Invalid(#[from] TranscriptError),
}

impl TranscriptRehydrateError {
    /// The store's error, when a blob could not be read or did not verify.
    pub fn into_store_error(self) -> Option<StoreError> {
        match self {
            TranscriptRehydrateError::Store { source, .. } => Some(source),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, TranscriptRehydrateError>;

/// The handles the markers in `messages` show, with their addresses, in order (each once):
/// what to fetch first (spans then need their chunks: see [`rehydrate_from_store`]).
pub fn required_blobs(messages: &[Message], handles: &HandleTable) -> Result<Vec<Pointer>> {
    let mut out: Vec<Pointer> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let Some(handle) = marker_handle(index, message)? else {
            continue;
        };
        let pointer = lookup(handles, handle, index)?.clone();
        if !out.contains(&pointer) {
            out.push(pointer);
        }
    }
    Ok(out)
}

/// Reads everything `messages` need from `store` (verified: handles, then the chunks of every
/// span) and rehydrates.
pub async fn rehydrate_from_store<S: Store>(
    messages: &[Message],
    handles: &HandleTable,
    store: &S,
) -> Result<Transcript> {
    handles.rehydrate_messages(messages, store).await
}

impl HandleTable {
    /// [`rehydrate_from_store`] through the object-safe store (the engine's path).
    pub(crate) async fn rehydrate_messages(
        &self,
        messages: &[Message],
        store: &dyn DynStore,
    ) -> Result<Transcript> {
        rehydrate_dyn(messages, self, store).await
    }
}

async fn rehydrate_dyn(
    messages: &[Message],
    handles: &HandleTable,
    store: &dyn DynStore,
) -> Result<Transcript> {
    // Each blob is hashed once: by the store when it checks its reads, else here as it
    // arrives; the rehydration below then trusts the map (a history is tens of megabytes).
    let read = |pointer: Pointer, index: usize| async move {
        let bytes = fetch(store, &pointer, index).await?;
        match bytes {
            Some(bytes) if !store.verifies_reads_dyn() && !pointer.hash().matches(&bytes) => {
                Err(TranscriptRehydrateError::Store {
                    index,
                    source: StoreError::Integrity {
                        hash: pointer.hash(),
                    },
                })
            }
            bytes => Ok(bytes),
        }
    };
    let mut blobs: HashMap<ContentHash, Vec<u8>> = HashMap::new();
    let mut spans: Vec<(usize, Pointer)> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let Some(handle) = marker_handle(index, message)? else {
            continue;
        };
        let pointer = lookup(handles, handle, index)?.clone();
        if blobs.contains_key(&pointer.hash()) {
            continue;
        }
        if let Some(bytes) = read(pointer.clone(), index).await? {
            if matches!(
                marker::parse(&message.content),
                Some(Parsed::Users { .. } | Parsed::Folded { .. })
            ) {
                spans.push((index, pointer.clone()));
            }
            blobs.insert(pointer.hash(), bytes);
        }
    }
    for (index, pointer) in spans {
        let Some(Ok(manifest)) = blobs.get(&pointer.hash()).map(|b| Manifest::parse(b)) else {
            continue; // reported with its message below
        };
        for chunk in manifest.chunk_pointers() {
            if let std::collections::hash_map::Entry::Vacant(slot) = blobs.entry(chunk.hash()) {
                if let Some(bytes) = read(chunk, index).await? {
                    slot.insert(bytes);
                }
            }
        }
    }
    let blobs = Blobs {
        bytes: &blobs,
        checked: true,
    };
    rehydrate_checked(messages, handles, blobs)
}

/// The blob behind `pointer` (`None` when the store does not have it: reported at the message
/// that needs it).
async fn fetch(store: &dyn DynStore, pointer: &Pointer, index: usize) -> Result<Option<Vec<u8>>> {
    match store.get_dyn(&pointer.hash()).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(source) => Err(TranscriptRehydrateError::Store { index, source }),
    }
}

/// The handle a marker message shows, if it is a marker.
fn marker_handle(index: usize, message: &Message) -> Result<Option<Handle>> {
    match marker::parse(&message.content) {
        None => Err(TranscriptRehydrateError::MalformedMarker { index }),
        Some(Parsed::Kept(_) | Parsed::Update) => Ok(None),
        Some(
            Parsed::Tombstone(handle)
            | Parsed::Paged(handle)
            | Parsed::Users { handle, .. }
            | Parsed::Folded { handle, .. },
        ) => Ok(Some(handle)),
    }
}

fn lookup(handles: &HandleTable, handle: Handle, index: usize) -> Result<&Pointer> {
    handles
        .pointer(handle)
        .ok_or(TranscriptRehydrateError::UnknownHandle { index, handle })
}

/// Turns planned messages back into the transcript they were planned from: kept messages as
/// they are (escape removed), tombstones and pages with their content from `blobs`, user runs
/// and folds replaced by their stored range (the kept user messages above a fold taken back),
/// state updates dropped. Every blob is verified against its address, and every range must
/// start where the messages before it end.
pub fn rehydrate_transcript(
    messages: &[Message],
    handles: &HandleTable,
    blobs: &HashMap<ContentHash, Vec<u8>>,
) -> Result<Transcript> {
    let blobs = Blobs {
        bytes: blobs,
        checked: false,
    };
    rehydrate_checked(messages, handles, blobs)
}

/// The blobs a rehydration reads, by address; `checked` when each was already hashed against
/// its address (by a store that checks its reads, or as it was fetched).
#[derive(Clone, Copy)]
struct Blobs<'a> {
    bytes: &'a HashMap<ContentHash, Vec<u8>>,
    checked: bool,
}

impl<'a> Blobs<'a> {
    /// The blob behind `pointer`, verified: `Store(NotFound)` when it is missing,
    /// `Store(Integrity)` when its bytes do not hash to its address.
    fn verified(self, pointer: &Pointer, index: usize) -> Result<&'a [u8]> {
        let hash = pointer.hash();
        let bytes = self
            .bytes
            .get(&hash)
            .ok_or(TranscriptRehydrateError::Store {
                index,
                source: StoreError::NotFound { hash },
            })?;
        if !self.checked && !hash.matches(bytes) {
            return Err(TranscriptRehydrateError::Store {
                index,
                source: StoreError::Integrity { hash },
            });
        }
        Ok(bytes)
    }
}

fn rehydrate_checked(
    messages: &[Message],
    handles: &HandleTable,
    blobs: Blobs<'_>,
) -> Result<Transcript> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // A users marker whose fold comes later: (its range, the out length when it was read).
    let mut pending_users: Option<(Handle, usize, usize)> = None;
    for (index, message) in messages.iter().enumerate() {
        let parsed = marker::parse(&message.content)
            .ok_or(TranscriptRehydrateError::MalformedMarker { index })?;
        let mismatch = |reason: &str| TranscriptRehydrateError::BlobMismatch {
            index,
            reason: reason.to_owned(),
        };
        match parsed {
            Parsed::Kept(content) => {
                let mut kept = message.clone();
                if content.len() != kept.content.len() {
                    kept.content = content.to_owned();
                }
                out.push(kept);
            }
            Parsed::Update => {}
            Parsed::Tombstone(handle) | Parsed::Paged(handle) => {
                let bytes = blobs.verified(lookup(handles, handle, index)?, index)?;
                let content =
                    String::from_utf8(bytes.to_vec()).map_err(|_| mismatch("not UTF-8 text"))?;
                out.push(Message {
                    content,
                    ..message.clone()
                });
            }
            Parsed::Users {
                handle,
                first,
                last,
            } => {
                // Its fold comes after the kept user messages, if any: it takes the range.
                let hoisted = messages[index + 1..]
                    .iter()
                    .take_while(|m| {
                        m.role == Role::User
                            && matches!(marker::parse(&m.content), Some(Parsed::Kept(_)))
                    })
                    .count();
                let fold = messages
                    .get(index + 1 + hoisted)
                    .and_then(|m| marker::parse(&m.content));
                if matches!(fold, Some(Parsed::Folded { handle: h, first: f, last: l, kept })
                    if h == handle && f == first && l == last && kept == hoisted)
                {
                    pending_users = Some((handle, first, last));
                    continue;
                }
                let span = span_messages(handles, blobs, handle, first, last, index)?;
                if span.iter().any(|m| m.role != Role::User) {
                    return Err(mismatch("a users marker's range holds other messages"));
                }
                if out.len() != first {
                    return Err(mismatch(
                        "the range does not start where the messages before it end",
                    ));
                }
                out.extend(span);
            }
            Parsed::Folded {
                handle,
                first,
                last,
                kept,
            } => {
                let users_marker = pending_users.take();
                if users_marker.is_some_and(|u| u != (handle, first, last)) {
                    return Err(mismatch("a users marker without its fold"));
                }
                if kept > out.len() {
                    return Err(mismatch("fewer messages above the fold than it says"));
                }
                let above = out.split_off(out.len() - kept);
                if out.len() != first {
                    return Err(mismatch(
                        "the range does not start where the messages before it end",
                    ));
                }
                let span = span_messages(handles, blobs, handle, first, last, index)?;
                let users: Vec<&Message> = span.iter().filter(|m| m.role == Role::User).collect();
                // The kept ones are the newest user messages of the range, in order; the others
                // were in the users marker, which must be there exactly when there are others.
                if users.len() < kept
                    || users[users.len() - kept..].iter().copied().ne(above.iter())
                    || (users.len() > kept) != users_marker.is_some()
                {
                    return Err(mismatch(
                        "the user messages above the fold are not the range's",
                    ));
                }
                out.extend(span);
            }
        }
    }
    if pending_users.is_some() {
        return Err(TranscriptRehydrateError::BlobMismatch {
            index: messages.len(),
            reason: "a users marker without its fold".into(),
        });
    }
    Ok(Transcript::from_messages(out)?)
}

/// Input messages `first..=last` of the span behind `handle`, verified.
fn span_messages(
    handles: &HandleTable,
    blobs: Blobs<'_>,
    handle: Handle,
    first: usize,
    last: usize,
    index: usize,
) -> Result<Vec<Message>> {
    let mismatch = |reason: String| TranscriptRehydrateError::BlobMismatch { index, reason };
    let manifest = Manifest::parse(blobs.verified(lookup(handles, handle, index)?, index)?)
        .map_err(&mismatch)?;
    if first < manifest.first || last >= manifest.end() {
        return Err(mismatch("the marker's range is not in its span".into()));
    }
    let mut out = Vec::with_capacity(last + 1 - first);
    for chunk in &manifest.chunks {
        let end = chunk.first + chunk.count;
        if end <= first || chunk.first > last {
            continue;
        }
        let bytes = blobs.verified(&Pointer::for_hash(chunk.hash), index)?;
        let messages = parse_chunk(chunk, bytes).map_err(&mismatch)?;
        let from = first.max(chunk.first) - chunk.first;
        let to = (last + 1).min(end) - chunk.first;
        out.extend(messages.into_iter().skip(from).take(to - from));
    }
    Ok(out)
}

/// Input message `index` of the span stored under the manifest `pointer`, read from `store`
/// and verified (the manifest, then its chunk).
pub(crate) async fn span_message(
    store: &dyn DynStore,
    pointer: &Pointer,
    index: usize,
) -> std::result::Result<Option<Message>, SpanReadError> {
    let manifest_bytes = crate::store::get_verified(store, &pointer.hash())
        .await
        .map_err(SpanReadError::Store)?;
    let manifest = Manifest::parse(&manifest_bytes).map_err(SpanReadError::NotASpan)?;
    let Some(chunk) = manifest.chunk_of(index) else {
        return Ok(None);
    };
    let bytes = crate::store::get_verified(store, &chunk.hash)
        .await
        .map_err(SpanReadError::Store)?;
    let mut messages = parse_chunk(chunk, &bytes).map_err(SpanReadError::NotASpan)?;
    Ok(Some(messages.swap_remove(index - chunk.first)))
}

/// Why one message of a span could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpanReadError {
    /// The store failed or a blob did not verify.
    #[error("{0}")]
    Store(StoreError),
    /// The blob is not a span manifest, or a chunk does not match it.
    #[error("{0}")]
    NotASpan(String),
}
