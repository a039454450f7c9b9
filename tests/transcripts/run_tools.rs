//! `Session::run_tools` (issue 31 item 2): one call answers every pending call of a reply, in
//! the model's order: the pointer tool by the resolver, effect calls under the ledger (never
//! twice), plain tools by the author's handler, concurrently; a ledger failure leaves the rest
//! pending and a second call finishes them.

use crate::session_driver::{compactor, effect_of, fresh_agent, Agent};
use crate::session_faults::FlakyLedger;

use compaction::session::{EffectOutcome, Session, SessionError, ToolFailure, ToolRunOutcome};
use compaction::{MemoryStore, Message, ToolCall};
use serde_json::json;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

fn session(ledger: FlakyLedger) -> Session<Agent> {
    Session::builder("agent-tools")
        .compactor(compactor(4_000))
        .store(MemoryStore::new())
        .ledger(ledger)
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap()
}

fn deploy(id: &str, key: &str) -> ToolCall {
    ToolCall::new(id, "deploy", json!({"service": "api", "key": key}))
}

fn read(id: &str, path: &str) -> ToolCall {
    ToolCall::new(id, "read_file", json!({ "path": path }))
}

/// The tool results after the last assistant message, as (call id, content).
fn results(session: &Session<Agent>) -> Vec<(String, String)> {
    let messages = session.transcript().messages();
    let last_reply = messages
        .iter()
        .rposition(|m| !m.tool_calls.is_empty())
        .expect("a reply with calls");
    messages[last_reply + 1..]
        .iter()
        .map(|m| (m.tool_call_id.clone().unwrap(), m.content.clone()))
        .collect()
}

/// Pending once, then ready: lets a concurrent runner start the other calls first.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn every_kind_of_call_is_answered_in_the_models_order() {
    let mut session = session(FlakyLedger::default());
    session.push(Message::user(
        "read the notes, deploy, and read the todo list",
    ));
    session.next_request_blocking().unwrap();
    let calls = vec![
        read("c1", "notes.txt"),
        deploy("c2", "deploy-1"),
        ToolCall::new("c3", "resolve_pointer", json!({"pointer": "p999"})),
        read("c4", "todo.txt"),
        ToolCall::new("c5", "no_such_tool", json!({})),
    ];
    session
        .push_response(Message::assistant_with_tools("", calls.clone()))
        .unwrap();
    let deploys = AtomicUsize::new(0);
    let runs = session
        .run_tools_blocking(|call| {
            let deploys = &deploys;
            async move {
                match call.name.as_str() {
                    "read_file" => Ok(format!("contents of {}", call.arguments.value()?["path"])),
                    "deploy" => {
                        deploys.fetch_add(1, Ordering::SeqCst);
                        Ok("deployed api".to_owned())
                    }
                    other => Err(ToolFailure::failed(format!("no tool named {other}"))),
                }
            }
        })
        .unwrap();

    let ids: Vec<&str> = runs.iter().map(|r| r.call.id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5"]);
    assert!(matches!(runs[0].outcome, ToolRunOutcome::Answered));
    assert!(matches!(
        runs[1].outcome,
        ToolRunOutcome::Effect(EffectOutcome::Committed)
    ));
    assert!(matches!(runs[2].outcome, ToolRunOutcome::Pointer(_)));
    assert!(
        matches!(&runs[4].outcome, ToolRunOutcome::Failed { error } if error == "no tool named no_such_tool"),
        "{:?}",
        runs[4].outcome
    );
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    assert!(session.pending_calls().is_empty());
    let results = results(&session);
    let result_ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(result_ids, ["c1", "c2", "c3", "c4", "c5"]);
    assert_eq!(results[0].1, "contents of \"notes.txt\"");
    assert_eq!(results[1].1, "deployed api");
    assert_eq!(results[4].1, "error: no tool named no_such_tool");
    // The reply is answered: the next request goes out.
    session.next_request_blocking().unwrap();
}

#[test]
fn an_effect_already_committed_is_not_run_again() {
    let mut session = session(FlakyLedger::default());
    let deploys = Arc::new(AtomicUsize::new(0));
    for (turn, id) in ["c1", "c2"].into_iter().enumerate() {
        session.push(Message::user(format!("deploy, turn {turn}")));
        session.next_request_blocking().unwrap();
        session
            .push_response(Message::assistant_with_tools(
                "",
                vec![deploy(id, "deploy-7")],
            ))
            .unwrap();
        let runs = session
            .run_tools_blocking(|_| {
                let deploys = deploys.clone();
                async move {
                    deploys.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, String>("deployed".to_owned())
                }
            })
            .unwrap();
        let expected = if turn == 0 {
            EffectOutcome::Committed
        } else {
            EffectOutcome::AlreadyCommitted
        };
        match &runs[0].outcome {
            ToolRunOutcome::Effect(outcome) => assert_eq!(*outcome, expected),
            other => panic!("not an effect: {other:?}"),
        }
    }
    assert_eq!(deploys.load(Ordering::SeqCst), 1, "the deploy ran twice");
}

#[test]
fn plain_tools_of_one_reply_run_concurrently() {
    let mut session = session(FlakyLedger::default());
    session.push(Message::user("read three files"));
    session.next_request_blocking().unwrap();
    let calls = vec![read("a", "1"), read("b", "2"), read("c", "3")];
    session
        .push_response(Message::assistant_with_tools("", calls))
        .unwrap();
    // Each tool starts, yields once, then reads how many had started: run one after another,
    // the first would see 1; run together, every one sees all 3.
    let started = AtomicUsize::new(0);
    let runs = session
        .run_tools_blocking(|_| {
            let started = &started;
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                YieldOnce(false).await;
                Ok::<_, String>(format!("{} started", started.load(Ordering::SeqCst)))
            }
        })
        .unwrap();
    assert_eq!(runs.len(), 3);
    for (_, content) in results(&session) {
        assert_eq!(content, "3 started");
    }
}

#[test]
fn a_ledger_failure_leaves_the_rest_pending_and_a_second_call_finishes() {
    let ledger = FlakyLedger::default();
    let mut session = session(ledger.clone());
    session.push(Message::user("read, deploy, read"));
    session.next_request_blocking().unwrap();
    let calls = vec![
        read("c1", "a.txt"),
        deploy("c2", "deploy-9"),
        read("c3", "b.txt"),
    ];
    session
        .push_response(Message::assistant_with_tools("", calls))
        .unwrap();
    let deploys = AtomicUsize::new(0);
    let tool = |call: ToolCall| {
        let deploys = &deploys;
        async move {
            if call.name == "deploy" {
                deploys.fetch_add(1, Ordering::SeqCst);
            }
            Ok::<_, String>(format!("ran {}", call.id))
        }
    };
    ledger.record.arm();
    let error = session.run_tools_blocking(tool).unwrap_err();
    assert!(matches!(error, SessionError::Ledger { .. }), "{error:?}");
    assert_eq!(
        deploys.load(Ordering::SeqCst),
        0,
        "nothing with an effect ran"
    );
    let pending: Vec<String> = session.pending_calls().into_iter().map(|c| c.id).collect();
    assert_eq!(
        pending,
        ["c2", "c3"],
        "the calls before the failure are answered"
    );
    // Not wedged: the ledger is back, and the same call finishes the reply.
    let runs = session.run_tools_blocking(tool).unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r.call.id.as_str()).collect();
    assert_eq!(ids, ["c2", "c3"]);
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    let result_ids: Vec<String> = results(&session).into_iter().map(|(id, _)| id).collect();
    assert_eq!(result_ids, ["c1", "c2", "c3"]);
    session.next_request_blocking().unwrap();
}

#[test]
fn nothing_pending_runs_nothing() {
    let mut session = session(FlakyLedger::default());
    session.push(Message::user("hello"));
    let runs = session
        .run_tools_blocking(|_| async { Err::<String, _>("no tool should run") })
        .unwrap();
    assert!(runs.is_empty());
}
