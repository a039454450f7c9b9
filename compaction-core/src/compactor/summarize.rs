//! The summaries of a [`Compactor`]'s plan: each one the schema allows, from the summary cache
//! or the summarizer, checked against its target, or the value evicted when the author chose that
//! over failing.

use crate::compactor::{trace, Compactor};
use crate::error::CompactionError;
use crate::plan::Plan;
use crate::state::schema::Schema;
use crate::summaries::cache::{lookup, CacheKey, CacheUse, Lookup};
use crate::summaries::contract::checked_summary;
use tracing::Instrument;

impl Compactor {
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
