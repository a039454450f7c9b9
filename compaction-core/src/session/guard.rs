//! The effect guard a session needs of its ledger (record, claim, commit, fail), object-safe,
//! with a failure split into the guard's refusal and the backend's error. Every
//! `EffectLedger` is one (`ledger.rs`).

use crate::effects::error::EffectError;
use crate::effects::record::Effect;
use crate::fence::Superseded;
use crate::future::BoxFuture;

/// A ledger operation that did not go through: the guard's refusal, or the backend's failure.
#[derive(Debug)]
pub(crate) enum LedgerFailure {
    /// The state machine refused the transition (the ledger is fine).
    Refused(EffectError),
    /// A newer session of the agent opened: this session's ledger writes are fenced.
    Superseded(Superseded),
    /// The backend failed; the operation may or may not have been applied.
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

/// The effect guard of a session's ledger.
pub(crate) trait EffectGuard: Send + Sync {
    /// Records `effect` in `scope` (an identical record again is a no-op).
    fn record<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), LedgerFailure>>;

    /// Claims `effect`'s key before it runs.
    fn begin<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), LedgerFailure>>;

    /// Settles a claimed key as done.
    fn commit<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), LedgerFailure>>;

    /// Records that a claimed effect did not happen.
    fn fail<'a>(&'a self, scope: &'a str, key: &'a str)
        -> BoxFuture<'a, Result<(), LedgerFailure>>;
}
