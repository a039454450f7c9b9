//! [`Compactor::rehydrate_with`]: rehydration with options, reporting what did not come back as
//! it was.

use crate::compacted::Compacted;
use crate::compactor::builder::Compactor;
use crate::compactor::trace;
use crate::error::CompactionError;
use crate::future::block_on;
use crate::rehydrate::{rehydrate, Reacquire, RehydrateOptions, Rehydrated};
use crate::state::compactable::Compactable;
use tracing::Instrument;

impl Compactor {
    /// [`rehydrate`](Self::rehydrate) with `options`; the result names every field that came
    /// back as `Default` because it could not be re-acquired (see [`RehydrateOptions`]).
    pub async fn rehydrate_with<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
        options: RehydrateOptions,
    ) -> Result<Rehydrated<S>, CompactionError> {
        let span = trace::rehydrate_span(S::schema().type_name());
        let rehydrated = rehydrate(
            &*self.store,
            compacted,
            &self.seal_keys,
            reacquirer,
            options,
        )
        .instrument(span.clone())
        .await;
        if let Err(error) = &rehydrated {
            trace::refused(&span, error);
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
