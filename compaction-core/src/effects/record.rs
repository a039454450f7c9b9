//! The effect vocabulary everything else names: one record ([`Effect`]), its exact tri-state
//! status ([`EffectStatus`]), a log of them ([`EffectLog`]: its data and readers; its guard
//! methods apply the state machine in `effects/log.rs`), and [`EffectRecords`], what an
//! `#[effect]` field holds. Imports nothing of the crate, so every layer may name it.

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

    /// Whether `begin` created this record on the spot: empty action, target and edges, which
    /// a later `record` of the same key fills in.
    pub fn is_placeholder(&self) -> bool {
        self.action.is_empty() && self.target.is_empty() && self.depends_on.is_empty()
    }
}

/// An ordered log of effects, keyed by idempotency key, with a guard against double execution.
///
/// Every transition goes through the effect state machine (`effects/machine.rs`) (the guard
/// methods are in `effects/log.rs`), the
/// same one every durable ledger applies, so a log in a test behaves as the ledger in
/// production. Deserializing a log checks what [`from_effects`](Self::from_effects) checks:
/// a JSON log with two records under one key is refused.
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
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EffectLog {
    /// Shared until changed: a log is copied at every request (the ledger's read becomes each
    /// field's view) and grows with every effect a session ever ran, so a copy is a count,
    /// and a change copies the records once (`Arc::make_mut`).
    pub(super) effects: std::sync::Arc<Vec<Effect>>,
}

impl Serialize for EffectLog {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.effects.as_slice().serialize(serializer)
    }
}

impl EffectLog {
    /// The effect under `key`.
    pub fn get(&self, key: &str) -> Option<&Effect> {
        self.position(key).map(|i| &self.effects[i])
    }

    /// The status of `key`, if recorded.
    pub fn status(&self, key: &str) -> Option<EffectStatus> {
        self.get(key).map(|e| e.status)
    }

    /// All effects in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// A handle that [`is_log`](Self::is_log) recognizes while this log is unchanged, without
    /// keeping its records alive. A change (`Arc::make_mut`) with such a handle out moves or
    /// copies the records to a new allocation, and the handle keeps the old one from being
    /// reused, so no other log's records can ever sit at its address.
    pub(crate) fn downgrade(&self) -> std::sync::Weak<Vec<Effect>> {
        std::sync::Arc::downgrade(&self.effects)
    }

    /// Whether this log is, unchanged, the one `handle` was taken from (or a clone of it).
    pub(crate) fn is_log(&self, handle: &std::sync::Weak<Vec<Effect>>) -> bool {
        std::ptr::eq(handle.as_ptr(), std::sync::Arc::as_ptr(&self.effects))
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

    pub(super) fn position(&self, key: &str) -> Option<usize> {
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
