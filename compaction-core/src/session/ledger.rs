//! What a session asks of its effect ledger, behind object-safe traits, so
//! [`Session<S>`](crate::session::Session) names no ledger type: compact with the ledger's
//! views, record the agent's newest checkpoint (refusing a rolled-back one), and the effect
//! guard of `guard.rs`. Every [`EffectLedger`] is both.

use crate::checkpoint::Compacted;
use crate::compactor::Compactor;
use crate::effects::ledger::EffectLedger;
use crate::effects::record::Effect;
use crate::error::{CompactionError, CHECKPOINT_FIELD};
use crate::future::BoxFuture;
use crate::session::guard::{EffectGuard, LedgerFailure};
use crate::state::compactable::Compactable;

/// The ledger of a session over states `S`.
pub(crate) trait SessionLedger<S>: EffectGuard {
    /// `compactor.compact_with_ledger(state, self)`.
    fn compact<'a>(
        &'a self,
        compactor: &'a Compactor,
        state: &'a S,
    ) -> BoxFuture<'a, Result<Compacted<S>, CompactionError>>;

    /// `compactor.advance_checkpoint(compacted, self)`: verifies the checkpoint and records its
    /// sequence as the agent's newest, refusing one older than the newest recorded.
    fn advance<'a>(
        &'a self,
        compactor: &'a Compactor,
        compacted: &'a Compacted<S>,
    ) -> BoxFuture<'a, Result<(), CompactionError>>;

    /// The newest checkpoint sequence recorded for `agent_id`.
    fn newest<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, CompactionError>>;

    /// This ledger as the effect guard.
    fn guard(&self) -> &dyn EffectGuard;
}

/// The ledger's error, split into the guard's refusal and a backend failure.
fn failure<L: EffectLedger>(error: L::Error) -> LedgerFailure {
    match L::refusal(&error) {
        Some(refusal) => LedgerFailure::Refused(refusal.clone()),
        None => LedgerFailure::Backend(Box::new(error)),
    }
}

impl<L: EffectLedger> EffectGuard for L {
    fn record<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), LedgerFailure>> {
        Box::pin(async move {
            EffectLedger::record(self, scope, effect)
                .await
                .map_err(failure::<L>)
        })
    }

    fn begin<'a>(
        &'a self,
        scope: &'a str,
        effect: &'a Effect,
    ) -> BoxFuture<'a, Result<(), LedgerFailure>> {
        Box::pin(async move { self.begin_effect(scope, effect).await.map_err(failure::<L>) })
    }

    fn commit<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), LedgerFailure>> {
        Box::pin(async move {
            EffectLedger::commit(self, scope, key)
                .await
                .map_err(failure::<L>)
        })
    }

    fn fail<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), LedgerFailure>> {
        Box::pin(async move {
            EffectLedger::fail(self, scope, key)
                .await
                .map_err(failure::<L>)
        })
    }
}

impl<S, L> SessionLedger<S> for L
where
    S: Compactable + Sync,
    L: EffectLedger,
{
    fn compact<'a>(
        &'a self,
        compactor: &'a Compactor,
        state: &'a S,
    ) -> BoxFuture<'a, Result<Compacted<S>, CompactionError>> {
        Box::pin(compactor.compact_with_ledger(state, self))
    }

    fn advance<'a>(
        &'a self,
        compactor: &'a Compactor,
        compacted: &'a Compacted<S>,
    ) -> BoxFuture<'a, Result<(), CompactionError>> {
        Box::pin(compactor.advance_checkpoint(compacted, self))
    }

    fn newest<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, CompactionError>> {
        Box::pin(async move {
            self.newest_checkpoint(agent_id)
                .await
                .map_err(|e| CompactionError::Ledger {
                    field: CHECKPOINT_FIELD.into(),
                    scope: String::new(),
                    source: Box::new(e),
                })
        })
    }

    fn guard(&self) -> &dyn EffectGuard {
        self
    }
}
