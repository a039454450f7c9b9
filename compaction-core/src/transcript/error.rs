//! Why a transcript could not be planned: the planner's typed errors.

use crate::transcript::conversation::TranscriptError;

/// Why a transcript could not be planned. The transcript is untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptPlanError {
    /// The transcript breaks a pairing rule; it is refused, never repaired.
    #[error("invalid transcript: {0}")]
    Invalid(#[from] TranscriptError),
    /// Even with every old tool result tombstoned, every foldable turn folded without summary
    /// and every old user message stubbed (unless `pin_user`), the transcript needs more tokens
    /// than its budget.
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
