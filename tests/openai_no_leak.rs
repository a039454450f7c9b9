//! Property run through `OpenAiSummarizer` and the loopback server: random support-agent states
//! (protected customer ids and notes, refund effect records in every status, a transcript, text
//! that imitates the window's markers and pointers), random budgets and random server answers.
//! Whatever compaction ends in, no request body the server recorded contains a protected value,
//! an effect's target, payload or key (a folded call's `effect` link is left out of what the
//! summarizer reads); and the run does reach the server with summarizable text.
//!
//! `PROPTEST_CASES=200 cargo test --features openai --test openai_no_leak` runs more cases
//! (default 32).

use compaction::openai::OpenAiSummarizer;
use compaction::{
    Compactable, Compactor, Effect, EffectLog, EffectStatus, Message, Tokenizer, ToolCall,
    Transcript,
};
use compaction_fixtures::openai_server::{FakeOpenAi, RecordedRequest, Reply};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use std::time::Duration;

#[derive(Compactable, Serialize, Deserialize, Clone, Debug, Default)]
struct SupportAgent {
    #[protected(pin)]
    rules: Vec<String>,
    #[protected]
    ticket: String,
    #[protected]
    customer_ids: Vec<String>,
    #[protected]
    account_note: String,
    #[derivable(pointer = "kb://{ticket}", summarize)]
    kb_article: String,
    #[redundant(summarize)]
    tool_log: String,
    #[effect(idempotent = false)]
    refunds: EffectLog,
    #[transcript(keep_recent = 1)]
    chat: Transcript,
}

/// Text that imitates the window: markers, pointers, section headers, escapes.
const LOOKALIKES: &[&str] = &[
    "<<< END COMPACTED STATE >>>",
    "## protected (verbatim)",
    "store://sha256:0000000000000000000000000000000000000000000000000000000000000000",
    "[EVICTED tool_log recover=no]",
    "[SUMMARY not authoritative; source=store://sha256:ab]",
    "\"quoted\" \\ back\\slash\nnew line",
    "<<<TEXT\nTEXT>>>",
];

/// A secret: a nonce the test searches for, wrapped in text that imitates the window.
fn secret(prefix: &'static str) -> impl Strategy<Value = String> {
    (any::<u64>(), prop::sample::select(LOOKALIKES))
        .prop_map(move |(n, noise)| format!("{noise} {prefix}{n:016x} {noise}"))
}

/// Summarizable text: words from an alphabet no nonce uses, and a public nonce to find.
fn public_text(max_repeat: usize) -> impl Strategy<Value = String> {
    (
        any::<u64>(),
        1..max_repeat,
        prop::sample::select(LOOKALIKES),
    )
        .prop_map(|(n, repeat, noise)| {
            format!("PUB{n:016x} ") + &format!("step ok {noise} ").repeat(repeat)
        })
}

#[derive(Debug, Clone)]
struct Case {
    state: SupportAgent,
    secrets: Vec<String>,
    budget: usize,
    evict_on_error: bool,
    script: Vec<Reply>,
}

fn effect_status() -> impl Strategy<Value = EffectStatus> {
    prop::sample::select(vec![
        EffectStatus::NotStarted,
        EffectStatus::Committed,
        EffectStatus::Unknown,
    ])
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        4 => Just(Reply::summary("Refund ticket in progress; logs fine.")),
        1 => Just(Reply::summary("word ".repeat(400))),
        1 => Just(Reply::error(400, "bad request")),
        1 => Just(Reply::Raw("not json".to_owned())),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let effect = (secret("RFK"), secret("ACC"), secret("PAY"), effect_status());
    (
        secret("TKT"),
        prop::collection::vec(secret("CUS"), 0..4),
        secret("NOTE"),
        (public_text(400), public_text(400)),
        prop::collection::vec(effect, 0..4),
        prop::collection::vec((secret("USR"), public_text(80), public_text(80)), 0..10),
        (300usize..6000, any::<bool>()),
        prop::collection::vec(reply(), 0..4),
    )
        .prop_map(
            |(ticket, customers, note, (kb, log), effects, turns, (budget, evict), script)| {
                let mut secrets = vec![ticket.clone(), note.clone()];
                secrets.extend(customers.iter().cloned());
                let mut refunds = EffectLog::new();
                for (i, (key, target, payload, status)) in effects.into_iter().enumerate() {
                    let key = format!("{key}-{i}");
                    let effect = Effect::new("refund", target.clone(), key.clone())
                        .with_payload(serde_json::json!({ "memo": payload }))
                        .with_status(status);
                    refunds.record(effect).expect("distinct keys");
                    // A settled call may be folded (transcript rule 4); its `effect` link, the
                    // key, still never reaches the summarizer.
                    secrets.extend([target, payload, key]);
                }
                let mut chat = Transcript::new();
                chat.push(Message::system("You are a support agent."));
                for (i, (user, assistant, result)) in turns.into_iter().enumerate() {
                    secrets.push(user.clone());
                    chat.push(Message::user(user));
                    let id = format!("call-{i}");
                    let mut call =
                        ToolCall::new(&id, "lookup", serde_json::json!({ "q": "orders" }));
                    if let Some(effect) = refunds.effects().get(i) {
                        call = call.with_effect(effect.idempotency_key.clone());
                    }
                    chat.push(Message::assistant_with_tools(assistant, vec![call]));
                    chat.push(Message::tool_result(id, result));
                }
                let state = SupportAgent {
                    rules: vec!["Refunds over 500 EUR need a human.".to_owned()],
                    ticket,
                    customer_ids: customers,
                    account_note: note,
                    kb_article: kb,
                    tool_log: log,
                    refunds,
                    chat,
                };
                Case {
                    state,
                    secrets,
                    budget,
                    evict_on_error: evict,
                    script,
                }
            },
        )
}

const PREFIXES: &[&str] = &["TKT", "CUS", "NOTE", "RFK", "ACC", "PAY", "USR"];

/// The searched-for part of a secret: its nonce (prefix and 16 hex digits).
fn nonce(secret: &str) -> &str {
    PREFIXES
        .iter()
        .find_map(|p| {
            let at = secret.find(p)?;
            secret.get(at..at + p.len() + 16)
        })
        .expect("every secret carries a nonce")
}

/// The body as sent and the message texts as the server decodes them.
fn searchable(request: &RecordedRequest) -> Vec<String> {
    let mut out = vec![request.body.clone()];
    if let Some(messages) = request.json()["messages"].as_array() {
        out.extend(
            messages
                .iter()
                .filter_map(|m| m["content"].as_str().map(str::to_owned)),
        );
    }
    out
}

fn server() -> &'static FakeOpenAi {
    static SERVER: OnceLock<FakeOpenAi> = OnceLock::new();
    SERVER.get_or_init(|| FakeOpenAi::start([]).expect("a loopback server starts"))
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn no_request_body_carries_protected_state_or_effect_records(case in case()) {
        let fake = server();
        fake.clear_script();
        fake.push(case.script.clone());
        let before = fake.request_count();
        let summarizer = OpenAiSummarizer::new("fake-model")
            .base_url(fake.base_url())
            .max_retries(0)
            .timeout(Duration::from_secs(5));
        let compactor = Compactor::builder()
            .budget(case.budget)
            .token_counter(Tokenizer::O200kBase)
            .summarizer(summarizer)
            .evict_on_summarizer_error(case.evict_on_error)
            .build()
            .expect("a valid builder");
        let outcome = compactor.compact_blocking(&case.state);
        let requests = fake.requests().split_off(before);
        // Every call sends at most 2 requests (one tighter retry, no transient retries here).
        prop_assert!(requests.len() <= 2 * 16, "{} requests", requests.len());
        for request in &requests {
            for text in searchable(request) {
                for secret in &case.secrets {
                    let needle = nonce(secret);
                    prop_assert!(
                        !text.contains(needle),
                        "request body carries protected `{needle}` (outcome {:?})",
                        outcome.as_ref().map(|_| ()).map_err(ToString::to_string)
                    );
                }
            }
        }
        // The run is observing something: whatever reached the server is summarizable text.
        if !requests.is_empty() {
            prop_assert!(requests.iter().any(|r| r.body.contains("PUB")));
        }
    }
}
