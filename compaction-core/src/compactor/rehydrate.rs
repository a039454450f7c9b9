//! The way back of a [`Compactor`]: the bytes behind a pointer, verified, and the full state
//! rebuilt from a checkpoint (verified and bound first; its transcript's memory installed so the
//! next compaction goes on from it).

use crate::checkpoint::{check_restorable, Compacted};
use crate::compactor::{trace, Compactor};
use crate::error::CompactionError;
use crate::future::block_on;
use crate::rehydrate::{rehydrate, Reacquire, RehydrateOptions, Rehydrated};
use crate::state::compactable::Compactable;
use crate::store::{get_verified, AsPointer};
use tracing::Instrument;

impl Compactor {
    /// Reads back the bytes behind a `store://sha256:` pointer, verified against its hash: the
    /// tool an agent calls to look at spilled state.
    pub async fn resolve(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        let span = trace::resolve_span();
        let resolved = async {
            let pointer = pointer.to_pointer()?;
            get_verified(&*self.store, &pointer.hash())
                .await
                .map_err(|e| CompactionError::from_store(e, Some(&pointer.to_string())))
        }
        .instrument(span.clone())
        .await;
        match &resolved {
            Ok(bytes) => {
                span.record("bytes", bytes.len());
            }
            Err(error) => trace::refused(&span, error),
        }
        resolved
    }

    /// [`resolve`](Self::resolve) for synchronous callers.
    pub fn resolve_blocking(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        block_on(self.resolve(pointer))
    }

    /// Rebuilds the full state from a compacted one: everything the store holds (spilled
    /// values, effect records and payloads, summarized values) byte-identical and verified,
    /// evicted derivable fields through `reacquirer`. Fails with `Integrity` when any preserved
    /// byte changed or a seal does not verify (see
    /// [`verify_checkpoint`](Self::verify_checkpoint), run first), `Reacquire` when the author's
    /// re-acquisition fails (see [`rehydrate_with`](Self::rehydrate_with) to allow `Default`
    /// instead), and `Store` when a
    /// spilled value cannot be read.
    pub async fn rehydrate<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
    ) -> Result<S, CompactionError> {
        let strict = RehydrateOptions::default();
        Ok(self
            .rehydrate_with(compacted, reacquirer, strict)
            .await?
            .state)
    }

    /// [`rehydrate`](Self::rehydrate) for synchronous callers.
    pub fn rehydrate_blocking<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
    ) -> Result<S, CompactionError> {
        block_on(self.rehydrate(compacted, reacquirer))
    }

    /// [`rehydrate`](Self::rehydrate) with `options`; the result names every field that came
    /// back as `Default` because it could not be re-acquired (see [`RehydrateOptions`]).
    pub async fn rehydrate_with<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
        options: RehydrateOptions,
    ) -> Result<Rehydrated<S>, CompactionError> {
        let span = trace::rehydrate_span(S::schema().type_name());
        let rehydrated = async {
            check_restorable(compacted, &self.seal_keys, &self.owner)?;
            self.continue_after_checkpoint(compacted);
            rehydrate(&*self.store, compacted, reacquirer, options).await
        }
        .instrument(span.clone())
        .await;
        match &rehydrated {
            // The checkpoint verified: the next compaction of its transcript continues it.
            Ok(_) => self.install_memory(compacted),
            Err(error) => trace::refused(&span, error),
        }
        rehydrated
    }

    /// [`rehydrate_with`](Self::rehydrate_with) for synchronous callers.
    pub fn rehydrate_with_blocking<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
        options: RehydrateOptions,
    ) -> Result<Rehydrated<S>, CompactionError> {
        block_on(self.rehydrate_with(compacted, reacquirer, options))
    }
}
