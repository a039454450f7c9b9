//! Which effects the transcript's calls perform are settled: looked up by scope *and* key,
//! never by key alone (issue 21.4).
//!
//! A call names its effect with [`ToolCall::with_effect_in`] (scope and key) or
//! [`ToolCall::with_effect`] (key only). A key-only call is resolved among every scope the
//! state's ledgers know: in exactly one scope it is that effect; in none it is live (nothing can
//! show it settled); in two or more it is ambiguous, and planning refuses it with
//! [`TranscriptPlanError::AmbiguousEffect`](crate::transcript::TranscriptPlanError) rather than
//! guess (a committed `order-42` in `refunds` must never let the unknown `order-42` in
//! `charges` be folded away).

use crate::conversation::transcript::ToolCall;
use std::collections::HashMap;

/// The statuses the planner needs: for each (scope, key) the ledgers hold, whether the effect
/// is settled (committed). Everything else a call may name is live.
///
/// ```
/// use compaction::transcript::EffectStatuses;
/// use compaction::ToolCall;
/// use serde_json::json;
///
/// let mut effects = EffectStatuses::new();
/// effects.insert("refunds", "order-42", true); // committed
/// effects.insert("charges", "order-42", false); // unknown outcome
/// let charge = ToolCall::new("c1", "charge", json!({})).with_effect_in("charges", "order-42");
/// assert_eq!(effects.is_settled(&charge), Ok(false));
/// let vague = ToolCall::new("c2", "charge", json!({})).with_effect("order-42");
/// assert!(effects.is_settled(&vague).is_err()); // in two scopes: ambiguous
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EffectStatuses {
    /// key -> every (scope, settled) the ledgers hold for it.
    by_key: HashMap<String, Vec<(String, bool)>>,
}

/// A key-only effect reference that more than one scope holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmbiguousKey {
    /// The key.
    pub key: String,
    /// Every scope that holds it, sorted.
    pub scopes: Vec<String>,
}

impl EffectStatuses {
    /// No effect known: every call with an effect is live.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `scope` holds `key`, settled (committed) or not. Inserting the same pair
    /// again overwrites its status.
    pub fn insert(&mut self, scope: impl Into<String>, key: impl Into<String>, settled: bool) {
        let scope = scope.into();
        let entries = self.by_key.entry(key.into()).or_default();
        match entries.iter_mut().find(|(s, _)| *s == scope) {
            Some(entry) => entry.1 = settled,
            None => entries.push((scope, settled)),
        }
    }

    /// Whether the effect `call` performs is settled: `Ok(true)` only when the ledger shows it
    /// committed in its scope. A call without an effect is settled (it has nothing to keep).
    pub fn is_settled(&self, call: &ToolCall) -> Result<bool, AmbiguousKey> {
        let Some(key) = call.effect.as_deref() else {
            return Ok(true);
        };
        let entries = self.by_key.get(key).map(Vec::as_slice).unwrap_or_default();
        match call.effect_scope.as_deref() {
            Some(scope) => Ok(entries.iter().any(|(s, settled)| s == scope && *settled)),
            None => match entries {
                [] => Ok(false),
                [(_, settled)] => Ok(*settled),
                _ => {
                    let mut scopes: Vec<String> = entries.iter().map(|(s, _)| s.clone()).collect();
                    scopes.sort();
                    Err(AmbiguousKey {
                        key: key.to_owned(),
                        scopes,
                    })
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_is_never_looked_up_alone_when_two_scopes_hold_it() {
        let mut effects = EffectStatuses::new();
        effects.insert("refunds", "order-42", true);
        let key_only = ToolCall::new("c", "t", json!({})).with_effect("order-42");
        assert_eq!(effects.is_settled(&key_only), Ok(true));
        effects.insert("charges", "order-42", false);
        let err = effects.is_settled(&key_only).unwrap_err();
        assert_eq!(err.scopes, vec!["charges".to_owned(), "refunds".to_owned()]);
        let charge = ToolCall::new("c", "t", json!({})).with_effect_in("charges", "order-42");
        assert_eq!(effects.is_settled(&charge), Ok(false));
        let refund = ToolCall::new("c", "t", json!({})).with_effect_in("refunds", "order-42");
        assert_eq!(effects.is_settled(&refund), Ok(true));
        let elsewhere = ToolCall::new("c", "t", json!({})).with_effect_in("other", "order-42");
        assert_eq!(effects.is_settled(&elsewhere), Ok(false));
        let unknown = ToolCall::new("c", "t", json!({})).with_effect("order-7");
        assert_eq!(effects.is_settled(&unknown), Ok(false));
    }
}
