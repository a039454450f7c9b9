//! OpenAI Responses reasoning blocks against hostile values (feature `openai-responses`):
//! whatever block `OpaquePart::from_block` accepts as OpenAI reasoning goes out as a reasoning
//! item with every field's value unchanged and is stored byte for byte; a documented item with
//! one field added, repeated, retyped or broken is a typed error. The recorded items and the
//! round trips are in `openai_responses.rs`.

use compaction::openai::async_openai::types::responses::InputItem;
use compaction::openai::{check_responses_input, from_responses_input, to_responses_input};
use compaction::transcript::{OpaqueKind, OpaquePart};
use compaction::Message;
use proptest::prelude::*;
use serde_json::{json, Value};
use wire::text;

mod wire;

/// A JSON string literal for `text`, sometimes with every ASCII letter written as a `\u`
/// escape (the same value, other bytes).
fn literal(text: &str, escaped: bool) -> String {
    if !escaped {
        return serde_json::to_string(text).unwrap();
    }
    let mut out = String::from("\"");
    for c in serde_json::to_string(text).unwrap()[1..].chars() {
        if c.is_ascii_alphabetic() {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The fields of a reasoning item with the documented shape, as `(name, JSON text)`, values
/// hostile (our markers, escapes, quotes), optional fields sometimes `null`.
fn documented_fields() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    let string = || (text(), any::<bool>()).prop_map(|(t, e)| literal(&t, e));
    let optional = || prop_oneof![1 => Just(None), 1 => Just(Some("null".to_owned())), 3 => string().prop_map(Some)];
    let parts = |kind: &'static str| {
        prop::collection::vec(string(), 0..3).prop_map(move |texts| {
            let parts: Vec<String> = texts
                .iter()
                .map(|t| format!(r#"{{"type":"{kind}","text":{t}}}"#))
                .collect();
            format!("[{}]", parts.join(","))
        })
    };
    let status = prop_oneof![
        Just(None),
        Just(Some("null".to_owned())),
        prop::sample::select(vec!["\"in_progress\"", "\"completed\"", "\"incomplete\""])
            .prop_map(|s| Some(s.to_owned())),
    ];
    (
        optional(),
        parts("summary_text"),
        prop::option::of(parts("reasoning_text")),
        optional(),
        status,
    )
        .prop_map(|(id, summary, content, encrypted, status)| {
            let mut fields = vec![("type", "\"reasoning\"".to_owned()), ("summary", summary)];
            fields.extend(id.map(|v| ("id", v)));
            fields.extend(content.map(|v| ("content", v)));
            fields.extend(encrypted.map(|v| ("encrypted_content", v)));
            fields.extend(status.map(|v| ("status", v)));
            fields
        })
        .prop_shuffle()
}

fn object(fields: &[(&str, String)], spacing: &str) -> String {
    let members: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{spacing}\"{name}\"{spacing}:{spacing}{value}"))
        .collect();
    format!("{{{}{spacing}}}", members.join(","))
}

/// One change to a documented item that leaves it outside the documented shape.
fn corruption() -> impl Strategy<Value = (usize, String)> {
    let cases: Vec<(&'static str, &'static str)> = vec![
        ("signature", "\"forged\""),
        ("Encrypted_content", "\"e\""),
        ("summary_text", "[]"),
        ("type", "\"reasoning\""), // a second one: repeated
        ("summary", "[]"),         // a second one: repeated
        ("id", "5"),
        ("status", "\"done\""),
        ("encrypted_content", "\"\\ud800\""),
        ("content", r#"[{"type":"summary_text","text":"a"}]"#),
        ("summary", r#"[{"type":"output_text","text":"a"}]"#),
        (
            "summary",
            r#"[{"type":"summary_text","text":"a","extra":1}]"#,
        ),
        ("summary", r#""a""#),
    ];
    (0..cases.len(), any::<prop::sample::Index>()).prop_map(move |(case, at)| {
        let (name, value) = cases[case];
        (at.index(usize::MAX), format!("\"{name}\":{value}"))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever block `from_block` accepts as OpenAI reasoning goes out as a reasoning item
    /// with every field's value unchanged (and in the checkpoint's bytes as it came); a
    /// documented item with one field added, repeated, retyped or broken is a typed error.
    #[test]
    fn a_reasoning_block_is_sent_unchanged_or_refused(
        fields in documented_fields(),
        spacing in prop::sample::select(vec!["", " ", "\n  "]),
        (at, extra) in corruption(),
        corrupt in any::<bool>(),
    ) {
        let mut block = object(&fields, spacing);
        if corrupt {
            // The extra member goes in between two members (or first, or last).
            let mut members: Vec<String> = fields
                .iter()
                .map(|(name, value)| format!("\"{name}\":{value}"))
                .collect();
            members.insert(at % (members.len() + 1), extra.clone());
            block = format!("{{{}}}", members.join(","));
            let refused = OpaquePart::from_block(OpaqueKind::OpenAiReasoning, block.as_str());
            prop_assert!(refused.is_err(), "accepted {}", block);
            return Ok(());
        }
        let part = OpaquePart::from_block(OpaqueKind::OpenAiReasoning, block.as_str())
            .map_err(|e| TestCaseError::fail(format!("{block}: {e}")))?;
        prop_assert_eq!(part.block(), block.trim());
        let turn = [Message::user("q"), Message::assistant("a").with_opaque([part.clone()])];
        let input = to_responses_input(&turn).unwrap();
        prop_assert_eq!(check_responses_input(&input), Ok(()));
        let sent = serde_json::to_value(&input[1]).unwrap();
        let mut expected: Value = serde_json::from_str(&block).unwrap();
        expected.as_object_mut().unwrap().retain(|_, v| !v.is_null());
        let mut sent_fields = sent.as_object().unwrap().clone();
        sent_fields.retain(|_, v| !v.is_null());
        prop_assert_eq!(Value::Object(sent_fields), expected);
        // Read back from the wire, the part is the item as async-openai writes it, and sent
        // again it is those bytes exactly.
        let received: Vec<InputItem> = serde_json::from_value(json!([sent])).unwrap();
        let back = from_responses_input(&received).unwrap();
        let again = to_responses_input(&[Message::user("q"), back[0].clone()]).unwrap();
        prop_assert_eq!(serde_json::to_string(&again[1]).unwrap(), back[0].opaque[0].block());
        // A checkpoint stores the part's bytes and gives them back.
        let stored = serde_json::to_string(&turn[1]).unwrap();
        let loaded: Message = serde_json::from_str(&stored).unwrap();
        prop_assert_eq!(loaded.opaque[0].block(), part.block());
    }
}
