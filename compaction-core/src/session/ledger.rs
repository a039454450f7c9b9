//! What a session asks of its effect ledger, behind object-safe traits, so
//! [`Session<S>`](crate::session::Session) names no ledger type: compact with the ledger's
//! views, record the agent's newest checkpoint (refusing a rolled-back one), and the effect
//! guard of `guard.rs`. Every [`EffectLedger`] is both.

use crate::checkpoint::Compacted;
use crate::compactor::Compactor;
use crate::effects::error::EffectError;
use crate::effects::ledger::EffectLedger;
use crate::effects::record::Effect;
use crate::error::CompactionError;
use crate::fence::{Fence, FenceRecord};
use crate::future::BoxFuture;
use crate::session::error::{fence_error, SessionError};
use crate::session::guard::{EffectGuard, LedgerFailure};
use crate::state::compactable::Compactable;

/// The ledger of a session over states `S`.
///
/// Every method reports a fence refusal of the ledger (or of a fenced store the compactor
/// spilled to) as [`SessionError::Superseded`], however the error that carried it was wrapped.
pub(crate) trait SessionLedger<S>: EffectGuard {
    /// `compactor.compact_with_ledger(state, self)`.
    fn compact<'a>(
        &'a self,
        compactor: &'a Compactor,
        state: &'a S,
    ) -> BoxFuture<'a, Result<Compacted<S>, SessionError>>;

    /// `compactor.advance_checkpoint(compacted, self)`: verifies the checkpoint and records its
    /// sequence as the agent's newest, refusing one older than the newest recorded.
    fn advance<'a>(
        &'a self,
        compactor: &'a Compactor,
        compacted: &'a Compacted<S>,
    ) -> BoxFuture<'a, Result<(), SessionError>>;

    /// The newest checkpoint sequence recorded for `agent_id`.
    fn newest<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<Option<u64>, SessionError>>;

    /// `EffectLedger::fence_record`.
    fn fence_record<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FenceRecord>, SessionError>>;

    /// `EffectLedger::raise_epoch`.
    fn raise_epoch<'a>(&'a self, fence: &'a Fence) -> BoxFuture<'a, Result<bool, SessionError>>;

    /// This ledger as the effect guard.
    fn guard(&self) -> &dyn EffectGuard;
}

/// The ledger's error, split into the guard's refusal, a fence refusal and a backend failure.
fn failure<L: EffectLedger>(error: L::Error) -> LedgerFailure {
    match L::refusal(&error) {
        Some(EffectError::Superseded(refusal)) => LedgerFailure::Superseded(refusal.clone()),
        Some(refusal) => LedgerFailure::Refused(refusal.clone()),
        None => LedgerFailure::Backend(Box::new(error)),
    }
}

/// A compaction error of a session over ledger `L`: `L`'s fence refusal inside a sequence
/// error (the compactor boxes the ledger's error) is [`SessionError::Superseded`], and so is a
/// fence refusal anywhere else in it ([`fence_error`]).
fn lift<L: EffectLedger>(error: CompactionError) -> SessionError {
    if let CompactionError::CheckpointSequence { source } = &error {
        if let Some(EffectError::Superseded(refusal)) =
            source.downcast_ref::<L::Error>().and_then(L::refusal)
        {
            return SessionError::superseded(refusal.clone());
        }
    }
    fence_error(error)
}

/// A ledger error reading or recording the agent's sequence or fence.
fn sequence_error<L: EffectLedger>(error: L::Error) -> SessionError {
    lift::<L>(CompactionError::CheckpointSequence {
        source: Box::new(error),
    })
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
    ) -> BoxFuture<'a, Result<Compacted<S>, SessionError>> {
        Box::pin(async move {
            compactor
                .compact_with_ledger(state, self)
                .await
                .map_err(lift::<L>)
        })
    }

    fn advance<'a>(
        &'a self,
        compactor: &'a Compactor,
        compacted: &'a Compacted<S>,
    ) -> BoxFuture<'a, Result<(), SessionError>> {
        Box::pin(async move {
            compactor
                .advance_checkpoint(compacted, self)
                .await
                .map_err(lift::<L>)
        })
    }

    fn newest<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<Option<u64>, SessionError>> {
        Box::pin(async move {
            self.newest_checkpoint(agent_id)
                .await
                .map_err(sequence_error::<L>)
        })
    }

    fn fence_record<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FenceRecord>, SessionError>> {
        Box::pin(async move {
            EffectLedger::fence_record(self, agent_id)
                .await
                .map_err(sequence_error::<L>)
        })
    }

    fn raise_epoch<'a>(&'a self, fence: &'a Fence) -> BoxFuture<'a, Result<bool, SessionError>> {
        Box::pin(async move {
            EffectLedger::raise_epoch(self, fence)
                .await
                .map_err(sequence_error::<L>)
        })
    }

    fn guard(&self) -> &dyn EffectGuard {
        self
    }
}
