//! What a compaction did to each field, for logs and for the agent's own bookkeeping.

use crate::store::{Fingerprint, Pointer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// What happened to one field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum FieldOutcome {
    /// In the window verbatim.
    Kept,
    /// Replaced by a summary; the verbatim source is in the store at `source`.
    Summarized {
        /// Tokens of the source text, at least: a source is counted only until it is known not
        /// to fit (exact when it fits its summary target), as the window never shows it.
        from_tokens: usize,
        /// Tokens of the summary.
        to_tokens: usize,
        /// Where the source is stored.
        source: Pointer,
        /// Whether the summary came from the summary cache (the same source, target and
        /// summarizer were summarized before) instead of a summarizer call.
        #[serde(default, skip_serializing_if = "is_false")]
        cached: bool,
    },
    /// A derivable field left the window; `pointer` says where to re-acquire it.
    Evicted {
        /// The field's pointer, built from its template.
        pointer: String,
    },
    /// Protected state or settled effect records moved to the store verbatim.
    Spilled {
        /// Where it is.
        pointer: Pointer,
    },
    /// Evicted for good (redundant state, effect payloads): a tombstone marks the loss.
    Tombstoned,
}

/// One field's line in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldReport {
    /// Concrete path (`plan_step`, `subtasks[1].notes`, `migrations.payloads`).
    pub field: String,
    /// What happened to it.
    pub outcome: FieldOutcome,
}

/// What one compaction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// The compaction's number (1 for the first compaction by a `Compactor`).
    pub compaction: u64,
    /// The budget, in tokens.
    pub budget: usize,
    /// Tokens of the rendered window (exact, with the configured counter). With a transcript,
    /// the window is only the request's first message: see [`request_tokens`](Self::request_tokens).
    pub tokens_after: usize,
    /// Tokens of the whole request sent to the model (the window, the transcript's messages
    /// as compacted, the chat formula's overhead and reply priming), when the state has a
    /// `#[transcript]`; `None` without one (the window is then the whole request). Absent from
    /// the JSON of reports without it, so older checkpoints keep their seals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_tokens: Option<usize>,
    /// Tokens the state would take rendered whole. Exact when nothing left the window; otherwise
    /// a lower bound, because evicted values are measured only until they are known not to fit.
    pub tokens_before: usize,
    /// Whether `tokens_before` is exact.
    pub tokens_before_exact: bool,
    /// The token counter's name.
    pub counter: String,
    /// Every field, in traversal order.
    pub fields: Vec<FieldReport>,
    /// The fingerprint of every protected field, kept or spilled.
    pub fingerprints: BTreeMap<String, Fingerprint>,
    /// What happened to the messages of the state's `#[transcript]` field (`None` when the
    /// state has none). Absent from the JSON of reports without a transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<TranscriptReport>,
}

/// What one compaction did to the messages of a `#[transcript]` field: one count per outcome
/// (every input message is counted exactly once), plus the messages the compaction added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptReport {
    /// Path of the `#[transcript]` field.
    pub field: String,
    /// Messages of the input.
    pub messages_in: usize,
    /// Input messages sent verbatim.
    pub kept: usize,
    /// User messages replaced by a stub (their content is in the store).
    pub stubbed: usize,
    /// Tool results whose content was replaced by a tombstone (the content is in the store).
    pub tombstoned: usize,
    /// Tool results sent as a head and a tail excerpt (the content is in the store), each by
    /// name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paged: Vec<PagedResult>,
    /// Assistant and tool messages folded (their ranges are in the store).
    pub folded: usize,
    /// Fold messages in the request (one per folded range between anchors).
    pub fold_messages: usize,
    /// User-run markers in the request (the user messages that left, byte-exact in the store).
    #[serde(default)]
    pub user_runs: usize,
    /// Of the folds, the ones that carry a summary.
    pub summarized_folds: usize,
    /// Folds made at this request that went out without their summary because the summarizer
    /// failed (with
    /// [`evict_on_summarizer_error(true)`](crate::CompactorBuilder::evict_on_summarizer_error)):
    /// each is the fold marker's handle-and-calls form, its messages behind its handle as
    /// always. 0 when every fold asked for got its summary.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub summaries_skipped: usize,
    /// Tokens of the transcript's messages as sent (chat formula, without the reply priming).
    pub tokens: usize,
    /// Whether this request was a compaction point (`false`: it only appended to the last
    /// request of this transcript, which is an exact prefix of it).
    #[serde(default)]
    pub compaction_point: bool,
    /// Leading transcript messages identical to the last request's.
    #[serde(default)]
    pub reused_messages: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A tool result sent in excerpts because it did not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagedResult {
    /// Its index in the transcript.
    pub index: usize,
    /// The call it answers.
    pub tool_call_id: String,
    /// Its size in bytes (all in the store).
    pub bytes: usize,
}

impl TranscriptReport {
    /// Whether every input message was sent verbatim.
    pub fn all_kept(&self) -> bool {
        self.kept == self.messages_in
    }
}

impl CompactionReport {
    /// The outcome of the field at `path`.
    pub fn outcome(&self, path: &str) -> Option<&FieldOutcome> {
        self.fields
            .iter()
            .find(|f| f.field == path)
            .map(|f| &f.outcome)
    }

    /// Whether every field stayed in the window verbatim, and every message of the
    /// transcript (if any) was sent verbatim.
    pub fn nothing_evicted(&self) -> bool {
        self.fields.iter().all(|f| f.outcome == FieldOutcome::Kept)
            && self
                .transcript
                .as_ref()
                .is_none_or(TranscriptReport::all_kept)
    }

    /// Paths of the fields whose summary came from the summary cache (no summarizer call).
    pub fn cached_summaries(&self) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|f| matches!(f.outcome, FieldOutcome::Summarized { cached: true, .. }))
            .map(|f| f.field.as_str())
            .collect()
    }

    /// Paths of the fields that did not stay verbatim.
    pub fn evicted(&self) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|f| f.outcome != FieldOutcome::Kept)
            .map(|f| f.field.as_str())
            .collect()
    }
}

impl fmt::Display for CompactionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let before = if self.tokens_before_exact { "" } else { ">=" };
        let (compaction, budget, counter) = (self.compaction, self.budget, &self.counter);
        // What the budget bounds is the request: lead with it when the window is only a part.
        match self.request_tokens {
            Some(request) => write!(
                f,
                "compaction #{compaction}: request {request} tokens (budget {budget}, \
                 {counter}), window {before}{} -> {} tokens",
                self.tokens_before, self.tokens_after
            )?,
            None => write!(
                f,
                "compaction #{compaction}: {before}{} -> {} tokens (budget {budget}, {counter})",
                self.tokens_before, self.tokens_after
            )?,
        }
        if let Some(t) = &self.transcript {
            write!(
                f,
                "; {}: {} messages -> {} kept, {} in {} user runs, {} tombstoned, {} paged, {} \
                 folded into {} ({} summarized)",
                t.field,
                t.messages_in,
                t.kept,
                t.stubbed,
                t.user_runs,
                t.tombstoned,
                t.paged.len(),
                t.folded,
                t.fold_messages,
                t.summarized_folds
            )?;
        }
        if self.nothing_evicted() {
            return write!(f, "; everything kept verbatim");
        }
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for field in &self.fields {
            let group = match field.outcome {
                FieldOutcome::Kept => "kept",
                FieldOutcome::Summarized { .. } => "summarized",
                FieldOutcome::Evicted { .. } => "evicted",
                FieldOutcome::Spilled { .. } => "spilled",
                FieldOutcome::Tombstoned => "tombstoned",
            };
            groups.entry(group).or_default().push(&field.field);
        }
        for (group, fields) in groups {
            write!(f, "; {group}: {}", fields.join(", "))?;
        }
        let cached = self.cached_summaries();
        if !cached.is_empty() {
            write!(f, "; summaries from the cache: {}", cached.join(", "))?;
        }
        Ok(())
    }
}

// Uncached summaries serialize as before the cache existed, so older checkpoints keep their
// seals.
fn is_false(value: &bool) -> bool {
    !value
}
