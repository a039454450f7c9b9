//! The summaries of a [`Compactor`]'s plan: each one the schema allows, from the summary cache
//! or the summarizer, checked against its target, or the value evicted when the author chose that
//! over failing; and the summaries of a transcript's folds, or the folds without them when the
//! author chose that over failing.

use crate::compactor::transcript::plan_error;
use crate::compactor::{trace, Compactor};
use crate::error::CompactionError;
use crate::plan::Plan;
use crate::planner::plan::{PlannedTranscript, TranscriptPlan};
use crate::state::schema::Schema;
use crate::summaries::cache::{lookup, CacheKey, CacheUse, Lookup};
use crate::summaries::contract::{checked_summary, DynSummarizer};
use crate::tokens::TokenCounter;
use tracing::Instrument;

impl Compactor {
    /// Summarizes the transcript's folds and completes its plan; with
    /// `evict_on_summarizer_error`, a summarizer failure (an error, or a summary empty or over
    /// its target) leaves the folds it did not summarize without a summary. Returns how many.
    pub(super) async fn finish_transcript(
        &self,
        path: &str,
        plan: TranscriptPlan,
    ) -> Result<(PlannedTranscript, usize), CompactionError> {
        let requests: Vec<(String, usize)> = plan
            .summary_requests()
            .map(|r| (r.text.clone(), r.target_tokens))
            .collect();
        let summarizer = self.summarizer.as_deref();
        let evict = self.evict_on_summarizer_error;
        let summaries = summarize_folds(summarizer, &*self.counter, path, requests, evict).await?;
        let skipped = summaries.iter().filter(|s| s.is_none()).count();
        let planned = if evict {
            self.transcript_planner.finish_or_skip(plan, summaries)
        } else {
            let summaries = summaries.into_iter().flatten().collect();
            self.transcript_planner
                .finish(plan, summaries)
                .map_err(|e| plan_error(path, 0, self.budget, e))?
        };
        Ok((planned, skipped))
    }

    /// Calls the summarizer for every planned summary not made yet, unless the summary cache
    /// holds it. Every request is checked against the schema first: only fields declared
    /// `summarize` may pass, whether the summary is fresh or cached.
    pub(super) async fn summarize_pending(
        &self,
        schema: &'static Schema,
        plan: &mut Plan,
        cache: &mut CacheUse,
    ) -> Result<(), CompactionError> {
        let identity = self.summarizer.as_ref().and_then(|s| s.identity_dyn());
        for slot in plan.pending_summaries() {
            let allowed = schema
                .field_for_instance(slot.path())
                .is_some_and(|f| f.class.may_summarize());
            if !allowed {
                return Err(CompactionError::ProtectedToSummarizer {
                    field: slot.path().to_owned(),
                });
            }
            let Some(summarizer) = &self.summarizer else {
                continue;
            };
            let Some((source, source_hash, target)) = slot.pending_summary() else {
                continue;
            };
            let counter = &*self.counter;
            let span = trace::summarize_span(slot.path(), target);
            let key = identity
                .as_deref()
                .map(|id| CacheKey::new(id, &source_hash, target));
            let found = match key {
                Some(key) => {
                    lookup(&*self.store, key, slot.path(), target, counter)
                        .instrument(span.clone())
                        .await
                }
                None => Lookup::Miss,
            };
            let summary = match found {
                Lookup::Hit(summary) => {
                    cache.hits.insert(slot.path().to_owned());
                    trace::summarized(&span, true, counter.count(&summary));
                    Ok(summary)
                }
                Lookup::Miss | Lookup::Rejected(_) => {
                    if let Lookup::Rejected(reason) = found {
                        trace::cache_entry_rejected(&span, reason);
                    }
                    let made = checked_summary(&**summarizer, counter, slot.path(), source, target)
                        .instrument(span.clone())
                        .await;
                    trace::summary_made(&span, &made, counter);
                    if let (Some(key), Ok(summary)) = (key, &made) {
                        cache.fresh.push((key, summary.clone()));
                    }
                    made
                }
            };
            match summary {
                Ok(summary) => slot.set_summary(summary, counter),
                // Only a summarizable field gets here, and its eviction leaves a pointer or a
                // tombstone: falling back loses nothing the window was guaranteed to hold.
                Err(_) if self.evict_on_summarizer_error => slot.evict_value(),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// One summary per fold request `(source, target)`, each held to its contract (none when no
/// summarizer is configured: then the planner asked for none). With `evict_on_error`, a
/// failing summarizer leaves its fold and every later one without a summary (`None`: the
/// fold's handle-and-calls form, which loses nothing: its messages are behind its handle), and
/// is not asked again in this request (a rate-limited model is not hammered).
async fn summarize_folds(
    summarizer: Option<&dyn DynSummarizer>,
    counter: &dyn TokenCounter,
    field: &str,
    requests: Vec<(String, usize)>,
    evict_on_error: bool,
) -> Result<Vec<Option<String>>, CompactionError> {
    let mut summaries = Vec::with_capacity(requests.len());
    let Some(summarizer) = summarizer else {
        return Ok(summaries);
    };
    let mut failed = false;
    for (source, target) in requests {
        if failed {
            summaries.push(None);
            continue;
        }
        let span = trace::summarize_span(field, target);
        let summary = checked_summary(summarizer, counter, field, &source, target)
            .instrument(span.clone())
            .await;
        trace::summary_made(&span, &summary, counter);
        match summary {
            Ok(summary) => summaries.push(Some(summary)),
            Err(_) if evict_on_error => {
                failed = true;
                summaries.push(None);
            }
            Err(error) => return Err(CompactionError::Summarizer(error)),
        }
    }
    Ok(summaries)
}
