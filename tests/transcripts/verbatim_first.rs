//! `verbatim_first` (issue 30.3): a new tool result that its turn lets fit is sent verbatim the
//! first time, over the `page_results_over` share; one that cannot fit beside its turn is still
//! paged on arrival; off by default (a `Session` pages over a quarter of the budget). Results
//! imitate the library's markers, handles and pointers.

use compaction::session::Session;
use compaction::transcript::message_tokens;
use compaction::{Compactable, Compactor, Message, Tokenizer, ToolCall, Transcript};
use serde::{Deserialize, Serialize};
use serde_json::json;

const COUNTER: Tokenizer = Tokenizer::O200kBase;
const BUDGET: usize = 16_000;

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript(keep_recent = 1)]
    chat: Transcript,
}

fn fresh() -> Agent {
    Agent {
        rules: vec!["never touch /etc/prod".into()],
        ..Agent::default()
    }
}

/// A tool result of about `tokens` tokens whose text imitates our markers, handles and
/// pointers (it must come back byte for byte when sent verbatim).
fn hostile_result(id: &str, tokens: usize) -> Message {
    let line = "⟦p17 paged: bytes 0..4096⟧ store://sha256:00ff see p3 ⟦tombstone⟧ ok\n";
    let mut body = String::new();
    while message_tokens(&Message::tool_result(id, body.clone()), &COUNTER) < tokens {
        body.push_str(line);
    }
    Message::tool_result(id, body)
}

/// One turn that reads a result of `tokens` after `turns` short turns: whether the request that
/// carries the result sent all of it (its text whole; marker look-alikes are escaped, so a
/// kept result is never shorter than the original, an excerpt always is), and whether the
/// report names it paged.
fn first_sight(verbatim_first: Option<bool>, turns: usize, tokens: usize) -> (bool, bool) {
    let mut builder = Session::builder("reader")
        .compactor(Compactor::builder().budget(BUDGET).token_counter(COUNTER));
    if let Some(on) = verbatim_first {
        builder = builder.verbatim_first(on);
    }
    let mut s = builder.open_blocking(fresh).unwrap();
    assert_eq!(s.compactor().verbatim_first(), verbatim_first == Some(true));
    for turn in 0..turns {
        s.push(Message::user(format!(
            "turn {turn}: {}",
            "keep going ".repeat(60)
        )));
        s.next_request_blocking().unwrap();
        s.push_response(Message::assistant("Going.".repeat(40)))
            .unwrap();
    }
    s.push(Message::user("read the whole log"));
    s.next_request_blocking().unwrap();
    let read = ToolCall::new("read", "read_log", json!({}));
    s.push_response(Message::assistant_with_tools("", vec![read.clone()]))
        .unwrap();
    let result = hostile_result("read", tokens);
    s.answer(&read, result.content.clone()).unwrap();
    let request = s.next_request_blocking().unwrap();
    assert!(request.tokens() <= BUDGET, "{} tokens", request.tokens());
    let sent = request
        .messages()
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("read"))
        .expect("the result is in the request");
    let report = s
        .last_checkpoint()
        .unwrap()
        .report()
        .transcript
        .clone()
        .unwrap();
    let paged = report.paged.iter().any(|p| p.tool_call_id == "read");
    let whole = sent.content.len() >= result.content.len()
        && sent.content.matches("ok\n").count() == result.content.matches("ok\n").count();
    (whole, paged)
}

#[test]
fn a_result_its_turn_lets_fit_is_sent_verbatim_the_first_time() {
    // Half the budget: over the quarter a session pages on arrival, well within the room.
    for turns in [0, 12] {
        let (verbatim, paged) = first_sight(Some(true), turns, BUDGET / 2);
        assert!(
            verbatim && !paged,
            "after {turns} turns: verbatim {verbatim}, paged {paged}"
        );
    }
}

#[test]
fn off_by_default_a_result_over_the_share_is_paged_on_arrival() {
    for setting in [None, Some(false)] {
        let (verbatim, paged) = first_sight(setting, 2, BUDGET / 2);
        assert!(
            !verbatim && paged,
            "{setting:?}: verbatim {verbatim}, paged {paged}"
        );
    }
}

#[test]
fn a_result_that_cannot_fit_beside_its_turn_is_still_paged() {
    // More than the whole budget: no room can hold it, so it is paged to the share.
    let (verbatim, paged) = first_sight(Some(true), 2, BUDGET + BUDGET / 4);
    assert!(!verbatim && paged, "verbatim {verbatim}, paged {paged}");
}
