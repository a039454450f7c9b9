//! A [`Reacquire`] behind a pointer, so a session's builder names no reacquirer type.

use crate::rehydrate::{DynReacquire, Reacquire, ReacquireError};
use std::sync::Arc;

/// Any [`Reacquire`], shared (through rehydration's own object-safe form, [`DynReacquire`]).
#[derive(Clone)]
pub(crate) struct ErasedReacquire(Arc<dyn DynReacquire>);

impl ErasedReacquire {
    pub(crate) fn new(reacquirer: impl Reacquire + 'static) -> Self {
        ErasedReacquire(Arc::new(reacquirer))
    }
}

impl Reacquire for ErasedReacquire {
    async fn reacquire(
        &self,
        field: &str,
        pointer: &str,
    ) -> Result<serde_json::Value, ReacquireError> {
        self.0.reacquire_dyn(field, pointer).await
    }
}
