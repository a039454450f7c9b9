//! The ledger side of [`Compactor::compact_with_ledger`](super::Compactor::compact_with_ledger):
//! finds every `#[effect]` field of a state and reads its records from its scope of the ledger.

use crate::effects::ledger::EffectLedger;
use crate::effects::record::{EffectLog, EffectRecords};
use crate::error::CompactionError;
use crate::state::compactable::{Compactable, PointerFn, Visitor};
use crate::state::path::{child_path, push_segment, Segment, Shape};
use crate::state::summarizable::Summarizable;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

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
    // Each field's scope, and how many fields read each scope: the last one takes the log
    // read from the ledger, the others a copy (a log grows with every effect ever run).
    let mut uses: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = Vec::with_capacity(fields.found.len());
    for (path, own) in fields.found {
        // Not in the schema: `compact` refuses it with `SchemaMismatch`.
        if let Some(field) = schema.field_for_instance(&path) {
            let scope = field.ledger_scope(&path);
            *uses.entry(scope.clone()).or_default() += 1;
            found.push((path, own, scope));
        }
    }
    let mut scopes: BTreeMap<String, EffectLog> = BTreeMap::new();
    let mut views = HashMap::with_capacity(found.len());
    for (path, own, scope) in found {
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
        // One set of the ledger's keys, not a scan of its log per record: a session's log
        // grows with every effect it ever ran, and this runs at every request.
        let recorded: HashSet<&str> = from_ledger
            .iter()
            .map(|e| e.idempotency_key.as_str())
            .collect();
        if let Some(missing) = own
            .iter()
            .find(|e| !recorded.contains(e.idempotency_key.as_str()))
        {
            return Err(CompactionError::EffectNotInLedger {
                field: path,
                scope,
                key: missing.idempotency_key.clone(),
            });
        }
        let remaining = uses.get_mut(&scope).map_or(0, |n| {
            *n -= 1;
            *n
        });
        let view = if remaining == 0 {
            scopes.remove(&scope).unwrap_or_default()
        } else {
            scopes[&scope].clone()
        };
        views.insert(path, view);
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
