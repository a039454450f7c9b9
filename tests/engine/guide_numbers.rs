//! The guide's rules in numbers (issue 28.4: docs that say what the code does). The README and
//! `docs/*.md` state defaults and thresholds as numbers; each test here names the sentence it
//! guards (file and line at the time of writing), checks that the page still says it, and
//! checks that the code does it: its constant and its behaviour. A changed default then breaks
//! this test, not the reader. (`keep_recent` is also shown running in docs/transcripts.md.)

use crate::common;

use common::{spilling_compactor, spilling_state, TempDir};
use compaction::pointer_tool::{PointerResolver, DEFAULT_MAX_BYTES};
use compaction::session::Session;
use compaction::sqlite::GcOptions;
use compaction::transcript::{message_tokens, TranscriptPolicy, MARKER_PREFIX};
use compaction::{
    Compactable, Compacted, CompactionError, Compactor, Effect, EffectLedger, EffectLog,
    FieldClass, MemoryLedger, MemoryStore, Message, NoReacquire, SqliteOptions, SqliteStore,
    Tokenizer, ToolCall, Transcript, SESSION_HIGH_WATER, SESSION_LOW_WATER,
    SESSION_PAGE_RESULTS_OVER, SESSION_WINDOW_SHARE,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Checks that `page` (a path from the repository root) states `phrase`, and prints where
/// (`page:line`), so a failing test shows the sentences it guards. Runs of whitespace match any
/// run of whitespace, so a sentence may wrap anywhere. Panics naming the page when the sentence
/// is gone: the guide no longer says what the test checks, so the test (and the guide) need a
/// look.
fn stated(page: &str, phrase: &str) {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page))
        .unwrap_or_else(|e| panic!("{page}: {e}"));
    // The page with every run of whitespace as one space, and the line each char is on.
    let (mut flat, mut lines) = (String::new(), Vec::new());
    let mut line = 1;
    for c in text.chars() {
        if c.is_whitespace() {
            if !flat.ends_with(' ') {
                flat.push(' ');
                lines.push(line);
            }
        } else {
            flat.push(c);
            lines.extend(std::iter::repeat_n(line, c.len_utf8()));
        }
        if c == '\n' {
            line += 1;
        }
    }
    let phrase = phrase.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = flat.find(&phrase).unwrap_or_else(|| {
        panic!("{page} no longer says `{phrase}`: update the guide and this test together")
    });
    eprintln!("guards {page}:{}: {phrase}", lines[at]);
}

const COUNTER: Tokenizer = Tokenizer::O200kBase;

/// A tool result whose message costs exactly `tokens` by the default wire format's formula.
fn result_of(id: &str, tokens: usize) -> Message {
    let body = |words: usize| format!("ok{}", " ok".repeat(words));
    let base = message_tokens(&Message::tool_result(id, body(0)), &COUNTER);
    let message = Message::tool_result(id, body(tokens - base));
    assert_eq!(
        message_tokens(&message, &COUNTER),
        tokens,
        "one token a word"
    );
    message
}

// ---------------------------------------------------------------------------------------------
// keep_recent: docs/transcripts.md (the example's attribute, and "`keep_recent = N`" under the
// rules), README.md's `#[transcript(keep_recent = N, pin_user)]` row.
// ---------------------------------------------------------------------------------------------

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Recent3 {
    #[transcript(keep_recent = 3)]
    chat: Transcript,
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Recent1 {
    #[transcript(keep_recent = 1)]
    chat: Transcript,
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct RecentDefault {
    #[transcript]
    chat: Transcript,
}

/// `turns` turns of: a user message, a call, its result of `tokens`, an answer.
fn conversation(turns: usize, tokens: usize) -> Transcript {
    let mut chat = Transcript::new();
    for turn in 0..turns {
        chat.push(Message::user(format!("turn {turn}: check module {turn}")));
        let id = format!("call_{turn}");
        let read = ToolCall::new(&id, "read_file", json!({ "module": turn }));
        chat.push(Message::assistant_with_tools("", vec![read]));
        chat.push(result_of(&id, tokens));
        chat.push(Message::assistant(format!("Module {turn} is fine.")));
    }
    chat
}

/// Index of the `n`-th newest user message (1: the newest).
fn nth_newest_user(chat: &Transcript, n: usize) -> usize {
    let users: Vec<usize> = (0..chat.len())
        .filter(|&i| chat.messages()[i].role == compaction::Role::User)
        .collect();
    users[users.len() - n]
}

/// docs/transcripts.md:18 (`#[transcript(keep_recent = 3)]`), docs/transcripts.md:59
/// ("`keep_recent = N` (default 1)"), README.md:95. The default is 1, as the attribute
/// without an argument shows.
#[test]
fn keep_recent_defaults_to_1() {
    stated("docs/transcripts.md", "#[transcript(keep_recent = 3)]");
    stated("docs/transcripts.md", "`keep_recent = N`** (default 1)");
    stated(
        "README.md",
        "the last N user turns (default 1) go last, and the newest user message and what follows \
         always stay",
    );
    assert_eq!(TranscriptPolicy::default().keep_recent, 1);
    let class = |schema: &compaction::Schema| schema.fields()[0].class;
    assert_eq!(
        class(RecentDefault::schema()),
        FieldClass::Transcript {
            keep_recent: 1,
            pin_user: false
        }
    );
    assert_eq!(class(RecentDefault::schema()), class(Recent1::schema()));
}

/// docs/transcripts.md:59-68: with room, the last N user turns are sent as they are while the
/// older turns give way; without it, the turns older than the newest user message fold inside
/// the N too, and the newest user message and what follows stay (its results paged).
#[test]
fn keep_recent_is_the_last_to_go_not_always_verbatim() {
    stated(
        "docs/transcripts.md",
        "While the older turns can give the room, the last N turns are sent as they are",
    );
    stated(
        "docs/transcripts.md",
        "the turns older than the newest user message go like any old turn: their tool results \
         tombstoned first, then the turns folded",
    );
    stated(
        "docs/transcripts.md",
        "what no budget takes is the newest user message and what follows it",
    );
    let agent = Recent3 {
        chat: conversation(8, 600),
    };
    let input = agent.chat.messages();
    let (third, newest) = (
        nth_newest_user(&agent.chat, 3),
        nth_newest_user(&agent.chat, 1),
    );
    let compact = |budget: usize| {
        Compactor::builder()
            .budget(budget)
            .build()
            .unwrap()
            .compact_blocking(&agent)
            .unwrap()
    };
    // Room: the older turns give way, the last 3 are verbatim.
    let roomy = compact(3_000);
    let report = roomy.report().transcript.clone().unwrap();
    assert!(report.tombstoned + report.folded > 0, "{report:?}");
    assert!(
        !roomy.messages().contains(&input[2]),
        "turn 0's result is tombstoned"
    );
    assert!(roomy.messages().ends_with(&input[third..]));
    // No room: the turns before the newest user message fold (the third newest user message
    // leaves into a user run, in the store); the newest user message and its work stay.
    let tight = compact(960);
    let request = tight.messages();
    assert!(!request.contains(&input[third]));
    assert!(request.ends_with(&input[newest..]));
    // Less still: the newest user message stays, its result is paged.
    let tighter = compact(600);
    let request = tighter.messages();
    assert!(request.contains(&input[newest]));
    let report = tighter.report().transcript.clone().unwrap();
    assert_eq!(report.paged.len(), 1, "{report:?}");
    assert_eq!(report.paged[0].tool_call_id, "call_7");
    // Nothing is lost.
    let compactor = Compactor::builder().budget(600).build().unwrap();
    let request = compactor.compact_blocking(&agent).unwrap();
    let back: Recent3 = compactor
        .rehydrate_blocking(&request, &NoReacquire)
        .unwrap();
    assert_eq!(back, agent);
}

/// A session's conversation at its first compaction point, and what that point did: `turns`
/// turns at most, each with a result of `tokens` tokens, on a budget of 10,000.
fn session_point<S>(fresh: fn() -> S, turns: usize, tokens: usize) -> (Transcript, Point)
where
    S: compaction::HasTranscript + Compactable + Send + Sync + 'static,
{
    let mut session = Session::builder("keep-recent")
        .compactor(Compactor::builder().budget(10_000))
        .open_blocking(fresh)
        .unwrap();
    for turn in 0..turns {
        session.push(Message::user(format!("turn {turn}: check module {turn}")));
        session.next_request_blocking().unwrap();
        let id = format!("call_{turn}");
        let read = ToolCall::new(&id, "read_file", json!({ "module": turn }));
        session
            .push_response(Message::assistant_with_tools("", vec![read.clone()]))
            .unwrap();
        session
            .answer(&read, result_of(&id, tokens).content)
            .unwrap();
        let request = session.next_request_blocking().unwrap();
        if request.is_compaction_point() {
            assert!(request.tokens() <= 10_000);
            let checkpoint = session.last_checkpoint().unwrap();
            let report = checkpoint.report().transcript.clone().unwrap();
            let paged = report.paged.iter().map(|p| p.tool_call_id.clone());
            let point = Point {
                sent: request.messages().to_vec(),
                paged: paged.collect(),
            };
            return (session.transcript().clone(), point);
        }
        session
            .push_response(Message::assistant(format!("Module {turn} is fine.")))
            .unwrap();
    }
    panic!("no compaction point in {turns} turns");
}

/// What a compaction point sent, and the tool calls whose results it paged.
struct Point {
    sent: Vec<Message>,
    paged: Vec<String>,
}

/// docs/transcripts.md:61-64: at a compaction point that aims for a session's low-water mark,
/// the last N user turns stay in place and only the results the model has already read are
/// paged (head and tail), where with `keep_recent = 1` the same turn is an old one, its result
/// tombstoned.
#[test]
fn keep_recent_holds_its_turns_at_a_sessions_compaction_point() {
    stated(
        "docs/transcripts.md",
        "the tool results in them that the model has already read may be paged",
    );
    // Four turns of 2,400 tokens pass the high-water mark; the last 3 alone pass the low one.
    let (chat, point) = session_point(Recent3::default, 10, 2_400);
    assert_eq!(
        chat.messages().len(),
        15,
        "the point is at the fourth result"
    );
    for n in 1..=3 {
        let user = &chat.messages()[nth_newest_user(&chat, n)];
        assert!(
            point.sent.contains(user),
            "user turn {n} (of 3) is not in place"
        );
    }
    let newest = nth_newest_user(&chat, 1);
    assert!(
        point.sent.ends_with(&chat.messages()[newest..]),
        "the newest turn, its result unread, is verbatim"
    );
    assert_eq!(
        point.paged,
        ["call_1"],
        "the third newest turn's result, read, is paged"
    );
    // With keep_recent = 1 the same turn is an old one: its result is tombstoned, not paged.
    let (chat, point) = session_point(Recent1::default, 10, 2_400);
    assert_eq!(chat.messages().len(), 15);
    assert!(point.paged.is_empty());
    let result = point
        .sent
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("call_1"))
        .unwrap();
    assert!(result
        .content
        .starts_with(&format!("{MARKER_PREFIX}tombstone")));
}

/// docs/transcripts.md:46-47: "The rules are written once, as the planner's spec, in the
/// [`compaction::transcript`] module docs (fourteen of them ...)". Wherever the spec lives in
/// compaction-core/src, it numbers fourteen rules (the 14th: what a fold may send to a
/// summarizer).
#[test]
fn the_planner_states_fourteen_rules() {
    stated("docs/transcripts.md", "(fourteen of them,");
    let mut specs = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("compaction-core/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.contains("**Anchors stay verbatim, in place, whatever the budget**") {
                specs.push((path, text));
            }
        }
    }
    assert_eq!(specs.len(), 1, "one spec of the rules: {specs:?}");
    let (path, text) = &specs[0];
    let numbered = text
        .lines()
        .map(|line| line.trim_start_matches("//!").trim_start())
        .filter(|line| {
            let digits = line.chars().take_while(char::is_ascii_digit).count();
            digits > 0 && line[digits..].starts_with(". **")
        })
        .count();
    assert_eq!(numbered, 14, "{}", path.display());
}

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
/// mark (60%)".
#[test]
fn a_session_appends_up_to_90_percent_then_compacts_to_about_60() {
    stated(
        "docs/sessions.md",
        "until it passes the high-water mark (90% of the budget by default), then one compaction \
         point brings it down to the low-water mark (60%)",
    );
    assert_eq!((SESSION_HIGH_WATER, SESSION_LOW_WATER), (0.9, 0.6));
    const BUDGET: usize = 16_000;
    let mut s = session(BUDGET).open_blocking(fresh).unwrap();
    assert_eq!(s.compactor().water_marks(), (0.9, 0.6));
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
            // brings the request down to about 60% (whole turns go, oldest first).
            assert!(appended > high, "{appended} <= {high}: compacted too early");
            let tokens = request.tokens();
            assert!(tokens <= BUDGET * 6 / 10, "{tokens} > 60%");
            assert!(
                tokens > BUDGET / 2,
                "{tokens} <= 50%: more than the low-water mark"
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
            if request.tokens() > BUDGET * 6 / 10 {
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

// ---------------------------------------------------------------------------------------------
// docs/pointers.md: the pointer tool's parts.
// ---------------------------------------------------------------------------------------------

/// docs/pointers.md:72-75: "Content longer than `with_max_bytes` (default `DEFAULT_MAX_BYTES`,
/// 16 KiB) comes in parts, each beginning with a note that gives the bytes it holds and the
/// `offset` for the rest."
#[test]
fn the_pointer_tool_reads_16_kib_at_a_time() {
    stated(
        "docs/pointers.md",
        "(default `DEFAULT_MAX_BYTES`, 16 KiB) comes in parts",
    );
    assert_eq!(DEFAULT_MAX_BYTES, 16 * 1024);
    assert_eq!(PointerResolver::new().max_bytes(), 16 * 1024);
    let mut agent = RecentDefault::default();
    agent.chat.push(Message::user("why did the deploy fail?"));
    let read = ToolCall::new("call_1", "read_file", json!({"path": "deploy.log"}));
    agent
        .chat
        .push(Message::assistant_with_tools("", vec![read]));
    let log = "step 41: ok\n".repeat(4_000); // 48,000 bytes
    agent.chat.push(Message::tool_result("call_1", log.clone()));
    agent.chat.push(Message::assistant("The log is long."));
    agent.chat.push(Message::user("show me all of it"));
    let compactor = Compactor::builder().budget(400).build().unwrap();
    let compacted = compactor.compact_blocking(&agent).unwrap();
    let mut resolver = PointerResolver::new();
    resolver.allow_compacted(&compactor, &compacted).unwrap();
    let pointer = compacted.pointers()[0].to_string();
    let mut parts = Vec::new();
    let mut offset = 0;
    while offset < log.len() {
        let args = json!({ "pointer": pointer, "offset": offset });
        let call = ToolCall::new(format!("read_{offset}"), "resolve_pointer", args);
        let reply = resolver.handle_blocking(&compactor, &call);
        let slice = reply.outcome.unwrap();
        assert_eq!((slice.start, slice.total), (offset, log.len()));
        parts.push(slice.end - slice.start);
        assert!(
            reply.message.content.contains(&format!("{}", slice.end)),
            "the offset for the rest"
        );
        offset = slice.end;
    }
    assert_eq!(parts, [16_384, 16_384, 48_000 - 2 * 16_384]);
}

// ---------------------------------------------------------------------------------------------
// docs/compacting.md: the window's header and its compact form.
// ---------------------------------------------------------------------------------------------

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Counter {
    #[protected]
    step: u32,
}

/// docs/compacting.md:55-62: the compact form exactly when the full one does not fit; one `u32`
/// field takes 82 tokens in the full form and 27 in the compact one; `COMPACT_FORM_BELOW`
/// (256) decides nothing.
#[test]
fn the_compact_form_is_taken_when_the_full_one_does_not_fit() {
    stated(
        "docs/compacting.md",
        "When the full form does not fit the budget, and only then",
    );
    stated(
        "docs/compacting.md",
        "takes 82 tokens in the full form and 27 in the compact one, which any budget from 27 to \
         81 tokens gets. (`compaction::render::COMPACT_FORM_BELOW`, 256, is kept for compatibility",
    );
    assert_eq!(compaction::render::COMPACT_FORM_BELOW, 256);
    let window = |budget: usize| {
        Compactor::builder()
            .budget(budget)
            .token_counter(COUNTER)
            .build()
            .unwrap()
            .compact_blocking(&Counter { step: 3 })
            .map(|c| (c.tokens(), c.render().contains("Re-verify")))
    };
    assert!(window(26).is_err());
    assert_eq!(window(27).unwrap(), (27, false), "compact");
    assert_eq!(window(81).unwrap(), (27, false), "compact");
    assert_eq!(window(82).unwrap(), (82, true), "full, though below 256");
    assert_eq!(window(300).unwrap(), (82, true));
}

/// docs/compacting.md:26: the sample window's header is the one the renderer writes (no counter
/// in it, so an unchanged window is the same text from one request to the next).
#[test]
fn the_sample_windows_header_is_the_renderers() {
    let header = "<<< COMPACTED STATE of MigrationState >>>";
    stated("docs/compacting.md", &format!("```text {header}"));
    let store = MemoryStore::new();
    let compacted = spilling_compactor(&store)
        .compact_blocking(&spilling_state())
        .unwrap();
    assert_eq!(compacted.render().lines().next(), Some(header));
}

// ---------------------------------------------------------------------------------------------
// docs/guarantees.md: checkpoint formats.
// ---------------------------------------------------------------------------------------------

/// `compacted` as JSON with its format number set to `format`.
fn with_format<S: Compactable>(compacted: &Compacted<S>, format: u32) -> Compacted<S> {
    let mut value = serde_json::to_value(compacted).unwrap();
    value["format"] = format.into();
    serde_json::from_value(value).unwrap()
}

/// docs/guarantees.md:55-58: checkpoints are written as format 3; format 1 is refused; format 2
/// is refused when it carries a transcript.
#[test]
fn checkpoints_are_format_3_and_older_ones_are_refused_by_their_number() {
    stated(
        "docs/guarantees.md",
        "Checkpoints of format 1 (before the fingerprint) are refused with `CheckpointFormat`",
    );
    stated(
        "docs/guarantees.md",
        "So are checkpoints of format 2 that carry a transcript (format 3 seals",
    );
    let compactor = Compactor::builder().budget(2_000).build().unwrap();
    fn refused<T>(result: Result<T, CompactionError>) -> (u32, u32) {
        match result {
            Err(CompactionError::CheckpointFormat { found, supported }) => (found, supported),
            Err(other) => panic!("not refused by its format: {other:?}"),
            Ok(_) => panic!("read"),
        }
    }
    // Without a transcript.
    let counter = compactor.compact_blocking(&Counter { step: 3 }).unwrap();
    assert_eq!(serde_json::to_value(&counter).unwrap()["format"], 3);
    // (A genuine format-2 checkpoint is sealed with its number: one cannot be made here.)
    let old = with_format(&counter, 1);
    assert_eq!(
        refused(compactor.rehydrate_blocking(&old, &NoReacquire)),
        (1, 3)
    );
    // With one.
    let mut agent = RecentDefault::default();
    agent.chat.push(Message::user("hello"));
    let chat = compactor.compact_blocking(&agent).unwrap();
    assert_eq!(serde_json::to_value(&chat).unwrap()["format"], 3);
    let old = with_format(&chat, 2);
    assert_eq!(
        refused(compactor.rehydrate_blocking(&old, &NoReacquire)),
        (2, 3)
    );
}

// ---------------------------------------------------------------------------------------------
// docs/storage.md, docs/operating.md, docs/effects.md: the durable store and the operator's
// tool.
// ---------------------------------------------------------------------------------------------

/// docs/storage.md:72: "waiting up to 5 s for the lock (`SqliteOptions::busy_timeout`)".
#[test]
fn sqlite_waits_5_s_for_a_lock() {
    stated(
        "docs/storage.md",
        "waiting up to 5 s for the lock (`SqliteOptions::busy_timeout`)",
    );
    assert_eq!(
        SqliteOptions::new().get_busy_timeout(),
        Duration::from_secs(5)
    );
}

/// docs/operating.md:127: "the grace period (`--min-age`, default one hour ...)": an
/// unreferenced blob stored just now is kept by default, and removed without a grace period.
#[test]
fn gc_keeps_blobs_younger_than_one_hour_by_default() {
    stated("docs/operating.md", "(`--min-age`, default one hour;");
    assert_eq!(GcOptions::DEFAULT_MIN_AGE, Duration::from_secs(3600));
    assert_eq!(GcOptions::new().get_min_age(), Duration::from_secs(3600));
    let dir = TempDir::new("guide-gc");
    let store = SqliteStore::open(dir.db("agent.db")).unwrap();
    let bytes = b"an unreferenced blob";
    compaction::block_on(compaction::Store::put(
        &store,
        &compaction::ContentHash::of(bytes),
        bytes,
    ))
    .unwrap();
    let kept = store.collect_garbage(&GcOptions::new()).unwrap();
    assert_eq!((kept.removed.len(), kept.kept_recent), (0, 1));
    let gone = store
        .collect_garbage(&GcOptions::new().min_age(Duration::ZERO))
        .unwrap();
    assert_eq!(gone.removed.len(), 1);
}

/// The argument `field` of the CLI (compaction-cli/src), with the `default_value` its
/// attribute gives, wherever the CLI declares it.
fn cli_default(field: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("compaction-cli/src");
    let mut dirs = vec![src];
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for pair in lines.windows(2) {
                let declared = pair[1].trim_start().starts_with(&format!("{field}:"));
                if let (true, Some(at)) = (declared, pair[0].find("default_value = \"")) {
                    let rest = &pair[0][at + "default_value = \"".len()..];
                    found.push(rest[..rest.find('"').unwrap()].to_owned());
                }
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "`{field}` with a default in compaction-cli/src: {found:?}"
    );
    found.remove(0)
}

/// docs/effects.md:51 ("`--min-claim-age` (10 minutes by default)"), docs/operating.md:17
/// ("`--min-claim-age`, default 10m") and docs/operating.md:127 (gc's `--min-age`, default
/// one hour): the CLI's defaults.
#[test]
fn the_clis_defaults_are_10_minutes_and_one_hour() {
    stated(
        "docs/effects.md",
        "`--min-claim-age` (10 minutes by default)",
    );
    stated("docs/operating.md", "`--min-claim-age`, default 10m");
    assert_eq!(cli_default("min_claim_age"), "10m");
    assert_eq!(cli_default("min_age"), "1h");
}

// ---------------------------------------------------------------------------------------------
// docs/testing.md and docs/postgres.md: what the suites run.
// ---------------------------------------------------------------------------------------------

/// docs/testing.md:17-20: "`prop_compact` runs 2,000 random cases by default"; "`prop_repeated`
/// runs `PROPTEST_CASES / 250` sequences (8 by default) of 1,000 mutate/compact/rehydrate
/// steps".
#[test]
fn the_property_suites_run_what_testing_md_says() {
    stated(
        "docs/testing.md",
        "`prop_compact` runs 2,000 random cases by default",
    );
    stated(
        "docs/testing.md",
        "`prop_repeated` runs `PROPTEST_CASES / 250` sequences (8 by default) of 1,000",
    );
    assert!(include_str!("prop_compact.rs").contains("cases: cases(2000),"));
    let repeated = include_str!("prop_repeated.rs");
    assert!(repeated.contains("cases: (cases(2000) / 250).max(1),"));
    assert!(repeated.contains("const STEPS: usize = 1_000;"));
    assert_eq!(2000 / 250, 8);
}

/// docs/postgres.md:116-117: "(`tests/pg_processes.rs`: 8 processes x 50 rounds, 50
/// `SIGKILL`s)".
#[test]
fn the_fleet_test_runs_8_processes_50_rounds_50_kills() {
    stated(
        "docs/postgres.md",
        "(`tests/pg_processes.rs`: 8 processes x 50 rounds, 50 `SIGKILL`s)",
    );
    let suite = include_str!("../pg_processes.rs");
    for constant in [
        "const WORKERS: usize = 8;",
        "const ROUNDS: usize = 50;",
        "const KILLS: usize = 50;",
    ] {
        assert!(suite.contains(constant), "{constant}");
    }
}

/// docs/postgres.md:99-100: "`PgOptions` sets the pool size (8 per handle), the connect timeout
/// (10 s) and how long an operation waits for a pooled connection (30 s)". (The values are
/// checked with the `postgres` feature.)
#[test]
fn pg_options_default_to_8_connections_10_s_and_30_s() {
    stated(
        "docs/postgres.md",
        "`PgOptions` sets the pool size (8 per handle), the connect timeout (10 s) and how long an \
         operation waits for a pooled connection (30 s)",
    );
    #[cfg(feature = "postgres")]
    {
        use compaction::postgres::PgOptions;
        let stated = PgOptions::new()
            .max_connections(8)
            .connect_timeout(Duration::from_secs(10))
            .wait_timeout(Duration::from_secs(30));
        assert_eq!(PgOptions::new(), stated);
        assert_ne!(PgOptions::new(), stated.clone().max_connections(9));
    }
}

// ---------------------------------------------------------------------------------------------
// docs/models.md: the summarizers' defaults (checked with the `openai` and `anthropic`
// features; the retries and backoff are exercised in tests/openai_summarizer.rs).
// ---------------------------------------------------------------------------------------------

/// docs/models.md:51-53: `.timeout(d)` 60 s, `.max_retries(n)` 3, `.max_backoff(d)` 30 s.
#[test]
fn the_openai_summarizer_defaults_to_60_s_3_retries_30_s() {
    stated("docs/models.md", "| `.timeout(d)` | 60 s |");
    stated("docs/models.md", "| `.max_retries(n)` | 3 |");
    stated("docs/models.md", "| `.max_backoff(d)` | 30 s |");
    #[cfg(feature = "openai")]
    {
        use compaction::openai::OpenAiSummarizer;
        let default = format!("{:?}", OpenAiSummarizer::new("gpt-4o-mini"));
        let stated = OpenAiSummarizer::new("gpt-4o-mini")
            .timeout(Duration::from_secs(60))
            .max_retries(3)
            .max_backoff(Duration::from_secs(30));
        assert_eq!(default, format!("{stated:?}"));
        assert!(default.contains("max_retries: 3"), "{default}");
    }
}

/// docs/models.md:112-113: "`ClaudeEstimate` counts `ceil(o200k × 1.6)` by default".
#[test]
fn claude_estimate_defaults_to_1_6_times_o200k() {
    stated(
        "docs/models.md",
        "`ClaudeEstimate` counts `ceil(o200k × 1.6)` by default",
    );
    #[cfg(feature = "anthropic")]
    {
        use compaction::anthropic::ClaudeEstimate;
        use compaction::TokenCounter;
        assert_eq!(ClaudeEstimate::default().factor(), 1.6);
        let text = "fn main() { println!(\"hello, world\"); }";
        let o200k = COUNTER.count(text);
        let expected = (o200k as f64 * 1.6).ceil() as usize;
        assert_eq!(ClaudeEstimate::default().count(text), expected);
    }
}
