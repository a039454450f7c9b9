//! The result of a compaction: the rendered window plus everything needed to rehydrate, as a
//! sealed checkpoint that another process can load.

use crate::binding::CheckpointBinding;
use crate::checkpoint::fingerprint::SchemaFingerprint;
use crate::checkpoint::seal::{KeyedSeal, SealKeys, SignedHere};
use crate::checkpoint::transcript_record::{CompactedTranscript, SealedTranscript};
use crate::conversation::format::{default_request_messages, ChatFormat};
use crate::conversation::handle::HandleTable;
use crate::conversation::transcript::Message;
use crate::report::CompactionReport;
use crate::state::path::Shape;
use crate::store::{ContentHash, Pointer};
use crate::window::field::{Entry, Form, SummaryValue};
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::sync::Arc;

/// A compacted state: the window text for the model, and a sealed checkpoint of everything
/// needed to rehydrate it.
///
/// `Compacted` is `Serialize + Deserialize`, so it can be saved and loaded by another process
/// that shares the store. Every part of it is covered by a seal (SHA-256) and every protected
/// value by its own fingerprint, checked on rehydrate: a changed byte is an `Integrity` error.
///
/// ```
/// use compaction::{Compactable, Compactor, Compacted, Tokenizer};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
/// struct State {
///     #[protected]
///     step: u32,
///     #[redundant]
///     log: Vec<String>,
/// }
///
/// let compactor = Compactor::builder().budget(200).token_counter(Tokenizer::O200kBase).build()?;
/// let state = State { step: 3, log: vec!["ok".into()] };
/// let compacted: Compacted<State> = compactor.compact_blocking(&state)?;
/// assert!(compacted.tokens() <= 200);
/// assert!(compacted.render().contains("step = 3"));
///
/// // A checkpoint survives a round trip through JSON and rehydrates to the same state.
/// let json = serde_json::to_string(&compacted).unwrap();
/// let loaded: Compacted<State> = serde_json::from_str(&json).unwrap();
/// let restored = compactor.rehydrate_blocking(&loaded, &compaction::NoReacquire)?;
/// assert_eq!(restored, state);
/// # Ok::<(), compaction::CompactionError>(())
/// ```
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Compacted<S> {
    pub(crate) format: u32,
    pub(crate) state_type: String,
    /// Absent from format-1 checkpoints, which are refused by their format number.
    #[serde(default)]
    pub(crate) schema: SchemaFingerprint,
    pub(crate) budget: usize,
    pub(crate) entries: Vec<Entry>,
    pub(crate) shapes: Vec<(String, Shape)>,
    pub(crate) window: String,
    pub(crate) tokens: usize,
    pub(crate) report: CompactionReport,
    /// The `#[transcript]` field's planned messages (absent in checkpoints of states without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) transcript: Option<CompactedTranscript>,
    /// The agent, namespace and sequence number the compactor bound it to
    /// (`CompactorBuilder::agent_id`); absent from checkpoints of compactors without one and
    /// from checkpoints made before bindings. Before `seal`: both seals cover it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) binding: Option<CheckpointBinding>,
    pub(crate) seal: ContentHash,
    /// The HMAC of the same content under the author's key, when the compactor had one
    /// (`CompactorBuilder::seal_key`). Absent otherwise, so unkeyed checkpoints are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) keyed_seal: Option<KeyedSeal>,
    /// The wire format of the compactor that made it, which lays out
    /// [`messages`](Compacted::messages). Not part of the checkpoint (a format is code, not
    /// data): `None` when read back, then the default.
    #[serde(skip)]
    pub(crate) chat_format: Option<Arc<dyn ChatFormat>>,
    /// The bytes this process sealed and their SHA-256 (`None` when read back). A
    /// checkpoint's fields never change after sealing, so verifying one made here compares
    /// this hash instead of serializing and hashing every field again: a session verifies its
    /// checkpoint three times per request (saving, recording its sequence, allowing its
    /// pointers), and the bytes grow with the state.
    #[serde(skip)]
    pub(crate) sealed_input: Option<SealedInput>,
    #[serde(skip)]
    pub(crate) _state: PhantomData<fn() -> S>,
}

/// Every store pointer the window's entries reference (spilled values, spilled effect records
/// and payloads, summary sources and the summarized values).
pub(crate) fn entry_pointers(entries: &[Entry]) -> Vec<Pointer> {
    let mut out = Vec::new();
    for entry in entries {
        match &entry.form {
            Form::ProtectedSpilled { pointer } => out.push(pointer.clone()),
            Form::Summary { source, value, .. } => {
                out.push(source.clone());
                if let Some(SummaryValue::Stored(pointer)) = value {
                    out.push(pointer.clone());
                }
            }
            Form::Effects {
                spilled,
                payloads_spilled,
                ..
            } => {
                out.extend(spilled.iter().map(|s| s.pointer.clone()));
                out.extend(payloads_spilled.iter().cloned());
            }
            _ => {}
        }
    }
    out
}

/// The checkpoint format this version writes and reads. Format 1 (no schema fingerprint) is
/// refused with `CheckpointFormat`: without a fingerprint, nothing proves which type wrote it.
/// Format 3 seals a transcript's messages through their digests and each block's chunks through
/// its manifest's hash (see [`SealedTranscript`]); a format 2 checkpoint without a transcript has
/// the same seal bytes, and is still read. Format 4 has format 3's content and seals; the
/// built-in stores save it as a manifest over shared parts (`checkpoint/parts.rs`), and still
/// read format 3's whole rows.
pub(crate) const FORMAT: u32 = 4;

/// The format before checkpoints were saved as manifests over parts: the same content.
const FORMAT_WHOLE_ROWS: u32 = 3;

/// The format before transcript messages were sealed through their digests.
const FORMAT_WITHOUT_DIGESTS: u32 = 2;

/// Whether this version reads a checkpoint of `format` (with a transcript or not).
pub(crate) fn format_supported(format: u32, has_transcript: bool) -> bool {
    format == FORMAT
        || format == FORMAT_WHOLE_ROWS
        || (format == FORMAT_WITHOUT_DIGESTS && !has_transcript)
}

#[derive(Serialize)]
struct SealInput<'a> {
    format: u32,
    state_type: &'a str,
    schema: &'a SchemaFingerprint,
    budget: usize,
    entries: &'a [Entry],
    shapes: &'a [(String, Shape)],
    window: &'a str,
    tokens: usize,
    report: &'a CompactionReport,
    // Skipped when absent, so the seals of checkpoints without a transcript do not change.
    #[serde(skip_serializing_if = "Option::is_none")]
    transcript: Option<SealedTranscript<'a>>,
    // Likewise: unbound checkpoints (and those made before bindings) keep their seals.
    #[serde(skip_serializing_if = "Option::is_none")]
    binding: Option<&'a CheckpointBinding>,
}

impl<S> Compacted<S> {
    /// The window text to put into the model's context.
    pub fn render(&self) -> &str {
        &self.window
    }

    /// What an author sends to a chat API: one message holding the rendered window of the
    /// state's other fields (a system message, unless the compactor's
    /// [`ChatFormat`] says otherwise: [`ChatFormat::window_message`]), then the
    /// `#[transcript]` field's messages (kept, stubbed, tombstoned and folded, in order; they
    /// always pass [`Transcript::validate`](crate::Transcript::validate)). With a transcript,
    /// the budget covers this whole list counted the format's way
    /// ([`ChatFormat::request_tokens`]; by default
    /// [`chat_tokens`](crate::transcript::chat_tokens)); without one, the list is just the
    /// window and the budget covers its text.
    ///
    /// The format is the compactor's that made this checkpoint; a checkpoint read back from
    /// JSON lays out with the default
    /// ([`OpenAiChat`](crate::transcript::OpenAiChat)):
    /// [`messages_in`](Self::messages_in) names another.
    ///
    /// A call still in flight (the last assistant message's calls without results, which
    /// `validate` allows so a state can be compacted and checkpointed mid-call) is kept
    /// verbatim at the end of this list, never folded: the list is then not a request a chat
    /// API accepts until the results are pushed and the state compacted again.
    pub fn messages(&self) -> Vec<Message> {
        match &self.chat_format {
            Some(format) => self.messages_in(&**format),
            None => default_request_messages(&self.window, self.transcript_messages()),
        }
    }

    /// [`messages`](Self::messages) laid out by `format`
    /// ([`ChatFormat::request_messages`]), for a checkpoint read back from JSON.
    pub fn messages_in(&self, format: &dyn ChatFormat) -> Vec<Message> {
        format.request_messages(&self.window, self.transcript_messages())
    }

    /// The transcript's kept, stubbed, tombstoned and folded messages, borrowed (empty without a
    /// transcript): [`messages`](Self::messages) after its system message, for adapters that
    /// convert them without a copy.
    pub(crate) fn transcript_messages(&self) -> &[Message] {
        self.transcript.as_ref().map_or(&[], |t| &t.messages)
    }

    /// Tokens of [`messages`](Self::messages) by the chat formula, when the state has a
    /// transcript (then at most the budget).
    pub fn request_tokens(&self) -> Option<usize> {
        self.transcript.as_ref().map(|t| t.request_tokens)
    }

    /// Tokens of [`render`](Self::render) with the compactor's counter; never above the budget.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// The budget this window was made for.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// What the compaction did.
    pub fn report(&self) -> &CompactionReport {
        &self.report
    }

    /// Every store pointer this window references (spilled values, spilled effect records and
    /// payloads, summary sources and the summarized values).
    pub fn pointers(&self) -> Vec<Pointer> {
        let mut out = entry_pointers(&self.entries);
        if let Some(transcript) = &self.transcript {
            out.extend(transcript.memory.pointers());
        }
        out
    }

    /// The short handles the transcript's markers show (`p17`), with the full address of each
    /// (`None` without a transcript). The pointer tool resolves a handle through it.
    pub fn handles(&self) -> Option<&HandleTable> {
        self.transcript.as_ref().map(|t| &t.memory.handles)
    }

    /// The full address of the stored span (a user run's and its fold's) that holds input
    /// message `index` of the transcript, when that message is in a compacted block: read it
    /// back with [`Compactor::resolve_message`](crate::Compactor::resolve_message).
    pub fn span_of(&self, index: usize) -> Option<Pointer> {
        let blocks = &self.transcript.as_ref()?.memory.blocks;
        let at = blocks.partition_point(|b| b.end <= index);
        blocks
            .get(at)
            .filter(|b| b.first <= index)
            .map(|b| Pointer::for_hash(b.manifest))
    }

    /// Every compacted range of the transcript: the full address of its stored span, and the
    /// input messages `first..end` it holds (read one back with
    /// [`Compactor::resolve_message`](crate::Compactor::resolve_message)).
    pub fn spans(&self) -> Vec<(Pointer, (usize, usize))> {
        self.transcript.as_ref().map_or_else(Vec::new, |t| {
            t.memory
                .blocks
                .iter()
                .map(|b| (Pointer::for_hash(b.manifest), (b.first, b.end)))
                .collect()
        })
    }

    /// How many leading [`messages`](Self::messages) the compactor keeps byte-identical across
    /// compaction points as far as it can: the window's stable part, the compacted blocks (they
    /// change only when the state's stable fields change or blocks are consolidated) and the
    /// transcript's opening still in place
    /// ([`CompactorBuilder::keep_first`](crate::CompactorBuilder::keep_first)).
    /// Everything after them stays identical until the next compaction point. Put a cache
    /// breakpoint (Anthropic's `cache_control`) after this many messages, and another on the
    /// last message.
    pub fn stable_prefix_len(&self) -> usize {
        1 + self
            .transcript
            .as_ref()
            .map_or(0, |t| t.memory.stable_slots())
    }

    /// How many leading [`messages`](Self::messages) are byte-identical to the previous request
    /// of this agent (what a provider's prompt cache can serve): all of the previous request's
    /// when this one only appended.
    pub fn reused_prefix_len(&self) -> usize {
        self.transcript.as_ref().map_or(0, |t| t.reused)
    }

    /// Tokens of the first `messages` of [`messages`](Self::messages), counted as the budget
    /// counts the request (the chat format's formula, the tool definitions included: they come
    /// first in every provider's cache order): what a prompt cache holding that prefix serves.
    /// The whole request's for `messages` at or past its length; 0 for none.
    pub fn prefix_tokens(&self, messages: usize) -> usize {
        if messages == 0 {
            return 0;
        }
        match &self.transcript {
            // The request's tokens less those of the transcript messages after the prefix (each
            // slot's tokens as the planner counted it; the window is message 0).
            Some(t) => {
                let tail: usize = t
                    .memory
                    .slots
                    .iter()
                    .skip(messages - 1)
                    .map(|s| s.tokens)
                    .sum();
                t.request_tokens.saturating_sub(tail)
            }
            None => self.tokens,
        }
    }

    /// Whether this request was a compaction point; `false` when it only appended to the last
    /// request (or the state has no transcript).
    pub fn is_compaction_point(&self) -> bool {
        self.transcript.as_ref().is_some_and(|t| t.memory.compacted)
    }

    /// The bytes both seals cover: every field but the seals themselves; those sealed by this
    /// process when it made the checkpoint.
    pub(crate) fn seal_input(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.sealed_input {
            Some(sealed) => std::borrow::Cow::Borrowed(&sealed.bytes),
            None => std::borrow::Cow::Owned(self.serialize_seal_input()),
        }
    }

    /// The bytes both seals cover, serialized from the fields.
    fn serialize_seal_input(&self) -> Vec<u8> {
        let input = SealInput {
            format: self.format,
            state_type: &self.state_type,
            schema: &self.schema,
            budget: self.budget,
            entries: &self.entries,
            shapes: &self.shapes,
            window: &self.window,
            tokens: self.tokens,
            report: &self.report,
            transcript: self.transcript.as_ref().map(CompactedTranscript::sealed),
            binding: self.binding.as_ref(),
        };
        // Serializing plain data into a Vec cannot fail; a failure would surface as a mismatch.
        serde_json::to_vec(&input).unwrap_or_default()
    }

    pub(crate) fn compute_seal(&self) -> ContentHash {
        match &self.sealed_input {
            Some(sealed) => sealed.hash,
            None => ContentHash::of(&self.serialize_seal_input()),
        }
    }

    /// Whether the checkpoint is intact (its plain seal, a SHA-256, matches its content).
    ///
    /// This detects damage, not forgery: whoever can write the checkpoint can recompute a
    /// plain hash. A compactor built with a [`SealKey`](crate::SealKey) also checks the keyed
    /// seal ([`Compactor::verify_checkpoint`](crate::Compactor::verify_checkpoint)).
    pub fn verify_seal(&self) -> bool {
        format_supported(self.format, self.transcript.is_some()) && self.compute_seal() == self.seal
    }

    /// The agent, namespace and sequence number this checkpoint is bound to, under its seals;
    /// `None` when its compactor had no [`agent_id`](crate::CompactorBuilder::agent_id). What
    /// the binding says is only proven by a keyed seal
    /// ([`Compactor::verify_checkpoint`](crate::Compactor::verify_checkpoint) checks both).
    pub fn binding(&self) -> Option<&CheckpointBinding> {
        self.binding.as_ref()
    }

    /// The id of the key whose keyed seal this checkpoint carries; `None` when it was sealed
    /// without a key. Only the key itself proves the seal valid.
    pub fn seal_key_id(&self) -> Option<&str> {
        self.keyed_seal.as_ref().map(|seal| seal.key.as_str())
    }

    /// Seals the content: the plain seal, and the keyed one when `keys` has a signing key.
    pub(crate) fn seal_with(&mut self, keys: &SealKeys) {
        let input = self.serialize_seal_input();
        self.seal = ContentHash::of(&input);
        let signed = keys.sign(&input);
        self.keyed_seal = signed.as_ref().map(|signed| signed.seal.clone());
        self.sealed_input = Some(SealedInput {
            bytes: input.into(),
            hash: self.seal,
            signed,
        });
    }

    /// Whether both seals verify: the plain one, and the keyed one under `keys` (see
    /// `SealKeys::verify` for a missing keyed seal or an empty key set).
    pub(crate) fn seals_verify(&self, keys: &SealKeys) -> bool {
        let input = self.seal_input();
        let plain = match &self.sealed_input {
            Some(sealed) => sealed.hash,
            None => ContentHash::of(&input),
        };
        // A keyed seal made here, by one of `keys`, over the remembered input: its HMAC is
        // the one remembered (a session verifies each checkpoint three times per request).
        let made_here = self
            .sealed_input
            .as_ref()
            .and_then(|sealed| sealed.signed.as_ref())
            .is_some_and(|signed| keys.made(self.keyed_seal.as_ref(), signed));
        plain == self.seal && (made_here || keys.verify(&input, self.keyed_seal.as_ref()))
    }
}

/// The seal input this process serialized when it sealed a checkpoint, its SHA-256, and the
/// keyed seal made over it (with the fingerprint of the key that made it), if any.
#[derive(Clone)]
pub(crate) struct SealedInput {
    bytes: Arc<[u8]>,
    hash: ContentHash,
    signed: Option<SignedHere>,
}

impl<S> Clone for Compacted<S> {
    fn clone(&self) -> Self {
        Compacted {
            format: self.format,
            state_type: self.state_type.clone(),
            schema: self.schema.clone(),
            budget: self.budget,
            entries: self.entries.clone(),
            shapes: self.shapes.clone(),
            window: self.window.clone(),
            tokens: self.tokens,
            report: self.report.clone(),
            transcript: self.transcript.clone(),
            binding: self.binding.clone(),
            seal: self.seal,
            keyed_seal: self.keyed_seal.clone(),
            chat_format: self.chat_format.clone(),
            sealed_input: self.sealed_input.clone(),
            _state: PhantomData,
        }
    }
}

impl<S> std::fmt::Debug for Compacted<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compacted")
            .field("state_type", &self.state_type)
            .field("tokens", &self.tokens)
            .field("budget", &self.budget)
            .field("binding", &self.binding)
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::Compacted;
    use crate::checkpoint::seal::{SealKey, SealKeys};
    use crate::store::ContentHash;

    /// A checkpoint as it is read back: nothing sealed in this process.
    fn read_back() -> Compacted<()> {
        let json = r#"{"format":3,"state_type":"T","budget":100,"entries":[],"shapes":[],
            "window":"w","tokens":1,
            "report":{"compaction":1,"budget":100,"tokens_after":1,"tokens_before":1,
                "tokens_before_exact":true,"counter":"heuristic","fields":[],"fingerprints":{}},
            "seal":"0000000000000000000000000000000000000000000000000000000000000000"}"#;
        serde_json::from_str(json).expect("parses")
    }

    #[test]
    fn the_remembered_seal_input_verifies_as_the_fields_do() {
        let mut keys = SealKeys::default();
        keys.set_signing(SealKey::new("k1", b"a key of at least sixteen bytes").expect("a key"));
        let mut sealed = read_back();
        assert!(!sealed.verify_seal(), "the zero seal is not this content's");
        sealed.seal_with(&keys);
        assert!(sealed.verify_seal() && sealed.seals_verify(&keys));
        // The same checkpoint read back (no remembered input) verifies the same way.
        let json = serde_json::to_string(&sealed).expect("serializes");
        let again: Compacted<()> = serde_json::from_str(&json).expect("parses");
        assert!(again.sealed_input.is_none());
        assert_eq!(again.compute_seal(), sealed.compute_seal());
        assert!(again.verify_seal() && again.seals_verify(&keys));
        // A seal changed after sealing is caught with the remembered input as without it.
        for mut copy in [sealed.clone(), again.clone()] {
            copy.seal = ContentHash::of(b"another seal");
            assert!(!copy.verify_seal() && !copy.seals_verify(&keys));
        }
        // So is a keyed seal that no longer matches.
        for mut copy in [sealed, again] {
            if let Some(keyed) = copy.keyed_seal.as_mut() {
                keyed.hmac = "00".repeat(32);
            }
            assert!(copy.verify_seal() && !copy.seals_verify(&keys));
        }
    }

    #[test]
    fn a_keyed_seal_made_here_verifies_only_under_the_key_that_made_it() {
        let key = |secret: &[u8]| SealKey::new("k1", secret).expect("a key");
        let signing = |key: SealKey| {
            let mut keys = SealKeys::default();
            keys.set_signing(key);
            keys
        };
        let keys = signing(key(b"a key of at least sixteen bytes"));
        let mut sealed = read_back();
        sealed.seal_with(&keys);
        assert!(sealed
            .sealed_input
            .as_ref()
            .is_some_and(|s| s.signed.is_some()));
        let json = serde_json::to_string(&sealed).expect("serializes");
        let again: Compacted<()> = serde_json::from_str(&json).expect("parses");
        // Another secret under the same id: refused with the remembered seal as without it.
        let impostor = signing(key(b"another key, sixteen bytes or more"));
        assert!(!sealed.seals_verify(&impostor) && !again.seals_verify(&impostor));
        // A compactor that rotated the key out (it still verifies): accepted either way.
        let mut rotated = signing(SealKey::new("k2", b"the next key, sixteen bytes").unwrap());
        rotated.add_retired(key(b"a key of at least sixteen bytes"));
        assert!(sealed.seals_verify(&rotated) && again.seals_verify(&rotated));
        // A rotated set that kept the id but not the secret: refused either way.
        let mut wrong = signing(SealKey::new("k2", b"the next key, sixteen bytes").unwrap());
        wrong.add_retired(key(b"not the secret that sealed it"));
        assert!(!sealed.seals_verify(&wrong) && !again.seals_verify(&wrong));
        // A keyed seal swapped for another key's over the same input: refused either way.
        let mut swapped = sealed.clone();
        let mut other = read_back();
        other.seal_with(&impostor);
        swapped.keyed_seal = other.keyed_seal.clone();
        assert!(!swapped.seals_verify(&keys));
        assert!(
            swapped.seals_verify(&impostor),
            "the swapped seal is the impostor's"
        );
    }
}
