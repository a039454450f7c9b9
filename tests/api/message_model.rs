//! The message model's promises through the whole engine (issues 21.6, 21.7, 23.2): provider-
//! opaque parts are counted, never shown to a summarizer, folded only with their turn and given
//! back byte-for-byte by rehydration; tool-call arguments come back as the model wrote them;
//! nothing comes between a call and its results.

use compaction::transcript::{chat_tokens, MessageOutcome, OpaquePart, ToolArguments};
use compaction::{
    Compactable, Compacted, CompactionError, Compactor, FnSummarizer, Message, NoReacquire,
    SummarizerError, Tokenizer, ToolCall, Transcript, TranscriptError,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::{Arc, Mutex};

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq)]
struct Agent {
    #[protected]
    task: String,
    #[transcript(keep_recent = 1)]
    chat: Transcript,
}

/// Hostile-looking signatures and reasoning: each must reach the provider unchanged and a
/// summarizer never.
const SIGNATURE: &str = "EqQBCkYIARgCIkD/sig+with=padding==";
const THINKING: &str = "secret chain of thought: the refund key is rk_live_42";
const REDACTED: &str = "ZW5jcnlwdGVkIHRoaW5raW5n";

/// A provider's own compaction (issue 31.5): Anthropic's summary block and OpenAI's encrypted
/// item, each holding a value no summarizer may see.
const PROVIDER_SUMMARY: &str = "provider summary: migration 0042 applied, key rk_live_77";
const PROVIDER_CIPHERTEXT: &str = "gAAAAB-provider-compaction-ciphertext";

/// Turns with thinking (signed and redacted), a tool call whose arguments a parser would
/// change, and a big result.
fn session(turns: usize) -> Agent {
    session_with(turns, |turn| {
        vec![
            OpaquePart::anthropic_thinking(format!("{THINKING} #{turn}"), SIGNATURE),
            OpaquePart::anthropic_redacted_thinking(REDACTED),
        ]
    })
}

/// The same turns with the providers' own compaction parts instead of thinking.
fn compacted_by_providers(turns: usize) -> Agent {
    session_with(turns, |turn| {
        vec![
            OpaquePart::anthropic_compaction(Some(format!("{PROVIDER_SUMMARY} #{turn}"))),
            OpaquePart::openai_compaction(format!("cmp_{turn}"), PROVIDER_CIPHERTEXT),
        ]
    })
}

fn session_with(turns: usize, parts: impl Fn(usize) -> Vec<OpaquePart>) -> Agent {
    let mut chat = Transcript::new();
    chat.push(Message::system("You refund orders."));
    for turn in 0..turns {
        chat.push(Message::user(format!("turn {turn}: refund the next order")));
        let id = format!("call_{turn}");
        let text = format!(r#"{{"order": 12345678901234567890123456789{turn}, "order": "dup"}}"#);
        let call = ToolCall::new(&id, "refund", ToolArguments::from_text(text).unwrap());
        chat.push(Message::assistant_with_tools("Refunding.", vec![call]).with_opaque(parts(turn)));
        chat.push(Message::tool_result(&id, "refund accepted\n".repeat(40)));
        chat.push(Message::assistant(format!("Turn {turn} done.")));
    }
    Agent {
        task: "refunds".into(),
        chat,
    }
}

#[test]
fn opaque_parts_are_counted_with_their_turn() {
    let plain = Message::assistant("Refunding.");
    let with = plain
        .clone()
        .with_opaque([OpaquePart::anthropic_thinking(THINKING, SIGNATURE)]);
    let counter = Tokenizer::O200kBase;
    let block = with.opaque[0].block();
    assert_eq!(
        chat_tokens(std::slice::from_ref(&with), &counter),
        chat_tokens(&[plain], &counter) + compaction::TokenCounter::count(&counter, block)
    );
}

#[test]
fn a_summarizer_never_sees_opaque_parts_and_rehydration_gives_them_back() {
    never_summarized_and_given_back(
        session(12),
        &[SIGNATURE, THINKING, REDACTED, "redacted_thinking", "opaque"],
    );
}

#[test]
fn a_providers_own_compaction_is_never_summarized_and_given_back() {
    never_summarized_and_given_back(
        compacted_by_providers(12),
        &[PROVIDER_SUMMARY, PROVIDER_CIPHERTEXT, "rk_live_77", "cmp_"],
    );
}

fn never_summarized_and_given_back(agent: Agent, secrets: &[&str]) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let summarizer = || {
        let record = Arc::clone(&seen);
        FnSummarizer::new(move |request| {
            record.lock().unwrap().push(request.text.to_owned());
            Ok::<_, SummarizerError>("Earlier refunds went through.".to_owned())
        })
    };
    let full = chat_tokens(agent.chat.messages(), &Tokenizer::O200kBase);
    // The budget where folds start to carry summaries depends on the planner's reserves: try
    // a range, and require that some compaction asked for summaries.
    let mut asked = None;
    for percent in (30..=90).step_by(10) {
        let compactor = Compactor::builder()
            .budget(full * percent / 100)
            .token_counter(Tokenizer::O200kBase)
            .summarizer(summarizer())
            .build()
            .unwrap();
        let Ok(compacted) = compactor.compact_blocking(&agent) else {
            continue;
        };
        if !seen.lock().unwrap().is_empty() {
            asked = Some((compactor, compacted));
            break;
        }
    }
    let (compactor, compacted) = asked.expect("some budget folds with a summary");
    let texts = seen.lock().unwrap().clone();
    assert!(texts.iter().any(|t| t.contains("refund")), "{texts:?}");
    for text in &texts {
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "the summarizer saw {secret:?}: {text}"
            );
        }
    }
    // Every assistant message sent keeps its parts byte-for-byte, or is folded whole.
    let sent = compacted.messages();
    for message in sent.iter().filter(|m| !m.opaque.is_empty()) {
        let original = agent
            .chat
            .iter()
            .find(|m| m.tool_calls == message.tool_calls && m.opaque == message.opaque);
        assert!(original.is_some(), "a turn's parts changed: {message:?}");
    }
    assert!(
        sent.iter().any(|m| !m.opaque.is_empty()),
        "recent turns keep theirs"
    );
    // The checkpoint and rehydration give everything back byte-for-byte.
    let json = serde_json::to_string(&compacted).unwrap();
    let loaded: Compacted<Agent> = serde_json::from_str(&json).unwrap();
    assert!(loaded.verify_seal());
    let restored = compactor.rehydrate_blocking(&loaded, &NoReacquire).unwrap();
    assert_eq!(restored, agent);
}

#[test]
fn a_turn_with_opaque_parts_is_folded_whole_or_kept_whole() {
    folded_whole_or_kept_whole(session(20));
    folded_whole_or_kept_whole(compacted_by_providers(20));
}

fn folded_whole_or_kept_whole(agent: Agent) {
    let full = chat_tokens(agent.chat.messages(), &Tokenizer::O200kBase);
    let planner =
        compaction::transcript::TranscriptPlanner::new(std::sync::Arc::new(Tokenizer::O200kBase));
    let policy = compaction::transcript::TranscriptPolicy::default();
    for budget in [full / 4, full / 2, full] {
        let Ok(planned) =
            planner.plan_without_summaries(&agent.chat, &policy, budget, &Default::default())
        else {
            continue;
        };
        let outcomes = planned.outcomes(&agent.chat);
        for (index, message) in agent.chat.iter().enumerate() {
            if message.opaque.is_empty() {
                continue;
            }
            // The turn: this assistant message and the results that answer its calls.
            let result = index + 1;
            match outcomes[index] {
                MessageOutcome::Kept => assert_ne!(outcomes[result], MessageOutcome::Folded),
                MessageOutcome::Folded => assert_eq!(outcomes[result], MessageOutcome::Folded),
                other => panic!("message {index} with opaque parts became {other:?}"),
            }
        }
        // No marker carries opaque parts.
        for message in planned.messages() {
            if message
                .content
                .starts_with(compaction::transcript::MARKER_PREFIX)
            {
                assert!(message.opaque.is_empty());
            }
        }
    }
}

#[test]
fn a_system_message_between_a_call_and_its_results_is_refused_naming_it() {
    for between in [
        Message::system("late rule"),
        Message::developer("late note"),
    ] {
        let chat = Transcript::from_iter([
            Message::user("refund 42"),
            Message::assistant_with_tools("", vec![ToolCall::new("c1", "refund", json!({}))]),
            between,
            Message::tool_result("c1", "ok"),
        ]);
        let error = chat.validate().unwrap_err();
        assert!(
            matches!(
                error,
                TranscriptError::BetweenCallAndResult {
                    index: 2,
                    call_index: 1,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("message 2"), "{error}");
        let agent = Agent {
            task: "t".into(),
            chat,
        };
        let compactor = Compactor::builder().budget(2_000).build().unwrap();
        assert!(matches!(
            compactor.compact_blocking(&agent),
            Err(CompactionError::InvalidTranscript { .. })
        ));
        // And a stored transcript edited into that shape does not load.
        let json = serde_json::to_string(&agent.chat).unwrap();
        assert!(serde_json::from_str::<Transcript>(&json).is_err());
    }
}

#[test]
fn a_result_shorter_than_its_tombstone_is_never_tombstoned() {
    // Turns whose results alternate: "ok" (shorter than any tombstone) and a long log.
    let mut chat = Transcript::new();
    chat.push(Message::system("You deploy."));
    for turn in 0..40 {
        chat.push(Message::user(format!("turn {turn}")));
        let (short, long) = (format!("s{turn}"), format!("l{turn}"));
        chat.push(Message::assistant_with_tools(
            "",
            vec![
                ToolCall::new(&short, "ping", json!({})),
                ToolCall::new(&long, "read", json!({"turn": turn})),
            ],
        ));
        chat.push(Message::tool_result(&short, "ok"));
        chat.push(Message::tool_result(&long, "log line\n".repeat(60)));
        chat.push(Message::assistant(format!("Turn {turn} done.")));
    }
    let planner =
        compaction::transcript::TranscriptPlanner::new(std::sync::Arc::new(Tokenizer::Heuristic));
    let policy = compaction::transcript::TranscriptPolicy::default();
    let full = chat_tokens(chat.messages(), &Tokenizer::Heuristic);
    let mut tombstoned_long = 0;
    for budget in [full / 2, full * 2 / 3, full * 4 / 5] {
        let planned = planner
            .plan_without_summaries(&chat, &policy, budget, &Default::default())
            .unwrap();
        let outcomes = planned.outcomes(&chat);
        for (index, message) in chat.iter().enumerate() {
            if outcomes[index] != MessageOutcome::Tombstoned {
                continue;
            }
            assert!(
                message.content.len() > 100,
                "budget {budget}: `{}` ({} bytes) was tombstoned",
                message.content,
                message.content.len()
            );
            tombstoned_long += 1;
        }
    }
    assert!(tombstoned_long > 0, "the long results are tombstoned");
}
