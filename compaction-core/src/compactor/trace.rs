//! The pipeline's `tracing` spans and events, in one place so what they carry is reviewed in
//! one place: names, paths, counts, sizes and refusal kinds, never a value.
//!
//! Spans: `compaction.compact` (and its refusal), `compaction.rehydrate`, `compaction.resolve`,
//! `compaction.summarize` (one per summary, cached or made) and `compaction.store` (each engine
//! read and write, `store.rs`). Events: one `debug` per field decision (path and outcome), an
//! `info` when a compaction ends. No protected value, effect record, pointer template
//! expansion, summary text or error message that could quote one is ever recorded: a refusal is
//! logged by its kind, an evicted field by its path.

use crate::error::CompactionError;
use crate::report::{CompactionReport, FieldOutcome};
use crate::summaries::SummarizerError;
use crate::tokens::TokenCounter;
use tracing::field::Empty;
use tracing::Span;

/// The span of one compaction; its outcome fields are recorded when it ends.
pub(super) fn compact_span(state_type: &str, budget: usize) -> Span {
    tracing::info_span!(
        "compaction.compact",
        state_type,
        budget,
        compaction = Empty,
        tokens = Empty,
        kept = Empty,
        spilled = Empty,
        summarized = Empty,
        evicted = Empty,
        tombstoned = Empty,
        cache_hits = Empty,
        refusal = Empty,
    )
}

/// Records how a compaction ended: its counts and one `debug` event per field, or its refusal.
pub(super) fn compacted(span: &Span, report: Result<&CompactionReport, &CompactionError>) {
    let _entered = span.enter();
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            let kind = error_kind(error);
            span.record("refusal", kind.as_str());
            tracing::info!(refusal = kind.as_str(), "compaction refused");
            return;
        }
    };
    let mut counts = [0usize; 5];
    let mut cache_hits = 0;
    for row in &report.fields {
        let outcome = outcome_name(&row.outcome);
        let index = match &row.outcome {
            FieldOutcome::Kept => 0,
            FieldOutcome::Spilled { .. } => 1,
            FieldOutcome::Summarized { cached, .. } => {
                cache_hits += usize::from(*cached);
                2
            }
            FieldOutcome::Evicted { .. } => 3,
            FieldOutcome::Tombstoned => 4,
        };
        counts[index] += 1;
        tracing::debug!(field = %row.field, outcome, "field decision");
    }
    let [kept, spilled, summarized, evicted, tombstoned] = counts;
    span.record("compaction", report.compaction);
    span.record("tokens", report.tokens_after);
    span.record("kept", kept);
    span.record("spilled", spilled);
    span.record("summarized", summarized);
    span.record("evicted", evicted);
    span.record("tombstoned", tombstoned);
    span.record("cache_hits", cache_hits);
    tracing::info!(
        tokens = report.tokens_after,
        budget = report.budget,
        kept,
        spilled,
        summarized,
        evicted,
        tombstoned,
        cache_hits,
        "compacted"
    );
}

/// The span of one rehydration.
pub(super) fn rehydrate_span(state_type: &str) -> Span {
    tracing::info_span!("compaction.rehydrate", state_type, refusal = Empty)
}

/// The span of one pointer resolution (the pointer is not recorded: it is the hash of a value,
/// and a small value's hash can be guessed back).
pub(super) fn resolve_span() -> Span {
    tracing::debug_span!("compaction.resolve", bytes = Empty, refusal = Empty)
}

/// Records a failed rehydration or resolve by the kind of its error.
pub(super) fn refused(span: &Span, error: &CompactionError) {
    let kind = error_kind(error);
    span.record("refusal", kind.as_str());
    let _entered = span.enter();
    tracing::debug!(refusal = kind.as_str(), "refused");
}

/// The span of one summary of the field at `field`, cached or made.
pub(super) fn summarize_span(field: &str, target: usize) -> Span {
    tracing::debug_span!(
        "compaction.summarize",
        field,
        target,
        cached = Empty,
        tokens = Empty,
        refusal = Empty,
    )
}

/// Records a summary's size and whether it came from the cache.
pub(super) fn summarized(span: &Span, cached: bool, tokens: usize) {
    span.record("cached", cached);
    span.record("tokens", tokens);
}

/// Records a summarizer call: the summary's size, or its failure by kind (a failure's message
/// may quote the model's answer).
pub(super) fn summary_made(
    span: &Span,
    made: &Result<String, SummarizerError>,
    counter: &dyn TokenCounter,
) {
    match made {
        Ok(summary) => summarized(span, false, counter.count(summary)),
        Err(error) => {
            span.record("refusal", summarizer_error_kind(error).as_str());
        }
    }
}

/// A cache entry that failed its checks: a miss, worth a warning (damage or tampering).
pub(super) fn cache_entry_rejected(span: &Span, reason: &'static str) {
    let _entered = span.enter();
    tracing::warn!(reason, "summary cache entry rejected; summarizing again");
}

fn outcome_name(outcome: &FieldOutcome) -> &'static str {
    match outcome {
        FieldOutcome::Kept => "kept",
        FieldOutcome::Spilled { .. } => "spilled",
        FieldOutcome::Summarized { cached: true, .. } => "summarized (cached)",
        FieldOutcome::Summarized { .. } => "summarized",
        FieldOutcome::Evicted { .. } => "evicted",
        FieldOutcome::Tombstoned => "tombstoned",
    }
}

fn summarizer_error_kind(error: &SummarizerError) -> String {
    match error {
        SummarizerError::Empty { .. } => "summary_empty".to_owned(),
        SummarizerError::OverLong { .. } => "summary_over_long".to_owned(),
        // `Failed`, and the variants a model summarizer adds (HTTP status, timeout, ...).
        other => format!("summarizer_{}", variant_name(other)),
    }
}

/// The name of an error's kind: what a log may say about it (messages can quote values).
fn error_kind(error: &CompactionError) -> String {
    match error {
        CompactionError::Summarizer(e) => summarizer_error_kind(e),
        CompactionError::Store(e) => format!("store_{}", e.kind()),
        other => variant_name(other),
    }
}

/// The snake_case name of an enum value's variant, read from the start of its derived `Debug`
/// (the rest, which may quote values, is dropped unread): every variant has a name, those
/// added later included, without a list to keep in step.
fn variant_name(value: &impl std::fmt::Debug) -> String {
    let debug = format!("{value:?}");
    let name = debug
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    let mut snake = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            snake.push('_');
        }
        snake.push(c.to_ascii_lowercase());
    }
    snake
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ContentHash, StoreError};

    #[test]
    fn kinds_name_the_variant_and_nothing_it_carries() {
        let secret = "cus_42 never touch /etc/prod";
        let unknown = CompactionError::UnknownEffect {
            field: secret.into(),
            key: secret.into(),
        };
        assert_eq!(error_kind(&unknown), "unknown_effect");
        let over = CompactionError::Summarizer(SummarizerError::OverLong {
            field: secret.into(),
            tokens: 9,
            target: 3,
        });
        assert_eq!(error_kind(&over), "summary_over_long");
        let failed = CompactionError::Summarizer(SummarizerError::failed(secret, secret));
        assert_eq!(error_kind(&failed), "summarizer_failed");
        let missing = CompactionError::Store(StoreError::NotFound {
            hash: ContentHash::of(secret.as_bytes()),
        });
        assert_eq!(error_kind(&missing), "store_not_found");
        assert_eq!(
            error_kind(&CompactionError::Config(secret.into())),
            "config"
        );
    }
}
