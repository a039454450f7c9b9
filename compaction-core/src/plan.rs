//! Planning: split the state by class (collect), decide what stays in the window (greedy, in a
//! fixed order), and demote when the rendered window is still over budget.
//!
//! # Order
//!
//! Everything that *may* leave the window starts out of it: the smallest window (the floor) holds
//! the pinned protected fields, the live effect records of non-idempotent ledgers, and a pointer
//! or tombstone for everything else. If the floor is over budget, compaction refuses
//! (`ProtectedOverBudget`). Otherwise fields are brought back, verbatim, in this order, each one
//! only if it fits in what is left:
//!
//! 1. `#[protected]` fields that are not pinned (else: spilled to the store, pointer kept);
//! 2. settled effect records (else: spilled as one block, with the engine's count line);
//! 3. effect payloads (else: tombstoned);
//! 4. `#[derivable]` fields (else: a summary carrying its back-pointer when `summarize` is set and
//!    a summarizer is configured, else a pointer stub);
//! 5. `#[redundant]` fields (else: a summary when `summarize` is set, else a tombstone).
//!
//! Within a step, fields go in traversal (declaration) order: an earlier field is kept in
//! preference to a later one, and a later, smaller field is still kept if it fits. Eviction is
//! the same order read backwards: redundant first, protected last. The budget is then checked on
//! the rendered text; if the estimate was short, the last field brought back is demoted, and so
//! on, until the window fits.

use crate::compactable::{child_path, push_segment, PointerFn, Segment, Shape, Visitor};
use crate::compacted::{Entry, Form, IndexedRecord, KeptPayload, Section, SpilledRecords};
use crate::render::{render_field, FieldView};
use crate::{
    CompactionError, ContentHash, EffectLog, EffectRecords, EffectStatus, FieldClass, Pointer,
    Schema, Summarizable, TokenCounter,
};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::HashSet;
use std::io;

/// A serializable value behind a trait object (serde's `Serialize` is not object safe).
pub(crate) trait JsonValue {
    fn write_json(&self, out: &mut dyn io::Write) -> serde_json::Result<()>;
    /// Whether the compact JSON is certainly longer than `cap` bytes (a lower-bound walk: no
    /// writing, no escaping, stops at the cap).
    fn json_exceeds(&self, cap: usize) -> bool;
}

impl<T: Serialize> JsonValue for T {
    fn write_json(&self, out: &mut dyn io::Write) -> serde_json::Result<()> {
        serde_json::to_writer(out, self)
    }
    fn json_exceeds(&self, cap: usize) -> bool {
        crate::json_len::exceeds(self, cap)
    }
}

/// A summarizable value behind a trait object. Only `Summarizable` types can become one, and
/// only the `*_summarizable` visitor methods create one.
pub(crate) trait SummaryText {
    fn summary_text(&self) -> Cow<'_, str>;
}

impl<T: Summarizable> SummaryText for T {
    fn summary_text(&self) -> Cow<'_, str> {
        self.summary_source()
    }
}

/// A field as the traversal handed it over: protected values already in canonical form, the
/// rest still borrowed.
pub(crate) enum Collected<'a> {
    Protected {
        pin: bool,
        json: String,
        fingerprint: ContentHash,
    },
    Value {
        value: &'a dyn JsonValue,
        pointer: Option<String>,
        summary: Option<&'a dyn SummaryText>,
    },
    Effects {
        idempotent: bool,
        log: &'a EffectLog,
    },
}

pub(crate) struct CollectedField<'a> {
    pub path: String,
    pub class: FieldClass,
    pub value: Collected<'a>,
}

/// The visitor the engine hands to `Compactable::visit`. It checks every call against the
/// schema, so a hand-written traversal cannot route a protected value anywhere it should not go.
pub(crate) struct Collector<'a> {
    schema: &'static Schema,
    path: String,
    marks: Vec<usize>,
    pub fields: Vec<CollectedField<'a>>,
    pub shapes: Vec<(String, Shape)>,
    pub error: Option<CompactionError>,
    visited: HashSet<String>,
}

/// What a visitor call claims about a field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claim {
    Protected { pin: bool },
    Derivable { summarize: bool },
    Redundant { summarize: bool },
    Effect { idempotent: bool },
}

impl<'a> Collector<'a> {
    pub fn new(schema: &'static Schema) -> Self {
        Collector {
            schema,
            path: String::new(),
            marks: Vec::new(),
            fields: Vec::new(),
            shapes: Vec::new(),
            error: None,
            visited: HashSet::new(),
        }
    }

    fn fail(&mut self, error: CompactionError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Checks a visitor call against the schema and returns the field's path and class.
    fn admit(&mut self, name: &str, claim: Claim) -> Option<(String, FieldClass)> {
        let path = child_path(&self.path, name);
        let declared = self.schema.field_for_instance(&path).map(|f| f.class);
        let summarizing = matches!(
            claim,
            Claim::Derivable { summarize: true } | Claim::Redundant { summarize: true }
        );
        let ok = match (declared, claim) {
            (Some(FieldClass::Protected { pin }), Claim::Protected { pin: p }) => pin == p,
            (Some(FieldClass::Derivable { summarize, .. }), Claim::Derivable { summarize: s }) => {
                summarize || !s
            }
            (Some(FieldClass::Redundant { summarize }), Claim::Redundant { summarize: s }) => {
                summarize || !s
            }
            (Some(FieldClass::Effect { idempotent }), Claim::Effect { idempotent: i }) => {
                idempotent == i
            }
            _ => false,
        };
        if ok {
            self.visited.insert(crate::schema::schema_path(&path));
            return declared.map(|class| (path, class));
        }
        // Anything not declared summarizable is treated as protected: refuse before any
        // summarizer could see it.
        let error = if summarizing && !declared.is_some_and(|c| c.may_summarize()) {
            CompactionError::ProtectedToSummarizer { field: path }
        } else {
            let reason = match declared {
                Some(class) => format!(
                    "declared {}, visited as {}",
                    class.name(),
                    claim_name(claim)
                ),
                None => format!("not in the schema, visited as {}", claim_name(claim)),
            };
            CompactionError::SchemaMismatch {
                field: path,
                reason,
            }
        };
        self.fail(error);
        None
    }

    /// Fails when a field the schema declares unconditionally was never visited.
    pub fn check_complete(&mut self) {
        if self.error.is_some() {
            return;
        }
        let missing = self
            .schema
            .fields()
            .iter()
            .find(|f| !f.conditional && !self.visited.contains(&f.path));
        if let Some(field) = missing {
            let error = CompactionError::SchemaMismatch {
                field: field.path.clone(),
                reason: "declared in the schema but never visited".into(),
            };
            self.fail(error);
        }
    }

    fn value<T: Serialize>(
        &mut self,
        name: &'static str,
        claim: Claim,
        value: &'a T,
        pointer: Option<PointerFn<'_>>,
        summary: Option<&'a dyn SummaryText>,
    ) {
        if let Some((path, class)) = self.admit(name, claim) {
            let pointer = pointer.map(|build| {
                let mut p = String::new();
                build(&mut p);
                p
            });
            self.fields.push(CollectedField {
                path,
                class,
                value: Collected::Value {
                    value,
                    pointer,
                    summary,
                },
            });
        }
    }
}

fn claim_name(claim: Claim) -> &'static str {
    match claim {
        Claim::Protected { pin: true } => "protected(pin)",
        Claim::Protected { pin: false } => "protected",
        Claim::Derivable { summarize: true } => "derivable(summarize)",
        Claim::Derivable { summarize: false } => "derivable",
        Claim::Redundant { summarize: true } => "redundant(summarize)",
        Claim::Redundant { summarize: false } => "redundant",
        Claim::Effect { .. } => "effect",
    }
}

/// Canonical JSON: through `serde_json::Value`, so map keys are sorted and a value that
/// round-trips through rehydration serializes to the same bytes again (a `HashMap` would not).
pub(crate) fn canonical_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(&serde_json::to_value(value)?)
}

impl<'a> Visitor<'a> for Collector<'a> {
    fn protected<T: Serialize>(&mut self, name: &'static str, pin: bool, value: &'a T) {
        let Some((path, class)) = self.admit(name, Claim::Protected { pin }) else {
            return;
        };
        match canonical_json(value) {
            Ok(json) => {
                let fingerprint = ContentHash::of(json.as_bytes());
                self.fields.push(CollectedField {
                    path,
                    class,
                    value: Collected::Protected {
                        pin,
                        json,
                        fingerprint,
                    },
                });
            }
            Err(e) => self.fail(CompactionError::Serialize {
                field: path,
                message: e.to_string(),
            }),
        }
    }

    fn derivable<T: Serialize>(
        &mut self,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    ) {
        self.value(
            name,
            Claim::Derivable { summarize: false },
            value,
            Some(pointer),
            None,
        );
    }

    fn derivable_summarizable<T: Summarizable>(
        &mut self,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    ) {
        let summary: &'a dyn SummaryText = value;
        self.value(
            name,
            Claim::Derivable { summarize: true },
            value,
            Some(pointer),
            Some(summary),
        );
    }

    fn redundant<T: Serialize>(&mut self, name: &'static str, value: &'a T) {
        self.value(
            name,
            Claim::Redundant { summarize: false },
            value,
            None,
            None,
        );
    }

    fn redundant_summarizable<T: Summarizable>(&mut self, name: &'static str, value: &'a T) {
        let summary: &'a dyn SummaryText = value;
        self.value(
            name,
            Claim::Redundant { summarize: true },
            value,
            None,
            Some(summary),
        );
    }

    fn effect<E: EffectRecords>(&mut self, name: &'static str, idempotent: bool, value: &'a E) {
        if let Some((path, class)) = self.admit(name, Claim::Effect { idempotent }) {
            self.fields.push(CollectedField {
                path,
                class,
                value: Collected::Effects {
                    idempotent,
                    log: value.effect_log(),
                },
            });
        }
    }

    fn enter(&mut self, segment: Segment) {
        self.marks.push(self.path.len());
        push_segment(&mut self.path, segment);
    }

    fn leave(&mut self) {
        if let Some(len) = self.marks.pop() {
            self.path.truncate(len);
        }
    }

    fn shape(&mut self, name: &'static str, shape: Shape) {
        self.shapes.push((child_path(&self.path, name), shape));
    }
}

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
        target: usize,
        done: Option<(String, Pointer, usize)>,
    },
    Evict,
}

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
    Evicted(usize),
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
    pub path: String,
    pub section: Section,
    pub body: SlotBody,
    /// Tokens the field is known to take at least when rendered whole (0 when unmeasured).
    pub whole_tokens_at_least: usize,
    /// What demotion may do without going below the floor form.
    pub floor: FloorForm,
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

fn spill_records<'e>(records: impl Iterator<Item = (usize, &'e crate::Effect)>) -> Movable {
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

impl Slot {
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
                    ..
                } => Form::Summary {
                    text: text.clone(),
                    source: source.clone(),
                    origin: pointer.clone(),
                    from_tokens: *from_tokens,
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
                let (payloads, payloads_evicted) = match payloads {
                    Payloads::None => (Vec::new(), 0),
                    Payloads::Kept(p) => (p.clone(), 0),
                    Payloads::Evicted(n) => (Vec::new(), *n),
                };
                Form::Effects {
                    idempotent: *idempotent,
                    total: *total,
                    records,
                    spilled,
                    payloads,
                    payloads_evicted,
                }
            }
        };
        Entry {
            path: self.path.clone(),
            section: self.section,
            form,
        }
    }

    /// Tokens of this slot's line(s) in the default format: the planning estimate.
    pub fn line_tokens(&self, counter: &dyn TokenCounter) -> usize {
        let entry = self.entry();
        let mut line = String::new();
        render_field(&mut line, &FieldView::of(&entry));
        counter.count(&line)
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
                    *payloads = Payloads::Evicted(p.len());
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

/// Bytes of JSON a token may stand for, at most, when deciding a value cannot fit without
/// counting it. Real text runs at 3-5 bytes a token; a value denser than this is judged by its
/// bytes and evicted, which is safe (it only evicts more), and the exact count of the final
/// window still decides the budget.
const MAX_BYTES_PER_TOKEN: usize = 16;
/// A summary target below this is not worth a summarizer call: the field is evicted instead.
const MIN_SUMMARY_TOKENS: usize = 8;

/// A `Write` that refuses to grow past a cap, so a value too big for the window costs at most
/// the cap to find out. Without a buffer it only measures.
struct CappedBuffer {
    bytes: Option<Vec<u8>>,
    len: usize,
    cap: usize,
}

impl io::Write for CappedBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.len + buf.len() > self.cap {
            return Err(io::Error::other("over cap"));
        }
        self.len += buf.len();
        if let Some(bytes) = &mut self.bytes {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Serializes `value` unless it is longer than `cap` bytes. It is measured first without being
/// stored, so a value over the cap costs no memory to rule out (only one that fits is buffered,
/// at its exact size).
fn json_within(value: &dyn JsonValue, cap: usize) -> Option<String> {
    // Strings alone already over the cap: ruled out in a few steps, nothing serialized.
    if value.json_exceeds(cap) {
        return None;
    }
    let mut measure = CappedBuffer {
        bytes: None,
        len: 0,
        cap,
    };
    value.write_json(&mut measure).ok()?;
    let mut buffer = CappedBuffer {
        bytes: Some(Vec::with_capacity(measure.len)),
        len: 0,
        cap,
    };
    value.write_json(&mut buffer).ok()?;
    String::from_utf8(buffer.bytes?).ok()
}

/// Inputs the planner needs besides the state.
pub(crate) struct PlanContext<'c> {
    pub counter: &'c dyn TokenCounter,
    pub can_summarize: bool,
    pub max_summary_tokens: usize,
}

/// Turns collected fields into slots at their floor form.
pub(crate) fn floor_slots(fields: &[CollectedField<'_>]) -> Vec<Slot> {
    fields
        .iter()
        .map(|field| {
            let (section, body) = match &field.value {
                Collected::Protected {
                    pin,
                    json,
                    fingerprint,
                } => (
                    Section::Protected,
                    SlotBody::Protected {
                        pin: *pin,
                        json: json.clone(),
                        fingerprint: *fingerprint,
                        spill: !*pin,
                    },
                ),
                Collected::Value { pointer, .. } => {
                    let redundant = matches!(field.class, FieldClass::Redundant { .. });
                    (
                        if redundant {
                            Section::Redundant
                        } else {
                            Section::Derivable
                        },
                        SlotBody::Value {
                            redundant,
                            pointer: pointer.clone(),
                            plan: ValuePlan::Evict,
                        },
                    )
                }
                Collected::Effects { idempotent, log } => {
                    let effects = log.effects();
                    // Live records of a non-idempotent ledger are obligations: they never move.
                    let pins = |e: &crate::Effect| !*idempotent && e.status.is_live();
                    let pinned = effects
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| pins(e))
                        .map(|(index, e)| IndexedRecord {
                            index,
                            record: e.record(),
                        })
                        .collect();
                    let movable =
                        spill_records(effects.iter().enumerate().filter(|(_, e)| !pins(e)));
                    let with_payload = effects.iter().filter(|e| e.payload.is_some()).count();
                    (
                        Section::Effects,
                        SlotBody::Effects {
                            idempotent: *idempotent,
                            total: effects.len(),
                            pinned,
                            movable,
                            payloads: if with_payload == 0 {
                                Payloads::None
                            } else {
                                Payloads::Evicted(with_payload)
                            },
                        },
                    )
                }
            };
            Slot {
                path: field.path.clone(),
                section,
                body,
                whole_tokens_at_least: 0,
                floor: FloorForm::default(),
            }
        })
        .collect()
}

/// One step of the upgrade pass.
#[derive(Clone, Copy)]
enum Step {
    Protected,
    Records,
    Payloads,
    Value,
}

/// Brings fields back into the window in keep-priority order while they fit in `remaining`
/// (the budget left after the floor window). Returns what is left.
///
/// With `remaining == 0` and `summaries == false` it makes the floor minimal: a field whose
/// verbatim form is no longer than its pointer or tombstone (a small protected number, say) is
/// kept, because spilling it would only cost tokens.
pub(crate) fn upgrade(
    slots: &mut [Slot],
    fields: &[CollectedField<'_>],
    ctx: &PlanContext<'_>,
    mut remaining: usize,
    summaries: bool,
) -> usize {
    let mut steps: Vec<(Stage, usize, Step)> = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        match &slot.body {
            SlotBody::Protected {
                pin: false,
                spill: true,
                ..
            } => steps.push((Stage::Protected, i, Step::Protected)),
            SlotBody::Protected { .. } => {}
            SlotBody::Effects {
                movable, payloads, ..
            } => {
                if matches!(movable, Movable::Spilled { .. }) {
                    steps.push((Stage::EffectRecords, i, Step::Records));
                }
                if matches!(payloads, Payloads::Evicted(_)) {
                    steps.push((Stage::Payloads, i, Step::Payloads));
                }
            }
            SlotBody::Value {
                plan: ValuePlan::Evict,
                ..
            } => steps.push((slot.stage(), i, Step::Value)),
            SlotBody::Value { .. } => {}
        }
    }
    steps.sort_by_key(|&(stage, i, _)| (stage, i));
    for (_, i, step) in steps {
        if !summaries {
            // The floor pass keeps a field only when it is no longer than its own pointer: what
            // one field saves must not pay for another (that floor would not be minimal).
            remaining = 0;
        }
        let slot = &mut slots[i];
        let floor = slot.line_tokens(ctx.counter);
        let limit = remaining + floor;
        let kept = match step {
            Step::Protected => {
                set_spill(slot, false);
                true
            }
            Step::Records => keep_records(slot, limit),
            Step::Payloads => keep_payloads(slot, &fields[i].value, limit),
            Step::Value => {
                remaining = plan_value(slot, floor, &fields[i].value, ctx, remaining, summaries);
                continue;
            }
        };
        if !kept {
            continue;
        }
        match ctx.counter.count_till_limit(&slot_text(slot), limit) {
            Some(rich) => {
                slot.whole_tokens_at_least = rich;
                remaining = limit - rich;
            }
            None => {
                slot.whole_tokens_at_least = limit + 1;
                undo(slot, step);
            }
        }
    }
    if !summaries {
        slots.iter_mut().for_each(Slot::mark_floor);
    }
    remaining
}

fn slot_text(slot: &Slot) -> String {
    let entry = slot.entry();
    let mut line = String::new();
    render_field(&mut line, &FieldView::of(&entry));
    line
}

fn set_spill(slot: &mut Slot, to: bool) {
    if let SlotBody::Protected { spill, .. } = &mut slot.body {
        *spill = to;
    }
}

fn undo(slot: &mut Slot, step: Step) {
    match step {
        Step::Protected => set_spill(slot, true),
        Step::Records => {
            if let SlotBody::Effects { movable, .. } = &mut slot.body {
                if let Movable::Kept(kept) = movable {
                    *movable = spill_kept(kept);
                }
            }
        }
        Step::Payloads => {
            if let SlotBody::Effects { payloads, .. } = &mut slot.body {
                if let Payloads::Kept(p) = payloads {
                    *payloads = Payloads::Evicted(p.len());
                }
            }
        }
        Step::Value => {
            if let SlotBody::Value { plan, .. } = &mut slot.body {
                *plan = ValuePlan::Evict;
            }
        }
    }
}

/// Brings spilled records back unless their bytes alone rule it out.
fn keep_records(slot: &mut Slot, limit: usize) -> bool {
    let SlotBody::Effects { movable, .. } = &mut slot.body else {
        return false;
    };
    let Movable::Spilled { bytes, .. } = movable else {
        return false;
    };
    if bytes.len() > limit.saturating_mul(MAX_BYTES_PER_TOKEN) {
        return false;
    }
    match serde_json::from_slice::<Vec<IndexedRecord>>(bytes) {
        Ok(kept) => {
            *movable = Movable::Kept(kept);
            true
        }
        Err(_) => false,
    }
}

/// Brings payloads back unless their bytes alone rule it out.
fn keep_payloads(slot: &mut Slot, collected: &Collected<'_>, limit: usize) -> bool {
    let (SlotBody::Effects { payloads, .. }, Collected::Effects { log, .. }) =
        (&mut slot.body, collected)
    else {
        return false;
    };
    let cap = limit.saturating_mul(MAX_BYTES_PER_TOKEN);
    let mut bytes = 0usize;
    let mut kept = Vec::new();
    for (index, effect) in log.effects().iter().enumerate() {
        if let Some(value) = &effect.payload {
            let Some(json) = json_within(value, cap.saturating_sub(bytes)) else {
                return false;
            };
            bytes += json.len();
            kept.push(KeptPayload {
                index,
                key: effect.idempotency_key.clone(),
                value: value.clone(),
            });
        }
    }
    *payloads = Payloads::Kept(kept);
    true
}

/// Keeps a value verbatim if it fits, else plans a summary when allowed and worth it, else
/// leaves it evicted. Returns the budget left.
fn plan_value(
    slot: &mut Slot,
    floor: usize,
    collected: &Collected<'_>,
    ctx: &PlanContext<'_>,
    remaining: usize,
    summaries: bool,
) -> usize {
    let Collected::Value { value, summary, .. } = collected else {
        return remaining;
    };
    let limit = remaining + floor;
    if let Some(json) = json_within(*value, limit.saturating_mul(MAX_BYTES_PER_TOKEN)) {
        set_value_plan(slot, ValuePlan::Keep { json });
        match ctx.counter.count_till_limit(&slot_text(slot), limit) {
            Some(rich) => {
                slot.whole_tokens_at_least = rich;
                return limit - rich;
            }
            None => slot.whole_tokens_at_least = limit + 1,
        }
    }
    set_value_plan(slot, ValuePlan::Evict);
    let Some(summary) = summary.filter(|_| ctx.can_summarize && summaries) else {
        return remaining;
    };
    // What the summary line costs around the summary text itself.
    set_value_plan(
        slot,
        ValuePlan::Summarize {
            source: String::new(),
            target: 0,
            done: Some((String::new(), Pointer::for_hash(ContentHash::of(b"")), 0)),
        },
    );
    let frame = slot.line_tokens(ctx.counter);
    let target = limit.saturating_sub(frame).min(ctx.max_summary_tokens);
    if target < MIN_SUMMARY_TOKENS {
        set_value_plan(slot, ValuePlan::Evict);
        return remaining;
    }
    let mut source = summary.summary_text().into_owned();
    // Held until the window fits: do not hold the serializer's spare capacity too (up to 2x).
    source.shrink_to_fit();
    set_value_plan(
        slot,
        ValuePlan::Summarize {
            source,
            target,
            done: None,
        },
    );
    limit - frame - target
}

fn set_value_plan(slot: &mut Slot, to: ValuePlan) {
    if let SlotBody::Value { plan, .. } = &mut slot.body {
        *plan = to;
    }
}
