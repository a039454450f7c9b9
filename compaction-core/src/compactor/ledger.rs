//! The ledger side of [`Compactor::compact_with_ledger`](super::Compactor::compact_with_ledger):
//! finds every `#[effect]` field of a state and reads its records from its scope of the ledger.

use crate::effects::ledger::EffectLedger;
use crate::effects::record::{EffectLog, EffectRecords};
use crate::error::CompactionError;
use crate::state::compactable::{Compactable, PointerFn, Visitor};
use crate::state::path::{child_path, push_segment, Segment, Shape};
use crate::state::summarizable::Summarizable;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The ledger's records for every `#[effect]` field of `state`, by concrete path. Refuses a
/// record the state's view holds and the ledger lacks ([`CompactionError::EffectNotInLedger`]),
/// and a ledger failure ([`CompactionError::Ledger`]).
pub(super) async fn ledger_views<S, L>(
    state: &S,
    ledger: &L,
) -> Result<HashMap<String, EffectLog>, CompactionError>
where
    S: Compactable + Sync,
    L: EffectLedger,
{
    let mut fields = EffectFields::default();
    state.visit(&mut fields);
    let schema = S::schema();
    let mut scopes: BTreeMap<String, EffectLog> = BTreeMap::new();
    let mut views = HashMap::with_capacity(fields.found.len());
    for (path, own) in fields.found {
        let scope = match schema.field_for_instance(&path) {
            Some(field) => field.ledger_scope(&path),
            // Not in the schema: `compact` refuses it with `SchemaMismatch`.
            None => continue,
        };
        if !scopes.contains_key(&scope) {
            let log = ledger
                .load_log(&scope)
                .await
                .map_err(|e| CompactionError::Ledger {
                    field: path.clone(),
                    scope: scope.clone(),
                    source: Box::new(e),
                })?;
            scopes.insert(scope.clone(), log);
        }
        let from_ledger = &scopes[&scope];
        if let Some(missing) = own
            .iter()
            .find(|e| from_ledger.get(&e.idempotency_key).is_none())
        {
            return Err(CompactionError::EffectNotInLedger {
                field: path,
                scope,
                key: missing.idempotency_key.clone(),
            });
        }
        views.insert(path, from_ledger.clone());
    }
    Ok(views)
}

/// Finds every `#[effect]` field of a state: its concrete path and its own records.
#[derive(Default)]
struct EffectFields<'a> {
    path: String,
    marks: Vec<usize>,
    found: Vec<(String, &'a EffectLog)>,
}

impl<'a> Visitor<'a> for EffectFields<'a> {
    fn protected<T: Serialize>(&mut self, _: &'static str, _: bool, _: &'a T) {}
    fn derivable<T: Serialize>(&mut self, _: &'static str, _: PointerFn<'_>, _: &'a T) {}
    fn derivable_summarizable<T: Summarizable>(
        &mut self,
        _: &'static str,
        _: PointerFn<'_>,
        _: &'a T,
    ) {
    }
    fn redundant<T: Serialize>(&mut self, _: &'static str, _: &'a T) {}
    fn redundant_summarizable<T: Summarizable>(&mut self, _: &'static str, _: &'a T) {}

    fn effect<E: EffectRecords>(&mut self, name: &'static str, _: bool, value: &'a E) {
        self.found
            .push((child_path(&self.path, name), value.effect_log()));
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

    fn shape(&mut self, _: &'static str, _: Shape) {}
}
