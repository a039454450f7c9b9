//! The guide's rules in numbers, continued (see `guide_numbers.rs`): the session's marks, its
//! paging share and its window share (docs/sessions.md).

use crate::guide_numbers::{result_of, stated, COUNTER};
use compaction::session::Session;
use compaction::transcript::message_tokens;
use compaction::{
    Compactable, Compactor, Effect, EffectLedger, EffectLog, MemoryLedger, Message, ToolCall,
    Transcript, SESSION_HIGH_WATER, SESSION_LOW_WATER, SESSION_PAGE_RESULTS_OVER,
    SESSION_WINDOW_SHARE,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// docs/sessions.md, "A request that stays cacheable": the marks, the page share, the window
// share.
// ---------------------------------------------------------------------------------------------

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    chat: Transcript,
    #[effect(idempotent = false)]
    writes: EffectLog,
}

fn fresh() -> Agent {
    Agent {
        rules: vec!["never touch /etc/prod".into()],
        ..Agent::default()
    }
}

fn session(budget: usize) -> compaction::SessionBuilder<Agent> {
    Session::builder("guide").compactor(Compactor::builder().budget(budget).token_counter(COUNTER))
}

/// docs/sessions.md:146-147: "A request grows by appending until it passes the high-water mark
/// (90% of the budget by default), then one compaction point brings it down to the low-water
/// mark (50%)".
#[test]
fn a_session_appends_up_to_90_percent_then_compacts_to_about_50() {
    stated(
        "docs/sessions.md",
        "until it passes the high-water mark (90% of the budget by default), then one compaction \
         point brings it down to the low-water mark (50%)",
    );
    assert_eq!((SESSION_HIGH_WATER, SESSION_LOW_WATER), (0.9, 0.5));
    const BUDGET: usize = 16_000;
    let mut s = session(BUDGET).open_blocking(fresh).unwrap();
    assert_eq!(s.compactor().water_marks(), (0.9, 0.5));
    let high = BUDGET * 9 / 10;
    let mut previous: Option<(usize, usize)> = None; // (its tokens, transcript length)
    let mut step = |s: &mut Session<Agent>| {
        let request = s.next_request_blocking().unwrap();
        let len = s.transcript().len();
        let new = &s.transcript().messages()[previous.map_or(0, |p| p.1)..];
        let appended = previous.map(|p| {
            p.0 + new
                .iter()
                .map(|m| message_tokens(m, &COUNTER))
                .sum::<usize>()
        });
        previous = Some((request.tokens(), len));
        (request, appended)
    };
    for turn in 0..40 {
        s.push(Message::user(format!(
            "turn {turn}: run the tests of module {turn}"
        )));
        let (request, _) = step(&mut s);
        assert!(!request.is_compaction_point() || turn == 0);
        let id = format!("call_{turn}");
        let run = ToolCall::new(&id, "run_tests", json!({ "module": turn }));
        s.push_response(Message::assistant_with_tools("", vec![run.clone()]))
            .unwrap();
        s.answer(&run, result_of(&id, 600).content).unwrap();
        let (request, appended) = step(&mut s);
        let appended = appended.unwrap();
        if !request.is_compaction_point() {
            assert!(request.tokens() <= high, "{} > {high}", request.tokens());
            assert_eq!(
                request.tokens(),
                appended,
                "an append costs its new messages"
            );
        } else {
            // The previous request plus the new messages would have passed 90%; the point
            // brings the request down to about half (whole turns go, oldest first).
            assert!(appended > high, "{appended} <= {high}: compacted too early");
            let tokens = request.tokens();
            assert!(tokens <= BUDGET / 2, "{tokens} > 50%");
            assert!(
                tokens > BUDGET * 4 / 10,
                "{tokens} <= 40%: more than the low-water mark needs"
            );
            return;
        }
        s.push_response(Message::assistant(format!("Module {turn} passes.")))
            .unwrap();
        step(&mut s);
    }
    panic!("no compaction point in 40 turns");
}

/// docs/sessions.md:151-157: "A new tool result over a quarter of the budget
/// (`SessionBuilder::page_results_over(share)`, default `SESSION_PAGE_RESULTS_OVER`) is sent as
/// a head and a tail excerpt with its handle ..., still as an append"; a plain `Compactor`
/// leaves it off.
#[test]
fn a_session_pages_a_result_over_a_quarter_of_the_budget_on_arrival() {
    stated(
        "docs/sessions.md",
        "A new tool result over a quarter of the budget (`SessionBuilder::page_results_over(share)`, \
         default `SESSION_PAGE_RESULTS_OVER`) is sent as a head and a tail excerpt",
    );
    stated("docs/sessions.md", "A plain `Compactor` leaves it off");
    assert_eq!(SESSION_PAGE_RESULTS_OVER, 0.25);
    const BUDGET: usize = 16_000;
    let plain = Compactor::builder().budget(BUDGET).build().unwrap();
    assert_eq!(plain.page_results_over(), None);
    let mut s = session(BUDGET).open_blocking(fresh).unwrap();
    let cap = BUDGET / 4;
    assert_eq!(s.compactor().page_results_over(), Some(cap));
    s.push(Message::user("run the suite"));
    s.next_request_blocking().unwrap();
    // One token under the cap is sent verbatim; one over is paged, and the request appends.
    for (id, tokens, paged) in [("at_cap", cap, false), ("over_cap", cap + 1, true)] {
        let run = ToolCall::new(id, "run_suite", json!({}));
        s.push_response(Message::assistant_with_tools("", vec![run.clone()]))
            .unwrap();
        let result = result_of(id, tokens);
        s.answer(&run, result.content.clone()).unwrap();
        let request = s.next_request_blocking().unwrap();
        assert!(!request.is_compaction_point(), "{id}: still an append");
        let sent = request.messages().last().unwrap();
        assert_eq!(sent.tool_call_id.as_deref(), Some(id));
        let report = s
            .last_checkpoint()
            .unwrap()
            .report()
            .transcript
            .clone()
            .unwrap();
        let named = report.paged.iter().any(|p| p.tool_call_id == id);
        assert_eq!(named, paged, "{id}: {report:?}");
        assert_eq!(sent.content == result.content, !paged, "{id}");
        assert!(message_tokens(sent, &COUNTER) <= cap, "{id}");
        s.push_response(Message::assistant("Done.")).unwrap();
        s.push(Message::user("and again"));
        s.next_request_blocking().unwrap();
    }
}

/// docs/sessions.md:154-155: "Without it, one result of half the budget fills the room between
/// the marks at once, and nearly every request becomes a compaction point": a session just past
/// its low-water mark that receives such a result compacts at once with paging off, and only
/// appends with the default share.
#[test]
fn half_the_budget_fills_the_room_between_the_marks() {
    stated(
        "docs/sessions.md",
        "Without it, one result of half the budget fills the room between the marks at once, and \
         nearly every request becomes a compaction point",
    );
    const BUDGET: usize = 16_000;
    let after_half = |share: f64| {
        let mut s = session(BUDGET)
            .page_results_over(share)
            .open_blocking(fresh)
            .unwrap();
        // Turns of 300 tokens until the request is just past the low-water mark.
        for turn in 0.. {
            s.push(Message::user(format!("turn {turn}: read part {turn}")));
            s.next_request_blocking().unwrap();
            let id = format!("call_{turn}");
            let read = ToolCall::new(&id, "read_log", json!({ "part": turn }));
            s.push_response(Message::assistant_with_tools("", vec![read.clone()]))
                .unwrap();
            s.answer(&read, result_of(&id, 300).content).unwrap();
            let request = s.next_request_blocking().unwrap();
            assert!(!request.is_compaction_point());
            s.push_response(Message::assistant("Read.")).unwrap();
            if request.tokens() > BUDGET / 2 {
                break;
            }
        }
        s.push(Message::user("now the whole log"));
        s.next_request_blocking().unwrap();
        let read = ToolCall::new("whole", "read_log", json!({}));
        s.push_response(Message::assistant_with_tools("", vec![read.clone()]))
            .unwrap();
        s.answer(&read, result_of("whole", BUDGET / 2).content)
            .unwrap();
        s.next_request_blocking().unwrap().is_compaction_point()
    };
    assert!(after_half(1.0), "verbatim, it passes the high-water mark");
    assert!(
        !after_half(SESSION_PAGE_RESULTS_OVER),
        "paged to its share, it still appends"
    );
}

/// A ledger of 400 committed writes and one whose outcome is unknown, in scope `writes`.
fn long_ledger() -> MemoryLedger {
    let ledger = MemoryLedger::new();
    compaction::block_on(async {
        for i in 0..400 {
            let key = format!("write:src/module_{i}.rs#{i}");
            let effect = Effect::new("write_file", "repo", &key);
            ledger.record("writes", &effect).await.unwrap();
            ledger.begin("writes", &key).await.unwrap();
            ledger.commit("writes", &key).await.unwrap();
        }
        let effect = Effect::new("write_file", "repo", "write:deploy/prod.yaml");
        ledger.record("writes", &effect).await.unwrap();
        ledger
            .begin("writes", "write:deploy/prod.yaml")
            .await
            .unwrap();
    });
    ledger
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Writer {
    #[protected(pin)]
    rules: Vec<String>,
    /// About 5,000 tokens: within a tenth of 64k, not within a twentieth.
    #[protected]
    notes: String,
    /// About 4,000 tokens: within a tenth of 64k beside `notes` only if the share were a fifth.
    #[protected]
    plan: String,
    #[transcript]
    chat: Transcript,
    #[effect(idempotent = false)]
    writes: EffectLog,
}

fn writer() -> Writer {
    Writer {
        rules: vec!["never touch /etc/prod".into()],
        notes: format!("notes:{}", " ok".repeat(5_000)),
        plan: format!("plan:{}", " go".repeat(4_000)),
        ..Writer::default()
    }
}

/// docs/sessions.md:161-166: "The window takes at most a tenth of the budget beyond its floor
/// (`SessionBuilder::window_share(share)`, default `SESSION_WINDOW_SHARE`): pinned fields and
/// live effects are always shown, and past the share settled effect records wait behind their
/// pointer"; a plain `Compactor` sets no cap.
#[test]
fn a_sessions_window_takes_at_most_a_tenth_of_the_budget() {
    stated(
        "docs/sessions.md",
        "The window takes at most a tenth of the budget beyond its floor \
         (`SessionBuilder::window_share(share)`, default `SESSION_WINDOW_SHARE`)",
    );
    stated("docs/sessions.md", "a plain `Compactor` sets no such cap");
    assert_eq!(SESSION_WINDOW_SHARE, 0.1);
    const BUDGET: usize = 64_000;
    let plain = Compactor::builder().budget(BUDGET).build().unwrap();
    assert_eq!(plain.window_share(), None);
    let window = |share: Option<f64>| {
        let builder = Session::builder("guide")
            .compactor(Compactor::builder().budget(BUDGET).token_counter(COUNTER))
            .ledger(long_ledger());
        let builder = match share {
            Some(share) => builder.window_share(share),
            None => builder,
        };
        let mut s = builder.open_blocking(writer).unwrap();
        if share.is_none() {
            assert_eq!(s.compactor().window_share(), Some(BUDGET / 10));
        }
        s.push(Message::user("what did we write?"));
        let request = s.next_request_blocking().unwrap();
        let window = request.messages()[0].clone();
        assert!(window.content.contains("never touch /etc/prod"), "pinned");
        assert!(window.content.contains("write:deploy/prod.yaml"), "live");
        window
    };
    // Left to grow, the window shows everything.
    let free = window(Some(1.0));
    assert!(message_tokens(&free, &COUNTER) > BUDGET / 4);
    // With a session's share, it shows what fits a tenth, in the planning order: `notes`,
    // not `plan` beside it, nor the settled records.
    let capped = window(None);
    let tokens = message_tokens(&capped, &COUNTER);
    assert!(tokens <= BUDGET / 10, "{tokens} > a tenth of {BUDGET}");
    assert!(capped.content.contains("notes:"), "a tenth holds the notes");
    assert!(
        !capped.content.contains("plan:"),
        "a tenth does not hold the plan too"
    );
    assert!(!capped.content.contains("write:src/module_0.rs"));
}
