//! How compacted messages are stored: in chunks written once and never rewritten, listed by a
//! small manifest (issue 20.6). A fold's or a user run's handle names a manifest.
//!
//! - A **chunk** is the JSON array of up to [`CHUNK_MESSAGES`] consecutive input messages (or
//!   fewer when they pass [`CHUNK_BYTES`]), stored under its SHA-256.
//! - A **manifest** is `{"span":1,"first":i,"chunks":[{"first":i,"count":n,"hash":"<hex>"},…]}`:
//!   contiguous chunks covering input messages `first..first+Σcount`. Consolidating two spans
//!   concatenates their chunk lists into a new manifest; no chunk is written again.
//!
//! Every read is verified: the manifest against its pointer, each chunk against the hash the
//! manifest names, and the chunks against the ranges the manifest claims.

use crate::conversation::transcript::Message;
use crate::planner::memory::ChunkRef;
use crate::store::ContentHash;

/// The most messages a chunk holds.
pub(crate) const CHUNK_MESSAGES: usize = 256;
/// A chunk closes once it holds this many bytes of JSON (a larger message gets its own).
pub(crate) const CHUNK_BYTES: usize = 1 << 20;

/// Writes `messages` (input messages `first..`) as chunks: their refs and the blobs to store.
pub(crate) fn chunk(
    first: usize,
    messages: &[Message],
) -> (Vec<ChunkRef>, Vec<(ContentHash, Vec<u8>)>) {
    let mut refs = Vec::new();
    let mut blobs = Vec::new();
    let mut open: Vec<u8> = Vec::new();
    let mut count = 0;
    let mut start = first;
    let mut close = |open: &mut Vec<u8>, count: &mut usize, start: &mut usize| {
        if *count == 0 {
            return;
        }
        open.push(b']');
        let bytes = std::mem::take(open);
        let hash = ContentHash::of(&bytes);
        refs.push(ChunkRef {
            first: *start,
            count: *count,
            hash,
        });
        blobs.push((hash, bytes));
        *start += *count;
        *count = 0;
    };
    for (i, message) in messages.iter().enumerate() {
        if count == CHUNK_MESSAGES {
            close(&mut open, &mut count, &mut start);
        }
        if count == 0 {
            // Sized once for what the chunk will likely hold: growing a megabyte by doubling
            // copied it over and over (a tenth of a first compaction).
            open.reserve(estimate(&messages[i..]));
            open.push(b'[');
        } else {
            open.push(b',');
        }
        // Written in place; a message that takes the chunk past its size moves to the next.
        let at = open.len();
        serde_json::to_writer(&mut open, message).expect("a message serializes");
        if count > 0 && (at - 1) + (open.len() - at) > CHUNK_BYTES {
            let json = open.split_off(at);
            open.truncate(at - 1);
            close(&mut open, &mut count, &mut start);
            open.reserve(estimate(&messages[i..]).max(json.len() + 2));
            open.push(b'[');
            open.extend_from_slice(&json);
        }
        count += 1;
    }
    close(&mut open, &mut count, &mut start);
    (refs, blobs)
}

/// About the bytes of the chunk that starts with `messages` (their JSON is their texts and a
/// little more), at most [`CHUNK_BYTES`] and a message.
fn estimate(messages: &[Message]) -> usize {
    let mut bytes = 2;
    for message in messages.iter().take(CHUNK_MESSAGES) {
        let calls: usize = message
            .tool_calls
            .iter()
            .map(|c| c.arguments_text().len() + c.id.len() + c.name.len() + 64)
            .sum();
        bytes += message.content.len() + message.content.len() / 32 + calls + 96;
        if bytes > CHUNK_BYTES {
            break;
        }
    }
    bytes.min(CHUNK_BYTES + CHUNK_BYTES / 8)
}

/// Parses a verified chunk's bytes against its ref.
pub(crate) fn parse_chunk(chunk: &ChunkRef, bytes: &[u8]) -> Result<Vec<Message>, String> {
    let messages: Vec<Message> =
        serde_json::from_slice(bytes).map_err(|_| "a chunk is not a JSON list of messages")?;
    if messages.len() != chunk.count {
        return Err(format!(
            "a chunk holds {} messages, its manifest says {}",
            messages.len(),
            chunk.count
        ));
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_the_json_of_their_messages_and_cover_the_span() {
        let messages: Vec<Message> = (0..600).map(|i| Message::user(format!("m{i}"))).collect();
        let (refs, blobs) = chunk(10, &messages);
        assert_eq!(refs.len(), 3);
        assert_eq!(refs[1].first, 10 + CHUNK_MESSAGES);
        assert_eq!(
            blobs[0].1,
            serde_json::to_vec(&messages[..CHUNK_MESSAGES]).unwrap()
        );
        let manifest = crate::planner::memory::Manifest::of(refs);
        assert_eq!((manifest.first, manifest.end()), (10, 610));
        assert_eq!(manifest.chunk_of(10 + 300).unwrap().first, 10 + 256);
        assert!(manifest.chunk_of(610).is_none() && manifest.chunk_of(9).is_none());
        let (_, bytes) = manifest.stored();
        assert_eq!(
            crate::planner::memory::Manifest::parse(&bytes).unwrap(),
            manifest
        );
        let big = vec![Message::user("x".repeat(CHUNK_BYTES)), Message::user("y")];
        assert_eq!(chunk(0, &big).0.len(), 2);
    }
}
