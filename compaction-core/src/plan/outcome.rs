//! What became of a slot once its window fits: its report rows, the tokens its value took
//! beyond its line, and the bytes it moves to the store.

use crate::plan::slot::{Movable, Payloads, Slot, SlotBody, ValueFromSource, ValuePlan};
use crate::report::{FieldOutcome, FieldReport};
use crate::store::{ContentHash, Pointer};
use crate::tokens::TokenCounter;

impl Slot {
    /// The bytes this slot moves to the store, under their address (a spilled protected value,
    /// a summary's source and its value, spilled effect records and payloads).
    pub fn spill_blobs(&self) -> Vec<(ContentHash, &[u8])> {
        match &self.body {
            SlotBody::Protected {
                json,
                fingerprint,
                spill: true,
                ..
            } => vec![(*fingerprint, json.as_bytes())],
            SlotBody::Value {
                plan:
                    ValuePlan::Summarize {
                        source,
                        done: Some((_, pointer, _)),
                        value,
                        ..
                    },
                ..
            } => {
                let mut blobs = vec![(pointer.hash(), source.as_bytes())];
                blobs.extend(value.as_ref().and_then(ValueFromSource::blob));
                blobs
            }
            SlotBody::Effects {
                movable, payloads, ..
            } => {
                let mut blobs = Vec::new();
                if let Movable::Spilled { bytes, summary } = movable {
                    blobs.push((summary.pointer.hash(), bytes.as_slice()));
                }
                if let Payloads::Spilled { bytes, pointer, .. } = payloads {
                    blobs.push((pointer.hash(), bytes.as_slice()));
                }
                blobs
            }
            _ => Vec::new(),
        }
    }

    /// The report's rows for this slot: one per field, and for an effect ledger with payloads
    /// a second row for `<path>.payloads`.
    pub fn outcomes(&self, counter: &dyn TokenCounter) -> Vec<FieldReport> {
        let row = |field: String, outcome| FieldReport { field, outcome };
        let outcome = match &self.body {
            SlotBody::Protected {
                fingerprint, spill, ..
            } => {
                if *spill {
                    FieldOutcome::Spilled {
                        pointer: Pointer::for_hash(*fingerprint),
                    }
                } else {
                    FieldOutcome::Kept
                }
            }
            SlotBody::Value {
                redundant,
                pointer,
                plan,
            } => match plan {
                ValuePlan::Keep { .. } => FieldOutcome::Kept,
                ValuePlan::Summarize {
                    done: Some((text, source, from_tokens)),
                    ..
                } => FieldOutcome::Summarized {
                    from_tokens: *from_tokens,
                    to_tokens: counter.count(text),
                    source: source.clone(),
                    // The compactor marks the summaries that came from its cache.
                    cached: false,
                },
                _ => match (redundant, pointer) {
                    (false, Some(p)) => FieldOutcome::Evicted { pointer: p.clone() },
                    _ => FieldOutcome::Tombstoned,
                },
            },
            SlotBody::Effects {
                movable, payloads, ..
            } => {
                let records = match movable {
                    Movable::Spilled { summary, .. } => FieldOutcome::Spilled {
                        pointer: summary.pointer.clone(),
                    },
                    _ => FieldOutcome::Kept,
                };
                let mut rows = vec![row(self.path.clone(), records)];
                let payloads = match payloads {
                    Payloads::None => None,
                    Payloads::Kept(_) => Some(FieldOutcome::Kept),
                    Payloads::Spilled { pointer, .. } => Some(FieldOutcome::Spilled {
                        pointer: pointer.clone(),
                    }),
                };
                if let Some(outcome) = payloads {
                    rows.push(row(format!("{}.payloads", self.path), outcome));
                }
                return rows;
            }
        };
        vec![row(self.path.clone(), outcome)]
    }

    /// Tokens the field's value took beyond its line, known at least, when it left the window
    /// (0 for a field kept, and for effect ledgers, whose records are counted exactly).
    pub fn tokens_left_at_least(&self, counter: &dyn TokenCounter) -> usize {
        if matches!(self.body, SlotBody::Effects { .. }) || self.is_verbatim() {
            return 0;
        }
        self.whole_tokens_at_least
            .saturating_sub(self.line_tokens(counter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::record::Effect;
    use crate::plan::slot::{spill_kept_payloads, spill_payloads};
    use crate::window::KeptPayload;

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
