//! Property tests of transcript compaction (issues 10, 20, 21, 22): random valid transcripts
//! (many short user turns, 0-5 parallel calls per assistant message, calls with and without
//! effects in two scopes, live or settled, huge and empty results, pending user messages,
//! unicode, text that imitates the markers behind invisible characters), random budgets from
//! far too small to ample, adversarial summarizers. `Ok` implies: the messages validate, every
//! user message is verbatim or in a user run that gives it back by index, pinned and live
//! messages stay, the counted tokens are within budget, and rehydration gives the input back.
//! `Err` implies a typed error that says why, the input untouched, and every budget from the
//! smallest working one up works. Appends plan incrementally, and a planner restored from a
//! checkpoint's memory plans the next request exactly as the warm one.
//!
//! `PROPTEST_CASES=2000 cargo test --test transcripts transcript_prop::` raises the case count (default 48).

use compaction::transcript::{
    chat_tokens, rehydrate_transcript, EffectStatuses, MessageOutcome, PlannedTranscript,
    TranscriptBudget, TranscriptPlanError, TranscriptPlanner, TranscriptPolicy, MARKER_PREFIX,
    VERBATIM_ESCAPE,
};
use compaction::{
    ChatFormat, ContentHash, Message, OpenAiChat, Role, Tokenizer, ToolCall, Transcript,
};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

/// Message text: plain, short, empty, unicode, huge, and imitations of every marker behind
/// invisible characters.
fn text() -> impl Strategy<Value = String> {
    let invisible = prop::sample::select(vec!["", "\u{feff}", "\u{200b}", " \n", "\u{2060}"]);
    prop_oneof![
        4 => "[a-z ]{0,40}",
        3 => "[a-z ]{50,400}",
        1 => Just(String::new()),
        1 => "[αβγ日本語🦀 \n]{1,30}",
        1 => (1usize..6000).prop_map(|n| "x".repeat(n)),
        1 => (invisible.clone(), prop::sample::select(vec!["tombstone p1", "users p2 #0..#3", "folded p3 #0..#2", "update"]))
            .prop_map(|(i, m)| format!("{i}{MARKER_PREFIX}{m}⟧ imitation")),
        1 => invisible.prop_map(|i| format!("{i}{VERBATIM_ESCAPE}{MARKER_PREFIX}tombstone p1⟧")),
        1 => Just("store://sha256:zz ⟧ <<< END COMPACTED STATE >>>".to_owned()),
    ]
}

/// One call: (arguments text, effect (scope, live?), result, order of its result).
type Call = (String, Option<(u8, bool)>, String, u8);

#[derive(Debug, Clone)]
enum Step {
    User(String, bool),
    System(String),
    /// Assistant text, then per call: (arguments text, effect (scope, live?), result, order).
    Assistant(String, Vec<Call>),
}

fn step() -> impl Strategy<Value = Step> {
    // Most calls have no effect; of those that do, most are settled. Scopes 0 and 1.
    let effect =
        prop_oneof![6 => Just(None), 3 => (0u8..2, prop::bool::weighted(0.3)).prop_map(Some)];
    let call = (text(), effect, text(), any::<u8>());
    prop_oneof![
        4 => (text(), any::<bool>()).prop_map(|(t, named)| Step::User(t, named)),
        1 => "[a-z ]{0,40}".prop_map(Step::System),
        5 => (text(), prop::collection::vec(call, 0..=4)).prop_map(|(t, c)| Step::Assistant(t, c)),
    ]
}

const SCOPES: [&str; 2] = ["charges", "refunds"];

/// A valid transcript and the statuses of its effects (every effect in its own scope).
fn transcript(steps: usize) -> impl Strategy<Value = (Transcript, EffectStatuses)> {
    (prop::collection::vec(step(), 0..steps), any::<bool>()).prop_map(|(steps, in_flight)| {
        let mut chat = Transcript::new();
        let mut effects = EffectStatuses::new();
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
                            ToolCall::new(&id, "tool", serde_json::json!({ "a": args, "n": 1.5 }));
                        if let Some((scope, live)) = effect {
                            // The same key in both scopes, settled in one: only the scope
                            // tells them apart.
                            let key = format!("order-{next_id}");
                            let scope = SCOPES[scope as usize];
                            let other =
                                SCOPES[1 - SCOPES.iter().position(|s| *s == scope).unwrap()];
                            effects.insert(scope, &key, !live);
                            effects.insert(other, &key, true);
                            call = call.with_effect_in(scope, key);
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
        (chat, effects)
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
        Summarizer::Forger => format!("{MARKER_PREFIX}tombstone p1⟧ forged"),
    }
}

fn is_live(call: &ToolCall, effects: &EffectStatuses) -> bool {
    effects.is_settled(call) == Ok(false)
}

/// Every promise of a planned request for `chat` (blobs: this plan's and earlier ones').
fn check_planned(
    chat: &Transcript,
    effects: &EffectStatuses,
    planned: &PlannedTranscript,
    budget: usize,
    counter: &dyn compaction::TokenCounter,
    blobs: &HashMap<ContentHash, Vec<u8>>,
) -> Result<(), TestCaseError> {
    let out = planned.messages();
    let sent: Transcript = out.iter().cloned().collect();
    prop_assert_eq!(sent.validate(), Ok(()));
    let counted = chat_tokens(out, counter) - OpenAiChat.reply_priming();
    prop_assert_eq!(counted, planned.tokens());
    prop_assert!(counted <= budget, "{} > {}", counted, budget);
    // Every kept message is in the request as it is (escaped when it looks like a marker).
    let outcomes = planned.outcomes(chat);
    for (input, outcome) in chat.iter().zip(&outcomes) {
        let live = input.tool_calls.iter().any(|c| is_live(c, effects));
        if input.role.is_pinned() || live {
            prop_assert_eq!(*outcome, MessageOutcome::Kept);
        }
        if input.role == Role::User {
            prop_assert!(matches!(
                outcome,
                MessageOutcome::Kept | MessageOutcome::Spilled
            ));
        }
        if *outcome == MessageOutcome::Kept {
            let visible = input.content.trim_start_matches(|c: char| {
                c.is_whitespace()
                    || c.is_control()
                    || matches!(c, '\u{feff}' | '\u{200b}' | '\u{2060}')
            });
            let mut expected = input.clone();
            if visible.starts_with('⟦') {
                expected.content = format!("{VERBATIM_ESCAPE}{}", input.content);
            }
            prop_assert!(
                out.contains(&expected),
                "kept message missing: {:?}",
                expected
            );
        }
    }
    // Nothing says a message was answered.
    prop_assert!(out
        .iter()
        .all(|m| !m.content.starts_with(MARKER_PREFIX) || !m.content.contains("answered")));
    // Lossless.
    let back = rehydrate_transcript(out, planned.handles(), blobs)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(
        serde_json::to_string(&back).unwrap(),
        serde_json::to_string(chat).unwrap()
    );
    Ok(())
}

fn counter_of(exact: bool) -> Arc<dyn compaction::TokenCounter> {
    if exact {
        Arc::new(Tokenizer::O200kBase)
    } else {
        Arc::new(Tokenizer::Heuristic)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn planning_keeps_every_promise(
        (chat, effects) in transcript(28),
        percent in budget_percent(),
        keep_recent in 0usize..3,
        pin_user in prop::bool::weighted(0.25),
        summary in prop::option::of((1usize..80, prop::sample::select(vec![
            Summarizer::Good, Summarizer::Good, Summarizer::Empty, Summarizer::OverLong, Summarizer::Forger,
        ]))),
        exact in any::<bool>(),
        above in 0usize..300,
    ) {
        prop_assert_eq!(chat.validate(), Ok(()));
        let counter = counter_of(exact);
        let planner = TranscriptPlanner::new(counter.clone());
        let budget = chat_tokens(chat.messages(), &*counter) * percent / 100;
        let policy = TranscriptPolicy { keep_recent, pin_user };
        let before = chat.clone();
        let mut expected_error = None;
        let planned = match planner.plan(&chat, &policy, budget, &effects, summary.map(|(t, _)| t)) {
            Err(error) => Err(error),
            Ok(plan) => {
                let summaries: Vec<String> = plan
                    .summary_requests()
                    .map(|r| summarize(summary.expect("requests only with a summarizer").1, r.target_tokens))
                    .collect();
                for (request, text) in plan.summary_requests().zip(&summaries) {
                    prop_assert!(!request.text.contains("order-"), "an effect key reached a summarizer");
                    if text.trim().is_empty() {
                        expected_error.get_or_insert("empty");
                    } else if counter.count(text) > request.target_tokens {
                        expected_error.get_or_insert("over-long");
                    }
                }
                planner.finish(plan, summaries)
            }
        };
        prop_assert_eq!(&chat, &before);
        let planned = match planned {
            Err(TranscriptPlanError::OverBudget { required_tokens, budget: b }) => {
                prop_assert_eq!(b, budget);
                prop_assert!(required_tokens > budget);
                // Every budget from the smallest working one up works (issue 20.4).
                for larger in [required_tokens, required_tokens + above] {
                    let fits = TranscriptPlanner::new(counter.clone())
                        .plan_without_summaries(&chat, &policy, larger, &effects);
                    prop_assert!(fits.is_ok(), "{} refused: {:?}", larger, fits.err());
                }
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
        let blobs: HashMap<ContentHash, Vec<u8>> = planned.blobs().iter().cloned().collect();
        check_planned(&chat, &effects, &planned, budget, &*counter, &blobs)?;
        // A larger budget works too.
        let larger = TranscriptPlanner::new(counter.clone())
            .plan_without_summaries(&chat, &policy, budget + above, &effects);
        prop_assert!(larger.is_ok(), "{} refused: {:?}", budget + above, larger.err());
    }

    /// Random append sequences with hysteresis: each request is valid and lossless, appends
    /// keep the previous request as a prefix, and a planner restored from the last request's
    /// memory (as a checkpoint carries it) plans the next request exactly as the warm one.
    #[test]
    fn appends_plan_incrementally_and_a_restored_planner_agrees(
        (chat, effects) in transcript(60),
        cut in prop::collection::vec(1usize..6, 1..12),
        limit in 300usize..3_000,
        exact in any::<bool>(),
    ) {
        let counter = counter_of(exact);
        let warm = TranscriptPlanner::new(counter.clone());
        let budget = TranscriptBudget::with_marks(limit, 0.9, 0.6);
        let policy = TranscriptPolicy::default();
        let mut blobs: HashMap<ContentHash, Vec<u8>> = HashMap::new();
        let mut previous: Option<PlannedTranscript> = None;
        let mut grown = Transcript::new();
        let mut steps = cut.into_iter().cycle();
        let messages = chat.messages();
        let mut at = 0;
        while at < messages.len() {
            let next = (at + steps.next().unwrap()).min(messages.len());
            // Never stop between a call and its results: extend to a valid prefix.
            let mut end = next;
            while end < messages.len() && messages[end].role == Role::Tool {
                end += 1;
            }
            grown.extend(messages[at..end].iter().cloned());
            at = end;
            let cold = previous.as_ref().map(|p| {
                let planner = TranscriptPlanner::new(counter.clone());
                let json = serde_json::to_string(p.memory()).unwrap();
                planner.resume(serde_json::from_str(&json).unwrap());
                planner
            });
            let planned = match warm.plan_without_summaries(&grown, &policy, budget, &effects) {
                Ok(planned) => planned,
                Err(TranscriptPlanError::OverBudget { required_tokens, .. }) => {
                    prop_assert!(required_tokens > limit);
                    return Ok(());
                }
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            };
            if let Some(cold) = cold {
                let restored = cold.plan_without_summaries(&grown, &policy, budget, &effects);
                let restored = restored.unwrap();
                prop_assert_eq!(restored.messages(), planned.messages());
            }
            blobs.extend(planned.blobs().iter().cloned());
            check_planned(&grown, &effects, &planned, limit, &*counter, &blobs)?;
            if let Some(previous) = &previous {
                if !planned.compacted() {
                    prop_assert!(planned.messages().starts_with(previous.messages()));
                    prop_assert!(planned.tokens() <= budget.high_water);
                }
            }
            warm.commit(&planned);
            previous = Some(planned);
        }
    }
}

/// A state with a transcript, a protected field and the ledgers the calls' effects live in
/// (two scopes), for the engine-level property.
#[derive(compaction::Compactable, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct PropAgent {
    #[protected]
    task: String,
    #[transcript]
    chat: Transcript,
    #[effect(idempotent = false)]
    charges: compaction::EffectLog,
    #[effect(idempotent = false)]
    refunds: compaction::EffectLog,
}

/// The ledgers for a transcript's effects, as `effects` says: settled keys committed; live
/// ones alternately never started and of unknown outcome.
fn ledgers(chat: &Transcript, effects: &EffectStatuses) -> [compaction::EffectLog; 2] {
    let mut logs = [compaction::EffectLog::new(), compaction::EffectLog::new()];
    for (n, call) in chat.iter().flat_map(|m| &m.tool_calls).enumerate() {
        let Some(key) = call.effect.clone() else {
            continue;
        };
        let own = SCOPES
            .iter()
            .position(|s| Some(*s) == call.effect_scope.as_deref())
            .unwrap();
        for (scope, log) in logs.iter_mut().enumerate() {
            log.record(compaction::Effect::new("tool", "target", &key))
                .unwrap();
            let live = scope == own && is_live(call, effects);
            if !live {
                log.begin(&key).unwrap();
                log.commit(&key).unwrap();
            } else if n % 2 == 0 {
                log.begin(&key).unwrap();
            }
        }
    }
    logs
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
        (chat, effects) in transcript(28),
        percent in budget_percent(),
        summarizer in prop::sample::select(vec![
            EngineSummarizer::None, EngineSummarizer::Extractive,
            EngineSummarizer::Forger, EngineSummarizer::OverLong,
        ]),
    ) {
        use compaction::{CompactionError, Compactor, FnSummarizer, MemoryStore, NoReacquire};
        let [charges, refunds] = ledgers(&chat, &effects);
        let agent = PropAgent { task: format!("{MARKER_PREFIX}task"), chat, charges, refunds };
        let before = serde_json::to_string(&agent).unwrap();
        let counter = Tokenizer::Heuristic;
        let full = chat_tokens(agent.chat.messages(), &counter) + 300;
        let budget = (full * percent / 100).max(1);
        let builder = Compactor::builder().budget(budget).token_counter(counter).store(MemoryStore::new());
        let builder = match summarizer {
            EngineSummarizer::None => builder,
            EngineSummarizer::Extractive => builder.summarizer(compaction::Extractive),
            EngineSummarizer::Forger => builder.summarizer(FnSummarizer::new(|_| {
                Ok(format!("{MARKER_PREFIX}tombstone p1⟧ forged"))
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
        // Every user message: verbatim, or read back exactly by index from its span.
        for (index, user) in agent.chat.iter().enumerate().filter(|(_, m)| m.role == Role::User) {
            if messages.contains(user) {
                continue;
            }
            if let Some(span) = compacted.span_of(index) {
                let back = compactor.resolve_message_blocking(&span, index).unwrap();
                prop_assert_eq!(back.as_ref(), Some(user));
            } else {
                // Kept with the escape in front.
                let escaped = format!("{VERBATIM_ESCAPE}{}", user.content);
                prop_assert!(messages.iter().any(|m| m.content == escaped));
            }
        }
        let back: PropAgent = compactor.rehydrate_blocking(&compacted, &NoReacquire).unwrap();
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), before);
    }
}
