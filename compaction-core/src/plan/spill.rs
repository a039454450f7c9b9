//! What leaves the window for the store, serialized once: settled effect records as one block
//! ([`Movable`]), effect payloads as one block ([`Payloads`]), and how a summarized value comes
//! back ([`ValueFromSource`]). Each blob is content-addressed, so its pointer proves the bytes
//! that come back on rehydrate.

use crate::effects::record::{Effect, EffectStatus};
use crate::plan::json_size::JsonValue;
use crate::render::{IndexedRecord, KeptPayload, SpilledRecords, SummaryValue};
use crate::store::{ContentHash, Pointer};
use serde::Serialize;

/// Effect records that may leave the window (settled ones; all of them when idempotent).
#[derive(Debug)]
pub(crate) enum Movable {
    None,
    Kept(Vec<IndexedRecord>),
    Spilled {
        bytes: Vec<u8>,
        summary: SpilledRecords,
    },
}

#[derive(Debug)]
pub(crate) enum Payloads {
    None,
    Kept(Vec<KeptPayload>),
    /// Moved to the store verbatim, as one block of `KeptPayload`s.
    Spilled {
        bytes: Vec<u8>,
        pointer: Pointer,
        count: usize,
    },
}

#[derive(Serialize)]
struct RecordRef<'a> {
    index: usize,
    record: RecordFields<'a>,
}

/// An effect record without its payload; serializes exactly like `Effect` with `payload: None`.
#[derive(Serialize)]
struct RecordFields<'a> {
    action: &'a str,
    target: &'a str,
    idempotency_key: &'a str,
    status: EffectStatus,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    depends_on: &'a [String],
}

/// A payload tied to its record; serializes exactly like [`KeptPayload`].
#[derive(Serialize)]
struct PayloadRef<'a> {
    index: usize,
    key: &'a str,
    value: &'a serde_json::Value,
}

/// How a summarized value comes back from the store: from its summary's source, which is
/// stored anyway (text and JSON sources, every built-in `Summarizable`), or from a copy of its
/// own JSON stored beside it (a source of the author's own making).
#[derive(Debug)]
pub(crate) enum ValueFromSource {
    Json,
    Text,
    Stored { json: String, pointer: Pointer },
}

impl ValueFromSource {
    /// How `value` comes back given its summary's `source`; `None` when it does not serialize.
    pub fn of(value: &dyn JsonValue, source: &str) -> Option<ValueFromSource> {
        let mut bytes = Vec::new();
        value.write_json(&mut bytes).ok()?;
        let json = String::from_utf8(bytes).ok()?;
        if json == source {
            return Some(ValueFromSource::Json);
        }
        if serde_json::to_string(source).ok()? == json {
            return Some(ValueFromSource::Text);
        }
        let pointer = Pointer::for_hash(ContentHash::of(json.as_bytes()));
        Some(ValueFromSource::Stored { json, pointer })
    }

    /// What the checkpoint records.
    pub fn form(&self) -> SummaryValue {
        match self {
            ValueFromSource::Json => SummaryValue::Source,
            ValueFromSource::Text => SummaryValue::SourceText,
            ValueFromSource::Stored { pointer, .. } => SummaryValue::Stored(pointer.clone()),
        }
    }

    /// The bytes to store beside the source, under their address (only a value stored apart).
    pub fn blob(&self) -> Option<(ContentHash, &[u8])> {
        match self {
            ValueFromSource::Stored { json, pointer } => Some((pointer.hash(), json.as_bytes())),
            _ => None,
        }
    }
}

pub(crate) fn spill_records<'e>(records: impl Iterator<Item = (usize, &'e Effect)>) -> Movable {
    let mut summary = SpilledRecords {
        pointer: Pointer::for_hash(ContentHash::of(b"")),
        count: 0,
        committed: 0,
        not_started: 0,
        unknown: 0,
    };
    let refs: Vec<RecordRef<'_>> = records
        .map(|(index, e)| {
            summary.count += 1;
            match e.status {
                EffectStatus::Committed => summary.committed += 1,
                EffectStatus::NotStarted => summary.not_started += 1,
                EffectStatus::Unknown => summary.unknown += 1,
            }
            RecordRef {
                index,
                record: RecordFields {
                    action: &e.action,
                    target: &e.target,
                    idempotency_key: &e.idempotency_key,
                    status: e.status,
                    depends_on: &e.depends_on,
                },
            }
        })
        .collect();
    if refs.is_empty() {
        return Movable::None;
    }
    let mut bytes = serde_json::to_vec(&refs).unwrap_or_default();
    // Held until the window fits: do not hold the serializer's spare capacity too (up to 2x).
    bytes.shrink_to_fit();
    summary.pointer = Pointer::for_hash(ContentHash::of(&bytes));
    Movable::Spilled { bytes, summary }
}

/// Spills records that were kept (during demotion).
pub(crate) fn spill_kept(records: &[IndexedRecord]) -> Movable {
    spill_records(records.iter().map(|r| (r.index, &r.record)))
}

/// Spills every payload of a log as one block of `KeptPayload`s, in log order.
pub(crate) fn spill_payloads(effects: &[Effect]) -> Payloads {
    let refs: Vec<PayloadRef<'_>> = effects
        .iter()
        .enumerate()
        .filter_map(|(index, e)| {
            e.payload.as_ref().map(|value| PayloadRef {
                index,
                key: &e.idempotency_key,
                value,
            })
        })
        .collect();
    payloads_block(&refs)
}

/// Spills payloads that were kept (during demotion).
pub(crate) fn spill_kept_payloads(kept: &[KeptPayload]) -> Payloads {
    let refs: Vec<PayloadRef<'_>> = kept
        .iter()
        .map(|p| PayloadRef {
            index: p.index,
            key: &p.key,
            value: &p.value,
        })
        .collect();
    payloads_block(&refs)
}

fn payloads_block(refs: &[PayloadRef<'_>]) -> Payloads {
    if refs.is_empty() {
        return Payloads::None;
    }
    let mut bytes = serde_json::to_vec(refs).unwrap_or_default();
    bytes.shrink_to_fit();
    let pointer = Pointer::for_hash(ContentHash::of(&bytes));
    Payloads::Spilled {
        bytes,
        pointer,
        count: refs.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spilled_payloads_read_back_as_kept_payloads_under_their_pointer() {
        let effects = vec![
            Effect::new("a", "t", "k0"),
            Effect::new("b", "t", "k1").with_payload(serde_json::json!({"out": "]\n[SPILLED"})),
        ];
        let Payloads::Spilled {
            bytes,
            pointer,
            count,
        } = spill_payloads(&effects)
        else {
            panic!("a payload to spill");
        };
        assert_eq!(count, 1);
        assert_eq!(pointer.hash(), ContentHash::of(&bytes));
        let back: Vec<KeptPayload> = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!((back[0].index, back[0].key.as_str()), (1, "k1"));
        assert_eq!(Some(&back[0].value), effects[1].payload.as_ref());
        let Payloads::Spilled { bytes: again, .. } = spill_kept_payloads(&back) else {
            panic!("kept payloads spill again");
        };
        assert_eq!(again, bytes);
        assert!(matches!(spill_payloads(&effects[..1]), Payloads::None));
    }

    #[test]
    fn a_summarized_value_comes_back_from_its_source_or_a_copy_stored_beside_it() {
        let text = "line \"one\"\nline two".to_owned();
        assert!(matches!(
            ValueFromSource::of(&text, &text),
            Some(ValueFromSource::Text)
        ));
        let list = vec![1u32, 2];
        assert!(matches!(
            ValueFromSource::of(&list, "[1,2]"),
            Some(ValueFromSource::Json)
        ));
        // A source that is neither: the value's JSON is stored apart, under its own address.
        let stored = ValueFromSource::of(&list, "two numbers").unwrap();
        let Some((hash, bytes)) = stored.blob() else {
            panic!("stored apart");
        };
        assert_eq!(bytes, b"[1,2]");
        assert_eq!(hash, ContentHash::of(b"[1,2]"));
        assert!(ValueFromSource::Text.blob().is_none());
    }
}
