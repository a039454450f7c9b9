//! The guard methods of [`EffectLog`]: every transition of an in-memory log applies the
//! effect state machine (`effects/machine.rs`), as every durable ledger does; and its
//! `Deserialize`, which checks what [`EffectLog::from_effects`] checks.

use crate::effects::error::EffectError;
use crate::effects::machine;
use crate::effects::record::EffectLog;
use crate::effects::record::{Effect, EffectStatus};
use crate::effects::transition::{Change, Event, SyncSummary, SyncVerdict};
use serde::Deserialize;

impl EffectLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log holding these effects in order (keys must be unique).
    pub fn from_effects(effects: Vec<Effect>) -> Result<Self, EffectError> {
        // One pass with a set: calling `record` per effect was quadratic (rehydrating 5,000
        // records spent 70% of its time comparing keys).
        let mut seen = std::collections::HashSet::with_capacity(effects.len());
        for e in &effects {
            if !seen.insert(e.idempotency_key.as_str()) {
                return Err(EffectError::DuplicateKey {
                    key: e.idempotency_key.clone(),
                });
            }
        }
        Ok(EffectLog {
            effects: std::sync::Arc::new(effects),
        })
    }

    /// Applies one transition of the state machine to `key` and returns the record's position
    /// and the history event, if the status moved.
    pub(crate) fn apply(
        &mut self,
        key: &str,
        transition: impl FnOnce(Option<&Effect>) -> Result<Change, EffectError>,
    ) -> Result<(usize, Option<Event>), EffectError> {
        self.apply_near(None, key, transition)
    }

    /// [`apply`](Self::apply), looking for `key` at position `near` first: a sync walks
    /// another view of the same log, in the same order but for new keys, so the record is
    /// almost always there; looking each one up from the start made a sync quadratic in the
    /// log's length (a 2,000-turn session's ledger spent most of its time comparing keys).
    pub(crate) fn apply_near(
        &mut self,
        near: Option<usize>,
        key: &str,
        transition: impl FnOnce(Option<&Effect>) -> Result<Change, EffectError>,
    ) -> Result<(usize, Option<Event>), EffectError> {
        let position = match near {
            Some(i)
                if self
                    .effects
                    .get(i)
                    .is_some_and(|e| e.idempotency_key == key) =>
            {
                Some(i)
            }
            _ => self.position(key),
        };
        let change = transition(position.map(|i| &self.effects[i]))?;
        let index = match (position, change.write) {
            (Some(i), Some(record)) => {
                std::sync::Arc::make_mut(&mut self.effects)[i] = record;
                i
            }
            (Some(i), None) => i,
            (None, Some(record)) => {
                std::sync::Arc::make_mut(&mut self.effects).push(record);
                self.effects.len() - 1
            }
            // The machine creates every new key it accepts; this arm is never taken.
            (None, None) => return Err(EffectError::NotFound { key: key.into() }),
        };
        Ok((index, change.event))
    }

    /// Adds an effect (usually `NotStarted`). Recording the same key again with the same
    /// action, target and edges is a no-op; with different ones it is
    /// [`EffectError::DuplicateKey`]; a key that [`begin`](Self::begin) created on the spot
    /// takes the recorded details, keeping its status.
    pub fn record(&mut self, effect: Effect) -> Result<&mut Effect, EffectError> {
        let key = effect.idempotency_key.clone();
        let (index, _) = self.apply(&key, |current| machine::record(current, &effect))?;
        Ok(&mut std::sync::Arc::make_mut(&mut self.effects)[index])
    }

    /// Claims `key` before running its effect: the record becomes `Unknown` while in flight, so
    /// a crash mid-effect leaves it unknown rather than retryable. A key not yet in the log is
    /// recorded on the spot (with empty action and target). Refuses a committed or unknown key.
    pub fn begin(&mut self, key: &str) -> Result<(), EffectError> {
        self.begin_effect(&Effect::new("", "", key))
    }

    /// [`begin`](Self::begin) that records the effect's action, target and edges when the key
    /// is new.
    pub fn begin_effect(&mut self, effect: &Effect) -> Result<(), EffectError> {
        self.apply(&effect.idempotency_key, |current| {
            machine::begin(current, effect)
        })
        .map(drop)
    }

    /// Settles an in-flight effect as done.
    pub fn commit(&mut self, key: &str) -> Result<(), EffectError> {
        self.apply(key, |current| machine::commit(current, key))
            .map(drop)
    }

    /// Records that an in-flight effect certainly did not happen; it may be retried.
    pub fn fail(&mut self, key: &str) -> Result<(), EffectError> {
        self.apply(key, |current| machine::fail(current, key))
            .map(drop)
    }

    /// Sets the status an operator established by checking the outside world.
    pub fn reconcile(&mut self, key: &str, status: EffectStatus) -> Result<(), EffectError> {
        self.apply(key, |current| machine::reconcile(current, key, status))
            .map(drop)
    }

    /// Sets the payload of `key`.
    pub fn set_payload(
        &mut self,
        key: &str,
        payload: serde_json::Value,
    ) -> Result<(), EffectError> {
        self.apply(key, |current| machine::set_payload(current, key, &payload))
            .map(drop)
    }

    /// Merges `incoming` (another view of the same effects, e.g. one an agent changed in
    /// memory) into this log, forward only and never erasing anything: new keys are added,
    /// statuses move forward only, a placeholder's details and a missing payload are filled in
    /// (`machine::sync`). The same merge a durable ledger's `sync_log` applies.
    pub fn sync(&mut self, incoming: &EffectLog) -> SyncSummary {
        let mut summary = SyncSummary::default();
        for (i, effect) in incoming.iter().enumerate() {
            let key = effect.idempotency_key.as_str();
            let mut verdict = SyncVerdict::Unchanged;
            let applied = self.apply_near(Some(i), key, |current| {
                let (change, v) = machine::sync(current, effect);
                verdict = v;
                Ok(change)
            });
            debug_assert!(applied.is_ok(), "sync never refuses");
            summary.add(key, verdict);
        }
        summary
    }
}

/// Deserializes through [`EffectLog::from_effects`], so a loaded log upholds the invariants a
/// built one does (a log with two records under one key would let a committed key be claimed
/// again).
impl<'de> Deserialize<'de> for EffectLog {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let effects = Vec::<Effect>::deserialize(deserializer)?;
        EffectLog::from_effects(effects).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_life_cycle() {
        let mut log = EffectLog::new();
        log.record(Effect::new("send", "mail://ops", "k1")).unwrap();
        assert!(matches!(
            log.commit("k1"),
            Err(EffectError::NotInFlight { .. })
        ));
        log.begin("k1").unwrap();
        assert!(matches!(
            log.begin("k1"),
            Err(EffectError::OutcomeUnknown { .. })
        ));
        log.fail("k1").unwrap();
        assert_eq!(log.status("k1"), Some(EffectStatus::NotStarted));
        log.begin("k1").unwrap();
        log.commit("k1").unwrap();
        assert!(matches!(
            log.begin("k1"),
            Err(EffectError::AlreadyCommitted { .. })
        ));
        assert!(matches!(
            log.record(Effect::new("a", "b", "k1")),
            Err(EffectError::DuplicateKey { .. })
        ));
    }

    #[test]
    fn a_deserialized_log_refuses_duplicate_keys() {
        let json = r#"[{"action":"a","target":"t","idempotency_key":"k","status":"committed"},
                      {"action":"a","target":"t","idempotency_key":"k","status":"not_started"}]"#;
        let err = serde_json::from_str::<EffectLog>(json).unwrap_err();
        assert!(err.to_string().contains("`k`"), "{err}");
    }

    #[test]
    fn begin_on_new_key_claims_it_as_unknown() {
        let mut log = EffectLog::new();
        log.begin("fresh").unwrap();
        assert_eq!(log.status("fresh"), Some(EffectStatus::Unknown));
        log.reconcile("fresh", EffectStatus::Committed).unwrap();
        assert_eq!(log.with_status(EffectStatus::Committed).count(), 1);
    }

    /// A sync looks each incoming record up at its own position first; a view in another
    /// order (or with keys this log lacks in the middle) must merge exactly as one in order.
    #[test]
    fn sync_merges_the_same_in_any_order() {
        let mut base = EffectLog::new();
        for k in ["k0", "k1", "k2", "k3"] {
            base.record(Effect::new("deploy", "svc", k)).unwrap();
        }
        let mut incoming = base.clone();
        incoming.begin("k1").unwrap();
        incoming.commit("k1").unwrap();
        incoming.begin("k3").unwrap();
        incoming.record(Effect::new("mail", "ops", "new")).unwrap();
        let mut reordered: Vec<Effect> = incoming.iter().cloned().collect();
        reordered.reverse();
        reordered.swap(0, 2);
        let reordered = EffectLog::from_effects(reordered).unwrap();
        let (mut in_order, mut out_of_order) = (base.clone(), base);
        in_order.sync(&incoming);
        out_of_order.sync(&reordered);
        for log in [&in_order, &out_of_order] {
            assert_eq!(log.len(), 5);
            assert_eq!(log.status("k0"), Some(EffectStatus::NotStarted));
            assert_eq!(log.status("k1"), Some(EffectStatus::Committed));
            assert_eq!(log.status("k3"), Some(EffectStatus::Unknown));
            assert_eq!(log.status("new"), Some(EffectStatus::NotStarted));
        }
    }
}
