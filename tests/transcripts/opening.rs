//! The opening (`keep_first`, issue 30): a session's first messages stay verbatim at the start
//! of every request, and its stable prefix covers them; an opening the soft steps cannot keep
//! is given up, never paid for by the recent turns or by a refusal. What it reads from
//! Anthropic's prompt cache is measured in `tests/anthropic_session.rs`.

use crate::session_driver::family::play_member;
use crate::session_driver::{fresh_agent, Agent};
use compaction::session::Session;
use compaction::{Compactor, Message, Tokenizer, ToolCall};
use serde_json::json;

/// Every request once the session has its first four messages starts, after the window, with
/// them as they are, and its stable prefix covers them, compaction points included.
#[test]
fn the_first_messages_stay_in_place_across_compaction_points() {
    let requests = play_member("coding-60-s1-k1", 16_000, Some(4));
    let points = requests
        .iter()
        .filter(|played| played.request.is_compaction_point())
        .count();
    assert!(points >= 10, "{points} compaction points");
    let mut checked = 0;
    let mut first_page: Option<String> = None;
    for (i, played) in requests.iter().enumerate() {
        let (request, transcript) = (&played.request, &played.transcript);
        if transcript.len() < 5 {
            continue;
        }
        // The first tool result is paged on arrival at this budget: it stays that page.
        let first = &request.messages()[1..5];
        assert_eq!(&first[..3], &transcript[..3], "request {i}");
        assert_eq!(first[3].tool_call_id, transcript[3].tool_call_id);
        let page = first_page.get_or_insert_with(|| first[3].content.clone());
        assert_eq!(&first[3].content, page, "request {i}");
        assert!(request.stable_prefix_len() >= 5, "request {i}");
        checked += 1;
    }
    assert!(checked > 100, "{checked} requests checked");
}

/// A first user message too large to keep beside the newest turn: a point that would keep the
/// opening needs a hard step, so the opening is given up at every point, and every request is
/// the one `keep_first(0)` makes (the user message spilled to its run), refusals included.
#[test]
fn an_opening_the_soft_steps_cannot_keep_changes_nothing() {
    let run = |keep_first: usize, budget: usize| -> Vec<Result<Vec<Message>, String>> {
        let compactor = Compactor::builder()
            .budget(budget)
            .token_counter(Tokenizer::Heuristic);
        let mut session = Session::builder("large-opening")
            .compactor(compactor)
            .keep_first(keep_first)
            .open_blocking(fresh_agent)
            .expect("a fresh session opens");
        let mut sent = Vec::new();
        let task = format!(
            "Migrate every table. {}",
            "The schema is as follows. ".repeat(260)
        );
        session.state_mut().chat.push(Message::user(task));
        for turn in 0..10 {
            let id = format!("call-{turn}");
            let call = ToolCall::new(&id, "read_file", json!({"path": "a.rs"}));
            let state: &mut Agent = session.state_mut();
            state
                .chat
                .push(Message::assistant_with_tools("Reading.", vec![call]));
            let lines = format!("line {turn} of the file\n").repeat(120);
            state.chat.push(Message::tool_result(&id, lines));
            state.chat.push(Message::user(format!("Next step {turn}.")));
            sent.push(
                session
                    .next_request_blocking()
                    .map(|request| request.messages().to_vec())
                    .map_err(|refused| refused.to_string()),
            );
        }
        sent
    };
    let (mut refused, mut sent) = (0, 0);
    for budget in [200, 300, 500, 1_000, 1_800, 2_000, 2_200] {
        let without = run(0, budget);
        let with = run(4, budget);
        let differs = (0..without.len()).find(|&i| with[i] != without[i]);
        if let Some(i) = differs {
            eprintln!(
                "with:\n{}\nwithout:\n{}",
                outline(&with[i]),
                outline(&without[i])
            );
        }
        assert_eq!(
            differs, None,
            "budget {budget}: request {differs:?} differs"
        );
        refused += without.iter().filter(|r| r.is_err()).count();
        sent += without.iter().filter(|r| r.is_ok()).count();
    }
    // Both sides of the comparison happened: refusals and requests.
    assert!(refused >= 5 && sent >= 30, "{refused} refused, {sent} sent");
}

/// A request's messages, a line each (role and the content's start), or its refusal.
fn outline(request: &Result<Vec<Message>, String>) -> String {
    match request {
        Ok(messages) => messages
            .iter()
            .map(|m| {
                let start: String = m.content.chars().take(90).collect();
                format!("{:?}: {start}", m.role)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(refused) => refused.clone(),
    }
}
