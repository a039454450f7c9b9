//! [`Session::run_tools`](crate::session::Session::run_tools): every pending call of the
//! model's last reply answered in one call. Pointer-tool calls are answered by the session's
//! resolver, effect calls run under the ledger, and every other call goes to the author's
//! handler; the results are pushed in the model's order.

use crate::conversation::message::{Message, ToolCall};
use crate::pointer_tool::PointerToolReply;
use crate::session::effect::{EffectOutcome, ToolFailure};

/// What [`run_tools`](crate::session::Session::run_tools) did with one call, in the model's
/// order. A tool result for the call was pushed in every case.
#[derive(Debug)]
pub struct ToolRun {
    /// The call answered.
    pub call: ToolCall,
    /// How it was answered.
    pub outcome: ToolRunOutcome,
}

/// How [`run_tools`](crate::session::Session::run_tools) answered a call.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolRunOutcome {
    /// The pointer tool (`resolve_pointer`), answered by the session's resolver: the verified
    /// bytes or why there are none.
    Pointer(Box<PointerToolReply>),
    /// A call the session's [`effect_calls`](crate::session::SessionBuilder::effect_calls)
    /// maps to an effect, run under the ledger
    /// ([`run_effect`](crate::session::Session::run_effect)): what the ledger let happen.
    Effect(EffectOutcome),
    /// A plain tool: the handler's output is the result.
    Answered,
    /// A plain tool whose handler returned an error: the result is `error: ` and its text, so
    /// the model reads why.
    Failed {
        /// The handler's error, as text.
        error: String,
    },
}

/// The tool result of a plain tool's output, and what to report about it.
pub(super) fn plain_result(
    call: &ToolCall,
    output: Result<String, ToolFailure>,
) -> (Message, ToolRunOutcome) {
    match output {
        Ok(text) => (
            Message::tool_result(call.id.clone(), text),
            ToolRunOutcome::Answered,
        ),
        Err(failure) => {
            let error = failure.to_string();
            (
                Message::tool_result(call.id.clone(), format!("error: {error}")),
                ToolRunOutcome::Failed { error },
            )
        }
    }
}
