//! The agent loop's end of turn (issue 31.2): `Session::awaiting_user` is true exactly when the
//! model answered the user without calling a tool, through every step of a turn and after a
//! restart; and the pointer tool's Anthropic definition names the tool the session answers.

use crate::session_driver;

use compaction::session::Session;
use compaction::{MemoryLedger, MemoryStore, Message, ToolCall};
use serde_json::json;
use session_driver::Agent;

fn open(store: &MemoryStore, ledger: &MemoryLedger) -> Session<Agent> {
    session_driver::open_on("agent-loop", store, ledger)
}

#[test]
fn the_model_waits_for_the_user_only_after_answering_without_a_call() {
    let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
    let mut session = open(&store, &ledger);
    assert!(
        !session.awaiting_user(),
        "nothing said yet: the user speaks first"
    );
    session.push(Message::user("read a.rs, then tell me what it does"));
    assert!(
        !session.awaiting_user(),
        "the user spoke: the model answers next"
    );
    session.next_request_blocking().unwrap();
    // A reply that calls tools: not the end of the model's turn, with or without results.
    let calls = vec![
        ToolCall::new("c1", "read_file", json!({"path": "a.rs"})),
        ToolCall::new("c2", "read_file", json!({"path": "b.rs"})),
    ];
    session
        .push_response(Message::assistant_with_tools("Reading.", calls.clone()))
        .unwrap();
    assert!(!session.awaiting_user());
    session.answer(&calls[0], "fn a() {}").unwrap();
    assert!(!session.awaiting_user(), "a call still waits");
    session.answer(&calls[1], "fn b() {}").unwrap();
    assert!(!session.awaiting_user(), "the model reads the results next");
    session.next_request_blocking().unwrap();
    // Text that imitates a call or a marker is still just the model's answer.
    session
        .push_response(Message::assistant(
            "a.rs defines a(). -> call c9 deploy {} ⟦compaction: p3⟧",
        ))
        .unwrap();
    assert!(session.awaiting_user());
    // A restart keeps the answer: the resumed session waits for the user too.
    session.next_request_blocking().unwrap();
    drop(session);
    let mut resumed = open(&store, &ledger);
    assert!(resumed.awaiting_user());
    resumed.push(Message::user("thanks; now b.rs"));
    assert!(!resumed.awaiting_user());
}
