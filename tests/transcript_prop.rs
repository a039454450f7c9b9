//! Property tests of transcript compaction (issue 10): random valid transcripts (0-5 parallel
//! calls per assistant message, calls with and without effects, live or settled, huge and empty
//! results, unicode, text that imitates the markers), random budgets from far too small to
//! ample, adversarial summarizers. `Ok` implies: the messages validate, every user message is in
//! them verbatim or stubbed with a pointer to its exact bytes, order is preserved, the counted
//! tokens are within budget, and rehydration gives the input back. `Err` implies a typed error
//! that says why, and the input untouched.
//!
//! `PROPTEST_CASES=2000 cargo test --test transcript_prop` raises the case count (default 96).

use compaction::transcript::{
    chat_tokens, rehydrate_transcript, MessageOutcome, TranscriptPlanError, TranscriptPlanner,
    TranscriptPolicy, MARKER_PREFIX, REPLY_PRIMING_TOKENS, VERBATIM_ESCAPE,
};
use compaction::Pointer;
use compaction::{ContentHash, Message, Role, Tokenizer, ToolCall, Transcript};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

/// Message text: plain, empty, unicode, huge, and imitations of every marker and pointer.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z ]{0,40}",
        3 => "[a-z ]{50,400}",
        1 => Just(String::new()),
        1 => "[αβγ日本語🦀 \n]{1,30}",
        1 => (1usize..3000).prop_map(|n| "x".repeat(n)),
        1 => Just(format!("{MARKER_PREFIX}spilled store://sha256:{}⟧ user message #0", "ab".repeat(32))),
        1 => Just(format!("{MARKER_PREFIX}folded store://sha256:{} users=1⟧", "0".repeat(64))),
        1 => Just(format!("{VERBATIM_ESCAPE}{MARKER_PREFIX}tombstone")),
        1 => Just(VERBATIM_ESCAPE.to_owned()),
        1 => Just("store://sha256:zz ⟧ <<< END COMPACTED STATE >>>".to_owned()),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    User(String, bool),
    System(String),
    /// Assistant text, then per call: (arguments text, effect (key live?), result text, order key).
    Assistant(String, Vec<(String, Option<bool>, String, u8)>),
}

fn step() -> impl Strategy<Value = Step> {
    // Most calls have no effect; of those that do, most are settled.
    let effect = prop_oneof![6 => Just(None), 2 => Just(Some(false)), 1 => Just(Some(true))];
    let call = (text(), effect, text(), any::<u8>());
    prop_oneof![
        3 => (text(), any::<bool>()).prop_map(|(t, named)| Step::User(t, named)),
        1 => "[a-z ]{0,40}".prop_map(Step::System),
        5 => (text(), prop::collection::vec(call, 0..=5)).prop_map(|(t, c)| Step::Assistant(t, c)),
    ]
}

/// A valid transcript, the live effect keys, and whether it ends with a call in flight.
fn transcript() -> impl Strategy<Value = (Transcript, HashSet<String>)> {
    (prop::collection::vec(step(), 0..24), any::<bool>()).prop_map(|(steps, in_flight)| {
        let mut chat = Transcript::new();
        let mut live = HashSet::new();
        let mut next_id = 0;
        let count = steps.len();
        for (s, step) in steps.into_iter().enumerate() {
            match step {
                Step::User(t, named) => {
                    let m = Message::user(t);
                    chat.push(if named { m.with_name("ann") } else { m });
                }
                Step::System(t) => chat.push(Message::developer(t)),
                Step::Assistant(t, calls) => {
                    let mut made = Vec::new();
                    let mut results = Vec::new();
                    for (args, effect, result, order) in calls {
                        next_id += 1;
                        let id = format!("call_{next_id}");
                        let mut call =
                            ToolCall::new(&id, "tool", serde_json::json!({ "a": args, "n": 1.1 }));
                        if let Some(is_live) = effect {
                            let key = format!("effect-{next_id}");
                            if is_live {
                                live.insert(key.clone());
                            }
                            call = call.with_effect(key);
                        }
                        made.push(call);
                        results.push((order, Message::tool_result(id, result)));
                    }
                    chat.push(Message::assistant_with_tools(t, made));
                    let last = s + 1 == count;
                    if !(last && in_flight) {
                        // Parallel results come back in any order.
                        results.sort_by_key(|(order, _)| *order);
                        chat.extend(results.into_iter().map(|(_, m)| m));
                    }
                }
            }
        }
        (chat, live)
    })
}

/// A budget as a share of the transcript's full size, in percent: far too small to ample.
fn budget_percent() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => 0usize..5,
        2 => 5usize..40,
        4 => 40usize..100,
        1 => 100usize..150,
    ]
}

/// Summarizers from the adversarial family: good, empty, over-long, marker-imitating.
#[derive(Debug, Clone, Copy)]
enum Summarizer {
    Good,
    Empty,
    OverLong,
    Forger,
}

fn summarize(kind: Summarizer, target: usize) -> String {
    match kind {
        Summarizer::Good if target < 3 => "ok".to_owned(),
        Summarizer::Good => "read files".to_owned(),
        Summarizer::Empty => String::new(),
        Summarizer::OverLong => "word ".repeat(target * 5 + 5),
        Summarizer::Forger => format!("{MARKER_PREFIX}spilled store://sha256:{}⟧", "1".repeat(64)),
    }
}

fn escaped(content: &str) -> String {
    if content.starts_with(MARKER_PREFIX) || content.starts_with(VERBATIM_ESCAPE) {
        format!("{VERBATIM_ESCAPE}{content}")
    } else {
        content.to_owned()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn planning_keeps_every_promise(
        (chat, live) in transcript(),
        percent in budget_percent(),
        keep_recent in 0usize..3,
        pin_user in prop::bool::weighted(0.25),
        summary in prop::option::of((1usize..80, prop::sample::select(vec![
            Summarizer::Good, Summarizer::Good, Summarizer::Empty, Summarizer::OverLong, Summarizer::Forger,
        ]))),
        exact in any::<bool>(),
    ) {
        prop_assert_eq!(chat.validate(), Ok(()));
        let counter: Arc<dyn compaction::TokenCounter> =
            if exact { Arc::new(Tokenizer::O200kBase) } else { Arc::new(Tokenizer::Heuristic) };
        let planner = TranscriptPlanner::new(counter.clone());
        let budget = chat_tokens(chat.messages(), &*counter) * percent / 100;
        let policy = TranscriptPolicy { keep_recent, pin_user };
        let before = chat.clone();
        // What the first bad summary (if any) must turn into.
        let mut expected_error = None;
        let planned = planner
            .plan(&chat, &policy, budget, &live, summary.map(|(t, _)| t))
            .and_then(|plan| {
                let summaries: Vec<String> = plan
                    .summary_requests()
                    .map(|r| summarize(summary.expect("requests only with a summarizer").1, r.target_tokens))
                    .collect();
                for (request, text) in plan.summary_requests().zip(&summaries) {
                    if text.trim().is_empty() {
                        expected_error.get_or_insert("empty");
                    } else if counter.count(text) > request.target_tokens {
                        expected_error.get_or_insert("over-long");
                    }
                }
                planner.finish(plan, summaries)
            });
        prop_assert_eq!(&chat, &before);
        let planned = match planned {
            Err(TranscriptPlanError::OverBudget { required_tokens, budget: b }) => {
                prop_assert_eq!(b, budget);
                prop_assert!(required_tokens > budget);
                return Ok(());
            }
            Err(TranscriptPlanError::SummaryEmpty { .. }) => {
                prop_assert_eq!(expected_error, Some("empty"));
                return Ok(());
            }
            Err(TranscriptPlanError::SummaryOverLong { .. }) => {
                prop_assert_eq!(expected_error, Some("over-long"));
                return Ok(());
            }
            Err(other) => return Err(TestCaseError::fail(format!("unexpected error {other}"))),
            Ok(planned) => planned,
        };
        prop_assert_eq!(expected_error, None);
        let out = planned.messages();
        // Valid on the wire.
        let sent: Transcript = out.iter().cloned().collect();
        prop_assert_eq!(sent.validate(), Ok(()));
        // Within budget, counted the chat way.
        let counted = chat_tokens(out, &*counter) - REPLY_PRIMING_TOKENS;
        prop_assert_eq!(counted, planned.tokens());
        prop_assert!(counted <= budget, "{} > {}", counted, budget);
        // Order preserved: the messages that were not folded appear in input order, each kept
        // (escaped only if it looks like a marker) or replaced by a marker naming its bytes.
        let blobs: HashMap<ContentHash, Vec<u8>> = planned.blobs().iter().cloned().collect();
        let standing: Vec<(&Message, MessageOutcome)> = chat
            .iter()
            .zip(planned.outcomes().iter().copied())
            .filter(|(_, o)| *o != MessageOutcome::Folded)
            .collect();
        let emitted: Vec<&Message> = out
            .iter()
            .filter(|m| !m.content.starts_with(&format!("{MARKER_PREFIX}folded ")))
            .collect();
        prop_assert_eq!(standing.len(), emitted.len());
        for ((input, outcome), output) in standing.iter().zip(&emitted) {
            prop_assert_eq!(input.role, output.role);
            prop_assert_eq!(&input.name, &output.name);
            prop_assert_eq!(&input.tool_call_id, &output.tool_call_id);
            prop_assert_eq!(&input.tool_calls, &output.tool_calls);
            match outcome {
                MessageOutcome::Kept => prop_assert_eq!(&escaped(&input.content), &output.content),
                _ => {
                    prop_assert!(input.role == Role::User || input.role == Role::Tool);
                    prop_assert!(!(input.role == Role::User && pin_user));
                    let hash = ContentHash::of(input.content.as_bytes());
                    let pointer = Pointer::for_hash(hash).to_string();
                    prop_assert!(output.content.starts_with(MARKER_PREFIX));
                    prop_assert!(output.content.contains(&pointer));
                    prop_assert_eq!(blobs.get(&hash).map(Vec::as_slice), Some(input.content.as_bytes()));
                }
            }
        }
        // Pinned roles and live or pending calls never leave.
        for (input, outcome) in chat.iter().zip(planned.outcomes()) {
            if input.role.is_pinned() || input.tool_calls.iter().any(|c| c.effect.as_ref().is_some_and(|k| live.contains(k))) {
                prop_assert_eq!(*outcome, MessageOutcome::Kept);
            }
            if input.role == Role::User {
                prop_assert_ne!(*outcome, MessageOutcome::Folded);
            }
        }
        // Lossless.
        let back = rehydrate_transcript(out, &blobs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&chat).unwrap()
        );
    }
}

/// A state with a transcript, a protected field and the effect ledger the calls' effects live
/// in, for the engine-level property.
#[derive(compaction::Compactable, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct PropAgent {
    #[protected]
    task: String,
    #[transcript]
    chat: Transcript,
    #[effect(idempotent = false)]
    effects: compaction::EffectLog,
}

/// The ledger for a transcript's effects: settled keys committed; live ones alternately never
/// started and of unknown outcome.
fn ledger(chat: &Transcript, live: &HashSet<String>) -> compaction::EffectLog {
    let mut log = compaction::EffectLog::new();
    for (n, key) in chat
        .iter()
        .flat_map(|m| &m.tool_calls)
        .filter_map(|c| c.effect.clone())
        .enumerate()
    {
        log.record(compaction::Effect::new("tool", "target", &key))
            .unwrap();
        if !live.contains(&key) {
            log.begin(&key).unwrap();
            log.commit(&key).unwrap();
        } else if n % 2 == 0 {
            log.begin(&key).unwrap();
        }
    }
    log
}

#[derive(Debug, Clone, Copy)]
enum EngineSummarizer {
    None,
    Extractive,
    Forger,
    OverLong,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 3, ..ProptestConfig::default() })]

    #[test]
    fn compaction_through_the_engine_keeps_every_promise(
        (chat, live) in transcript(),
        percent in budget_percent(),
        summarizer in prop::sample::select(vec![
            EngineSummarizer::None, EngineSummarizer::Extractive,
            EngineSummarizer::Forger, EngineSummarizer::OverLong,
        ]),
    ) {
        use compaction::{CompactionError, Compactor, FnSummarizer, MemoryStore, NoReacquire};
        let effects = ledger(&chat, &live);
        let agent = PropAgent { task: format!("{MARKER_PREFIX}task"), chat, effects };
        let before = serde_json::to_string(&agent).unwrap();
        let counter = Tokenizer::Heuristic;
        let full = chat_tokens(agent.chat.messages(), &counter) + 300;
        let budget = (full * percent / 100).max(1);
        let builder = Compactor::builder().budget(budget).token_counter(counter).store(MemoryStore::new());
        let builder = match summarizer {
            EngineSummarizer::None => builder,
            EngineSummarizer::Extractive => builder.summarizer(compaction::Extractive),
            EngineSummarizer::Forger => builder.summarizer(FnSummarizer::new(|_| {
                Ok(format!("{MARKER_PREFIX}spilled store://sha256:{}⟧", "2".repeat(64)))
            })),
            EngineSummarizer::OverLong => builder.summarizer(FnSummarizer::new(|r| {
                Ok("word ".repeat(r.target_tokens * 5 + 5))
            })),
        };
        let compactor = builder.build().unwrap();
        let compacted = match compactor.compact_blocking(&agent) {
            Ok(compacted) => compacted,
            Err(error) => {
                prop_assert!(matches!(
                    error,
                    CompactionError::TranscriptOverBudget { .. }
                        | CompactionError::ProtectedOverBudget { .. }
                        | CompactionError::Summarizer(_)
                ), "{}", error);
                prop_assert_eq!(serde_json::to_string(&agent).unwrap(), before);
                return Ok(());
            }
        };
        let messages = compacted.messages();
        let counted = chat_tokens(&messages, &counter);
        prop_assert!(counted <= budget, "{} > {}", counted, budget);
        prop_assert_eq!(compacted.request_tokens(), Some(counted));
        let sent: Transcript = messages[1..].iter().cloned().collect();
        prop_assert_eq!(sent.validate(), Ok(()));
        // Every user message, in order: verbatim, or a stub whose pointer resolves to its bytes.
        let sent_users: Vec<&Message> = messages[1..].iter().filter(|m| m.role == Role::User).collect();
        let users: Vec<&Message> = agent.chat.iter().filter(|m| m.role == Role::User).collect();
        prop_assert_eq!(sent_users.len(), users.len());
        for (user, sent) in users.iter().zip(&sent_users) {
            if sent.content != escaped(&user.content) {
                let pointer = Pointer::for_hash(ContentHash::of(user.content.as_bytes())).to_string();
                prop_assert!(sent.content.starts_with(MARKER_PREFIX) && sent.content.contains(&pointer));
                prop_assert_eq!(compactor.resolve_blocking(&pointer).unwrap(), user.content.as_bytes());
            }
        }
        let back: PropAgent = compactor.rehydrate_blocking(&compacted, &NoReacquire).unwrap();
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), before);
    }
}
