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
//! preference to a later one, and a later, smaller field is still kept if it fits. The one
//! exception is rule 5 of the transcripts, newer before older: the elements of a `Vec` of
//! `#[nested]` state go from the last to the first (`CollectedField::rank`). Eviction is
//! the same order read backwards: redundant first, protected last. The budget is then checked on
//! the rendered text; if the estimate was short, the last field brought back is demoted, and so
//! on, until the window fits.

mod collect;
mod collected;
mod effect_forms;
mod json_size;
mod keep;
mod outcome;
mod slot;

pub(crate) use collect::collect;
pub(crate) use collected::{CollectedTranscript, Collection};
pub(crate) use effect_forms::KeptRecordsOver;

use crate::error::{CompactionError, FieldCost};
use crate::plan::collected::{Collected, CollectedField};
use crate::plan::json_size::{json_within, MAX_BYTES_PER_TOKEN};
use crate::plan::keep::{keep_payloads, keep_records, records_line, Keep};
use crate::plan::slot::{
    spill_kept, spill_kept_payloads, FloorForm, Movable, Payloads, Slot, SlotBody, Stage,
    ValueFromSource, ValuePlan,
};
use crate::report::{CompactionReport, FieldOutcome};
use crate::state::schema::FieldClass;
use crate::store::{ContentHash, Pointer};
use crate::tokens::TokenCounter;
use crate::window::{Entry, Section};
use std::collections::BTreeMap;

/// A summary target below this is not worth a summarizer call: the field is evicted instead.
const MIN_SUMMARY_TOKENS: usize = 8;

/// Inputs the planner needs besides the state.
pub(crate) struct PlanContext<'c> {
    pub counter: &'c dyn TokenCounter,
    pub can_summarize: bool,
    pub max_summary_tokens: usize,
    /// The limits effect logs' lines were counted over by this counter.
    pub records_over: &'c KeptRecordsOver,
}

/// Every field's planned form, owning all it needs (nothing borrowed from the state), so the
/// async part of compaction holds no borrow of the state.
pub(crate) struct Plan {
    slots: Vec<Slot>,
}

impl Plan {
    /// The floor: the smallest window that keeps every guarantee (see the module docs).
    pub fn floor(collection: &Collection<'_>, ctx: &PlanContext<'_>) -> Plan {
        let mut slots = floor_slots(&collection.fields);
        upgrade(&mut slots, &collection.fields, ctx, 0, false);
        Plan { slots }
    }

    /// Every field at its richest form (nothing spilled, summarized or evicted), or `None` when
    /// some value is ruled out by its bytes alone (more than `budget` tokens could hold). Tried
    /// before the floor: when this window fits, it is the plan, so a state whose whole window
    /// fits is never refused nor cut, whatever the per-line estimates say (the floor's
    /// "left the window" line, tokens merging across lines).
    pub fn all_verbatim(collection: &Collection<'_>, budget: usize) -> Option<Plan> {
        // Values ruled out by their bytes first, in a few steps each: building the floor's slots
        // serializes and hashes every settled effect record, which a state with one large value
        // (the usual case when compacting) must not pay twice.
        let cap = budget.saturating_mul(MAX_BYTES_PER_TOKEN);
        let too_big = |field: &CollectedField<'_>| matches!(&field.value, Collected::Value { value, .. } if value.json_exceeds(cap));
        if collection.fields.iter().any(too_big) {
            return None;
        }
        let mut slots = floor_slots(&collection.fields);
        for (slot, field) in slots.iter_mut().zip(&collection.fields) {
            let kept = match (&slot.body, &field.value) {
                (SlotBody::Protected { .. }, _) => {
                    set_spill(slot, false);
                    true
                }
                (SlotBody::Effects { .. }, collected) => {
                    let records = !matches!(
                        &slot.body,
                        SlotBody::Effects {
                            movable: Movable::Spilled { .. },
                            ..
                        }
                    ) || matches!(keep_records(slot, None, budget), Keep::Kept);
                    let payloads = !matches!(
                        &slot.body,
                        SlotBody::Effects {
                            payloads: Payloads::Spilled { .. },
                            ..
                        }
                    ) || keep_payloads(slot, collected, budget);
                    records && payloads
                }
                (SlotBody::Value { .. }, Collected::Value { value, .. }) => {
                    match json_within(*value, budget.saturating_mul(MAX_BYTES_PER_TOKEN)) {
                        Some(json) => {
                            set_value_plan(slot, ValuePlan::Keep { json });
                            true
                        }
                        None => false,
                    }
                }
                _ => false,
            };
            if !kept {
                return None;
            }
        }
        Some(Plan { slots })
    }

    /// The smallest window that keeps every guarantee, with its tokens by `count`: the floor
    /// or, for small states whose pointers cost as much as their values, the all-verbatim one.
    pub fn smallest(
        collection: &Collection<'_>,
        ctx: &PlanContext<'_>,
        count: impl Fn(&Plan) -> usize,
    ) -> (usize, Plan) {
        let floor = Plan::floor(collection, ctx);
        let floor_tokens = count(&floor);
        // Ruled out by bytes at the floor's size, it cannot be smaller than the floor.
        match Plan::all_verbatim(collection, floor_tokens) {
            Some(verbatim) => match count(&verbatim) {
                tokens if tokens < floor_tokens => (tokens, verbatim),
                _ => (floor_tokens, floor),
            },
            None => (floor_tokens, floor),
        }
    }

    /// Brings fields back in keep-priority order while they fit in `remaining` tokens (the
    /// budget left after the floor window).
    pub fn upgrade(
        &mut self,
        collection: &Collection<'_>,
        ctx: &PlanContext<'_>,
        remaining: usize,
    ) {
        upgrade(&mut self.slots, &collection.fields, ctx, remaining, true);
    }

    /// The window entries for the current plan, in traversal order.
    pub fn entries(&self) -> Vec<Entry> {
        self.slots.iter().map(Slot::entry).collect()
    }

    /// Demotes the lowest-priority field still above its floor. `false` when none is left.
    pub fn demote_one(&mut self) -> bool {
        let slots = &mut self.slots;
        let mut order: Vec<usize> = (0..slots.len()).collect();
        order.sort_by(|&a, &b| {
            let key = |i: usize| (slots[i].stage(), &slots[i].rank);
            key(b).cmp(&key(a))
        });
        order.into_iter().any(|i| slots[i].demote())
    }

    /// The fields still waiting for a summary: each answers
    /// [`pending_summary`](Slot::pending_summary) and takes [`set_summary`](Slot::set_summary)
    /// or [`evict_value`](Slot::evict_value).
    pub fn pending_summaries(&mut self) -> impl Iterator<Item = &mut Slot> {
        self.slots
            .iter_mut()
            .filter(|slot| slot.pending_summary().is_some())
    }

    /// Everything the plan moves to the store, under its address.
    pub fn spills(&self) -> impl Iterator<Item = (ContentHash, &[u8])> {
        self.slots.iter().flat_map(Slot::spill_blobs)
    }

    /// `ProtectedOverBudget`: what had to stay verbatim, with its tokens, and what already left.
    pub fn over_budget(
        &self,
        required_tokens: usize,
        budget: usize,
        counter: &dyn TokenCounter,
    ) -> CompactionError {
        let mut fields = Vec::new();
        let mut evicted = Vec::new();
        for slot in &self.slots {
            if slot.is_verbatim() {
                fields.push(FieldCost {
                    field: slot.path.clone(),
                    tokens: slot.line_tokens(counter),
                });
            } else {
                evicted.push(slot.path.clone());
            }
        }
        CompactionError::ProtectedOverBudget {
            fields,
            required_tokens,
            budget,
            evicted,
        }
    }

    /// What this plan did to each field, once its window of `tokens_after` tokens fits.
    pub fn report(
        &self,
        compaction: u64,
        budget: usize,
        tokens_after: usize,
        counter: &dyn TokenCounter,
    ) -> CompactionReport {
        let mut fields = Vec::new();
        let mut fingerprints = BTreeMap::new();
        let mut tokens_before = tokens_after;
        for slot in &self.slots {
            if let Some(fingerprint) = slot.fingerprint() {
                fingerprints.insert(slot.path.clone(), fingerprint);
            }
            tokens_before += slot.tokens_left_at_least(counter);
            fields.extend(slot.outcomes(counter));
        }
        let exact = fields.iter().all(|f| f.outcome == FieldOutcome::Kept);
        CompactionReport {
            compaction,
            budget,
            tokens_after,
            tokens_before,
            tokens_before_exact: exact,
            counter: counter.name().to_owned(),
            fields,
            fingerprints,
            request_tokens: None,
            transcript: None,
        }
    }
}

/// Turns collected fields into slots at their floor form.
fn floor_slots(fields: &[CollectedField<'_>]) -> Vec<Slot> {
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
                    let forms = effect_forms::of(log, *idempotent);
                    (
                        Section::Effects,
                        SlotBody::Effects {
                            idempotent: *idempotent,
                            total: log.len(),
                            pinned: forms.pinned,
                            movable: forms.movable,
                            payloads: forms.payloads,
                        },
                    )
                }
            };
            Slot {
                path: field.path.clone(),
                rank: field.rank.clone(),
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
fn upgrade(
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
                if matches!(payloads, Payloads::Spilled { .. }) {
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
    steps.sort_by(|a, b| (a.0, &slots[a.1].rank).cmp(&(b.0, &slots[b.1].rank)));
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
            Step::Records => {
                match keep_records(slot, Some((&fields[i].value, ctx.records_over)), limit) {
                    Keep::Kept => true,
                    Keep::RuledOut => false,
                    Keep::KnownOver => {
                        // What counting the line would find (below), without rendering it.
                        slot.whole_tokens_at_least = limit + 1;
                        false
                    }
                }
            }
            Step::Payloads => keep_payloads(slot, &fields[i].value, limit),
            Step::Value => {
                remaining = plan_value(slot, floor, &fields[i].value, ctx, remaining, summaries);
                continue;
            }
        };
        if !kept {
            continue;
        }
        match ctx.counter.count_till_limit(&slot.line(), limit) {
            Some(rich) => {
                slot.whole_tokens_at_least = rich;
                remaining = limit - rich;
            }
            None => {
                slot.whole_tokens_at_least = limit + 1;
                if matches!(step, Step::Records) {
                    if let (Some(line), Collected::Effects { log, .. }) =
                        (records_line(slot), &fields[i].value)
                    {
                        ctx.records_over.note(log, line, limit);
                    }
                }
                undo(slot, step);
            }
        }
    }
    if !summaries {
        slots.iter_mut().for_each(Slot::mark_floor);
    }
    remaining
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
                    *payloads = spill_kept_payloads(p);
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
        match ctx.counter.count_till_limit(&slot.line(), limit) {
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
            source_hash: ContentHash::of(b""),
            target: 0,
            done: Some((String::new(), Pointer::for_hash(ContentHash::of(b"")), 0)),
            value: None,
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
    // The source goes to the store verbatim; rehydration restores the value from it (or from
    // a copy of its JSON stored beside it, when the source is not the value).
    let from_source = match summary.text_is_json() {
        true => Some(ValueFromSource::Json),
        false => ValueFromSource::of(*value, &source),
    };
    let Some(value) = from_source else {
        set_value_plan(slot, ValuePlan::Evict);
        return remaining;
    };
    let source_hash = ContentHash::of(source.as_bytes());
    set_value_plan(
        slot,
        ValuePlan::Summarize {
            source,
            source_hash,
            target,
            done: None,
            value: Some(value),
        },
    );
    limit - frame - target
}

fn set_value_plan(slot: &mut Slot, to: ValuePlan) {
    if let SlotBody::Value { plan, .. } = &mut slot.body {
        *plan = to;
    }
}
