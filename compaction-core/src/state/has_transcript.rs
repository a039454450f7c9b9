//! [`HasTranscript`]: a state's one `#[transcript]` field, reached generically, so a session
//! can push the conversation into whatever state type it holds.

use crate::conversation::transcript::Transcript;
use crate::state::compactable::Compactable;

/// A state with a `#[transcript]` field of its own: the conversation a
/// [`Session`](crate::session::Session) pushes the model's responses and the tool results into.
///
/// `#[derive(Compactable)]` implements it for a struct with a `#[transcript]` field (a state
/// has at most one); a state without one does not implement it, so handing it to a session is
/// a compile error that says so. Implement it by hand only for a hand-written `Compactable`
/// (or to reach a transcript inside a `#[nested]` field).
///
/// ```
/// use compaction::{Compactable, HasTranscript, Message, Transcript};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default)]
/// struct Agent {
///     #[protected]
///     repo: String,
///     #[transcript]
///     chat: Transcript,
/// }
///
/// fn greet<S: HasTranscript>(state: &mut S) {
///     state.transcript_mut().push(Message::user("hello"));
/// }
///
/// let mut agent = Agent::default();
/// greet(&mut agent);
/// assert_eq!(agent.transcript().len(), 1);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no `#[transcript]` field, so a session cannot hold its conversation",
    label = "this state has no conversation",
    note = "add a field `#[transcript] chat: compaction::Transcript` to `{Self}` (derived \
            `Compactable` then implements `HasTranscript`)"
)]
pub trait HasTranscript: Compactable {
    /// The conversation.
    fn transcript(&self) -> &Transcript;
    /// The conversation, to append to. A transcript only grows by appending
    /// ([`Transcript::push`]).
    fn transcript_mut(&mut self) -> &mut Transcript;
}

impl<T: HasTranscript> HasTranscript for Box<T> {
    fn transcript(&self) -> &Transcript {
        (**self).transcript()
    }
    fn transcript_mut(&mut self) -> &mut Transcript {
        (**self).transcript_mut()
    }
}
