//! The guide's rules in numbers (issue 28.4: docs that say what the code does). The README and
//! `docs/*.md` state defaults and thresholds as numbers; each test here names the sentence it
//! guards (file and line at the time of writing), checks that the page still says it, and
//! checks that the code does it: its constant and its behaviour. A changed default then breaks
//! this test, not the reader. (`keep_recent` is also shown running in docs/transcripts.md.)

use compaction::session::Session;
use compaction::transcript::{message_tokens, TranscriptPolicy, MARKER_PREFIX};
use compaction::{
    Compactable, Compactor, FieldClass, Message, NoReacquire, Tokenizer, ToolCall, Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;

/// Checks that `page` (a path from the repository root) states `phrase`, and prints where
/// (`page:line`), so a failing test shows the sentences it guards. Runs of whitespace match any
/// run of whitespace, so a sentence may wrap anywhere. Panics naming the page when the sentence
/// is gone: the guide no longer says what the test checks, so the test (and the guide) need a
/// look.
pub(crate) fn stated(page: &str, phrase: &str) {
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

pub(crate) const COUNTER: Tokenizer = Tokenizer::O200kBase;

/// A tool result whose message costs exactly `tokens` by the default wire format's formula.
pub(crate) fn result_of(id: &str, tokens: usize) -> Message {
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
pub(crate) struct RecentDefault {
    #[transcript]
    pub(crate) chat: Transcript,
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
    // Without an opening (rule 15): the first turn would stay in place, its result verbatim,
    // and the turn after it fold instead; this is keep_recent's rule alone.
    let mut session = Session::builder("keep-recent")
        .compactor(Compactor::builder().budget(10_000))
        .keep_first(0)
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
    // Half the budget needs both read results paged: the third and second newest turns'.
    assert_eq!(
        point.paged,
        ["call_1", "call_2"],
        "the read results of the older two of the 3 turns are paged"
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
/// [`compaction::transcript`] module docs (sixteen of them ...)". Wherever the spec lives in
/// compaction-core/src, it numbers sixteen rules (the 15th: the opening; the 16th: what a
/// compaction point rewrites).
#[test]
fn the_planner_states_sixteen_rules() {
    stated("docs/transcripts.md", "(sixteen of them,");
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
    assert_eq!(numbered, 16, "{}", path.display());
}
