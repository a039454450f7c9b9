//! The way back: planned messages plus their verified blobs give the input transcript,
//! byte-identical.

use crate::store::{ContentHash, Pointer, Store, StoreError};
use crate::transcript::conversation::Transcript;
use crate::transcript::conversation::TranscriptError;
use crate::transcript::conversation::{Message, Role};
use crate::transcript::marker::{self, Parsed};
use std::collections::HashMap;

/// Why planned messages could not be turned back into their transcript.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptRehydrateError {
    /// A content begins like a marker but is not one compaction wrote (only compaction writes
    /// that prefix: kept text that begins like it is escaped).
    #[error("message {index} begins like a compaction marker but is not a well-formed one")]
    MalformedMarker {
        /// The message.
        index: usize,
    },
    /// A blob is missing, or its bytes do not hash to its pointer.
    #[error("message {index}: {source}")]
    Store {
        /// The message whose blob failed.
        index: usize,
        /// The store's error (`NotFound`, `Integrity`, backend).
        #[source]
        source: StoreError,
    },
    /// A blob's bytes are not what its marker says (text for stubs and tombstones, the run's
    /// messages for folds, with the user messages just above the fold).
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

/// The pointers the markers in `messages` name, in order (each once): what to fetch before
/// [`rehydrate_transcript`].
pub fn required_blobs(messages: &[Message]) -> Result<Vec<Pointer>, TranscriptRehydrateError> {
    marker::pointers_in(messages)
        .map_err(|index| TranscriptRehydrateError::MalformedMarker { index })
}

/// Reads the blobs `messages` need from `store` (verified) and rehydrates.
pub async fn rehydrate_from_store<S: Store>(
    messages: &[Message],
    store: &S,
) -> Result<Transcript, TranscriptRehydrateError> {
    let mut blobs = HashMap::new();
    for pointer in required_blobs(messages)? {
        let hash = pointer.hash();
        match store.get(&hash).await {
            Ok(bytes) => {
                blobs.insert(hash, bytes);
            }
            // Reported below, at the message that needs it.
            Err(StoreError::NotFound { .. }) => {}
            Err(source) => {
                let index = first_use(messages, &pointer);
                return Err(TranscriptRehydrateError::Store { index, source });
            }
        }
    }
    rehydrate_transcript(messages, &blobs)
}

fn first_use(messages: &[Message], pointer: &Pointer) -> usize {
    let text = pointer.to_string();
    messages
        .iter()
        .position(|m| m.content.contains(&text))
        .unwrap_or(0)
}

/// Turns planned messages back into the transcript they were planned from: kept messages as
/// they are (escape removed), stubs and tombstones with their content from `blobs`, folds
/// replaced by their stored span. Every blob is verified against its pointer.
pub fn rehydrate_transcript(
    messages: &[Message],
    blobs: &HashMap<ContentHash, Vec<u8>>,
) -> Result<Transcript, TranscriptRehydrateError> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let parsed = marker::parse(&message.content)
            .ok_or(TranscriptRehydrateError::MalformedMarker { index })?;
        match parsed {
            Parsed::Kept(content) => {
                let mut kept = message.clone();
                if content.len() != kept.content.len() {
                    kept.content = content.to_owned();
                }
                out.push(kept);
            }
            Parsed::Spilled(pointer) | Parsed::Tombstone(pointer) => {
                let bytes = verified(blobs, &pointer, index)?;
                let content = String::from_utf8(bytes.to_vec()).map_err(|_| {
                    TranscriptRehydrateError::BlobMismatch {
                        index,
                        reason: "not UTF-8 text".into(),
                    }
                })?;
                out.push(Message {
                    content,
                    ..message.clone()
                });
            }
            Parsed::Folded { pointer, users } => {
                let bytes = verified(blobs, &pointer, index)?;
                let mismatch = |reason: &str| TranscriptRehydrateError::BlobMismatch {
                    index,
                    reason: reason.to_owned(),
                };
                let span: Vec<Message> = serde_json::from_slice(bytes)
                    .map_err(|_| mismatch("not a JSON list of messages"))?;
                // The run's user messages were sent just above the fold; they must be the
                // span's user messages, in order.
                if users > out.len() {
                    return Err(mismatch("fewer messages above the fold than it says"));
                }
                let above = out.split_off(out.len() - users);
                let span_users: Vec<&Message> =
                    span.iter().filter(|m| m.role == Role::User).collect();
                if span_users.len() != users || span_users.into_iter().ne(above.iter()) {
                    return Err(mismatch(
                        "the user messages above the fold are not the span's",
                    ));
                }
                out.extend(span);
            }
        }
    }
    Ok(Transcript::from_messages(out)?)
}

fn verified<'b>(
    blobs: &'b HashMap<ContentHash, Vec<u8>>,
    pointer: &Pointer,
    index: usize,
) -> Result<&'b [u8], TranscriptRehydrateError> {
    let hash = pointer.hash();
    let bytes = blobs.get(&hash).ok_or(TranscriptRehydrateError::Store {
        index,
        source: StoreError::NotFound { hash },
    })?;
    if !hash.matches(bytes) {
        return Err(TranscriptRehydrateError::Store {
            index,
            source: StoreError::Integrity { hash },
        });
    }
    Ok(bytes)
}
