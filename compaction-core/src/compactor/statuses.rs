//! What the state's ledgers say about each effect (`EffectStatuses`), remembered per thread
//! while the logs are unchanged. A session's logs hold every effect it ever ran, and the
//! statuses were built again at every request (a key and a scope copied per record: the largest
//! cost after the effect forms that grew with a session's length). Logs are recognized by their
//! records' allocations through weak handles that any change invalidates (`EffectLog::is_log`),
//! never by their lengths or keys, as the plan's effect forms are.

use crate::effects::record::{Effect, EffectLog, EffectStatus};
use crate::plan::Collection;
use crate::planner::effects::EffectStatuses;
use crate::state::schema::Schema;
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// Fewer records are looked up every time: remembering them saves nothing.
const WORTH_REMEMBERING: usize = 64;

/// The scopes and logs one set of statuses was built from, in traversal order.
type Sources = Vec<(String, Weak<Vec<Effect>>)>;

thread_local! {
    /// The last statuses built on this thread (a thread plans one session at a time, and a
    /// state's effect fields are read together).
    static LAST: RefCell<Option<(Sources, Arc<EffectStatuses>)>> = const { RefCell::new(None) };
}

/// What the state's ledgers say about each effect, by scope and key: a transcript call whose
/// effect no scope shows committed is never folded, and a key-only call that two scopes hold
/// is refused (issue 21.4).
pub(super) fn effect_statuses(collection: &Collection<'_>, schema: &Schema) -> Arc<EffectStatuses> {
    let logs: Vec<(String, &EffectLog)> = collection
        .effect_logs()
        .map(|(path, log)| {
            let scope = schema
                .field_for_instance(path)
                .map_or_else(|| path.to_owned(), |field| field.ledger_scope(path));
            (scope, log)
        })
        .collect();
    if logs.iter().map(|(_, log)| log.len()).sum::<usize>() < WORTH_REMEMBERING {
        return Arc::new(build(&logs));
    }
    let same = |sources: &Sources| {
        sources.len() == logs.len()
            && sources
                .iter()
                .zip(&logs)
                .all(|((scope, handle), (now, log))| scope == now && log.is_log(handle))
    };
    let found = LAST.with(|last| match &*last.borrow() {
        Some((sources, statuses)) if same(sources) => Some(Arc::clone(statuses)),
        _ => None,
    });
    if let Some(statuses) = found {
        return statuses;
    }
    let statuses = Arc::new(build(&logs));
    let sources = logs
        .iter()
        .map(|(scope, log)| (scope.clone(), log.downgrade()))
        .collect();
    LAST.with(|last| *last.borrow_mut() = Some((sources, Arc::clone(&statuses))));
    statuses
}

fn build(logs: &[(String, &EffectLog)]) -> EffectStatuses {
    let mut effects = EffectStatuses::new();
    for (scope, log) in logs {
        for effect in log.iter() {
            let settled = effect.status == EffectStatus::Committed;
            effects.insert(scope.as_str(), effect.idempotency_key.as_str(), settled);
        }
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::transcript::ToolCall;
    use crate::plan::collect;
    use crate::state::compactable::{Compactable, Parts, Visitor};
    use crate::state::path::RebuildError;
    use crate::state::schema::FieldClass;
    use std::sync::OnceLock;

    /// A state with one effect field, its records in the `deploys` scope.
    struct Deploys {
        log: EffectLog,
    }

    impl Compactable for Deploys {
        fn schema() -> &'static Schema {
            static SCHEMA: OnceLock<Schema> = OnceLock::new();
            SCHEMA.get_or_init(|| {
                Schema::builder("Deploys")
                    .field(
                        "deploys",
                        FieldClass::Effect { idempotent: false },
                        "EffectLog",
                    )
                    .build()
            })
        }
        fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V) {
            visitor.effect("deploys", false, &self.log);
        }
        fn rebuild(parts: &mut Parts) -> Result<Self, RebuildError> {
            Ok(Deploys {
                log: parts.redundant("deploys")?,
            })
        }
    }

    fn statuses(state: &Deploys) -> Arc<EffectStatuses> {
        let collection = collect(state, None).expect("collects");
        effect_statuses(&collection, Deploys::schema())
    }

    fn settled(statuses: &EffectStatuses, key: &str) -> bool {
        let call = ToolCall::new("c", "deploy", serde_json::json!({})).with_effect(key);
        statuses.is_settled(&call).expect("one scope")
    }

    fn long_log() -> Deploys {
        let mut log = EffectLog::new();
        for i in 0..WORTH_REMEMBERING + 10 {
            log.record(Effect::new("deploy", "svc", format!("k{i}")))
                .expect("new key");
        }
        Deploys { log }
    }

    #[test]
    fn unchanged_logs_are_looked_up_once_and_a_change_is_always_seen() {
        let mut state = long_log();
        let first = statuses(&state);
        assert!(!settled(&first, "k3"));
        // The same log, and a clone of it: the statuses built once.
        assert!(Arc::ptr_eq(&first, &statuses(&state)));
        let clone = Deploys {
            log: state.log.clone(),
        };
        assert!(Arc::ptr_eq(&first, &statuses(&clone)));
        // Changed in place while a clone is alive, then with no clone left: seen both times.
        state.log.begin("k3").expect("starts");
        state.log.commit("k3").expect("commits");
        let after = statuses(&state);
        assert!(settled(&after, "k3"), "the commit is seen");
        assert!(
            !settled(&statuses(&clone), "k3"),
            "the clone was not committed"
        );
        drop(clone);
        state.log.begin("k4").expect("starts");
        state.log.commit("k4").expect("commits");
        assert!(
            settled(&statuses(&state), "k4"),
            "changed with no clone left"
        );
        // A new key in a log of the same length as one seen before.
        let mut other = long_log();
        other.log = EffectLog::from_effects(
            other
                .log
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    if e.idempotency_key == "k5" {
                        e.idempotency_key = "other".into();
                        e.status = EffectStatus::Committed;
                    }
                    e
                })
                .collect(),
        )
        .expect("distinct keys");
        assert!(settled(&statuses(&other), "other"));
    }

    #[test]
    fn short_logs_are_looked_up_every_time() {
        let mut log = EffectLog::new();
        log.record(Effect::new("deploy", "svc", "k"))
            .expect("new key");
        let state = Deploys { log };
        assert!(!Arc::ptr_eq(&statuses(&state), &statuses(&state)));
    }
}
