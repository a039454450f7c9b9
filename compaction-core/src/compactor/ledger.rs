//! The ledger side of [`Compactor::compact_with_ledger`](super::Compactor::compact_with_ledger):
//! finds every `#[effect]` field of a state and reads its records from its scope of the ledger.

use crate::effects::ledger::EffectLedger;
use crate::effects::record::{Effect, EffectLog, EffectRecords};
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
        if let Some(missing) = not_recorded(own, &scopes[&scope]) {
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

/// The first of `own`'s records whose key `from_ledger` does not hold. A session's log grows
/// with every effect it ever ran and this runs at every request, so the common case is checked
/// first without hashing: the ledger's log holds the field's records in the field's order (it
/// was synced from it), each key at its own position. Any other order falls back to one set of
/// the ledger's keys, never a scan of its log per record.
fn not_recorded<'o>(own: &'o EffectLog, from_ledger: &EffectLog) -> Option<&'o Effect> {
    let in_order = own
        .iter()
        .zip(from_ledger.iter())
        .all(|(mine, theirs)| mine.idempotency_key == theirs.idempotency_key);
    if in_order && own.len() <= from_ledger.len() {
        return None;
    }
    let recorded: HashSet<&str> = from_ledger
        .iter()
        .map(|e| e.idempotency_key.as_str())
        .collect();
    own.iter()
        .find(|e| !recorded.contains(e.idempotency_key.as_str()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn log(keys: &[&str]) -> EffectLog {
        let effects = keys.iter().map(|k| Effect::new("deploy", "svc", *k));
        EffectLog::from_effects(effects.collect()).expect("distinct keys")
    }

    fn missing(own: &[&str], ledger: &[&str]) -> Option<String> {
        not_recorded(&log(own), &log(ledger)).map(|e| e.idempotency_key.clone())
    }

    #[test]
    fn every_key_the_ledger_holds_is_recorded_in_any_order() {
        assert_eq!(missing(&["a", "b"], &["a", "b"]), None);
        assert_eq!(missing(&["a", "b"], &["a", "b", "c"]), None);
        assert_eq!(missing(&["b", "a"], &["a", "b", "c"]), None);
        assert_eq!(missing(&["c"], &["a", "b", "c"]), None);
        assert_eq!(missing(&[], &[]), None);
    }

    #[test]
    fn a_key_the_ledger_lacks_is_found_wherever_it_is() {
        // Past the ledger's end, after an in-order prefix: the fast path must not stop at the
        // shorter log.
        assert_eq!(missing(&["a", "b", "z"], &["a", "b"]), Some("z".into()));
        assert_eq!(missing(&["a"], &[]), Some("a".into()));
        // In the middle, and in a log out of the ledger's order.
        assert_eq!(
            missing(&["a", "z", "b"], &["a", "b", "c"]),
            Some("z".into())
        );
        assert_eq!(
            missing(&["c", "a", "z"], &["a", "b", "c"]),
            Some("z".into())
        );
    }
}
