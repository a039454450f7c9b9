//! End to end: a `#[transcript]` field through the derive, the engine, `Compacted::messages()`
//! and rehydration, with the `CodingAgent` of issue 10.

use compaction::transcript::chat_tokens;
use compaction::{
    Compactable, Compacted, CompactionError, Compactor, ContentHash, Effect, EffectLog, Extractive,
    FieldClass, MemoryStore, Message, NoReacquire, Role, Tokenizer, ToolCall, Transcript,
    TranscriptError,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq)]
struct CodingAgent {
    #[protected(pin)]
    rules: Vec<String>,
    #[protected]
    repo_root: String,
    #[transcript(keep_recent = 3)] // the last 3 user turns and what followed, verbatim
    chat: Transcript,
    #[effect(idempotent = false)]
    writes: EffectLog,
}

const CONSTRAINT: &str = "numpy must stay below 2.0";

/// A coding session: the constraint at turn 3, big file reads, file writes recorded as effects
/// linked to their calls (all committed but the last, whose outcome is unknown).
fn session(turns: usize) -> CodingAgent {
    let mut agent = CodingAgent {
        rules: vec!["never push to main".into()],
        repo_root: "/srv/app".into(),
        chat: Transcript::new(),
        writes: EffectLog::new(),
    };
    agent
        .chat
        .push(Message::system("You are a careful coding agent."));
    for turn in 0..turns {
        let ask = if turn == 3 {
            format!("Remember: {CONSTRAINT}.")
        } else {
            format!("Turn {turn}: fix the next failing test.")
        };
        agent.chat.push(Message::user(ask));
        let read = format!("read-{turn}");
        let write = format!("write-{turn}");
        let key = format!("w{turn}");
        agent.chat.push(Message::assistant_with_tools(
            "Looking at the code.",
            vec![
                ToolCall::new(
                    &read,
                    "read_file",
                    json!({"path": format!("src/m{turn}.py")}),
                ),
                ToolCall::new(
                    &write,
                    "write_file",
                    json!({"path": format!("src/m{turn}.py")}),
                )
                .with_effect(&key),
            ],
        ));
        agent.chat.push(Message::tool_result(
            &read,
            format!("line of code {turn}\n").repeat(120),
        ));
        agent.chat.push(Message::tool_result(&write, "ok"));
        agent
            .chat
            .push(Message::assistant(format!("Fixed module {turn}.")));
        agent
            .writes
            .record(Effect::new("write_file", format!("src/m{turn}.py"), &key))
            .unwrap();
        agent.writes.begin(&key).unwrap();
        if turn + 1 < turns {
            agent.writes.commit(&key).unwrap();
        }
    }
    agent
}

fn compactor(budget: usize) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .max_summary_tokens(120)
        .store(MemoryStore::new())
        .build()
        .unwrap()
}

#[test]
fn the_schema_names_the_transcript_class() {
    let field = CodingAgent::schema().field("chat").unwrap();
    assert_eq!(
        field.class,
        FieldClass::Transcript {
            keep_recent: 3,
            pin_user: false
        }
    );
}

#[test]
fn messages_fit_the_budget_keep_pairs_and_rehydrate_byte_identical() {
    let agent = session(30);
    let full = chat_tokens(agent.chat.messages(), &Tokenizer::O200kBase);
    let budget = 4000;
    assert!(
        full > 3 * budget,
        "the session must need compaction ({full})"
    );
    let compactor = compactor(budget);
    let compacted = compactor.compact_blocking(&agent).unwrap();
    let messages = compacted.messages();
    if std::env::var("SHOW_REQUEST").is_ok() {
        for m in &messages {
            eprintln!(
                "{:?}: {}",
                m.role,
                m.content.chars().take(400).collect::<String>()
            );
        }
    }
    // One system message with the state window, then the transcript.
    assert_eq!(messages[0].role, Role::System);
    assert!(messages[0].content.contains("never push to main"));
    assert!(messages[0].content.contains("/srv/app"));
    let counted = chat_tokens(&messages, &Tokenizer::O200kBase);
    assert!(counted <= budget, "{counted} > {budget}");
    assert_eq!(compacted.request_tokens(), Some(counted));
    // Valid on the wire: no orphaned call or result.
    let sent: Transcript = messages[1..].iter().cloned().collect();
    assert_eq!(sent.validate(), Ok(()));
    // The write whose outcome is unknown is still a verbatim pair.
    let last = agent.chat.messages().len();
    assert!(messages.contains(&agent.chat.messages()[last - 4]));
    // The constraint is in the request, or in a user run that gives it back exactly.
    let index = agent
        .chat
        .iter()
        .position(|m| m.content.contains(CONSTRAINT))
        .unwrap();
    if !messages.iter().any(|m| m.content.contains(CONSTRAINT)) {
        let span = compacted.span_of(index).expect("in a user run");
        let back = compactor.resolve_message_blocking(&span, index).unwrap();
        assert_eq!(back.as_ref(), Some(&agent.chat.messages()[index]));
    }
    // Every pointer resolves, and rehydration gives the agent back.
    for pointer in compacted.pointers() {
        compactor.resolve_blocking(&pointer).unwrap();
    }
    let back: CodingAgent = compactor
        .rehydrate_blocking(&compacted, &NoReacquire)
        .unwrap();
    assert_eq!(
        serde_json::to_string(&back.chat).unwrap(),
        serde_json::to_string(&agent.chat).unwrap()
    );
    assert_eq!(back, agent);
}

#[test]
fn compacting_after_every_turn_keeps_working() {
    let compactor = compactor(4000);
    let mut agent = session(12);
    for turn in 0..5 {
        agent
            .chat
            .push(Message::user(format!("and one more thing {turn}")));
        agent.chat.push(Message::assistant("done"));
        let compacted = compactor.compact_blocking(&agent).unwrap();
        assert!(chat_tokens(&compacted.messages(), &Tokenizer::O200kBase) <= 4000);
        let back: CodingAgent = compactor
            .rehydrate_blocking(&compacted, &NoReacquire)
            .unwrap();
        assert_eq!(back.chat, agent.chat);
    }
}

#[test]
fn an_invalid_transcript_is_refused_with_its_index() {
    let mut agent = session(2);
    agent.chat.push(Message::tool_result("no-such-call", "x"));
    let index = agent.chat.len() - 1;
    let err = compactor(4000).compact_blocking(&agent).unwrap_err();
    match err {
        CompactionError::InvalidTranscript { field, source } => {
            assert_eq!(field, "chat");
            assert_eq!(
                source,
                TranscriptError::ResultWithoutCall {
                    index,
                    call_id: "no-such-call".into()
                }
            );
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_saved_window_edited_into_an_orphaned_pair_does_not_load() {
    let compacted = compactor(4000).compact_blocking(&session(3)).unwrap();
    let mut saved: serde_json::Value = serde_json::to_value(&compacted).unwrap();
    let messages = saved["transcript"]["messages"].as_array_mut().unwrap();
    // Drop the first assistant message that makes calls: its results are left orphaned.
    let caller = messages
        .iter()
        .position(|m| {
            m.get("tool_calls")
                .is_some_and(|c| !c.as_array().unwrap().is_empty())
        })
        .expect("the session calls tools");
    messages.remove(caller);
    let err = serde_json::from_value::<Compacted<CodingAgent>>(saved.clone()).err();
    let err = err
        .expect("an orphaned result is refused on load")
        .to_string();
    assert!(err.contains("no earlier message made"), "{err}");

    // A name on a tool message: no chat API could send it.
    let mut saved = serde_json::to_value(&compacted).unwrap();
    let messages = saved["transcript"]["messages"].as_array_mut().unwrap();
    let result = messages.iter().position(|m| m["role"] == "tool").unwrap();
    messages[result]["name"] = json!("read_file");
    let err = serde_json::from_value::<Compacted<CodingAgent>>(saved).err();
    assert!(err.expect("refused").to_string().contains("carries a name"));
}

#[test]
fn a_budget_too_small_for_the_recent_turns_is_a_typed_error() {
    let agent = session(6);
    let before = serde_json::to_string(&agent).unwrap();
    let err = compactor(300).compact_blocking(&agent).unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::TranscriptOverBudget { .. }
                | CompactionError::ProtectedOverBudget { .. }
        ),
        "{err}"
    );
    assert_eq!(serde_json::to_string(&agent).unwrap(), before);
}

#[test]
fn the_report_counts_every_message_once_by_outcome() {
    use compaction::transcript::MARKER_PREFIX;
    let agent = session(30);
    let compacted = compactor(4000).compact_blocking(&agent).unwrap();
    let report = compacted.report().transcript.clone().expect("a transcript");
    assert_eq!(report.field, "chat");
    assert_eq!(report.messages_in, agent.chat.len());
    assert_eq!(
        report.kept + report.stubbed + report.tombstoned + report.paged.len() + report.folded,
        report.messages_in
    );
    let sent = &compacted.messages()[1..];
    let markers = |role: Role, kind: &str| {
        let start = format!("{MARKER_PREFIX}{kind} ");
        sent.iter()
            .filter(|m| m.role == role && m.content.starts_with(&start))
            .count()
    };
    assert_eq!(report.tombstoned, markers(Role::Tool, "tombstone"));
    assert_eq!(report.paged.len(), markers(Role::Tool, "paged"));
    assert_eq!(report.user_runs, markers(Role::User, "users"));
    assert_eq!(report.fold_messages, markers(Role::Assistant, "folded"));
    assert!(report.stubbed > 0 && report.folded > 0, "{report:?}");
    assert!(report.summarized_folds <= report.fold_messages);
    assert_eq!(
        sent.len(),
        report.kept
            + report.tombstoned
            + report.paged.len()
            + report.user_runs
            + report.fold_messages
    );
    let verbatim = sent
        .iter()
        .filter(|m| agent.chat.messages().contains(m))
        .count();
    assert_eq!(report.kept, verbatim);
    assert_eq!(
        report.tokens,
        chat_tokens(sent, &Tokenizer::O200kBase)
            - compaction::ChatFormat::reply_priming(&compaction::OpenAiChat)
    );
    assert!(!compacted.report().nothing_evicted());
    assert!(compacted.report().to_string().contains("tombstoned"));

    let small = session(2);
    let whole = compactor(100_000).compact_blocking(&small).unwrap();
    let report = whole.report().transcript.clone().expect("a transcript");
    assert!(report.all_kept(), "{report:?}");
    assert_eq!(report.kept, small.chat.len());
    assert!(whole.report().nothing_evicted(), "{}", whole.report());
}

#[test]
fn a_checkpoint_whose_block_chunks_were_edited_is_refused() {
    let compacted = compactor(4000).compact_blocking(&session(40)).unwrap();
    assert!(compacted.verify_seal());
    let saved = serde_json::to_value(&compacted).unwrap();
    let block = &saved["transcript"]["memory"]["blocks"][0];
    assert!(
        block["chunks"]["chunks"][0]["hash"].is_string(),
        "the session folds: {block}"
    );
    let other = ContentHash::of(b"another chunk").to_hex();

    // Another chunk address, the manifest left alone: the chunks no longer hash to it.
    let mut edited = saved.clone();
    edited["transcript"]["memory"]["blocks"][0]["chunks"]["chunks"][0]["hash"] = json!(other);
    let err = serde_json::from_value::<Compacted<CodingAgent>>(edited).err();
    let err = err.expect("refused on load").to_string();
    assert!(err.contains("manifest does not match its chunks"), "{err}");

    // The manifest's hash and the handle table edited to agree with the new chunk: it loads,
    // and the seal (which covers each block through its manifest's hash) no longer verifies.
    let mut edited = saved.clone();
    let chunks = &mut edited["transcript"]["memory"]["blocks"][0]["chunks"];
    chunks["chunks"][0]["hash"] = json!(other);
    let refs: Vec<String> = chunks["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                r#"{{"first":{},"count":{},"hash":"{}"}}"#,
                c["first"],
                c["count"],
                c["hash"].as_str().unwrap()
            )
        })
        .collect();
    let manifest = format!(
        r#"{{"span":1,"first":{},"chunks":[{}]}}"#,
        chunks["first"],
        refs.join(",")
    );
    let hash = ContentHash::of(manifest.as_bytes()).to_hex();
    let handle = edited["transcript"]["memory"]["blocks"][0]["handle"]
        .as_str()
        .unwrap()
        .to_owned();
    edited["transcript"]["memory"]["blocks"][0]["manifest"] = json!(hash);
    edited["transcript"]["memory"]["handles"]["handles"][&handle] =
        json!(format!("store://sha256:{hash}"));
    let loaded: Compacted<CodingAgent> =
        serde_json::from_value(edited).expect("a consistent record loads");
    assert!(
        !loaded.verify_seal(),
        "the seal covers the block's manifest"
    );
}
