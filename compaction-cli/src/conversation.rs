//! `show` of an agent with a `#[transcript]`: the messages the model received, as its latest
//! checkpoint holds them (the window first, then kept messages, stubs, tombstones and folds with
//! their handles), printed so that no text from the conversation can move the cursor, rewrite a
//! line, reorder what follows or pass for one of this tool's own header lines. A message
//! compaction wrote (a page, a user run, a tombstone, a fold) is marked with its handle on a line
//! of its own, read by the library's [`Marker`]: kept text that imitates one is sent escaped, so
//! it is never marked.

use crate::backend::AnyCheckpoint;
use crate::output::thousands;
use compaction::render::escape_inline;
use compaction::transcript::Marker;
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

/// What a provider's prompt cache can serve of the last request: the leading messages it sent
/// as the request before it did (`SessionRequest::expected_cache` at the time), with their
/// tokens as the budget counts them, and whether it was a compaction point.
pub fn cache_json(compacted: &AnyCheckpoint) -> Value {
    let reused = compacted.reused_prefix_len();
    json!({
        "reused_messages": reused,
        "reused_tokens": compacted.prefix_tokens(reused),
        "stable_prefix_messages": compacted.stable_prefix_len(),
        "compaction_point": compacted.is_compaction_point(),
    })
}

fn cache_line(compacted: &AnyCheckpoint) -> String {
    let reused = compacted.reused_prefix_len();
    let how = if compacted.is_compaction_point() {
        "a compaction point"
    } else {
        "an append"
    };
    format!(
        "cache: {} tokens in the first {reused} messages as the request before sent them ({how}; \
         stable prefix {} messages)\n",
        thousands(compacted.prefix_tokens(reused)),
        compacted.stable_prefix_len()
    )
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
                    "marker": Marker::of(&m.content).map(|marker| marker_json(&marker)),
                })
            })
            .collect(),
    )
}

/// What a marker stands for, with its handle (`null` for kept text).
fn marker_json(marker: &Marker) -> Value {
    let handle = marker.handle().map(String::from);
    match marker {
        Marker::Tombstone { bytes, .. } => {
            json!({ "kind": "tombstone", "handle": handle, "bytes": bytes })
        }
        Marker::Paged { bytes, shown, .. } => json!({
            "kind": "paged", "handle": handle, "bytes": bytes,
            "head_bytes": shown[0], "tail_from": shown[1],
        }),
        Marker::UserRun {
            first,
            last,
            messages,
            bytes,
            ..
        } => json!({
            "kind": "user_run", "handle": handle, "first": first, "last": last,
            "messages": messages, "bytes": bytes,
        }),
        Marker::Fold { first, last, .. } => {
            json!({ "kind": "fold", "handle": handle, "first": first, "last": last })
        }
        _ => json!({ "kind": "update", "handle": handle }),
    }
}

/// The mark of a message compaction wrote, in the tool's own words (never the message's).
fn marker_text(marker: &Marker) -> String {
    let handle = marker.handle().map_or_else(String::new, |h| h.to_string());
    match marker {
        Marker::Tombstone { bytes, .. } => {
            format!("[tombstoned {handle}: {} bytes]", thousands(*bytes))
        }
        Marker::Paged { bytes, shown, .. } => format!(
            "[paged {handle}: {} bytes, head+tail shown (bytes 0..{} and {}..{})]",
            thousands(*bytes),
            thousands(shown[0]),
            thousands(shown[1]),
            thousands(*bytes)
        ),
        Marker::UserRun {
            first,
            last,
            messages,
            bytes,
            ..
        } => format!(
            "[user run {handle}: {messages} user messages of #{first}..#{last}, {} bytes]",
            thousands(*bytes)
        ),
        Marker::Fold { first, last, .. } => {
            format!("[fold {handle}: assistant and tool messages of #{first}..#{last}]")
        }
        _ => "[state update]".to_string(),
    }
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
        "{}: compaction #{}, request {} of {} tokens (window block {}), {} messages sent",
        terminal_line(agent),
        report.compaction,
        compacted.request_tokens().unwrap_or(compacted.tokens()),
        compacted.budget(),
        compacted.tokens(),
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
    out.push_str(&cache_line(compacted));
    let mut marked = false;
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
        // The mark is on a line of its own, in the tool's words: a header's name or id (the
        // model's text) can never end up looking like one.
        let marker = Marker::of(&message.content);
        if let Some(marker) = &marker {
            out.push_str(&format!("    {}\n", marker_text(marker)));
        }
        marked |= marker.is_some_and(|m| m.handle().is_some());
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
    if marked {
        out.push_str(&format!(
            "\nthe bytes behind a handle: compaction resolve DATABASE pN --agent {} (--offset N \
             pages them)\n",
            shell_word(agent)
        ));
    }
    out
}

/// The agent id as one shell word: quoted when it holds anything but `[A-Za-z0-9._-]`, and
/// escaped for the terminal.
fn shell_word(agent: &str) -> String {
    if !agent.is_empty()
        && agent
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        agent.to_string()
    } else {
        format!("'{}'", terminal_line(&agent.replace('\'', "'\\''")))
    }
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
