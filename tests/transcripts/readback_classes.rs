//! What the model reads back, and what the session writes about effects, never reaches a
//! summarizer (issue 29.1): a protected value spilled behind a pointer, a user message read by
//! index from a user run, an assistant message with its thinking block read by index from a
//! fold, and the session's own answers to effect calls. Each is read or written through the
//! public API of a `Session`, folded later under a recording summarizer, and the test asserts
//! on every `SummaryRequest` the summarizer received.

use compaction::pointer_tool::{PointerToolReply, ReadBackClass};
use compaction::session::{EffectCall, EffectOutcome, Session};
use compaction::transcript::OpaquePart;
use compaction::{
    Compactable, Compactor, Effect, EffectLog, FnSummarizer, MemoryLedger, MemoryStore, Message,
    Role, Tokenizer, ToolCall, Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::{Arc, Mutex};

#[derive(Compactable, Serialize, Deserialize, Default, Debug)]
struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[protected]
    vault: String,
    #[transcript(keep_recent = 1)]
    chat: Transcript,
    #[effect(idempotent = false)]
    deploys: EffectLog,
}

/// Every text a summarizer was sent.
type Seen = Arc<Mutex<Vec<String>>>;

const VAULT: &str = "VAULT-SECRET-4111";
const USER_SECRET: &str = "USER-SECRET-0042";
const THOUGHT: &str = "THINKING-SECRET-77";
const KEY: &str = "deploy-KEY-SECRET-9";
const TARGET: &str = "svc://TARGET-SECRET";

fn open(budget: usize, store: &MemoryStore, ledger: &MemoryLedger, seen: &Seen) -> Session<Agent> {
    let seen = seen.clone();
    let summarizer = FnSummarizer::new(move |request: compaction::SummaryRequest<'_>| {
        seen.lock().unwrap().push(request.text.to_owned());
        Ok("an earlier stretch of work.".to_owned())
    });
    Session::builder("reader")
        .compactor(
            Compactor::builder()
                .budget(budget)
                .token_counter(Tokenizer::O200kBase)
                .summarizer(summarizer),
        )
        .store(store.clone())
        .ledger(ledger.clone())
        .effect_calls(|call: &ToolCall| {
            (call.name == "deploy")
                .then(|| EffectCall::new("deploys", Effect::new("deploy", TARGET, KEY)))
        })
        .open_blocking(|| Agent {
            rules: vec!["never deploy on Fridays".into()],
            vault: format!("{VAULT} {}", "account record; ".repeat(400)),
            ..Agent::default()
        })
        .unwrap()
}

/// One plain turn: a user message, a read with a large output, the model's answer.
fn plain_turn(s: &mut Session<Agent>, n: usize) {
    s.push(Message::user(format!("look at log {n}")));
    s.next_request_blocking().unwrap();
    let call = ToolCall::new(
        format!("r{n}"),
        "read_file",
        json!({"path": format!("{n}.log")}),
    );
    s.push_response(Message::assistant_with_tools("", vec![call.clone()]))
        .unwrap();
    s.answer(&call, format!("GET /health 200 ok {n}\n").repeat(120))
        .unwrap();
    s.next_request_blocking().unwrap();
    s.push_response(Message::assistant(format!("log {n} is fine")))
        .unwrap();
}

/// Calls the pointer tool with `arguments` and returns its reply.
fn read_back(s: &mut Session<Agent>, id: &str, arguments: serde_json::Value) -> PointerToolReply {
    let call = ToolCall::new(id, "resolve_pointer", arguments);
    s.push_response(Message::assistant_with_tools("", vec![call]))
        .unwrap();
    let mut replies = s.answer_pointer_calls_blocking();
    assert_eq!(replies.len(), 1);
    replies.remove(0)
}

fn handle_after<'a>(messages: &'a [Message], prefix: &str) -> Option<(&'a Message, String)> {
    messages.iter().find_map(|m| {
        let rest = m.content.strip_prefix(prefix)?;
        let handle: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        Some((m, handle))
    })
}

/// Folds until the summarizer has been asked about the turn with `id`, and returns what it saw.
fn fold_until_summarized(s: &mut Session<Agent>, seen: &Seen, id: &str, from: usize) -> String {
    for n in from..from + 40 {
        plain_turn(s, n);
        let all = seen.lock().unwrap().join("\n-----\n");
        if all.contains(&format!("\"{id}\"")) {
            return all;
        }
    }
    panic!("the turn with {id} was never folded into a summary");
}

#[test]
fn read_backs_of_protected_user_and_opaque_text_never_reach_the_summarizer() {
    read_back_protected_user_and_opaque(false);
}

/// The class is derived from what is persisted: the same holds when the read-backs are folded
/// by a process that reopened the session from its store.
#[test]
fn read_backs_folded_after_a_restart_are_still_withheld() {
    read_back_protected_user_and_opaque(true);
}

fn read_back_protected_user_and_opaque(restart: bool) {
    let (store, ledger, seen) = (MemoryStore::new(), MemoryLedger::new(), Seen::default());
    let mut s = open(3_000, &store, &ledger, &seen);

    // Turn 1: the user's secret, and the model thinking about it (a signed thinking block).
    s.push(Message::user(format!("the vault code is {USER_SECRET}")));
    s.next_request_blocking().unwrap();
    s.push_response(
        Message::assistant("noted").with_opaque([OpaquePart::anthropic_thinking(
            format!("I must remember {THOUGHT}"),
            "sig-1",
        )]),
    )
    .unwrap();
    let mut messages = Vec::new();
    for n in 0..60 {
        plain_turn(&mut s, n);
        messages = s.next_request_blocking().unwrap().messages().to_vec();
        if handle_after(&messages, "⟦compaction:users ").is_some() {
            break;
        }
    }

    // The protected field is spilled behind a pointer the window shows.
    let window = &messages[0].content;
    assert!(
        !window.contains(VAULT),
        "the vault should be spilled: {window}"
    );
    let at = window.find("store://sha256:").expect("a spilled pointer");
    let pointer = &window[at..at + "store://sha256:".len() + 64];
    // Turn 1 is folded: its user run and its fold name handles.
    let (_, users) = handle_after(&messages, "⟦compaction:users ").expect("a user run");
    let (_, fold) = handle_after(&messages, "⟦compaction:folded ").expect("a fold");

    s.push(Message::user("what did we have?"));
    s.next_request_blocking().unwrap();
    let protected = read_back(&mut s, "rb-vault", json!({ "pointer": pointer }));
    assert!(protected.message.content.contains(VAULT));
    assert_eq!(protected.class, ReadBackClass::Protected);
    s.next_request_blocking().unwrap();
    let user_index = s
        .transcript()
        .messages()
        .iter()
        .position(|m| m.role == Role::User && m.content.contains(USER_SECRET))
        .unwrap();
    let user = read_back(
        &mut s,
        "rb-user",
        json!({ "pointer": users, "index": user_index }),
    );
    assert!(
        user.message.content.contains(USER_SECRET),
        "{}",
        user.message.content
    );
    assert_eq!(user.class, ReadBackClass::User);
    s.next_request_blocking().unwrap();
    let thought = read_back(
        &mut s,
        "rb-thought",
        json!({ "pointer": fold, "index": user_index + 1 }),
    );
    assert!(
        thought.message.content.contains(THOUGHT),
        "{}",
        thought.message.content
    );
    assert_eq!(thought.class, ReadBackClass::Opaque);
    s.next_request_blocking().unwrap();
    s.push_response(Message::assistant("I have read them back"))
        .unwrap();
    if restart {
        s.push(Message::user("one more"));
        s.next_request_blocking().unwrap();
        drop(s);
        s = open(3_000, &store, &ledger, &seen);
        assert!(s.resumed_from().is_some());
        s.push_response(Message::assistant("resumed")).unwrap();
    }

    let all = fold_until_summarized(&mut s, &seen, "rb-thought", 100);
    for secret in [VAULT, USER_SECRET, THOUGHT] {
        assert!(!all.contains(secret), "{secret} reached the summarizer");
    }
}

#[test]
fn the_sessions_answers_about_effects_never_reach_the_summarizer_nor_name_what_the_window_hides() {
    let (store, ledger, seen) = (MemoryStore::new(), MemoryLedger::new(), Seen::default());
    let mut s = open(3_000, &store, &ledger, &seen);
    s.push(Message::user("deploy"));
    s.next_request_blocking().unwrap();
    let first = ToolCall::new("d1", "deploy", json!({}));
    s.push_response(Message::assistant_with_tools("", vec![first.clone()]))
        .unwrap();
    let outcome = s
        .run_effect_blocking(&first, || async { Ok::<_, String>("deployed".to_owned()) })
        .unwrap();
    assert_eq!(outcome, EffectOutcome::Committed);
    // Enough turns that the committed record may leave the window.
    for n in 0..6 {
        plain_turn(&mut s, n);
    }
    s.push(Message::user("deploy again"));
    let request = s.next_request_blocking().unwrap();
    let shown: String = request
        .messages()
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    let again = ToolCall::new("d2", "deploy", json!({}));
    s.push_response(Message::assistant_with_tools("", vec![again.clone()]))
        .unwrap();
    let outcome = s
        .run_effect_blocking(&again, || async { Ok::<_, String>("deployed".to_owned()) })
        .unwrap();
    assert_eq!(outcome, EffectOutcome::AlreadyCommitted);
    let answer = s.transcript().messages().last().unwrap().content.clone();
    assert!(answer.starts_with("Not run"), "{answer}");
    for named in [KEY, TARGET] {
        assert!(
            !answer.contains(named) || shown.contains(named),
            "the answer names {named}, which the window does not show:\n{answer}"
        );
    }
    s.next_request_blocking().unwrap();
    s.push_response(Message::assistant("it was already done"))
        .unwrap();

    let all = fold_until_summarized(&mut s, &seen, "d2", 100);
    assert!(
        !all.contains("Not run"),
        "the session's answer was summarized"
    );
    assert!(
        !all.contains(KEY) && !all.contains(TARGET),
        "the effect's key or target was summarized"
    );
}

/// Every handle (`pN`) and store pointer a request shows, in order.
fn addresses(messages: &[Message]) -> Vec<String> {
    let mut out = Vec::new();
    for message in messages {
        let text = &message.content;
        for (at, _) in text.match_indices("store://sha256:") {
            if let Some(pointer) = text.get(at..at + "store://sha256:".len() + 64) {
                out.push(pointer.to_owned());
            }
        }
        if let Some(rest) = text.strip_prefix("⟦compaction:") {
            let rest = rest.split_once(' ').map_or("", |(_, r)| r);
            let handle: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if handle.starts_with('p') {
                out.push(handle);
            }
        }
    }
    out
}

/// One step of a random agent.
#[derive(Debug, Clone)]
enum Step {
    /// A user turn with a plain read.
    Plain(usize),
    /// A user message and a model reply with a thinking block.
    Thinking,
    /// A deploy of effect `n`: `outcome` 0 runs and commits, 1 fails, 2 leaves it unknown.
    Deploy { n: u8, outcome: u8 },
    /// A read-back of the `pick`-th address the last request shows, maybe by index.
    ReadBack { pick: usize, index: Option<usize> },
    /// Save, drop the session and reopen it from the store.
    Restart,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (0usize..50).prop_map(Step::Plain),
        1 => Just(Step::Thinking),
        1 => (0u8..3, 0u8..3).prop_map(|(n, outcome)| Step::Deploy { n, outcome }),
        4 => (any::<usize>(), proptest::option::of(0usize..200))
            .prop_map(|(pick, index)| Step::ReadBack { pick, index }),
        1 => Just(Step::Restart),
    ]
}

fn open_random(
    budget: usize,
    store: &MemoryStore,
    ledger: &MemoryLedger,
    seen: &Seen,
) -> Session<Agent> {
    let seen = seen.clone();
    let summarizer = FnSummarizer::new(move |request: compaction::SummaryRequest<'_>| {
        seen.lock().unwrap().push(request.text.to_owned());
        Ok("summary.".to_owned())
    });
    Session::builder("random")
        .compactor(
            Compactor::builder()
                .budget(budget)
                .token_counter(Tokenizer::O200kBase)
                .summarizer(summarizer),
        )
        .store(store.clone())
        .ledger(ledger.clone())
        .effect_calls(|call: &ToolCall| {
            let n = call.arguments.value().ok()?["n"].as_u64()?;
            (call.name == "deploy").then(|| {
                EffectCall::new(
                    "deploys",
                    Effect::new("deploy", "svc://SECRET-TARGET", format!("SECRET-KEY-{n}")),
                )
            })
        })
        .open_blocking(|| Agent {
            rules: vec!["never deploy on Fridays".into()],
            vault: format!("SECRET-VAULT {}", "account record; ".repeat(300)),
            ..Agent::default()
        })
        .unwrap()
}

/// Runs `steps` and then enough plain turns to fold them; returns what the summarizer saw.
fn run_random(budget: usize, steps: &[Step], tail: usize) -> Vec<String> {
    let (store, ledger, seen) = (MemoryStore::new(), MemoryLedger::new(), Seen::default());
    let mut s = open_random(budget, &store, &ledger, &seen);
    let mut shown: Vec<Message> = Vec::new();
    let tail = (0..tail).map(|n| Step::Plain(1000 + n));
    for (i, step) in steps.iter().cloned().chain(tail).enumerate() {
        match step {
            Step::Plain(n) => {
                s.push(Message::user(format!("SECRET-USER-{i} look at log {n}")));
                shown = s.next_request_blocking().unwrap().messages().to_vec();
                let call = ToolCall::new(format!("r{i}"), "read_file", json!({ "n": n }));
                s.push_response(Message::assistant_with_tools("", vec![call.clone()]))
                    .unwrap();
                s.answer(&call, format!("plain output {n}\n").repeat(n * 5 + 1))
                    .unwrap();
            }
            Step::Thinking => {
                s.push(Message::user(format!("SECRET-USER-{i} think")));
                shown = s.next_request_blocking().unwrap().messages().to_vec();
                let thought = OpaquePart::anthropic_thinking(format!("SECRET-THINK-{i}"), "sig");
                s.push_response(Message::assistant("thought about it").with_opaque([thought]))
                    .unwrap();
            }
            Step::Deploy { n, outcome } => {
                s.push(Message::user(format!("SECRET-USER-{i} deploy")));
                shown = s.next_request_blocking().unwrap().messages().to_vec();
                let call = ToolCall::new(format!("d{i}"), "deploy", json!({ "n": n }));
                s.push_response(Message::assistant_with_tools("", vec![call.clone()]))
                    .unwrap();
                s.run_effect_blocking(&call, || async move {
                    match outcome {
                        0 => Ok(format!("SECRET-OUTPUT-{i}")),
                        1 => Err(compaction::session::ToolFailure::failed("SECRET-FAILED")),
                        _ => Err(compaction::session::ToolFailure::unknown("SECRET-TIMEOUT")),
                    }
                })
                .unwrap();
            }
            Step::ReadBack { pick, index } => {
                shown = s.next_request_blocking().unwrap().messages().to_vec();
                let found = addresses(&shown);
                if found.is_empty() {
                    continue;
                }
                let mut arguments = json!({ "pointer": found[pick % found.len()] });
                if let Some(index) = index {
                    arguments["index"] = json!(index);
                }
                let call = ToolCall::new(format!("rb{i}"), "resolve_pointer", arguments);
                s.push_response(Message::assistant_with_tools("", vec![call]))
                    .unwrap();
                s.answer_pointer_calls_blocking();
            }
            Step::Restart => {
                shown = s.next_request_blocking().unwrap().messages().to_vec();
                drop(s);
                s = open_random(budget, &store, &ledger, &seen);
                continue;
            }
        }
        s.next_request_blocking().unwrap();
        s.push_response(Message::assistant(format!("step {i} done")))
            .unwrap();
    }
    let _ = shown;
    let seen = seen.lock().unwrap().clone();
    seen
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]

    /// Random transcripts with read-backs of every class (spilled protected values, user
    /// messages, thinking turns, effect records and answers, plain results), folded under random
    /// budgets, across restarts: nothing marked SECRET ever reaches the summarizer.
    #[test]
    fn no_fold_sends_a_non_disposable_read_back_to_the_summarizer(
        budget in 2_500usize..6_000,
        steps in proptest::collection::vec(step(), 4..14),
    ) {
        let seen = run_random(budget, &steps, 20);
        for text in &seen {
            proptest::prop_assert!(!text.contains("SECRET"), "leaked: {}", text.chars().take(2_000).collect::<String>());
        }
    }
}

#[test]
fn an_answer_about_an_effect_the_window_never_showed_names_no_key_or_target() {
    let (store, ledger, seen) = (MemoryStore::new(), MemoryLedger::new(), Seen::default());
    let mut s = open(3_000, &store, &ledger, &seen);
    s.push(Message::user("deploy"));
    s.next_request_blocking().unwrap();
    let call = ToolCall::new("d1", "deploy", json!({}));
    s.push_response(Message::assistant_with_tools("", vec![call.clone()]))
        .unwrap();
    let outcome = s
        .run_effect_blocking(&call, || async {
            Err::<String, _>(compaction::session::ToolFailure::unknown("timed out"))
        })
        .unwrap();
    assert!(matches!(outcome, EffectOutcome::LeftUnknown { .. }));
    let answer = s.transcript().messages().last().unwrap().content.clone();
    assert!(answer.starts_with("Outcome unknown: timed out"), "{answer}");
    assert!(
        !answer.contains(KEY) && !answer.contains(TARGET),
        "{answer}"
    );
    assert!(
        answer.contains("This call's effect may or may not have happened"),
        "{answer}"
    );
}
