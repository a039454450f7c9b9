//! A [`Reacquire`] behind a pointer, so a session's builder names no reacquirer type.

use crate::future::BoxFuture;
use crate::rehydrate::{Reacquire, ReacquireError};
use std::sync::Arc;

/// Any [`Reacquire`], shared.
#[derive(Clone)]
pub(crate) struct ErasedReacquire(Arc<dyn DynReacquire>);

impl ErasedReacquire {
    pub(crate) fn new(reacquirer: impl Reacquire + 'static) -> Self {
        ErasedReacquire(Arc::new(reacquirer))
    }
}

/// [`Reacquire`] in object-safe form.
trait DynReacquire: Send + Sync {
    fn reacquire_dyn<'a>(
        &'a self,
        field: &'a str,
        pointer: &'a str,
    ) -> BoxFuture<'a, Result<serde_json::Value, ReacquireError>>;
}

impl<R: Reacquire> DynReacquire for R {
    fn reacquire_dyn<'a>(
        &'a self,
        field: &'a str,
        pointer: &'a str,
    ) -> BoxFuture<'a, Result<serde_json::Value, ReacquireError>> {
        Box::pin(self.reacquire(field, pointer))
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
