//! What a `resolve_pointer` result holds, by where its text came from: [`ReadBackClass`], and
//! how the resolver tells it from a checkpoint (each pointer's class) and from a message read by
//! index.

use crate::checkpoint::Compacted;
use crate::conversation::message::{Message, Role, ToolCall};
use crate::planner::memory::Slot;
use crate::pointer_tool::definition::RESOLVE_POINTER;
use crate::store::Pointer;
use crate::window::field::{Form, SummaryValue};

/// The class of what one `resolve_pointer` call read back, on every
/// [`PointerToolReply`](crate::pointer_tool::PointerToolReply): the class of the text the
/// model now holds again as an ordinary tool result.
///
/// A fold never sends a read-back to a summarizer unless it is provably
/// [`Disposable`](Self::Disposable): the others are tombstoned in what the summarizer reads,
/// and stay byte-exact in the fold's stored span (its handle reads them again). The fold does
/// not trust this in-memory value: it derives the answer again from the transcript alone
/// (see [`crate::transcript`], rule 14), so a restarted process decides the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReadBackClass {
    /// A `#[protected]` value spilled to the store, a system or developer message, or content
    /// whose origin cannot be told (a pointer allowed by hand, a read-back of a read-back): the
    /// strictest class.
    Protected,
    /// A user message (read by index from a user run).
    User,
    /// An assistant message that carries provider-opaque parts (thinking, encrypted reasoning).
    Opaque,
    /// Effect state: spilled effect records or payloads, an assistant message whose calls name
    /// an effect, or a side-effecting call's result (where the session writes its answers).
    Effect,
    /// Text a fold may summarize anyway: a plain tool result, a summary's source, a model
    /// message without opaque parts or effects, and the tool's own notes and errors.
    Disposable,
}

impl ReadBackClass {
    /// Its name, as the model reads it in a result's class note (`protected`, `user`,
    /// `opaque`, `effect`, `disposable`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReadBackClass::Protected => "protected",
            ReadBackClass::User => "user",
            ReadBackClass::Opaque => "opaque",
            ReadBackClass::Effect => "effect",
            ReadBackClass::Disposable => "disposable",
        }
    }

    /// Whether a fold may send it to a summarizer.
    pub fn is_disposable(self) -> bool {
        self == ReadBackClass::Disposable
    }

    /// The stricter of two classes (for content that is two things at once).
    pub(crate) fn stricter(self, other: ReadBackClass) -> ReadBackClass {
        let rank = |c: ReadBackClass| match c {
            ReadBackClass::Disposable => 0,
            ReadBackClass::Opaque => 1,
            ReadBackClass::Effect => 2,
            ReadBackClass::User => 3,
            ReadBackClass::Protected => 4,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

impl std::fmt::Display for ReadBackClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class of every store pointer `compacted` issued, by what it holds: a spilled protected
/// value is protected; spilled effect records and payloads are effect; a summary's source and
/// stored value are disposable; a tombstoned or paged tool result takes the class of its call
/// (effect-linked: effect; a `resolve_pointer` result: protected, since what it read cannot be
/// told from here; any other tool: disposable). Compacted ranges are classed message by message
/// when read by index ([`message_class`]).
pub(crate) fn pointer_classes<S>(compacted: &Compacted<S>) -> Vec<(Pointer, ReadBackClass)> {
    let mut out = Vec::new();
    for entry in &compacted.entries {
        match &entry.form {
            Form::ProtectedSpilled { pointer } => {
                out.push((pointer.clone(), ReadBackClass::Protected));
            }
            Form::Summary { source, value, .. } => {
                out.push((source.clone(), ReadBackClass::Disposable));
                if let Some(SummaryValue::Stored(pointer)) = value {
                    out.push((pointer.clone(), ReadBackClass::Disposable));
                }
            }
            Form::Effects {
                spilled,
                payloads_spilled,
                ..
            } => {
                let pointers = spilled.iter().map(|s| &s.pointer).chain(payloads_spilled);
                out.extend(pointers.map(|p| (p.clone(), ReadBackClass::Effect)));
            }
            _ => {}
        }
    }
    let Some(transcript) = &compacted.transcript else {
        return out;
    };
    let messages = &transcript.messages;
    for (position, meta) in transcript.memory.slots.iter().enumerate() {
        let (Slot::Tombstoned { handle, .. } | Slot::Paged { handle, .. }) = &meta.slot else {
            continue;
        };
        let Some(pointer) = transcript.memory.handles.pointer(*handle) else {
            continue;
        };
        let call = messages.get(position).and_then(|result| {
            let id = result.tool_call_id.as_deref()?;
            messages[..position]
                .iter()
                .rev()
                .find(|m| m.role == Role::Assistant)?
                .tool_calls
                .iter()
                .find(|c| c.id == id)
        });
        out.push((pointer.clone(), result_class(call)));
    }
    out
}

/// The class of a tool result, by the call it answers (`None`: not found).
pub(crate) fn result_class(call: Option<&ToolCall>) -> ReadBackClass {
    match call {
        Some(call) if call.effect.is_some() => ReadBackClass::Effect,
        Some(call) if call.name != RESOLVE_POINTER => ReadBackClass::Disposable,
        // A read-back of a read-back, or a result whose call is unknown: what it holds cannot
        // be told, so the strictest class.
        _ => ReadBackClass::Protected,
    }
}

/// The class of a message read by index from a compacted range; a tool message's class is its
/// call's ([`result_class`]), which the caller looks up in the range.
pub(crate) fn message_class(message: &Message, call: Option<&ToolCall>) -> ReadBackClass {
    match message.role {
        Role::User => ReadBackClass::User,
        Role::System | Role::Developer => ReadBackClass::Protected,
        Role::Assistant if !message.opaque.is_empty() => ReadBackClass::Opaque,
        Role::Assistant if message.tool_calls.iter().any(|c| c.effect.is_some()) => {
            ReadBackClass::Effect
        }
        Role::Assistant => ReadBackClass::Disposable,
        Role::Tool => result_class(call),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planner_names_the_pointer_tool_as_the_tool_does() {
        assert_eq!(crate::planner::fold_rule::POINTER_TOOL, RESOLVE_POINTER);
    }

    #[test]
    fn stricter_keeps_the_stricter_class_either_way() {
        use ReadBackClass::*;
        let all = [Protected, User, Opaque, Effect, Disposable];
        for a in all {
            assert_eq!(a.stricter(Disposable), a);
            assert_eq!(Disposable.stricter(a), a);
            assert_eq!(a.stricter(Protected), Protected);
            assert_eq!(a.stricter(a), a);
        }
    }
}
