//! The configured summarizer behind an object-safe trait, and each summary held to its
//! contract, fresh or cached: not empty, not over its target.

use crate::future::BoxFuture;
use crate::summaries::{Summarizer, SummarizerError, SummaryRequest};
use crate::tokens::TokenCounter;

/// Object-safe form of [`Summarizer`], so a `Compactor` needs no type parameter.
pub(crate) trait DynSummarizer: Send + Sync {
    fn summarize_dyn<'a>(
        &'a self,
        request: SummaryRequest<'a>,
    ) -> BoxFuture<'a, Result<String, SummarizerError>>;
    fn identity_dyn(&self) -> Option<String>;
}

impl<T: Summarizer> DynSummarizer for T {
    fn summarize_dyn<'a>(
        &'a self,
        request: SummaryRequest<'a>,
    ) -> BoxFuture<'a, Result<String, SummarizerError>> {
        Box::pin(self.summarize(request))
    }
    fn identity_dyn(&self) -> Option<String> {
        self.identity()
    }
}

/// One summarizer call, held to its contract: not empty, not over its target.
pub(crate) async fn checked_summary(
    summarizer: &dyn DynSummarizer,
    counter: &dyn TokenCounter,
    field: &str,
    source: &str,
    target: usize,
) -> Result<String, SummarizerError> {
    let request = SummaryRequest {
        field,
        text: source,
        target_tokens: target,
    };
    let summary = summarizer.summarize_dyn(request).await?;
    check_summary(counter, field, summary, target)
}

/// A summary held to its contract, whether fresh or cached: not empty, not over its target.
pub(crate) fn check_summary(
    counter: &dyn TokenCounter,
    field: &str,
    summary: String,
    target: usize,
) -> Result<String, SummarizerError> {
    if summary.trim().is_empty() {
        return Err(SummarizerError::Empty {
            field: field.to_owned(),
        });
    }
    let tokens = counter.count(&summary);
    if tokens > target {
        return Err(SummarizerError::OverLong {
            field: field.to_owned(),
            tokens,
            target,
        });
    }
    Ok(summary)
}
