//! The typed errors of compaction and rehydration. Every one leaves the caller's state untouched:
//! `compact` only borrows it.

use crate::{RebuildError, StoreError, SummarizerError};

/// The verbatim cost of one field that had to stay in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCost {
    /// Concrete path of the field (for effects: `migrations (live records)`).
    pub field: String,
    /// Tokens it takes in the rendered window.
    pub tokens: usize,
}

/// Why compaction or rehydration refused.
///
/// Every refusal is a value you can match on; the caller's state is untouched. Pinned state
/// that cannot fit is refused, never cut:
///
/// ```
/// use compaction::{Compactable, CompactionError, Compactor, Tokenizer};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default)]
/// struct State {
///     #[protected(pin)]
///     constraints: Vec<String>,
/// }
///
/// let state = State { constraints: vec!["never touch /etc/prod; ".repeat(100)] };
/// let compactor = Compactor::builder().budget(200).token_counter(Tokenizer::O200kBase).build()?;
/// match compactor.compact_blocking(&state) {
///     Err(CompactionError::ProtectedOverBudget { required_tokens, budget, .. }) => {
///         assert!(required_tokens > budget);
///     }
///     Err(other) => panic!("another refusal: {other}"),
///     Ok(_) => panic!("pinned state over the budget must be refused"),
/// }
/// # Ok::<(), CompactionError>(())
/// ```
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// What must stay verbatim (pinned protected fields, live effect records, pointers and
    /// tombstones for everything else) does not fit the budget even after evicting everything
    /// evictable. Raise the budget or pin less; nothing was summarized or cut.
    #[error(
        "protected state needs {required_tokens} tokens but the budget is {budget}; \
         refusing to compact lossily (already evicted or spilled: {evicted:?}; \
         verbatim fields: {fields:?})"
    )]
    ProtectedOverBudget {
        /// The fields that had to stay verbatim, with their tokens.
        fields: Vec<FieldCost>,
        /// Tokens of the smallest window that keeps every guarantee.
        required_tokens: usize,
        /// The budget.
        budget: usize,
        /// Fields that were already evicted, summarized or spilled.
        evicted: Vec<String>,
    },
    /// A protected or effect field was about to reach a summarizer (a hand-written
    /// `Compactable` impl, or a traversal that disagrees with its schema). Refused before the
    /// summarizer saw anything.
    #[error(
        "field `{field}` is not declared `summarize` (it is protected, an effect ledger, or \
         plain derivable/redundant state) and must never reach a summarizer"
    )]
    ProtectedToSummarizer {
        /// The field.
        field: String,
    },
    /// `refuse_on_unknown_effects(true)` and an effect's outcome is unknown.
    #[error(
        "effect `{key}` in `{field}` has an unknown outcome; reconcile it before compacting \
         (refuse_on_unknown_effects is on)"
    )]
    UnknownEffect {
        /// The effect field.
        field: String,
        /// The idempotency key.
        key: String,
    },
    /// The summarizer failed, returned nothing, or returned more than its target.
    #[error(transparent)]
    Summarizer(SummarizerError),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
    /// A preserved value does not match its fingerprint: tampered or corrupt.
    #[error("`{field}` does not match its fingerprint: the preserved value was altered")]
    Integrity {
        /// The field (or `<checkpoint>` for the checkpoint as a whole).
        field: String,
    },
    /// The author's `Reacquire` could not re-acquire an evicted derivable field.
    #[error("could not re-acquire `{field}` from `{pointer}`: {source}")]
    Reacquire {
        /// The field.
        field: String,
        /// The pointer it was evicted behind.
        pointer: String,
        /// The author's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The traversal of a hand-written `Compactable` impl disagrees with its schema.
    #[error("traversal disagrees with the schema at `{field}`: {reason}")]
    SchemaMismatch {
        /// The field.
        field: String,
        /// What disagrees.
        reason: String,
    },
    /// A state could not be rebuilt from its preserved parts.
    #[error(transparent)]
    Rebuild(#[from] RebuildError),
    /// A value could not be serialized.
    #[error("cannot serialize `{field}`: {message}")]
    Serialize {
        /// The field.
        field: String,
        /// serde's message.
        message: String,
    },
    /// The compactor was configured wrongly.
    #[error("invalid compactor configuration: {0}")]
    Config(String),
    /// A checkpoint of another state type was handed to `rehydrate`.
    #[error("checkpoint holds a `{found}`, not a `{expected}`")]
    WrongStateType {
        /// The type asked for.
        expected: String,
        /// The type the checkpoint was made from.
        found: String,
    },
}

impl From<StoreError> for CompactionError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Integrity { hash } => CompactionError::Integrity {
                field: format!("store blob {hash}"),
            },
            other => CompactionError::Store(other),
        }
    }
}

impl From<SummarizerError> for CompactionError {
    fn from(e: SummarizerError) -> Self {
        CompactionError::Summarizer(e)
    }
}
