//! A side-effecting tool run under the ledger: record, claim, run, then commit, or `fail` when
//! the tool errors. A key that is already committed, or whose outcome is unknown, is not run.
//! The call gets a tool result in every case, in words the model can act on.

use crate::conversation::answer::EffectAnswer;
use crate::conversation::message::{Message, ToolArgumentsError, ToolCall};
use crate::conversation::transcript::Transcript;
use crate::effects::error::EffectError;
use crate::effects::record::Effect;
use crate::session::error::SessionError;
use crate::session::guard::{EffectGuard, LedgerFailure};
use crate::session::turn::pending_calls;
use std::fmt::Display;
use std::future::Future;

/// The effect a tool call performs: the ledger scope of its `#[effect]` field (the field's
/// path, or its `#[effect(scope = "...")]`) and the effect, whose idempotency key names it
/// across retries and restarts. Returned by the
/// [`effect_calls`](crate::session::SessionBuilder::effect_calls) mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectCall {
    /// The ledger scope.
    pub scope: String,
    /// The effect (its status is the ledger's business: give a new `Effect`).
    pub effect: Effect,
}

impl EffectCall {
    /// The effect `effect` in scope `scope`.
    pub fn new(scope: impl Into<String>, effect: Effect) -> Self {
        EffectCall {
            scope: scope.into(),
            effect,
        }
    }
}

/// Why a side-effecting tool did not succeed: what its closure in
/// [`run_effect`](crate::session::Session::run_effect) returns as its error. Most errors
/// (`String`, `&str`, `std::io::Error`, a boxed error) convert into [`Failed`](Self::Failed);
/// say [`ToolFailure::unknown`] when the tool cannot tell whether the effect happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolFailure {
    /// It certainly did not happen (refused before it started, validation failed): recorded
    /// with `fail`, so it may be tried again.
    Failed(String),
    /// Nobody knows whether it happened (a timeout after the request went out, a connection
    /// lost mid-call): the effect stays `unknown` until an operator reconciles it, and is never
    /// run again before.
    Unknown(String),
}

impl ToolFailure {
    /// It certainly did not happen.
    pub fn failed(error: impl Display) -> Self {
        ToolFailure::Failed(error.to_string())
    }

    /// Whether it happened is unknown.
    pub fn unknown(error: impl Display) -> Self {
        ToolFailure::Unknown(error.to_string())
    }
}

impl Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolFailure::Failed(error) | ToolFailure::Unknown(error) => f.write_str(error),
        }
    }
}

impl From<String> for ToolFailure {
    fn from(error: String) -> Self {
        ToolFailure::Failed(error)
    }
}

impl From<&str> for ToolFailure {
    fn from(error: &str) -> Self {
        ToolFailure::Failed(error.to_owned())
    }
}

/// The model's arguments do not parse: the tool never started.
impl From<ToolArgumentsError> for ToolFailure {
    fn from(error: ToolArgumentsError) -> Self {
        ToolFailure::failed(error)
    }
}

impl From<std::io::Error> for ToolFailure {
    fn from(error: std::io::Error) -> Self {
        ToolFailure::failed(error)
    }
}

impl From<Box<dyn std::error::Error + Send + Sync>> for ToolFailure {
    fn from(error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        ToolFailure::failed(error)
    }
}

/// What [`run_effect`](crate::session::Session::run_effect) did. In every case a tool result for the call was
/// pushed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EffectOutcome {
    /// The tool ran and the effect is committed; its output is the tool result.
    Committed,
    /// The tool ran and returned an error: the effect is recorded as not started (`fail`), so
    /// it may be tried again; the error is in the tool result.
    Failed {
        /// The tool's error, as text.
        error: String,
    },
    /// The tool ran and could not tell whether the effect happened
    /// ([`ToolFailure::Unknown`]), or the ledger could not record its outcome (`error` says
    /// "the effect ledger could not record the outcome"): it stays `unknown` in the ledger for
    /// an operator to reconcile, and the tool result tells the model not to retry it.
    LeftUnknown {
        /// The tool's error, as text.
        error: String,
    },
    /// Not run: the ledger shows the effect committed already (it happened, maybe before a
    /// restart). The tool result tells the model not to repeat it.
    AlreadyCommitted,
    /// Not run: the effect was claimed before and never settled, so nobody knows whether it
    /// happened; an operator must reconcile it (`compaction reconcile`). The tool result says
    /// so.
    OutcomeUnknown,
    /// Not run: the ledger refused it for another reason (the key is recorded for a different
    /// effect).
    Refused {
        /// The ledger's refusal.
        reason: EffectError,
    },
}

impl EffectOutcome {
    /// Whether the tool ran (committed or failed).
    pub fn ran(&self) -> bool {
        matches!(
            self,
            EffectOutcome::Committed | EffectOutcome::Failed { .. }
        )
    }
}

/// [`Session::run_effect`](crate::session::Session::run_effect) on the session's parts: the
/// ledger's guard, the conversation, the last request's text (its window and state updates:
/// what the model was shown of the effect log), and the call's effect (`None`: the session does
/// not know the call as an effect). The tool result it pushes carries the session's record of
/// what it did ([`EffectAnswer`]), taken from the outcome, never from the result's words: that
/// record is what an operator's tool reads.
///
/// Every answer the session writes here is effect-class text: it answers a call linked to its
/// effect, and a fold never sends such a result to a summarizer (the planner's fold rule,
/// `planner/fold_rule.rs`). It names the effect (key, action, target) only when `window`
/// shows that record: otherwise the model reads "this call's effect", so the conversation never
/// carries an effect record the window does not (a committed record may have spilled).
pub(crate) async fn run_effect<F, Fut, E>(
    guard: &dyn EffectGuard,
    transcript: &mut Transcript,
    window: &str,
    call: &ToolCall,
    effect_call: Option<EffectCall>,
    run: F,
) -> Result<EffectOutcome, SessionError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<String, E>>,
    E: Into<ToolFailure>,
{
    // An `Ok` carries the words the session answers with, pushed here with the record; an
    // `Err` pushes nothing (the call stays pending).
    let (words, outcome) =
        run_under_ledger(guard, transcript, window, call, effect_call, run).await?;
    let mut answer = Message::tool_result(call.id.clone(), words);
    answer.effect_answer = Some(answer_of(&outcome));
    transcript.push(answer);
    Ok(outcome)
}

/// The record of an outcome.
fn answer_of(outcome: &EffectOutcome) -> EffectAnswer {
    match outcome {
        EffectOutcome::Committed => EffectAnswer::Committed,
        EffectOutcome::Failed { .. } => EffectAnswer::Failed,
        EffectOutcome::LeftUnknown { .. } => EffectAnswer::LeftUnknown,
        EffectOutcome::AlreadyCommitted => EffectAnswer::AlreadyCommitted,
        EffectOutcome::OutcomeUnknown => EffectAnswer::OutcomeUnknown,
        EffectOutcome::Refused { .. } => EffectAnswer::Refused,
    }
}

/// [`run_effect`] up to the answer: claims, runs and settles; the words of the tool result
/// come with the outcome (pushed by `run_effect` with the record).
async fn run_under_ledger<F, Fut, E>(
    guard: &dyn EffectGuard,
    transcript: &Transcript,
    window: &str,
    call: &ToolCall,
    effect_call: Option<EffectCall>,
    run: F,
) -> Result<(String, EffectOutcome), SessionError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<String, E>>,
    E: Into<ToolFailure>,
{
    if !pending_calls(transcript.messages())
        .iter()
        .any(|c| c.id == call.id)
    {
        return Err(SessionError::NotPending {
            call_id: call.id.clone(),
        });
    }
    let Some(EffectCall { scope, effect }) = effect_call else {
        return Err(SessionError::NotAnEffect {
            call_id: call.id.clone(),
            tool: call.name.clone(),
        });
    };
    let key = effect.idempotency_key.clone();
    let named = Named::of(&effect, window);
    let claimed = match guard.record(&scope, &effect).await {
        Ok(()) => guard.begin(&scope, &effect).await,
        Err(failure) => Err(failure),
    };
    match claimed {
        Ok(()) => {}
        Err(LedgerFailure::Refused(reason)) => {
            let (words, outcome) = not_run(&named, reason);
            return Ok((words, outcome));
        }
        // A newer session of the agent took over: this one writes nothing more, and runs
        // nothing (the newer session decides about this call).
        Err(LedgerFailure::Superseded(refusal)) => {
            return Err(SessionError::superseded(refusal));
        }
        // Nothing ran and nothing is pushed: the call stays pending, and `run_effect` again
        // claims it once the ledger answers (a claim that went through after all is then
        // refused as unknown, the truth).
        Err(LedgerFailure::Backend(source)) => {
            return Err(SessionError::Ledger { scope, key, source });
        }
    }
    match run().await {
        Ok(output) => match guard.commit(&scope, &key).await {
            Ok(()) => Ok((output, EffectOutcome::Committed)),
            // Taken over while the tool ran: the claim stays `unknown` for the newer session
            // and an operator, and this session reports nothing done (it pushes nothing).
            Err(LedgerFailure::Superseded(refusal)) => Err(SessionError::superseded(refusal)),
            // The tool ran: its answer is pushed whatever the ledger says, and the outcome is
            // what the ledger holds, a claim never settled (an `Err` here would report a
            // session that did not change, and a retry would lose the output).
            Err(failure) => Ok((
                format!(
                    "The tool ran, but its outcome could not be recorded: {} stays unknown \
                     until an operator reconciles it. Do not run it again. Its output \
                     was:\n{output}",
                    named.short
                ),
                unrecorded(failure),
            )),
        },
        Err(error) => match error.into() {
            ToolFailure::Unknown(error) => Ok((
                format!(
                    "Outcome unknown: {error}\n{} may or may not have happened. It stays \
                     unknown until an operator checks and reconciles it; do not run it again, \
                     and tell the user.",
                    named.capital()
                ),
                EffectOutcome::LeftUnknown { error },
            )),
            ToolFailure::Failed(error) => match guard.fail(&scope, &key).await {
                Err(LedgerFailure::Superseded(refusal)) => Err(SessionError::superseded(refusal)),
                Ok(()) => Ok((
                    format!(
                        "Failed: {error}\n{} did not happen (recorded as not started); you \
                         may try it again.",
                        named.capital()
                    ),
                    EffectOutcome::Failed { error },
                )),
                Err(failure) => Ok((
                    format!(
                        "Failed: {error}\nThe failure could not be recorded: {} stays \
                         unknown until an operator reconciles it. Do not run it again.",
                        named.short
                    ),
                    unrecorded(failure),
                )),
            },
        },
    }
}

/// Links each call of `message` that `map` names as an effect to it (scope and key), unless the
/// call already names one.
pub(crate) fn link_effects(message: &mut Message, map: &dyn Fn(&ToolCall) -> Option<EffectCall>) {
    for call in &mut message.tool_calls {
        if call.effect.is_some() {
            continue;
        }
        if let Some(EffectCall { scope, effect }) = map(call) {
            call.effect = Some(effect.idempotency_key);
            call.effect_scope = Some(scope);
        }
    }
}

/// How the session's answers name an effect: by its record when the window shows it, else as
/// "this call's effect" (the call is right above the answer).
struct Named {
    /// `effect `KEY``, or `this call's effect`.
    short: String,
    /// `effect `KEY` (ACTION on TARGET)`, or `this call's effect`.
    long: String,
    /// Whether the window shows the record (so its key may be named).
    shown: bool,
}

impl Named {
    fn of(effect: &Effect, window: &str) -> Named {
        if shown_in(window, effect) {
            let Effect {
                idempotency_key: key,
                action,
                target,
                ..
            } = effect;
            Named {
                short: format!("effect `{key}`"),
                long: format!("effect `{key}` ({action} on {target})"),
                shown: true,
            }
        } else {
            Named {
                short: "this call's effect".to_owned(),
                long: "this call's effect".to_owned(),
                shown: false,
            }
        }
    }

    /// `short` at the start of a sentence.
    fn capital(&self) -> String {
        let mut chars = self.short.chars();
        chars.next().map_or_else(String::new, |first| {
            first.to_uppercase().chain(chars).collect()
        })
    }
}

/// Whether `window` shows `effect`'s record: a line of an effect log (one JSON record each, in the
/// window or a state update) with its key, action and target. A message that imitates such a
/// line put the record in the model's context itself, so naming it adds nothing.
pub(crate) fn shown_in(window: &str, effect: &Effect) -> bool {
    window
        .lines()
        .filter(|line| line.trim_start().starts_with('{'))
        .filter_map(|line| serde_json::from_str::<Effect>(line.trim()).ok())
        .any(|record| {
            record.idempotency_key == effect.idempotency_key
                && record.action == effect.action
                && record.target == effect.target
        })
}

/// The tool result and outcome of an effect the ledger refused to claim.
fn not_run(named: &Named, reason: EffectError) -> (String, EffectOutcome) {
    let long = &named.long;
    match reason {
        EffectError::AlreadyCommitted { .. } => (
            format!(
                "Not run: {long} is already committed: it happened before, and running it again \
                 would do it twice. Treat it as done; do not call it again."
            ),
            EffectOutcome::AlreadyCommitted,
        ),
        EffectError::OutcomeUnknown { .. } => (
            format!(
                "Not run: {long} was started before and its outcome is unknown (it may or may \
                 not have happened). It must not be retried until an operator checks and \
                 reconciles it. Tell the user; do not call it again."
            ),
            EffectOutcome::OutcomeUnknown,
        ),
        // The ledger's reason names the key: repeated only when the window shows it.
        reason if named.shown => (
            format!(
                "Not run: the effect ledger refused {}: {reason}.",
                named.short
            ),
            EffectOutcome::Refused { reason },
        ),
        reason => (
            "Not run: the effect ledger refused this call's effect (its key is recorded for \
             another effect), so the tool was not called."
                .to_owned(),
            EffectOutcome::Refused { reason },
        ),
    }
}

/// A claimed effect whose settlement the ledger did not take: it stays claimed, so its outcome
/// is unknown until an operator reconciles it.
fn unrecorded(failure: LedgerFailure) -> EffectOutcome {
    let reason = match failure {
        LedgerFailure::Backend(source) => source.to_string(),
        LedgerFailure::Refused(reason) => reason.to_string(),
        LedgerFailure::Superseded(refusal) => refusal.to_string(),
    };
    EffectOutcome::LeftUnknown {
        error: format!("the effect ledger could not record the outcome: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "deploy", json!({"service": id}))
    }

    #[test]
    fn only_mapped_calls_are_linked_and_a_named_effect_is_kept() {
        let mut message = Message::assistant_with_tools(
            "",
            vec![
                call("a"),
                ToolCall::new("r", "read_file", json!({})),
                call("c").with_effect_in("mine", "k"),
            ],
        );
        let map = |c: &ToolCall| {
            (c.name == "deploy")
                .then(|| EffectCall::new("deploys", Effect::new("d", "t", c.id.clone())))
        };
        link_effects(&mut message, &map);
        let links: Vec<_> = message
            .tool_calls
            .iter()
            .map(|c| (c.effect_scope.as_deref(), c.effect.as_deref()))
            .collect();
        assert_eq!(
            links,
            [
                (Some("deploys"), Some("a")),
                (None, None),
                (Some("mine"), Some("k"))
            ]
        );
    }
}
