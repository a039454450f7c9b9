//! Slots: one field on its way into the window, owning everything it needs. A slot answers every
//! question about its field (its line, its entry, whether it is verbatim, what it spills, its
//! outcome, its pending summary) and changes its own form (demotion), so nothing outside plan/
//! ever looks at a form.

use crate::effects::record::{Effect, EffectStatus};
use crate::plan::json_size::{json_is, JsonValue};
use crate::store::{ContentHash, Pointer};
use crate::tokens::TokenCounter;
use crate::window::{
    Entry, FieldView, Form, IndexedRecord, KeptPayload, Section, SpilledRecords, SummaryValue,
};
use serde::Serialize;

/// Keep priority: lower stages come back into the window first and leave it last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    Pinned,
    Protected,
    EffectRecords,
    Payloads,
    Derivable,
    Redundant,
}

/// A derivable or redundant value's planned form.
#[derive(Debug)]
pub(crate) enum ValuePlan {
    Keep {
        json: String,
    },
    Summarize {
        source: String,
        /// The source's SHA-256, computed once: its store address and its summary cache key.
        source_hash: ContentHash,
        target: usize,
        done: Option<(String, Pointer, usize)>,
        /// How rehydration restores the value from the store.
        value: Option<ValueFromSource>,
    },
    Evict,
}

/// Effect records that may leave the window (settled ones; all of them when idempotent).
#[derive(Debug, Clone)]
pub(crate) enum Movable {
    None,
    Kept(Vec<IndexedRecord>),
    Spilled {
        bytes: Vec<u8>,
        summary: SpilledRecords,
    },
}

#[derive(Debug, Clone)]
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
        // Compared while serializing: the value's JSON is only built when it is stored apart
        // (a summary source of megabytes is not copied once more to find it is the JSON).
        if json_is(value, source.as_bytes()) {
            return Some(ValueFromSource::Json);
        }
        if json_is(value, serde_json::to_string(source).ok()?.as_bytes()) {
            return Some(ValueFromSource::Text);
        }
        let mut bytes = Vec::new();
        value.write_json(&mut bytes).ok()?;
        let json = String::from_utf8(bytes).ok()?;
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

#[derive(Debug)]
pub(crate) enum SlotBody {
    Protected {
        pin: bool,
        json: String,
        fingerprint: ContentHash,
        spill: bool,
    },
    Value {
        redundant: bool,
        pointer: Option<String>,
        plan: ValuePlan,
    },
    Effects {
        idempotent: bool,
        total: usize,
        pinned: Vec<IndexedRecord>,
        movable: Movable,
        payloads: Payloads,
    },
}

/// One field on its way into the window, owning everything it needs (nothing borrowed from the
/// state survives planning, so the async part of compaction holds no borrow of it).
#[derive(Debug)]
pub(crate) struct Slot {
    pub(super) path: String,
    /// The field's priority key (`CollectedField::rank`).
    pub(super) rank: Vec<usize>,
    pub(super) section: Section,
    pub(super) body: SlotBody,
    /// Tokens the field is known to take at least when rendered whole (0 when unmeasured).
    pub(super) whole_tokens_at_least: usize,
    /// What demotion may do without going below the floor form.
    pub(super) floor: FloorForm,
}

/// The demotions a slot allows: a form the floor pass kept (verbatim because it is no longer
/// than its pointer or tombstone) is the floor, and demoting past it would only cost tokens,
/// so a window that the floor fits could end refused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FloorForm {
    spill_protected: bool,
    evict_value: bool,
    evict_payloads: bool,
    spill_records: bool,
}

impl Default for FloorForm {
    fn default() -> Self {
        FloorForm {
            spill_protected: true,
            evict_value: true,
            evict_payloads: true,
            spill_records: true,
        }
    }
}

impl Slot {
    /// The field's concrete path.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn stage(&self) -> Stage {
        match &self.body {
            SlotBody::Protected { pin: true, .. } => Stage::Pinned,
            SlotBody::Protected { .. } => Stage::Protected,
            SlotBody::Effects { .. } => Stage::EffectRecords,
            SlotBody::Value {
                redundant: false, ..
            } => Stage::Derivable,
            SlotBody::Value {
                redundant: true, ..
            } => Stage::Redundant,
        }
    }

    /// The window entry for the slot's current plan.
    pub fn entry(&self) -> Entry {
        let form = match &self.body {
            SlotBody::Protected {
                pin,
                json,
                fingerprint,
                spill,
            } => {
                if *spill {
                    Form::ProtectedSpilled {
                        pointer: Pointer::for_hash(*fingerprint),
                    }
                } else {
                    Form::Protected {
                        pin: *pin,
                        json: json.clone(),
                        fingerprint: *fingerprint,
                    }
                }
            }
            SlotBody::Value {
                redundant,
                pointer,
                plan,
            } => match plan {
                ValuePlan::Keep { json } => Form::Value { json: json.clone() },
                ValuePlan::Summarize {
                    done: Some((text, source, from_tokens)),
                    value,
                    ..
                } => Form::Summary {
                    text: text.clone(),
                    source: source.clone(),
                    origin: pointer.clone(),
                    from_tokens: *from_tokens,
                    value: value.as_ref().map(ValueFromSource::form),
                },
                // A summary not made yet renders as its eviction; it is made before rendering.
                ValuePlan::Summarize { done: None, .. } | ValuePlan::Evict => {
                    match (redundant, pointer) {
                        (false, Some(p)) => Form::Evicted { pointer: p.clone() },
                        _ => Form::Tombstone,
                    }
                }
            },
            SlotBody::Effects {
                idempotent,
                total,
                pinned,
                movable,
                payloads,
            } => {
                let mut records = pinned.clone();
                let mut spilled = None;
                match movable {
                    Movable::None => {}
                    Movable::Kept(kept) => {
                        records.extend(kept.iter().cloned());
                        records.sort_by_key(|r| r.index);
                    }
                    Movable::Spilled { summary, .. } => spilled = Some(summary.clone()),
                }
                let (payloads, payloads_evicted, payloads_spilled) = match payloads {
                    Payloads::None => (Vec::new(), 0, None),
                    Payloads::Kept(p) => (p.clone(), 0, None),
                    Payloads::Spilled { pointer, count, .. } => {
                        (Vec::new(), *count, Some(pointer.clone()))
                    }
                };
                Form::Effects {
                    idempotent: *idempotent,
                    total: *total,
                    records,
                    spilled,
                    payloads,
                    payloads_evicted,
                    payloads_spilled,
                }
            }
        };
        Entry {
            path: self.path.clone(),
            section: self.section,
            form,
        }
    }

    /// This slot's line(s) in the default format, as the window shows its current plan.
    pub fn line(&self) -> String {
        FieldView::of(&self.entry().for_window()).default_lines()
    }

    /// Tokens of [`line`](Self::line): the planning estimate.
    pub fn line_tokens(&self, counter: &dyn TokenCounter) -> usize {
        counter.count(&self.line())
    }

    /// Whether the field's value (for effects: any record) is verbatim in the window.
    pub fn is_verbatim(&self) -> bool {
        match &self.body {
            SlotBody::Protected { spill, .. } => !spill,
            SlotBody::Value { plan, .. } => matches!(plan, ValuePlan::Keep { .. }),
            SlotBody::Effects {
                pinned, movable, ..
            } => !pinned.is_empty() || matches!(movable, Movable::Kept(_)),
        }
    }

    /// The fingerprint of a protected value.
    pub fn fingerprint(&self) -> Option<ContentHash> {
        match &self.body {
            SlotBody::Protected { fingerprint, .. } => Some(*fingerprint),
            _ => None,
        }
    }

    /// The summary this slot still waits for: its source text, the source's hash and its
    /// target in tokens.
    pub fn pending_summary(&self) -> Option<(&str, ContentHash, usize)> {
        match &self.body {
            SlotBody::Value {
                plan:
                    ValuePlan::Summarize {
                        source,
                        source_hash,
                        target,
                        done: None,
                        ..
                    },
                ..
            } => Some((source, *source_hash, *target)),
            _ => None,
        }
    }

    /// Puts the summarizer's text in place of the pending summary.
    pub fn set_summary(&mut self, summary: String, counter: &dyn TokenCounter) {
        let whole_at_least = self.whole_tokens_at_least;
        if let SlotBody::Value {
            plan:
                ValuePlan::Summarize {
                    source,
                    source_hash,
                    target,
                    done,
                    ..
                },
            ..
        } = &mut self.body
        {
            // The source is never rendered, so it is never counted whole (for a large source
            // that would cost more than the rest of the compaction): counted only until it is
            // known to exceed the target, it gives the report a lower bound.
            let from_tokens = counter
                .count_till_limit(source, *target)
                .unwrap_or(*target + 1)
                .max(whole_at_least);
            let pointer = Pointer::for_hash(*source_hash);
            *done = Some((summary, pointer, from_tokens));
        }
    }

    /// Evicts a derivable or redundant value (pointer or tombstone).
    pub fn evict_value(&mut self) {
        if let SlotBody::Value { plan, .. } = &mut self.body {
            *plan = ValuePlan::Evict;
        }
    }

    /// Whether the slot is at its richest planned form and may be demoted one step.
    /// Returns `true` if something was demoted.
    pub fn demote(&mut self) -> bool {
        let floor = self.floor;
        match &mut self.body {
            SlotBody::Protected {
                pin: false, spill, ..
            } if !*spill && floor.spill_protected => {
                *spill = true;
                true
            }
            SlotBody::Value { plan, .. }
                if !matches!(plan, ValuePlan::Evict) && floor.evict_value =>
            {
                *plan = ValuePlan::Evict;
                true
            }
            SlotBody::Effects {
                payloads, movable, ..
            } => {
                if let (Payloads::Kept(p), true) = (&*payloads, floor.evict_payloads) {
                    *payloads = spill_kept_payloads(p);
                    return true;
                }
                if let (Movable::Kept(kept), true) = (&*movable, floor.spill_records) {
                    *movable = spill_kept(kept);
                    return true;
                }
                false
            }
            _ => false,
        }
    }

    /// Records the current form as the floor: [`demote`](Self::demote) never goes below it.
    pub fn mark_floor(&mut self) {
        self.floor = FloorForm {
            spill_protected: matches!(self.body, SlotBody::Protected { spill: true, .. }),
            evict_value: matches!(
                self.body,
                SlotBody::Value {
                    plan: ValuePlan::Evict,
                    ..
                }
            ),
            evict_payloads: !matches!(
                self.body,
                SlotBody::Effects {
                    payloads: Payloads::Kept(_),
                    ..
                }
            ),
            spill_records: !matches!(
                self.body,
                SlotBody::Effects {
                    movable: Movable::Kept(_),
                    ..
                }
            ),
        };
    }
}
