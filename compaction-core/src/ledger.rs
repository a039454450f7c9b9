//! The effect ledger: side effects with an exact tri-state status that compaction copies verbatim.
//!
//! A summary can say "migrated the users table"; only a ledger can say *which* migration, under
//! which idempotency key, and whether it committed, never started, or timed out with an unknown
//! outcome. Records are never summarized, and an `Unknown` status is never collapsed.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a side effect stands. Three states, because "timed out" is neither "done" nor "failed".
///
/// ```
/// use compaction::{Effect, EffectError, EffectLog, EffectStatus};
///
/// let mut log = EffectLog::new();
/// log.record(Effect::new("charge_card", "payments://customers/42", "charge-7"))?;
/// assert_eq!(log.status("charge-7"), Some(EffectStatus::NotStarted));
/// log.begin("charge-7")?; // the call is in flight: a crash or timeout now leaves it Unknown
/// assert_eq!(log.status("charge-7"), Some(EffectStatus::Unknown));
/// // Unknown is never guessed: check the provider by the idempotency key, then record it.
/// log.reconcile("charge-7", EffectStatus::Committed)?;
/// assert_eq!(log.status("charge-7"), Some(EffectStatus::Committed));
/// // The window and the ledger spell it in snake case.
/// assert_eq!(serde_json::to_string(&EffectStatus::NotStarted).unwrap(), r#""not_started""#);
/// # Ok::<(), EffectError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    /// Certainly has not happened: safe to start.
    NotStarted,
    /// Certainly happened: never run it again.
    Committed,
    /// Was started and its outcome is not known (in flight, crashed, timed out).
    /// Must be reconciled against the outside world before anything retries it.
    Unknown,
}

impl EffectStatus {
    /// `true` for `NotStarted` and `Unknown`: an obligation the agent still has to act on or
    /// reconcile, which therefore always stays in the window.
    pub fn is_live(self) -> bool {
        !matches!(self, EffectStatus::Committed)
    }

    /// The snake_case name used in the rendered window (`not_started`, `committed`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            EffectStatus::NotStarted => "not_started",
            EffectStatus::Committed => "committed",
            EffectStatus::Unknown => "unknown",
        }
    }
}

impl fmt::Display for EffectStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One side effect: what it does, to what, under which idempotency key, and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// What the effect does, e.g. `apply_migration`.
    pub action: String,
    /// What it acts on, e.g. `db://prod/users`.
    pub target: String,
    /// Unique key that identifies this effect across retries and restarts.
    pub idempotency_key: String,
    /// Exact status; copied verbatim across every compaction.
    pub status: EffectStatus,
    /// Keys of effects whose *output* this one needs: ordering edges that must survive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Bulky result data (a tool's response). The only part of an effect compaction may evict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
}

impl Effect {
    /// A new effect that has not started.
    pub fn new(
        action: impl Into<String>,
        target: impl Into<String>,
        idempotency_key: impl Into<String>,
    ) -> Self {
        Effect {
            action: action.into(),
            target: target.into(),
            idempotency_key: idempotency_key.into(),
            status: EffectStatus::NotStarted,
            depends_on: Vec::new(),
            payload: None,
        }
    }

    /// Adds an ordering edge: this effect needs the output of `key`.
    pub fn depends_on(mut self, key: impl Into<String>) -> Self {
        self.depends_on.push(key.into());
        self
    }

    /// Sets the payload.
    pub fn with_payload(mut self, payload: serde_json::Value) -> Self {
        self.payload = Some(payload);
        self
    }

    /// Sets the status (for records loaded from elsewhere; use the log's guard methods to move
    /// an effect through its life).
    pub fn with_status(mut self, status: EffectStatus) -> Self {
        self.status = status;
        self
    }

    /// The record without its payload: the part compaction copies verbatim.
    pub fn record(&self) -> Effect {
        Effect {
            payload: None,
            ..self.clone()
        }
    }
}

/// Why the effect guard refused a transition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EffectError {
    /// `begin` on a key that already committed: running it again would duplicate the effect.
    #[error("effect `{key}` already committed; do not run it again")]
    AlreadyCommitted {
        /// The idempotency key.
        key: String,
    },
    /// `begin` on a key whose outcome is unknown: the outside world must be checked first.
    #[error(
        "effect `{key}` has an unknown outcome; reconcile it against the outside world \
         (reconcile(key, status)) before retrying"
    )]
    OutcomeUnknown {
        /// The idempotency key.
        key: String,
    },
    /// `commit`/`fail` on a key that was never begun.
    #[error("effect `{key}` is not in flight (status {status}); call begin first")]
    NotInFlight {
        /// The idempotency key.
        key: String,
        /// Its current status.
        status: EffectStatus,
    },
    /// The key is not in the log.
    #[error("no effect with idempotency key `{key}`")]
    NotFound {
        /// The idempotency key.
        key: String,
    },
    /// `record` with a key that is already present.
    #[error("an effect with idempotency key `{key}` is already recorded")]
    DuplicateKey {
        /// The idempotency key.
        key: String,
    },
}

/// An ordered log of effects, keyed by idempotency key, with a guard against double execution.
///
/// ```
/// use compaction::{EffectLog, Effect, EffectStatus, EffectError};
///
/// let mut log = EffectLog::default();
/// log.record(Effect::new("apply_migration", "db://prod/users", "mig-0042"))?;
/// log.begin("mig-0042")?;                       // in flight: recorded as Unknown
/// assert_eq!(log.status("mig-0042"), Some(EffectStatus::Unknown));
/// log.commit("mig-0042")?;                      // settled
/// // A second attempt is refused instead of re-applying the migration.
/// assert!(matches!(log.begin("mig-0042"), Err(EffectError::AlreadyCommitted { .. })));
/// # Ok::<(), EffectError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EffectLog {
    effects: Vec<Effect>,
}

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
        Ok(EffectLog { effects })
    }

    /// Adds an effect (usually `NotStarted`); refuses a duplicate key.
    pub fn record(&mut self, effect: Effect) -> Result<&mut Effect, EffectError> {
        if self.position(&effect.idempotency_key).is_some() {
            return Err(EffectError::DuplicateKey {
                key: effect.idempotency_key,
            });
        }
        self.effects.push(effect);
        Ok(self.effects.last_mut().expect("just pushed"))
    }

    /// Claims `key` before running its effect: the record becomes `Unknown` while in flight, so
    /// a crash mid-effect leaves it unknown rather than retryable. A key not yet in the log is
    /// recorded on the spot (with empty action and target). Refuses a committed or unknown key.
    pub fn begin(&mut self, key: &str) -> Result<(), EffectError> {
        match self.position(key) {
            None => {
                let mut effect = Effect::new("", "", key);
                effect.status = EffectStatus::Unknown;
                self.effects.push(effect);
                Ok(())
            }
            Some(i) => {
                let effect = &mut self.effects[i];
                match effect.status {
                    EffectStatus::NotStarted => {
                        effect.status = EffectStatus::Unknown;
                        Ok(())
                    }
                    EffectStatus::Committed => {
                        Err(EffectError::AlreadyCommitted { key: key.into() })
                    }
                    EffectStatus::Unknown => Err(EffectError::OutcomeUnknown { key: key.into() }),
                }
            }
        }
    }

    /// Settles an in-flight effect as done.
    pub fn commit(&mut self, key: &str) -> Result<(), EffectError> {
        self.settle(key, EffectStatus::Committed)
    }

    /// Records that an in-flight effect certainly did not happen; it may be retried.
    pub fn fail(&mut self, key: &str) -> Result<(), EffectError> {
        self.settle(key, EffectStatus::NotStarted)
    }

    fn settle(&mut self, key: &str, to: EffectStatus) -> Result<(), EffectError> {
        let effect = self.get_mut(key)?;
        if effect.status != EffectStatus::Unknown {
            return Err(EffectError::NotInFlight {
                key: key.into(),
                status: effect.status,
            });
        }
        effect.status = to;
        Ok(())
    }

    /// Sets the status an operator established by checking the outside world.
    pub fn reconcile(&mut self, key: &str, status: EffectStatus) -> Result<(), EffectError> {
        self.get_mut(key)?.status = status;
        Ok(())
    }

    /// The effect under `key`.
    pub fn get(&self, key: &str) -> Option<&Effect> {
        self.position(key).map(|i| &self.effects[i])
    }

    fn get_mut(&mut self, key: &str) -> Result<&mut Effect, EffectError> {
        match self.position(key) {
            Some(i) => Ok(&mut self.effects[i]),
            None => Err(EffectError::NotFound { key: key.into() }),
        }
    }

    /// The status of `key`, if recorded.
    pub fn status(&self, key: &str) -> Option<EffectStatus> {
        self.get(key).map(|e| e.status)
    }

    /// Sets the payload of `key`.
    pub fn set_payload(
        &mut self,
        key: &str,
        payload: serde_json::Value,
    ) -> Result<(), EffectError> {
        self.get_mut(key)?.payload = Some(payload);
        Ok(())
    }

    /// All effects in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Iterates over all effects in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Effect> {
        self.effects.iter()
    }

    /// Effects with the given status, in order.
    pub fn with_status(&self, status: EffectStatus) -> impl Iterator<Item = &Effect> + '_ {
        self.effects.iter().filter(move |e| e.status == status)
    }

    /// Number of effects.
    pub fn len(&self) -> usize {
        self.effects.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.effects.is_empty()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.effects.iter().position(|e| e.idempotency_key == key)
    }
}

impl<'a> IntoIterator for &'a EffectLog {
    type Item = &'a Effect;
    type IntoIter = std::slice::Iter<'a, Effect>;
    fn into_iter(self) -> Self::IntoIter {
        self.effects.iter()
    }
}

/// Types that record effects and may back an `#[effect]` field.
///
/// Implemented by [`EffectLog`]; a ledger backed by a database can implement it too, by handing
/// out its records as an `EffectLog` and rebuilding from one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not record effects, so it cannot be an `#[effect]` field",
    label = "an `#[effect]` field must be an `EffectLog` or implement `EffectRecords`",
    note = "use `compaction::EffectLog` for this field, or classify it `#[protected]` if it is plain state"
)]
pub trait EffectRecords {
    /// The records, in order.
    fn effect_log(&self) -> &EffectLog;
    /// Rebuilds the value from its records.
    fn from_effect_log(log: EffectLog) -> Self
    where
        Self: Sized;
}

impl EffectRecords for EffectLog {
    fn effect_log(&self) -> &EffectLog {
        self
    }
    fn from_effect_log(log: EffectLog) -> Self {
        log
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
    fn begin_on_new_key_claims_it_as_unknown() {
        let mut log = EffectLog::new();
        log.begin("fresh").unwrap();
        assert_eq!(log.status("fresh"), Some(EffectStatus::Unknown));
        log.reconcile("fresh", EffectStatus::Committed).unwrap();
        assert_eq!(log.with_status(EffectStatus::Committed).count(), 1);
    }
}
