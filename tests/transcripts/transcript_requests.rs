//! The requests of a `#[transcript]` agent over many turns (issues 20, 21, 22): a stable
//! request (hysteresis, monotone history, the window split into a stable front and appended
//! state updates, the prefix boundaries), long histories of short user turns, results many
//! times the budget, pending user messages, effects by scope and key, and a restart that plans
//! the next request exactly as the warm process would have.

use compaction::transcript::{chat_tokens, MARKER_PREFIX};
use compaction::{
    Compactable, Compacted, CompactionError, Compactor, Effect, EffectLog, Message, NoReacquire,
    Role, Tokenizer, ToolCall, Transcript, SESSION_HIGH_WATER, SESSION_LOW_WATER,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[protected]
    plan_step: u32,
    #[transcript]
    chat: Transcript,
    #[effect(idempotent = false)]
    charges: EffectLog,
    #[effect(idempotent = false)]
    refunds: EffectLog,
}

fn agent() -> Agent {
    Agent {
        rules: vec!["never touch /etc/prod".into()],
        plan_step: 0,
        chat: Transcript::from_messages(vec![Message::system("You are a careful agent.")]).unwrap(),
        charges: EffectLog::new(),
        refunds: EffectLog::new(),
    }
}

fn session(budget: usize) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .high_water_mark(SESSION_HIGH_WATER)
        .low_water_mark(SESSION_LOW_WATER)
        .build()
        .unwrap()
}

/// A deterministic size, so every run is the same session.
fn size(turn: usize, salt: usize, low: usize, high: usize) -> usize {
    let mut x = (turn as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((salt as u64) << 29);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    low + (x as usize) % (high - low)
}

/// One turn: a short user message, then one to three steps (a call and its result of a few
/// hundred to a few thousand words), then an answer.
fn play_turn(agent: &mut Agent, turn: usize) {
    agent.chat.push(Message::user(format!(
        "turn {turn}: please look at module {turn} next"
    )));
    for step in 0..size(turn, 1, 1, 4) {
        let id = format!("c{turn}_{step}");
        agent.chat.push(Message::assistant_with_tools(
            "",
            vec![ToolCall::new(
                &id,
                "read",
                json!({"module": turn, "step": step}),
            )],
        ));
        let words = size(turn, step + 2, 50, 700);
        let body: String = (0..words)
            .map(|w| format!("w{} ", (w * 7 + turn) % 97))
            .collect();
        agent.chat.push(Message::tool_result(&id, body));
    }
    agent
        .chat
        .push(Message::assistant(format!("Module {turn} is fine.")));
}

fn common_prefix(a: &[Message], b: &[Message]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Issue 22.3: between compaction points each request is the previous one plus what is new
/// (state updates included: the state changes every few turns), the request before a
/// compaction point is a prefix of every later request until the next one, the marks hold, the
/// front window carries no counter, and the prefix boundaries the checkpoint gives are right.
#[test]
fn requests_only_append_between_compaction_points_and_say_where_their_prefix_ends() {
    let budget = 16_000;
    let compactor = session(budget);
    let mut agent = agent();
    let mut previous: Option<Compacted<Agent>> = None;
    let (mut points, mut appends, mut updates) = (0, 0, 0);
    for turn in 0..120 {
        play_turn(&mut agent, turn);
        if turn % 7 == 3 {
            agent.plan_step += 1;
        }
        let compacted = compactor.compact_blocking(&agent).unwrap();
        let messages = compacted.messages();
        let tokens = chat_tokens(&messages, &Tokenizer::O200kBase);
        assert!(tokens <= budget, "turn {turn}: {tokens}");
        assert_eq!(compacted.request_tokens(), Some(tokens));
        assert!(
            !messages[0].content.contains("compaction #"),
            "{}",
            messages[0].content
        );
        let sent: Transcript = messages[1..].iter().cloned().collect();
        assert_eq!(sent.validate(), Ok(()));
        updates += messages
            .iter()
            .filter(|m| m.content.starts_with(&format!("{MARKER_PREFIX}update⟧")))
            .count();
        if std::env::var_os("SHOW_REQUESTS").is_some() {
            eprintln!(
                "turn {turn}: {tokens} tokens, {} messages, point {}, reused {}, stable {}",
                messages.len(),
                compacted.is_compaction_point(),
                compacted.reused_prefix_len(),
                compacted.stable_prefix_len()
            );
        }
        if let Some(previous) = &previous {
            let before = previous.messages();
            let common = common_prefix(&before, &messages);
            assert_eq!(compacted.reused_prefix_len(), common, "turn {turn}");
            if compacted.is_compaction_point() {
                points += 1;
                assert!(tokens <= budget * 9 / 10 + 50, "turn {turn}: {tokens}");
            } else {
                appends += 1;
                assert_eq!(common, before.len(), "turn {turn}: not an append");
                assert!(tokens <= budget * 9 / 10, "turn {turn}: {tokens}");
            }
        }
        assert!(compacted.stable_prefix_len() >= 1);
        previous = Some(compacted);
    }
    assert!(points >= 3, "{points} compaction points");
    assert!(appends > 2 * points, "{appends} appends, {points} points");
    assert!(
        updates > 0,
        "the plan step changed: a state update was appended"
    );
    // The last request rehydrates to the agent, plan step and all.
    let back: Agent = compactor
        .rehydrate_blocking(previous.as_ref().unwrap(), &NoReacquire)
        .unwrap();
    assert_eq!(back, agent);
}

/// Issue 20.6 / 22: a process restarted from the last checkpoint (serialized, loaded, resumed)
/// plans the next request exactly as the warm one: same front window, same handles, same
/// blocks, the previous request still a prefix.
#[test]
fn a_resumed_compactor_sends_the_request_the_warm_one_would_have() {
    let warm = session(8_000);
    let mut agent = agent();
    for turn in 0..40 {
        play_turn(&mut agent, turn);
        if turn % 5 == 0 {
            agent.plan_step += 1;
        }
        let checkpoint = warm.compact_blocking(&agent).unwrap();
        let saved = serde_json::to_string(&checkpoint).unwrap();
        // Another process: same configuration, loads the checkpoint and the agent's state.
        let cold = session(8_000);
        let loaded: Compacted<Agent> = serde_json::from_str(&saved).unwrap();
        cold.resume(&loaded).unwrap();
        let state: Agent = serde_json::from_str(&serde_json::to_string(&agent).unwrap()).unwrap();
        let mut next_warm = agent.clone();
        let mut next_cold = state;
        play_turn(&mut next_warm, 1_000 + turn);
        play_turn(&mut next_cold, 1_000 + turn);
        let a = warm.compact_blocking(&next_warm).unwrap();
        let b = cold.compact_blocking(&next_cold).unwrap();
        assert_eq!(a.messages(), b.messages(), "turn {turn}");
        assert_eq!(a.reused_prefix_len(), b.reused_prefix_len());
        // The warm compactor goes on with the real history.
        let _ = warm.compact_blocking(&agent).unwrap();
    }
}

/// Issue 20: thousands of short user turns fit 16k and 32k, and the smallest form does not
/// grow with the history (user messages leave in runs, not one stub each).
#[test]
fn thousands_of_short_user_turns_fit_16k_and_32k() {
    let mut agent = agent();
    for turn in 0..2_000 {
        agent.chat.push(Message::user(format!(
            "question {turn}: what about the {} case, and keep it under {} ms?",
            ["first", "second", "third"][turn % 3],
            turn * 7 % 500
        )));
        if turn % 3 == 0 {
            let id = format!("c{turn}");
            agent.chat.push(Message::assistant_with_tools(
                "",
                vec![ToolCall::new(&id, "search", json!({"q": turn}))],
            ));
            agent.chat.push(Message::tool_result(
                &id,
                "result line\n".repeat(40 + turn % 60),
            ));
        } else {
            agent.chat.push(Message::assistant(
                "Here is the answer, in a few sentences. ".repeat(4 + turn % 20),
            ));
        }
    }
    for budget in [16_000, 32_000] {
        let compactor = Compactor::builder()
            .budget(budget)
            .token_counter(Tokenizer::O200kBase)
            .build()
            .unwrap();
        let compacted = compactor.compact_blocking(&agent).unwrap();
        let messages = compacted.messages();
        assert!(chat_tokens(&messages, &Tokenizer::O200kBase) <= budget);
        let runs = messages
            .iter()
            .filter(|m| m.content.starts_with(&format!("{MARKER_PREFIX}users ")))
            .count();
        assert!((1..=8).contains(&runs), "{runs} user runs");
        // Every user message is verbatim or comes back by index.
        for (index, user) in agent
            .chat
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::User)
        {
            if index % 97 != 0 || messages.contains(user) {
                continue;
            }
            let span = compacted.span_of(index).expect("in a user run");
            let back = compactor.resolve_message_blocking(&span, index).unwrap();
            assert_eq!(back.as_ref(), Some(user));
        }
    }
}

/// Issue 20.3: a tool result several times the budget in the newest turn is paged, not
/// refused; the report names it, and the whole result is in the store.
#[test]
fn a_result_several_times_the_budget_is_paged_and_named() {
    let mut agent = agent();
    play_turn(&mut agent, 0);
    agent.chat.push(Message::user("run the whole test suite"));
    agent.chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new("t", "run_tests", json!({"suite": "all"}))],
    ));
    let log: String = (0..20_000).map(|i| format!("test_{i} ... ok\n")).collect();
    agent.chat.push(Message::tool_result("t", log.clone()));
    let budget = 4_000;
    assert!(chat_tokens(agent.chat.messages(), &Tokenizer::O200kBase) > 10 * budget);
    for compactor in [session(budget), session(budget * 3)] {
        let compacted = compactor.compact_blocking(&agent).unwrap();
        let messages = compacted.messages();
        assert!(chat_tokens(&messages, &Tokenizer::O200kBase) <= compactor.budget());
        let report = compacted.report().transcript.clone().unwrap();
        assert_eq!(report.paged.len(), 1, "{report:?}");
        assert_eq!(report.paged[0].tool_call_id, "t");
        assert_eq!(report.paged[0].bytes, log.len());
        let page = messages.last().unwrap();
        assert!(page.content.contains("test_0 ... ok"));
        assert!(page.content.contains("test_19999 ... ok"));
        let back: Agent = compactor
            .rehydrate_blocking(&compacted, &NoReacquire)
            .unwrap();
        assert_eq!(back.chat, agent.chat);
    }
}

/// Issue 21.3: two user messages before the agent replies are pending: they stay verbatim at
/// every budget that works, and nothing calls them answered.
#[test]
fn pending_user_messages_are_never_called_answered() {
    let mut agent = agent();
    for turn in 0..30 {
        play_turn(&mut agent, turn);
    }
    agent.chat.push(Message::user("deploy to staging"));
    agent.chat.push(Message::user("but never on a Friday"));
    let full = chat_tokens(agent.chat.messages(), &Tokenizer::O200kBase);
    let mut worked = 0;
    for budget in (1_000..full).step_by(full / 12) {
        let Ok(compacted) = session(budget).compact_blocking(&agent) else {
            continue;
        };
        worked += 1;
        let messages = compacted.messages();
        let n = agent.chat.len();
        assert!(messages.contains(&agent.chat.messages()[n - 1]), "{budget}");
        assert!(messages.contains(&agent.chat.messages()[n - 2]), "{budget}");
        assert!(
            messages.iter().all(|m| !m.content.contains("answered")),
            "{budget}"
        );
    }
    assert!(worked > 5);
}

/// Issue 21.4: a committed `order-42` in `refunds` never lets the unknown charge `order-42` in
/// `charges` be folded; a key-only call that both scopes hold is refused.
#[test]
fn effects_are_looked_up_by_scope_and_key() {
    let mut agent = agent();
    agent
        .chat
        .push(Message::user("refund order 42, then charge it again"));
    agent.chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new("r", "refund", json!({"order": 42}))
            .with_effect_in("refunds", "order-42")],
    ));
    agent.chat.push(Message::tool_result("r", "refunded"));
    agent.chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new("c", "charge", json!({"order": 42}))
            .with_effect_in("charges", "order-42")],
    ));
    agent.chat.push(Message::tool_result("c", "timeout"));
    for turn in 0..40 {
        play_turn(&mut agent, turn);
    }
    agent
        .refunds
        .record(Effect::new("refund", "order-42", "order-42"))
        .unwrap();
    agent.refunds.begin("order-42").unwrap();
    agent.refunds.commit("order-42").unwrap();
    agent
        .charges
        .record(Effect::new("charge", "order-42", "order-42"))
        .unwrap();
    agent.charges.begin("order-42").unwrap(); // timed out: unknown
    let compactor = session(6_000);
    let compacted = compactor.compact_blocking(&agent).unwrap();
    let messages = compacted.messages();
    let charge = &agent.chat.messages()[4];
    assert!(
        messages.contains(charge),
        "the unknown charge stays in view"
    );
    // The refund is settled: it may fold with its turn.
    assert!(!messages.contains(&agent.chat.messages()[2]));
    // A call naming the key alone is ambiguous: refused, never guessed.
    let mut vague = agent.clone();
    vague.chat.push(Message::user("and again"));
    vague.chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new("v", "charge", json!({})).with_effect("order-42")],
    ));
    let err = compactor.compact_blocking(&vague).unwrap_err();
    assert!(
        matches!(&err, CompactionError::AmbiguousEffect { key, scopes, .. }
            if key == "order-42" && scopes == &["charges".to_owned(), "refunds".to_owned()]),
        "{err}"
    );
}
