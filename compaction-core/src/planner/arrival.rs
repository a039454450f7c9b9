//! What a new tool result is sent as when it arrives (rule 5, issue 30.3): paged to the
//! `page_results_over` cap when it passes it; with `verbatim_first`, verbatim whenever the
//! newest turn fits the room the request has, paged only when it does not.

use crate::conversation::format::{message_tokens_limited, ChatFormat};
use crate::conversation::marker;
use crate::conversation::transcript::{Message, Role};
use crate::planner::plan::Request;
use crate::tokens::TokenCounter;

/// The cap a new tool result is paged to on arrival in this request, or `None` to send it
/// verbatim: the compactor's `page_results_over` cap; with `verbatim_first`, lifted when the
/// newest turn (from the last user message on, every result verbatim) fits in `limit`, the
/// tokens the transcript has once the window (the pinned state with it) and the request's
/// overhead are taken.
///
/// Per result, the rule is "a result that fits the room left after the pinned state, the
/// window and the rest of the newest turn is sent verbatim the first time": a result of R
/// tokens in a turn of T fits `limit - (T - R)` exactly when T fits `limit`, so one count of
/// the turn answers for each of its results. The cap only ever pages a result the model could
/// not have read whole beside its turn; older turns make room for it instead (folded or
/// paged at the compaction point that follows, as their rules say).
pub(crate) fn page_over_on_arrival(
    messages: &[Message],
    request: &Request<'_>,
    limit: usize,
    counter: &dyn TokenCounter,
    format: &dyn ChatFormat,
) -> Option<usize> {
    let cap = request.page_over?;
    if !request.verbatim_first {
        return Some(cap);
    }
    let turn = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    let mut total = 0usize;
    for message in &messages[turn..] {
        let content = marker::escape(&message.content);
        let left = limit - total;
        match message_tokens_limited(format, message, &content, counter, left) {
            Some(tokens) => total += tokens,
            None => return Some(cap),
        }
    }
    None
}
