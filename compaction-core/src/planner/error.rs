//! Why a transcript could not be planned: the planner's typed errors.

use crate::conversation::transcript::TranscriptError;

/// Why a transcript could not be planned. The transcript is untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptPlanError {
    /// The transcript breaks a pairing rule; it is refused, never repaired.
    #[error("invalid transcript: {0}")]
    Invalid(#[from] TranscriptError),
    /// Even in its smallest form (pinned messages, anchors, the compacted blocks' markers
    /// without summaries, the newest user message and the turn after it with every tool result
    /// paged to its note), the transcript needs more tokens than its budget.
    #[error(
        "the transcript needs at least {required_tokens} tokens but its budget is {budget}; \
         refusing to drop messages"
    )]
    OverBudget {
        /// Tokens of the smallest form the rules allow.
        required_tokens: usize,
        /// The budget.
        budget: usize,
    },
    /// A call names its effect by key only ([`ToolCall::with_effect`](crate::ToolCall::with_effect))
    /// and more than one scope of the state's ledgers holds that key: which effect it performs
    /// is ambiguous, so the call is refused rather than guessed (name the scope with
    /// [`ToolCall::with_effect_in`](crate::ToolCall::with_effect_in)).
    #[error(
        "message {index}: call `{call_id}` names effect key `{key}` without a scope, and the \
         scopes {scopes:?} all hold it; name the scope with ToolCall::with_effect_in"
    )]
    AmbiguousEffect {
        /// The assistant message that makes the call.
        index: usize,
        /// The call.
        call_id: String,
        /// The key.
        key: String,
        /// Every scope holding it.
        scopes: Vec<String>,
    },
    /// `finish` got a different number of summaries than the plan asked for.
    #[error("the plan asked for {expected} summaries, got {got}")]
    SummaryCount {
        /// Requests in the plan.
        expected: usize,
        /// Summaries given.
        got: usize,
    },
    /// A summary is empty.
    #[error("the summary of messages #{first}..#{last} is empty")]
    SummaryEmpty {
        /// First message of the folded run.
        first: usize,
        /// Last message of the folded run.
        last: usize,
    },
    /// A summary is longer than its target. It is never cut.
    #[error("the summary of messages #{first}..#{last} has {tokens} tokens, over its target of {target}")]
    SummaryOverLong {
        /// First message of the folded run.
        first: usize,
        /// Last message of the folded run.
        last: usize,
        /// Tokens of the summary.
        tokens: usize,
        /// Its target.
        target: usize,
    },
}
