//! The typed errors of compaction and rehydration. Every one leaves the caller's state untouched:
//! `compact` only borrows it.

use crate::binding::{foreign_message, CheckpointBinding};
use crate::conversation::transcript::TranscriptError;
use crate::state::path::RebuildError;
use crate::store::StoreError;
use crate::summaries::SummarizerError;

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
    #[error("{}", over_budget_message(.fields, *.required_tokens, *.budget, .evicted))]
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
    /// The author's `Reacquire` could not re-acquire an evicted derivable field. The message
    /// names the field, not the pointer: a derivable pointer is built from protected values
    /// (`file://{config_path}`), and messages end up in logs.
    #[error("could not re-acquire `{field}`: {source}")]
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
    /// The effect ledger could not read or record the agent's checkpoint sequence (a backend
    /// failure, not a refusal: a rolled-back checkpoint is [`CheckpointRollback`](Self::CheckpointRollback)).
    /// Nothing was committed.
    #[error("the effect ledger could not read or record the checkpoint sequence: {source}")]
    CheckpointSequence {
        /// The ledger's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `compact_with_ledger` could not read an `#[effect]` field's scope from the ledger.
    #[error("reading effect scope `{scope}` of `{field}` from the ledger failed: {source}")]
    Ledger {
        /// The effect field.
        field: String,
        /// Its scope in the ledger.
        scope: String,
        /// The ledger's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `compact_with_ledger`: the state's view of an `#[effect]` field holds a record the
    /// ledger does not, so compacting from the ledger would drop it. Record it through the
    /// ledger (or `sync_log` the view) first.
    #[error(
        "effect `{key}` in `{field}` is not in the ledger (scope `{scope}`); record it through \
         the ledger or sync_log the field's log before compacting with the ledger"
    )]
    EffectNotInLedger {
        /// The effect field.
        field: String,
        /// Its scope in the ledger.
        scope: String,
        /// The idempotency key the ledger lacks.
        key: String,
    },
    /// The checkpoint was written by this state type with other fields (added, removed,
    /// reclassified, retyped or re-nested): rehydrating it would drop or misplace state.
    #[error("checkpoint of `{state_type}` was written with other fields: {difference}")]
    SchemaChanged {
        /// The state type (its full path and generic arguments).
        state_type: String,
        /// What differs, field by field.
        difference: String,
    },
    /// The checkpoint was written in a format this version does not read (format 1, before
    /// checkpoints carried a schema fingerprint): compact the state again with this version.
    #[error(
        "checkpoint format {found} is not supported (this version reads format {supported}); \
         it carries no schema fingerprint, so nothing proves which type wrote it"
    )]
    CheckpointFormat {
        /// The checkpoint's format.
        found: u32,
        /// The format this version reads.
        supported: u32,
    },
    /// A `#[transcript]` field breaks a pairing rule chat APIs enforce (the error names the
    /// message). Compaction refuses it and never repairs it.
    #[error("transcript `{field}` is invalid: {source}")]
    InvalidTranscript {
        /// The transcript field.
        field: String,
        /// Which rule, at which message.
        #[source]
        source: TranscriptError,
    },
    /// Even in its smallest form (old tool results tombstoned, old turns folded, old user
    /// messages stubbed unless `pin_user`) the transcript does not fit what the budget leaves
    /// after the state's smallest window and the request overhead. Nothing was dropped.
    #[error(
        "transcript `{field}` needs at least {required_tokens} tokens but only {available} of \
         the budget {budget} are left for it; refusing to drop messages"
    )]
    TranscriptOverBudget {
        /// The transcript field.
        field: String,
        /// Tokens of its smallest form.
        required_tokens: usize,
        /// Tokens left for it.
        available: usize,
        /// The whole budget.
        budget: usize,
    },
    /// A transcript call names its effect by key only (`ToolCall::with_effect`) and more than
    /// one `#[effect]` scope of the state holds that key: which effect it performs is
    /// ambiguous, so compaction refuses rather than guess (name the scope with
    /// `ToolCall::with_effect_in`).
    #[error(
        "transcript `{field}`, message {index}: a call names effect key `{key}` without a \
         scope, and the scopes {scopes:?} all hold it; name the scope with \
         ToolCall::with_effect_in"
    )]
    AmbiguousEffect {
        /// The transcript field.
        field: String,
        /// The assistant message making the call.
        index: usize,
        /// The key.
        key: String,
        /// Every scope holding it.
        scopes: Vec<String>,
    },
    /// A checkpoint of another state type was handed to `rehydrate`: another type name, the
    /// same name in another module, or another instantiation of a generic type (the names are
    /// full paths with generic arguments then).
    #[error("checkpoint holds a `{found}`, not a `{expected}`")]
    WrongStateType {
        /// The type asked for.
        expected: String,
        /// The type the checkpoint was made from.
        found: String,
    },
    /// The checkpoint is another agent's or another namespace's: bound to them under its seals
    /// (see [`CompactorBuilder::agent_id`](crate::CompactorBuilder::agent_id)), or, with a
    /// keyed seal, bound to no agent while an agent's checkpoint was expected (or bound to one
    /// while the keyed compactor has no agent id). Refused on save, on load and by
    /// `verify_checkpoint`, `rehydrate` and the pointer tool; never restored.
    #[error("{}", foreign_message(.agent_id, .namespace, .found))]
    ForeignCheckpoint {
        /// The agent it was saved, loaded or verified for (`None`: a compactor without an
        /// agent id).
        agent_id: Option<String>,
        /// The namespace it was saved, loaded or verified in (`""` where there is none).
        namespace: String,
        /// The binding it carries (`None`: bound to no agent).
        found: Option<Box<CheckpointBinding>>,
    },
    /// The checkpoint is this agent's and validly sealed, but older than the newest one the
    /// ledger recorded for the agent: an older checkpoint put back (rolled back). Refused by
    /// [`Compactor::advance_checkpoint`](crate::Compactor::advance_checkpoint).
    #[error(
        "the checkpoint of agent `{agent_id}` has sequence {sequence}, but the ledger recorded \
         sequence {newest}: an older checkpoint was put back; refusing it"
    )]
    CheckpointRollback {
        /// The agent.
        agent_id: String,
        /// The checkpoint's sequence number.
        sequence: u64,
        /// The newest sequence the ledger holds for the agent.
        newest: u64,
    },
}

/// The field name checkpoint-level errors carry.
pub(crate) const CHECKPOINT_FIELD: &str = "<checkpoint>";

impl CompactionError {
    /// The error's kind, the variant's name in snake_case (`protected_over_budget`,
    /// `foreign_checkpoint`; `store_not_found`, `summary_over_long` and `summarizer_*` inside
    /// those two): what a log line may say about an error without quoting anything it carries.
    /// The message (`Display`) names effect keys, field paths, agent ids and store addresses
    /// for the operator who acts on it (guide, docs/errors-async-logging.md, "Logging").
    pub fn kind(&self) -> String {
        match self {
            CompactionError::Summarizer(e) => summarizer_error_kind(e),
            CompactionError::Store(e) => format!("store_{}", e.kind()),
            other => variant_name(other),
        }
    }

    /// `Integrity` for a checkpoint as a whole (field `<checkpoint>`).
    pub(crate) fn checkpoint_integrity() -> Self {
        CompactionError::Integrity {
            field: CHECKPOINT_FIELD.into(),
        }
    }

    /// The one mapping of a store failure: a blob that does not match its hash is `Integrity`
    /// (named after `field`, or after the blob when no field is given), anything else `Store`.
    pub(crate) fn from_store(error: StoreError, field: Option<&str>) -> Self {
        match error {
            StoreError::Integrity { hash } => CompactionError::Integrity {
                field: field.map_or_else(|| format!("store blob {hash}"), str::to_owned),
            },
            other => CompactionError::Store(other),
        }
    }
}

/// The kind of a summarizer failure (see [`CompactionError::kind`]).
pub(crate) fn summarizer_error_kind(error: &SummarizerError) -> String {
    match error {
        SummarizerError::Empty { .. } => "summary_empty".to_owned(),
        SummarizerError::OverLong { .. } => "summary_over_long".to_owned(),
        // `Failed`, and the variants a model summarizer adds (HTTP status, timeout, ...).
        other => format!("summarizer_{}", variant_name(other)),
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

impl From<StoreError> for CompactionError {
    fn from(e: StoreError) -> Self {
        CompactionError::from_store(e, None)
    }
}

impl From<SummarizerError> for CompactionError {
    fn from(e: SummarizerError) -> Self {
        CompactionError::Summarizer(e)
    }
}

/// How many of the largest verbatim fields a refusal names.
const LARGEST_SHOWN: usize = 5;

/// `ProtectedOverBudget` for people: what the smallest window needs, how much of it is fixed,
/// the smallest budget that works, and the largest fields that must stay.
fn over_budget_message(
    fields: &[FieldCost],
    required_tokens: usize,
    budget: usize,
    evicted: &[String],
) -> String {
    let in_fields: usize = fields.iter().map(|f| f.tokens).sum();
    let fixed = required_tokens.saturating_sub(in_fields);
    let mut largest: Vec<&FieldCost> = fields.iter().collect();
    largest.sort_by(|a, b| b.tokens.cmp(&a.tokens).then_with(|| a.field.cmp(&b.field)));
    let shown: Vec<String> = largest
        .iter()
        .take(LARGEST_SHOWN)
        .map(|f| format!("{} ({} tokens)", f.field, f.tokens))
        .collect();
    let mut text = format!(
        "protected state needs {required_tokens} tokens but the budget is {budget}; refusing to \
         compact lossily. The smallest budget that works is {required_tokens}: {fixed} tokens \
         of fixed overhead (the window's header and notice, pointers and tombstones)"
    );
    if shown.is_empty() {
        text.push_str(", no field has to stay verbatim");
    } else {
        let more = fields.len().saturating_sub(LARGEST_SHOWN);
        text.push_str(&format!(
            " plus {in_fields} in fields that must stay verbatim, largest first: {}",
            shown.join(", ")
        ));
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
    }
    if !evicted.is_empty() {
        text.push_str(&format!(
            ". Already evicted or spilled: {}",
            evicted.join(", ")
        ));
    }
    text.push_str(". Raise the budget or pin less.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ContentHash;

    #[test]
    fn kinds_name_the_variant_and_nothing_it_carries() {
        let secret = "cus_42 never touch /etc/prod";
        let unknown = CompactionError::UnknownEffect {
            field: secret.into(),
            key: secret.into(),
        };
        assert_eq!(unknown.kind(), "unknown_effect");
        let over = CompactionError::Summarizer(SummarizerError::OverLong {
            field: secret.into(),
            tokens: 9,
            target: 3,
        });
        assert_eq!(over.kind(), "summary_over_long");
        let failed = CompactionError::Summarizer(SummarizerError::failed(secret, secret));
        assert_eq!(failed.kind(), "summarizer_failed");
        let missing = CompactionError::Store(StoreError::NotFound {
            hash: ContentHash::of(secret.as_bytes()),
        });
        assert_eq!(missing.kind(), "store_not_found");
        assert_eq!(CompactionError::Config(secret.into()).kind(), "config");
        let foreign = CompactionError::ForeignCheckpoint {
            agent_id: Some(secret.into()),
            namespace: secret.into(),
            found: None,
        };
        assert_eq!(foreign.kind(), "foreign_checkpoint");
    }
}
