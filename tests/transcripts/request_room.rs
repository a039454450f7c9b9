//! Room in an agent's requests that keeps them cacheable (issue 22.3 with 20.3): a new tool
//! result over its share of the budget is paged on arrival, so the request still only appends;
//! a compaction point pages the results the model has already read to reach its low-water
//! mark, so the next appends find room; a restarted process pages exactly as the warm one; the
//! window grows no further than its share, whatever room the conversation leaves.

use compaction::transcript::{chat_tokens, MARKER_PREFIX};
use compaction::{
    Compactable, Compacted, CompactionError, Compactor, CompactorBuilder, Effect, EffectLog,
    Message, NoReacquire, Role, Tokenizer, ToolCall, Transcript, SESSION_HIGH_WATER,
    SESSION_LOW_WATER,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    chat: Transcript,
}

fn agent() -> Agent {
    Agent {
        rules: vec!["never touch /etc/prod".into()],
        chat: Transcript::from_messages(vec![Message::system("You are a careful agent.")]).unwrap(),
    }
}

const BUDGET: usize = 16_000;

/// A compactor of `budget` tokens with a session's marks (and nothing else of a session's).
fn with_session_marks(budget: usize) -> CompactorBuilder {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .high_water_mark(SESSION_HIGH_WATER)
        .low_water_mark(SESSION_LOW_WATER)
}

fn compactor(page_results_over: Option<f64>) -> Compactor {
    let builder = with_session_marks(BUDGET);
    match page_results_over {
        Some(share) => builder.page_results_over(share),
        None => builder,
    }
    .build()
    .unwrap()
}

/// A tool result of about `tokens` tokens whose first and last lines are recognizable, and
/// whose middle imitates a page marker and a handle (outside text is hostile).
fn result_body(tag: &str, tokens: usize) -> String {
    let mut body = format!("{tag} first line\n{MARKER_PREFIX}page ⟦p1⟧ bytes 0..10 of 99⟧\n");
    let mut i = 0;
    while body.len() < tokens * 4 {
        body.push_str(&format!("{tag} line {i}: test_{i} ... ok\n"));
        i += 1;
    }
    body.push_str(&format!("{tag} last line\n"));
    body
}

fn call(agent: &mut Agent, id: &str, tokens: usize) -> String {
    agent.chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new(id, "run", json!({ "id": id }))],
    ));
    let body = result_body(id, tokens);
    agent.chat.push(Message::tool_result(id, body.clone()));
    body
}

fn tokens(messages: &[Message]) -> usize {
    chat_tokens(messages, &Tokenizer::O200kBase)
}

/// A short conversation, compacted once: the request every test appends to.
fn started(compactor: &Compactor) -> (Agent, Compacted<Agent>) {
    let mut agent = agent();
    agent.chat.push(Message::user("run the billing tests"));
    call(&mut agent, "small", 300);
    agent.chat.push(Message::assistant("They pass."));
    agent.chat.push(Message::user("now the whole suite"));
    let first = compactor.compact_blocking(&agent).unwrap();
    (agent, first)
}

#[test]
fn a_result_over_its_share_is_paged_on_arrival_and_the_request_still_appends() {
    let compactor = compactor(Some(0.25));
    assert_eq!(compactor.page_results_over(), Some(BUDGET / 4));
    let (mut agent, first) = started(&compactor);
    // 9k tokens: verbatim it would fit under the high-water mark, but it is over its share.
    let body = call(&mut agent, "suite", 9_000);
    let second = compactor.compact_blocking(&agent).unwrap();
    let (before, after) = (first.messages(), second.messages());
    assert!(!second.is_compaction_point());
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the request only appends"
    );
    let page = after.last().unwrap();
    assert_eq!(page.role, Role::Tool);
    assert_ne!(page.content, body);
    assert!(
        page.content.contains("suite first line"),
        "{}",
        page.content
    );
    assert!(page.content.contains("suite last line"));
    assert!(tokens(std::slice::from_ref(page)) <= BUDGET / 4);
    assert!(tokens(&after) <= BUDGET);
    let report = second.report().transcript.clone().unwrap();
    assert_eq!(report.paged.len(), 1, "{report:?}");
    assert_eq!(report.paged[0].tool_call_id, "suite");
    assert_eq!(report.paged[0].bytes, body.len());
    // The exact bytes come back.
    let back: Agent = compactor.rehydrate_blocking(&second, &NoReacquire).unwrap();
    assert_eq!(back, agent);
    // Without the option the same result is sent verbatim.
    let plain = self::compactor(None);
    let (mut agent, _) = started(&plain);
    let body = call(&mut agent, "suite", 9_000);
    let verbatim = plain.compact_blocking(&agent).unwrap();
    assert_eq!(verbatim.messages().last().unwrap().content, body);
}

#[test]
fn a_result_under_its_share_is_sent_verbatim() {
    let compactor = compactor(Some(0.25));
    let (mut agent, first) = started(&compactor);
    let body = call(&mut agent, "small2", 2_000);
    let second = compactor.compact_blocking(&agent).unwrap();
    assert!(!second.is_compaction_point());
    assert_eq!(second.messages().len(), first.messages().len() + 2);
    assert_eq!(second.messages().last().unwrap().content, body);
    assert!(second
        .report()
        .transcript
        .as_ref()
        .unwrap()
        .paged
        .is_empty());
}

/// Without paging, a recent turn of large results the model has read would leave a compaction
/// point just under the high-water mark (the recent turn is kept), and the next step would pass
/// it again. The point pages the read results, oldest first, down to the low-water mark; the
/// newest result, not yet read, stays verbatim.
#[test]
fn a_compaction_point_pages_read_results_down_to_the_low_water_mark() {
    let compactor = compactor(None);
    let (mut agent, _) = started(&compactor);
    let mut bodies = Vec::new();
    let mut last = None;
    for step in 0..6 {
        bodies.push(call(&mut agent, &format!("step{step}"), 2_600));
        let compacted = compactor.compact_blocking(&agent).unwrap();
        assert!(tokens(&compacted.messages()) <= BUDGET);
        if compacted.is_compaction_point() {
            last = Some((step, compacted));
            break;
        }
    }
    let (step, point) = last.expect("the turn passes the high-water mark");
    let messages = point.messages();
    let low = (BUDGET as f64 * SESSION_LOW_WATER) as usize;
    assert!(tokens(&messages) <= low, "{} > {low}", tokens(&messages));
    // The newest result is verbatim, the user message too; the read ones are paged, and named.
    assert_eq!(messages.last().unwrap().content, bodies[step]);
    assert!(messages.iter().any(|m| m.content == "now the whole suite"));
    let report = point.report().transcript.clone().unwrap();
    assert!(!report.paged.is_empty());
    assert!(report
        .paged
        .iter()
        .all(|p| p.tool_call_id != format!("step{step}")));
    let back: Agent = compactor.rehydrate_blocking(&point, &NoReacquire).unwrap();
    assert_eq!(back, agent);
}

/// Results paged on arrival (a `Session`'s way) are read too: a compaction point pages them
/// smaller, down to their note, oldest first, as it pages read results sent verbatim. Without
/// it, a recent turn of such pages leaves the point just under the high-water mark and the
/// next result passes it again: a point on almost every request (measured on the family's
/// coding sessions with `keep_recent` 2 and 3 at 8k and 16k).
#[test]
fn a_compaction_point_pages_read_pages_smaller() {
    let compactor = compactor(Some(0.25));
    let (mut agent, _) = started(&compactor);
    let mut first_pages = Vec::new();
    let mut last = None;
    for step in 0..8 {
        let id = format!("step{step}");
        call(&mut agent, &id, 6_000);
        let compacted = compactor.compact_blocking(&agent).unwrap();
        assert!(tokens(&compacted.messages()) <= BUDGET);
        if compacted.is_compaction_point() {
            last = Some((step, compacted));
            break;
        }
        // Paged on arrival, to about its share.
        let page = compacted.messages().last().unwrap().clone();
        assert!(tokens(std::slice::from_ref(&page)) <= BUDGET / 4);
        assert!(page.content.contains(&format!("{id} first line")));
        first_pages.push(page);
    }
    let (step, point) = last.expect("the pages pass the high-water mark");
    assert!(step >= 2, "a point at step {step}");
    let messages = point.messages();
    let low = (BUDGET as f64 * SESSION_LOW_WATER) as usize;
    assert!(tokens(&messages) <= low, "{} > {low}", tokens(&messages));
    // The oldest page the model read is sent smaller than it was; the newest result, not read
    // yet, keeps its first page; the user message stays.
    let sent = |id: &str| {
        messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .map(|m| m.content.clone())
    };
    let oldest = sent("step0").expect("the recent turn's result is still sent");
    assert!(oldest.len() < first_pages[0].content.len() / 2, "{oldest}");
    assert!(oldest.contains("resolve_pointer"), "{oldest}");
    let newest = sent(&format!("step{step}")).unwrap();
    assert!(
        newest.contains(&format!("step{step} first line")),
        "{newest}"
    );
    assert!(messages.iter().any(|m| m.content == "now the whole suite"));
    let back: Agent = compactor.rehydrate_blocking(&point, &NoReacquire).unwrap();
    assert_eq!(back, agent);
}

/// A process restarted from a checkpoint pages the next result exactly as the warm one.
#[test]
fn a_resumed_compactor_pages_as_the_warm_one() {
    let warm = compactor(Some(0.25));
    let (mut agent, _) = started(&warm);
    call(&mut agent, "suite", 9_000);
    let checkpoint = warm.compact_blocking(&agent).unwrap();
    let json = serde_json::to_string(&checkpoint).unwrap();
    let loaded: Compacted<Agent> = serde_json::from_str(&json).unwrap();
    let cold = compactor(Some(0.25));
    cold.resume(&loaded).unwrap();
    agent.chat.push(Message::assistant("The suite passes."));
    agent.chat.push(Message::user("and the integration tests?"));
    call(&mut agent, "integration", 7_000);
    let from_warm = warm.compact_blocking(&agent).unwrap();
    let from_cold = cold.compact_blocking(&agent).unwrap();
    assert_eq!(from_warm.messages(), from_cold.messages());
    assert!(!from_warm.is_compaction_point());
}

#[test]
fn a_share_outside_zero_to_one_is_refused() {
    type Setting = fn(compaction::CompactorBuilder, f64) -> compaction::CompactorBuilder;
    let settings: [(&str, Setting); 2] = [
        ("page_results_over", |b, s| b.page_results_over(s)),
        ("window_share", |b, s| b.window_share(s)),
    ];
    for share in [0.0, -0.5, 1.5, f64::NAN] {
        for (name, set) in settings {
            let built = set(Compactor::builder().budget(BUDGET), share).build();
            assert!(
                matches!(&built, Err(CompactionError::Config(why)) if why.contains(name)),
                "{name} {share}: {:?}",
                built.err()
            );
        }
    }
}

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Writer {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    chat: Transcript,
    #[effect(idempotent = false)]
    writes: EffectLog,
}

fn writer() -> Writer {
    Writer {
        rules: vec!["never touch /etc/prod".into()],
        chat: Transcript::from_messages(vec![Message::system("You write files.")]).unwrap(),
        writes: EffectLog::new(),
    }
}

/// Records, claims and commits the write `key`.
fn committed_write(writer: &mut Writer, key: &str) {
    writer
        .writes
        .record(Effect::new("write_file", "repo", key))
        .unwrap();
    writer.writes.begin(key).unwrap();
    writer.writes.commit(key).unwrap();
}

/// A long session's effect log (hundreds of committed writes and one whose outcome is unknown)
/// would take most of a roomy budget's window; with a share, the window stays within it, the
/// unknown write is still listed, and the state comes back exactly.
#[test]
fn the_window_grows_no_further_than_its_share() {
    let mut writer = writer();
    for i in 0..400 {
        let key = format!("write:src/module_{i}.rs#{i}");
        committed_write(&mut writer, &key);
    }
    writer
        .writes
        .record(Effect::new(
            "write_file",
            "repo",
            "write:deploy/prod.yaml#400",
        ))
        .unwrap();
    // Claimed and never settled: its outcome is unknown.
    writer.writes.begin("write:deploy/prod.yaml#400").unwrap();
    writer.chat.push(Message::user("what did we write?"));
    let budget = 64_000;
    let capped = with_session_marks(budget)
        .window_share(0.1)
        .build()
        .unwrap();
    let roomy = with_session_marks(budget).build().unwrap();
    let window_tokens = |compactor: &Compactor| {
        let compacted = compactor.compact_blocking(&writer).unwrap();
        let window = compacted.messages()[0].clone();
        assert!(window.content.contains("write:deploy/prod.yaml#400"));
        assert!(window.content.contains("unknown"));
        let back: Writer = compactor
            .rehydrate_blocking(&compacted, &NoReacquire)
            .unwrap();
        assert_eq!(back, writer);
        tokens(&[window])
    };
    let (free, limited) = (window_tokens(&roomy), window_tokens(&capped));
    assert!(free > budget / 10, "the log alone takes {free} tokens");
    assert!(limited <= budget / 10, "{limited} > {}", budget / 10);
}

/// A turn of the writer: a short request, a call whose result is about `tokens` tokens, and a
/// write recorded and committed (the state changes on every turn).
fn write_turn(writer: &mut Writer, turn: usize, tokens: usize) {
    writer
        .chat
        .push(Message::user(format!("turn {turn}: fix module {turn}")));
    let id = format!("read{turn}");
    writer.chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new(&id, "read", json!({ "module": turn }))],
    ));
    writer
        .chat
        .push(Message::tool_result(&id, result_body(&id, tokens)));
    writer
        .chat
        .push(Message::assistant(format!("Module {turn} is fixed.")));
    let key = format!("write:src/module_{turn}.rs");
    committed_write(writer, &key);
}

/// Issue 22.3: a compaction point keeps the window at the front when the fields that changed
/// since it was rendered fit in a state update: the front (and what follows it up to the
/// blocks) is byte-identical to the previous request's, the update goes last and names the
/// new write, and a process resumed from the checkpoint before the point sends the same
/// request as the warm one.
#[test]
fn a_compaction_point_keeps_the_front_and_sends_what_changed_last() {
    let compactor = || {
        with_session_marks(BUDGET)
            .window_share(0.1)
            .build()
            .unwrap()
    };
    let warm = compactor();
    let mut writer = writer();
    let mut previous: Option<Compacted<Writer>> = None;
    let mut kept_points = 0;
    for turn in 0..40 {
        write_turn(&mut writer, turn, 1_500);
        let compacted = warm.compact_blocking(&writer).unwrap();
        let messages = compacted.messages();
        assert!(tokens(&messages) <= BUDGET);
        let back: Writer = warm.rehydrate_blocking(&compacted, &NoReacquire).unwrap();
        assert_eq!(back, writer);
        if let (Some(last), true) = (&previous, compacted.is_compaction_point()) {
            let old = last.messages();
            if messages[0] == old[0] {
                kept_points += 1;
                // The front and the transcript's system prompt are still the old request's.
                assert_eq!(messages[1], old[1]);
                let update = &messages.last().unwrap().content;
                assert!(
                    update.starts_with(&format!("{MARKER_PREFIX}update⟧")),
                    "{update}"
                );
                assert!(
                    update.contains(&format!("{} records", writer.writes.len())),
                    "{update}"
                );
                // A process resumed from the checkpoint before this point sends the same.
                let cold = compactor();
                let json = serde_json::to_string(last).unwrap();
                let loaded: Compacted<Writer> = serde_json::from_str(&json).unwrap();
                cold.resume(&loaded).unwrap();
                let again = cold.compact_blocking(&writer).unwrap();
                assert_eq!(again.messages(), messages);
            }
        }
        previous = Some(compacted);
    }
    assert!(
        kept_points >= 2,
        "{kept_points} compaction points kept the front"
    );
}
