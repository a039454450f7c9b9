//! `show` of an agent with a `#[transcript]`: the messages the model received, as its latest
//! checkpoint holds them (the window first, then kept messages, stubs, tombstones and folds with
//! their handles), printed so that no text from the conversation can move the cursor, rewrite a
//! line, reorder what follows or pass for one of this tool's own header lines.

use crate::backend::AnyCheckpoint;
use compaction::render::escape_inline;
use compaction::{Message, ToolCall};
use serde_json::{json, Value};

/// What starts each line of a message's text (an empty line is the bar alone): a mark the
/// tool's own lines never start with, so a line of text that imitates a call
/// (`-> call call_9 refund {…}`), a header (`#9 tool`) or a row of another section still reads
/// as text, line by line.
const TEXT: &str = "    | ";

/// The conversation of a checkpoint with a transcript; `None` without one.
pub fn messages(compacted: &AnyCheckpoint) -> Option<Vec<Message>> {
    compacted
        .request_tokens()
        .is_some()
        .then(|| compacted.messages())
}

/// The messages for `--json`: the raw text (JSON escapes what it must), one object each.
pub fn to_json(messages: &[Message]) -> Value {
    Value::Array(
        messages
            .iter()
            .enumerate()
            .map(|(index, m)| {
                json!({
                    "index": index,
                    "role": m.role.as_str(),
                    "content": m.content,
                    "name": m.name,
                    "tool_call_id": m.tool_call_id,
                    "tool_calls": m.tool_calls.iter().map(call_json).collect::<Vec<_>>(),
                    "opaque_parts": m.opaque.len(),
                })
            })
            .collect(),
    )
}

fn call_json(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "name": call.name,
        "arguments": call.arguments_text(),
        "effect": call.effect,
        "effect_scope": call.effect_scope,
    })
}

/// The text view: a summary line, then each message under a `#N role` header at the start of a
/// line, each line of its content behind [`TEXT`] and made printable, and each call on a
/// `    -> call` line. Content never starts a line, and never follows an indent as anything but
/// text: no text can print like a header, a call, or a line of another section.
pub fn to_text(agent: &str, compacted: &AnyCheckpoint, messages: &[Message]) -> String {
    let report = compacted.report();
    let mut out = format!(
        "{}: compaction #{}, request {} of {} tokens, {} messages sent",
        terminal_line(agent),
        report.compaction,
        compacted.request_tokens().unwrap_or(compacted.tokens()),
        compacted.budget(),
        messages.len()
    );
    if let Some(t) = &report.transcript {
        out.push_str(&format!(
            " ({} of {} input messages kept; {} folded into {} folds; {} tombstoned; {} paged; \
             {} user messages in {} runs)",
            t.kept,
            t.messages_in,
            t.folded,
            t.fold_messages,
            t.tombstoned,
            t.paged.len(),
            t.stubbed,
            t.user_runs
        ));
    }
    out.push('\n');
    for (index, message) in messages.iter().enumerate() {
        out.push_str(&format!("\n#{index} {}", message.role.as_str()));
        if let Some(name) = &message.name {
            out.push_str(&format!(" [{}]", terminal_line(name)));
        }
        if let Some(id) = &message.tool_call_id {
            out.push_str(&format!(" answering {}", terminal_line(id)));
        }
        if !message.opaque.is_empty() {
            out.push_str(&format!(" (+{} opaque parts)", message.opaque.len()));
        }
        out.push('\n');
        // A message that only calls tools has no text: no blank line for it.
        let text = (!message.content.is_empty()).then_some(message.content.as_str());
        for line in text.into_iter().flat_map(|t| t.split('\n')) {
            out.push_str(TEXT.trim_end());
            if !line.is_empty() {
                out.push(' ');
                out.push_str(&terminal_line(line));
            }
            out.push('\n');
        }
        for call in &message.tool_calls {
            out.push_str(&format!(
                "    -> call {} {} {}\n",
                terminal_line(&call.id),
                terminal_line(&call.name),
                terminal_line(call.arguments_text())
            ));
        }
    }
    out
}

/// One line of content, safe on a terminal: the window's own escaping for outside text
/// ([`escape_inline`]): control characters (escape sequences, carriage returns, tabs), line
/// separators and the invisible characters that reorder or hide text (bidi overrides, zero-width
/// marks) as `\u{1b}`-style escapes, and a backslash doubled so an escape is never ambiguous.
fn terminal_line(line: &str) -> String {
    escape_inline(line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::terminal_line;

    #[test]
    fn escapes_what_a_terminal_would_act_on() {
        let hostile = "ok\u{1b}[2K\rdone\u{202e}gnp.exe\u{200b}\u{7f}\u{9b}31m\t|\\u{1b}";
        let shown = terminal_line(hostile);
        assert_eq!(
            shown,
            r"ok\u{001b}[2K\rdone\u{202e}gnp.exe\u{200b}\u{007f}\u{009b}31m\t|\\u{1b}"
        );
        assert!(shown.chars().all(|c| !c.is_control()));
        assert_eq!(
            terminal_line("⟦compaction:folded p3⟧ ü"),
            "⟦compaction:folded p3⟧ ü"
        );
    }
}
