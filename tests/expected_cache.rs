//! What a session's request tells the agent about the prompt cache (issue 46): the prefix it
//! expects a provider to serve from what the previous request wrote
//! (`SessionRequest::expected_cache`), checked against the chat formula and, on Anthropic's
//! wire, against the cache model; and the breakpoint that ends the kept prefix, so a request
//! that adds more than Anthropic's 20-block lookback after the previous one still reads it.

mod session_driver;

use compaction::anthropic::AnthropicCaching;
use compaction::cache::{
    AnthropicCacheModel, AnthropicCacheRules, CacheTtl, OpenAiCacheRules, ANTHROPIC_LOOKBACK_BLOCKS,
};
use compaction::session::{ExpectedCache, Session, SessionRequest};
use compaction::transcript::chat_tokens;
use compaction::{MemoryLedger, MemoryStore, Message, Tokenizer, ToolCall};
use serde_json::json;
use session_driver::{compactor, fresh_agent, open_on, play_to_end, Agent, Script, World};

struct Nowhere;

impl World for Nowhere {
    fn perform(&self, _key: &str) {}
}

/// Plays `turns` of the driver's script on `session`, returning every request.
fn play(session: &mut Session<Agent>, seed: u64, turns: usize) -> Vec<SessionRequest> {
    play_to_end(session, &Script { seed, turns }, &Nowhere)
}

fn open(store: &MemoryStore, ledger: &MemoryLedger) -> Session<Agent> {
    open_on("agent-cache", store, ledger)
}

#[test]
fn each_request_says_which_prefix_the_cache_serves() {
    let counter = Tokenizer::O200kBase;
    for seed in [3, 17] {
        let mut session = open(&MemoryStore::new(), &MemoryLedger::new());
        let requests = play(&mut session, seed, 14);
        assert_eq!(requests[0].expected_cache(), ExpectedCache::default());
        let (mut points, mut appends) = (0, 0);
        for pair in requests.windows(2) {
            let (previous, request) = (&pair[0], &pair[1]);
            let expected = request.expected_cache();
            let reused = request.reused_prefix_len();
            assert_eq!(expected.reused_messages, reused);
            assert_eq!(
                request.messages()[..reused],
                previous.messages()[..reused],
                "seed {seed}: the reused messages are the previous request's"
            );
            // Tokens as the budget counts them: the chat formula over the prefix (this agent
            // sends no tools), computed here from the messages alone.
            assert_eq!(
                expected.reused_tokens,
                chat_tokens(&request.messages()[..reused], &counter),
                "seed {seed}"
            );
            if request.is_compaction_point() {
                points += 1;
                let kept = reused.min(previous.stable_prefix_len());
                assert_eq!(expected.breakpoint_messages, kept, "seed {seed}");
                assert!(expected.breakpoint_tokens <= expected.reused_tokens);
                assert!(
                    expected.reused_tokens < request.tokens(),
                    "a point changed something"
                );
            } else {
                appends += 1;
                // An append sends the whole previous request first.
                assert_eq!(reused, previous.messages().len(), "seed {seed}");
                assert_eq!(expected.breakpoint_messages, reused);
                assert_eq!(expected.reused_tokens, previous.tokens(), "seed {seed}");
            }
        }
        assert!(
            points >= 2 && appends >= 5,
            "seed {seed}: {points} / {appends}"
        );
    }
}

#[test]
fn the_wire_rules_round_what_is_expected() {
    let expected = ExpectedCache {
        reused_messages: 9,
        reused_tokens: 1_400,
        breakpoint_messages: 4,
        breakpoint_tokens: 1_100,
    };
    let sonnet = AnthropicCacheRules::for_model("claude-sonnet-4-5");
    let opus = AnthropicCacheRules::for_model("claude-opus-4-5");
    assert_eq!(expected.anthropic_tokens(&sonnet), 1_100);
    assert_eq!(
        expected.anthropic_tokens(&opus),
        0,
        "under Opus 4.5's 4,096"
    );
    let openai = OpenAiCacheRules::default();
    assert_eq!(expected.openai_tokens(&openai), 1_024 + 2 * 128);
    let short = ExpectedCache {
        reused_tokens: 1_023,
        ..expected
    };
    assert_eq!(short.openai_tokens(&openai), 0);
    assert_eq!(ExpectedCache::default().anthropic_tokens(&sonnet), 0);
}

#[test]
fn a_resumed_session_expects_what_the_warm_one_would() {
    // Two runs of one agent through the same turns; the second process restarts before its
    // next request. Both requests say the same of the cache: the checkpoint carries what the
    // previous request sent and where its stable prefix ended.
    let next = |restart: bool| {
        let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
        let mut session = open(&store, &ledger);
        play(&mut session, 5, 6);
        // The model's last reply durable, as an agent makes it before it waits for its user.
        session.finish_blocking().unwrap();
        if restart {
            drop(session);
            session = open(&store, &ledger);
            assert!(session.resumed_from().is_some());
        }
        session.push(Message::user("turn 6: one more thing"));
        session.next_request_blocking().unwrap()
    };
    let (warm, resumed) = (next(false), next(true));
    assert_eq!(warm.messages(), resumed.messages());
    assert_eq!(warm.expected_cache(), resumed.expected_cache());
    assert!(resumed.expected_cache().breakpoint_tokens > 0);
}

/// Anthropic's cache with every prefix cacheable (minimum 0), as the requests are small.
fn any_length() -> AnthropicCacheRules {
    AnthropicCacheRules {
        min_cacheable_tokens: 0,
        ttl: CacheTtl::FiveMinutes,
    }
}

#[test]
fn a_turn_wider_than_the_lookback_still_reads_the_previous_request() {
    // No opening, so the stable prefix is the window alone: only the breakpoint that ends what
    // the previous request sent can find its entry once the reply adds 2 x 15 blocks.
    let mut session = Session::builder("agent-wide")
        .compactor(compactor(60_000))
        .keep_first(0)
        .open_blocking(fresh_agent)
        .unwrap();
    session.push(Message::user(
        "read every file of svc-1, then say what it does",
    ));
    let first = session.next_request_blocking().unwrap();
    let calls: Vec<ToolCall> = (0..15)
        .map(|i| {
            let path = format!("src/svc_1/f{i}.rs");
            ToolCall::new(format!("toolu_{i}"), "read_file", json!({ "path": path }))
        })
        .collect();
    session
        .push_response(Message::assistant_with_tools("", calls.clone()))
        .unwrap();
    for call in &calls {
        session.answer(call, "fn main() {}\n".repeat(30)).unwrap();
    }
    let second = session.next_request_blocking().unwrap();
    assert!(!second.is_compaction_point());
    assert!(2 * calls.len() > ANTHROPIC_LOOKBACK_BLOCKS);
    let caching = AnthropicCaching::for_model("claude-test").min_cacheable_tokens(0);
    let counter = Tokenizer::O200kBase;
    let mut cache = AnthropicCacheModel::new(any_length());
    let first_blocks = first
        .anthropic_request_with("claude-test", 1024, &caching)
        .unwrap()
        .prompt_blocks(&counter);
    let sent: usize = first_blocks.blocks().iter().map(|b| b.tokens).sum();
    cache.send(0, first_blocks.blocks()).unwrap();
    let second_wire = second
        .anthropic_request_with("claude-test", 1024, &caching)
        .unwrap();
    let used = cache
        .send(20_000, second_wire.prompt_blocks(&counter).blocks())
        .unwrap();
    assert_eq!(used.read, sent, "the whole previous request is read");
    // The same list placed without knowing what the previous request sent reads only what
    // its stable prefix's entry holds.
    let mut cold = AnthropicCacheModel::new(any_length());
    cold.send(0, first_blocks.blocks()).unwrap();
    let blind = caching
        .request(
            "claude-test",
            1024,
            second.messages(),
            second.stable_prefix_len(),
        )
        .unwrap();
    let used = cold
        .send(20_000, blind.prompt_blocks(&counter).blocks())
        .unwrap();
    assert!(used.read < sent, "{} < {sent}", used.read);
}
