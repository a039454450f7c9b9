//! `EffectAnswer`: what a session did with an effect call, kept on the tool result it pushed
//! for the call. The record, not the result's words, is what an operator's tool reads: a tool's
//! output can say anything ("Not run: ..."), the record is written by the session only.

use serde::{Deserialize, Serialize};

/// What [`Session::run_effect`](crate::session::Session::run_effect) did with an effect call:
/// the record it keeps on the tool result it pushed
/// ([`Message::effect_answer`](crate::transcript::Message::effect_answer)), saved with the
/// checkpoint (its seals cover it) and never sent to a model or a summarizer.
///
/// A result without it was not written by `run_effect` (the agent answered the call itself, or
/// an older version of the library wrote it): what happened to such a call is not known from
/// the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EffectAnswer {
    /// The tool ran and the effect is committed (the result is the tool's output).
    Committed,
    /// The tool ran and failed; the effect is recorded as not started.
    Failed,
    /// The tool ran and could not tell whether the effect happened, or the ledger could not
    /// record how it ended: left `unknown`.
    LeftUnknown,
    /// Not run: the ledger shows the effect committed already.
    AlreadyCommitted,
    /// Not run: the effect was claimed before and its outcome is unknown.
    OutcomeUnknown,
    /// Not run: the ledger refused the claim for another reason.
    Refused,
}

impl EffectAnswer {
    /// Whether the tool was called (whatever came of it). `false`: the session refused to run
    /// it, and nothing happened.
    pub fn ran(self) -> bool {
        matches!(
            self,
            EffectAnswer::Committed | EffectAnswer::Failed | EffectAnswer::LeftUnknown
        )
    }

    /// Its name as stored: `committed`, `failed`, `left_unknown`, `already_committed`,
    /// `outcome_unknown`, `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectAnswer::Committed => "committed",
            EffectAnswer::Failed => "failed",
            EffectAnswer::LeftUnknown => "left_unknown",
            EffectAnswer::AlreadyCommitted => "already_committed",
            EffectAnswer::OutcomeUnknown => "outcome_unknown",
            EffectAnswer::Refused => "refused",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EffectAnswer;

    #[test]
    fn stored_names_are_the_serialized_ones() {
        for answer in [
            EffectAnswer::Committed,
            EffectAnswer::Failed,
            EffectAnswer::LeftUnknown,
            EffectAnswer::AlreadyCommitted,
            EffectAnswer::OutcomeUnknown,
            EffectAnswer::Refused,
        ] {
            let json = serde_json::to_string(&answer).unwrap();
            assert_eq!(json, format!("\"{}\"", answer.as_str()));
            assert_eq!(serde_json::from_str::<EffectAnswer>(&json).unwrap(), answer);
        }
    }
}
