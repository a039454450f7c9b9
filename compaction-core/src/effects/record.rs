//! One effect record ([`Effect`]) and its exact tri-state status ([`EffectStatus`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a side effect stands. Three states, because "timed out" is neither "done" nor "failed".
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
