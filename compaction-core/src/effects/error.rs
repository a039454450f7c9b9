//! Why the effect guard refused a transition.

use crate::effects::record::EffectStatus;
use crate::fence::Superseded;

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
    /// A scope, key, action, target or dependency holds a NUL character. PostgreSQL text
    /// cannot hold one, so no ledger stores one: every ledger (and `EffectLog`) refuses it
    /// alike, before reading or writing anything.
    #[error(
        "effect `{}`: its {part} contains a NUL character, which no ledger stores",
        key.escape_debug()
    )]
    Nul {
        /// The idempotency key (it may itself be what holds the NUL).
        key: String,
        /// Which part holds it: `scope`, `key`, `action`, `target` or `dependency`.
        part: &'static str,
    },
    /// A write through a ledger handle fenced for a session (see [`crate::fence`]) after a
    /// newer session of the agent opened: nothing was written.
    #[error("{0}")]
    Superseded(Superseded),
}
