//! A coding agent whose conversation is typed state: a simulated 200-turn session compacted
//! after every turn, side by side with the naive "last N messages plus a summary" baseline.
//!
//! Run: `cargo run --example coding_agent` (add `-- --turns 60` for a shorter session,
//! `-- --show` to print the last request).
//!
//! Copy [`CodingAgent`] and the loop in [`main`] as the template of your own agent: the chat
//! history is a `#[transcript]` field, every tool call that has side effects names its
//! `EffectLog` record (`ToolCall::with_effect`), and what you send to the model is
//! `compacted.messages()`. The rest of this directory is the comparison: `session.rs` plays the
//! session (a constraint stated once at turn 3, large tool outputs, one write whose outcome is
//! unknown), `naive.rs` is the baseline, `verdict.rs` checks each request the model would get.
//!
//! It prints a verdict table and exits 0 only if the typed run held every invariant: no request
//! with an orphaned call or result, the constraint always visible or pointed to, no write shown
//! as still to do once done, the write of unknown outcome always in view, no user message lost,
//! every request within budget, and the final compaction rehydrating to the exact session.

mod naive;
mod session;
mod verdict;

use compaction::{
    Compactable, Compactor, EffectLog, Extractive, MemoryStore, Message, NoReacquire, Tokenizer,
    Transcript,
};
use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The agent's state: its rules, the repository, the conversation, and its side effects.
#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq)]
struct CodingAgent {
    /// Rules from the operator: always in the window, verbatim.
    #[protected(pin)]
    rules: Vec<String>,
    #[protected]
    repo_root: String,
    /// The conversation: the last 3 user turns and what followed stay verbatim; older tool
    /// results, then old turns, leave behind pointers; user messages are never summarized.
    #[transcript(keep_recent = 3)]
    chat: Transcript,
    /// One record per file write, keyed like the calls that perform them.
    #[effect(idempotent = false)]
    writes: EffectLog,
}

/// The request budget (the whole `messages()` list, chat formula) and the summary size.
const BUDGET: usize = 16_000;
const SUMMARY_TOKENS: usize = 200;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let turns = args
        .iter()
        .position(|a| a == "--turns")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(200);
    let show = args.iter().any(|a| a == "--show");

    let compactor = Compactor::builder()
        .budget(BUDGET)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .max_summary_tokens(SUMMARY_TOKENS)
        .store(MemoryStore::new())
        .build()
        .expect("a valid configuration");
    let counter = Tokenizer::O200kBase;
    let mut naive = naive::Naive::new(BUDGET, SUMMARY_TOKENS, &counter, &Extractive);

    let mut agent = CodingAgent {
        rules: vec![
            "never push to main".into(),
            "run the tests before a write".into(),
        ],
        repo_root: "/srv/app".into(),
        chat: Transcript::from_messages(vec![Message::system(
            "You are a careful coding agent working in /srv/app.",
        )])
        .expect("a system message is a valid transcript"),
        writes: EffectLog::new(),
    };
    let (mut typed, mut baseline) = (verdict::Tally::default(), verdict::Tally::default());
    let (mut typed_time, mut naive_time) = (Duration::ZERO, Duration::ZERO);
    let mut turn_starts = Vec::new();
    let mut unknown_write = None;
    let mut last = None;
    for turn in 0..turns {
        // The agent's turn: the user asks, the agent reads, tests and writes.
        let (messages, committed) = session::turn(turn, session::unknown_write_turn(turns));
        turn_starts.push(agent.chat.len());
        agent.chat.extend(messages);
        let key = session::write_key(turn);
        agent
            .writes
            .record(session::write_effect(turn))
            .expect("a new key");
        agent.writes.begin(&key).expect("not begun yet");
        if committed {
            agent.writes.commit(&key).expect("in flight");
        } else {
            unknown_write = Some(turn);
        }

        // Compact after every turn, as an agent does; send `compacted.messages()`.
        let started = Instant::now();
        let compacted = match compactor.compact_blocking(&agent) {
            Ok(compacted) => compacted,
            Err(e) => {
                eprintln!("turn {turn}: the typed compaction failed: {e}");
                return ExitCode::FAILURE;
            }
        };
        let request = compacted.messages();
        typed_time += started.elapsed();
        if std::env::var_os("DEBUG_REPORT").is_some() {
            eprintln!("{turn}: {}", compacted.report());
        }

        let started = Instant::now();
        let naive_request = naive.request(agent.chat.messages());
        naive_time += started.elapsed();

        // What the pointer tool gives the model for a marker's handle and a message index.
        let resolve = |handle: &str, index: usize| {
            let handle = handle.parse().ok()?;
            let pointer = compacted.handles()?.pointer(handle)?;
            compactor.resolve_message_blocking(pointer, index).ok()?
        };
        let no_store = |_: &str, _: usize| None;
        let context = verdict::Context {
            history: agent.chat.messages(),
            turn_starts: &turn_starts,
            unknown_write,
            budget: BUDGET,
            counter: &counter,
            resolve: &resolve,
        };
        typed.check(&request, &context);
        baseline.check(
            &naive_request,
            &verdict::Context {
                resolve: &no_store,
                ..context
            },
        );
        last = Some((compacted, request));
    }
    let Some((compacted, request)) = last else {
        eprintln!("no turn played");
        return ExitCode::FAILURE;
    };
    if show {
        for message in &request {
            let text: String = message.content.chars().take(300).collect();
            println!("{:>9}: {text}", message.role.as_str());
        }
    }
    // The way back: the last compaction rehydrates to the exact session.
    let rehydrated = compactor
        .rehydrate_blocking(&compacted, &NoReacquire)
        .is_ok_and(|back: CodingAgent| back == agent);

    println!(
        "{turns} turns, {} messages, compacted after every turn to {BUDGET} tokens (o200k, chat formula)\n",
        agent.chat.len()
    );
    print_table(&baseline, &typed, naive_time, typed_time);
    println!("\nlast typed compaction: {}", compacted.report());
    println!(
        "rehydrated byte-identical: {}",
        if rehydrated { "yes" } else { "NO" }
    );
    if typed.clean() && rehydrated {
        println!("\nverdict: the typed transcript held every invariant");
        ExitCode::SUCCESS
    } else {
        println!("\nverdict: the typed transcript broke an invariant (see the table)");
        ExitCode::FAILURE
    }
}

/// One line of the verdict table: its label and how to read it from a run's tally.
type Row = (&'static str, fn(&verdict::Tally) -> usize);

const ROWS: [Row; 7] = [
    (
        "requests with orphaned pairs (a provider rejects them)",
        |t| t.orphaned_requests,
    ),
    (
        "requests where the constraint was neither visible nor pointed to",
        |t| t.constraint_lost,
    ),
    (
        "writes re-executed (instruction shown, its write not)",
        |t| t.writes_reexecuted.len(),
    ),
    ("requests hiding the write of unknown outcome", |t| {
        t.unknown_write_hidden
    }),
    (
        "user messages lost (neither verbatim nor pointed to)",
        |t| t.users_lost.len(),
    ),
    ("requests over budget", |t| t.over_budget),
    ("largest request (tokens)", |t| t.largest),
];

fn print_table(
    naive: &verdict::Tally,
    typed: &verdict::Tally,
    naive_time: Duration,
    typed_time: Duration,
) {
    let line = |label: &str, n: &dyn std::fmt::Display, t: &dyn std::fmt::Display| {
        println!("{label:<66} {n:>8} {t:>8}");
    };
    line(
        &format!("over {} requests", typed.requests),
        &"naive",
        &"typed",
    );
    for (label, metric) in ROWS {
        line(label, &metric(naive), &metric(typed));
    }
    let ms = |d: Duration| d.as_millis();
    line(
        "time to build every request (ms)",
        &ms(naive_time),
        &ms(typed_time),
    );
}
