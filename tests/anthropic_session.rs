//! A session's requests on Anthropic's Messages wire (feature `anthropic-types`):
//! `SessionRequest::anthropic_request` puts `cache_control` breakpoints where they pay (the end
//! of the system prompt, the last block of the stable prefix, the request's last block, each
//! only on a prefix that reaches the model's minimum, never more than four), every request
//! passes the documented conversation rules, between compaction points everything up to the
//! stable prefix's breakpoint is byte-identical request to request, and on the cache model
//! each appended request reads everything the one before it sent.

mod session_driver;

use compaction::anthropic::{
    check_anthropic, to_anthropic, AnthropicCaching, AnthropicError, AnthropicRequest,
    AnthropicResponse, CacheControl, ContentBlock, SystemBlock, MIN_THINKING_BUDGET,
};
use compaction::cache::{AnthropicCacheModel, AnthropicCacheRules, CacheTtl};
use compaction::session::{Session, SessionRequest};
use compaction::{MemoryLedger, MemoryStore, Message, Role, Tokenizer};
use serde_json::json;
use session_driver::family::{play_member, Played};
use session_driver::{compactor, effect_of, fresh_agent, play_to_end, Agent, Script, World};
use std::sync::Mutex;

#[derive(Default)]
struct Performed(Mutex<Vec<String>>);

impl World for Performed {
    fn perform(&self, key: &str) {
        self.0.lock().unwrap().push(key.to_owned());
    }
}

/// Where the request's breakpoints are: `(None, i)` for system block `i`, `(Some(m), b)` for
/// block `b` of message `m`.
fn breakpoints(request: &AnthropicRequest) -> Vec<(Option<usize>, usize)> {
    let mut found: Vec<(Option<usize>, usize)> = request
        .system
        .iter()
        .enumerate()
        .filter(|(_, b)| b.cache_control.is_some())
        .map(|(i, _)| (None, i))
        .collect();
    for (m, message) in request.messages.iter().enumerate() {
        for (b, block) in message.content.iter().enumerate() {
            let control = match block {
                ContentBlock::Text { cache_control, .. }
                | ContentBlock::ToolUse { cache_control, .. }
                | ContentBlock::ToolResult { cache_control, .. } => cache_control.as_ref(),
                _ => None,
            };
            if control.is_some() {
                found.push((Some(m), b));
            }
        }
    }
    found
}

/// The JSON of everything up to and including the breakpoint: what the provider caches.
fn cached_prefix(request: &AnthropicRequest, at: (Option<usize>, usize)) -> String {
    let (system, messages): (&[SystemBlock], Vec<serde_json::Value>) = match at {
        (None, i) => (&request.system[..=i], Vec::new()),
        (Some(m), b) => {
            let mut messages: Vec<serde_json::Value> = request.messages[..m]
                .iter()
                .map(|message| serde_json::to_value(message).unwrap())
                .collect();
            let turn = &request.messages[m];
            messages.push(json!({"role": turn.role, "content": &turn.content[..=b]}));
            (&request.system, messages)
        }
    };
    serde_json::to_string(&json!({"system": system, "messages": messages})).unwrap()
}

/// A fresh session of the driver's agent at a 4,000-token budget, on memory.
fn opened(agent_id: &str) -> Session<Agent> {
    Session::builder(agent_id)
        .compactor(compactor(4_000))
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap()
}

/// Every breakpoint placed whatever the prefix's length (minimum 0): the three places.
fn everywhere() -> AnthropicCaching {
    AnthropicCaching::for_model("claude-test").min_cacheable_tokens(0)
}

/// The block that ends the first `len` messages of `request`, converted alone (a state update
/// late in the request as the user text block it is sent as).
fn end_of(request: &SessionRequest, len: usize) -> (Option<usize>, usize) {
    let leading = request.messages()[..len]
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let laid_out: Vec<Message> = (request.messages()[..len].iter().enumerate())
        .map(|(i, m)| match m.role {
            Role::System if i >= leading => Message::user(m.content.clone()),
            _ => m.clone(),
        })
        .collect();
    let prefix = to_anthropic(&laid_out).expect("a prefix converts alone");
    match prefix.messages.last() {
        None => (None, prefix.system.len() - 1),
        Some(last) => (Some(prefix.messages.len() - 1), last.content.len() - 1),
    }
}

/// Asserts that `wire` (made from `request` with [`everywhere`]) has a breakpoint exactly
/// where the first `stable_prefix_len()` messages end, converted alone, one on the system
/// prompt's end, one on its last block and, when the request sends more of the previous one
/// as it was than its stable prefix, one where that ends; and no other. Returns the stable
/// prefix's.
fn breakpoint_at_the_stable_prefix(
    request: &SessionRequest,
    wire: &AnthropicRequest,
) -> (Option<usize>, usize) {
    let found = breakpoints(wire);
    assert!(found.len() <= 4, "at most four: {found:?}");
    let expected = end_of(request, request.stable_prefix_len());
    assert!(
        found.contains(&expected),
        "the stable prefix's end: {found:?}"
    );
    let reused = request.reused_prefix_len();
    let kept = (reused > request.stable_prefix_len()).then(|| end_of(request, reused));
    if let Some(kept) = kept {
        assert!(found.contains(&kept), "the kept prefix's end: {found:?}");
    }
    let ours = [Some(expected), kept, Some((None, wire.system.len() - 1))];
    let rolling = &found[..found.len() - 1];
    assert!(
        rolling.iter().all(|b| ours.contains(&Some(*b))),
        "no other breakpoint: {found:?}"
    );
    assert!(found.contains(&(None, wire.system.len() - 1)), "{found:?}");
    let last = wire.messages.len() - 1;
    let last_block = wire.messages[last]
        .content
        .iter()
        .rposition(|b| !matches!(b, ContentBlock::Opaque(_) | ContentBlock::Other(_)))
        .map(|b| (Some(last), b));
    assert_eq!(
        found.last().copied(),
        last_block.or(Some(expected)),
        "rolling"
    );
    expected
}

/// Plays `script` to its end (no crash), returning every request the session made.
fn play(session: &mut Session<Agent>, script: &Script) -> Vec<SessionRequest> {
    play_to_end(session, script, &Performed::default())
}

#[test]
fn every_request_is_valid_and_cached_up_to_its_stable_prefix() {
    for seed in [3, 11, 29] {
        let script = Script { seed, turns: 14 };
        let mut session = Session::builder("agent-anthropic")
            .compactor(compactor(4_000))
            .store(MemoryStore::new())
            .ledger(MemoryLedger::new())
            .effect_calls(effect_of)
            .open_blocking(fresh_agent)
            .unwrap();
        // The previous request's cached prefix, stable prefix length and messages.
        let mut previous: Option<(String, usize, Vec<Message>)> = None;
        let (mut requests, mut points, mut grown, mut late_system) = (0, 0, 0, 0);
        let mut opening_grew = 0;
        for request in play(&mut session, &script) {
            let wire = request
                .anthropic_request_with("claude-test", 1024, &everywhere())
                .unwrap();
            check_anthropic(&wire.messages).unwrap();
            // Through JSON, as the provider reads it.
            let sent: AnthropicRequest =
                serde_json::from_str(&serde_json::to_string(&wire).unwrap()).unwrap();
            assert_eq!(sent, wire);
            let at = breakpoint_at_the_stable_prefix(&request, &wire);
            let prefix = cached_prefix(&wire, at);
            let stable = request.stable_prefix_len();
            if request.is_compaction_point() {
                points += 1;
            } else if let Some((previous, previous_stable, previous_messages)) = &previous {
                if stable == *previous_stable {
                    assert_eq!(
                        &prefix, previous,
                        "seed {seed}, request {requests}: the cached prefix changed without \
                         a compaction point"
                    );
                } else {
                    // The session's opening arriving: the stable prefix only grows over
                    // messages the previous request sent as they are.
                    assert!(stable > *previous_stable, "seed {seed}, request {requests}");
                    assert_eq!(
                        request.messages()[..*previous_stable],
                        previous_messages[..*previous_stable]
                    );
                    opening_grew += 1;
                }
                grown += 1;
            }
            late_system += request.messages()[1..]
                .iter()
                .skip_while(|m| m.role == Role::System)
                .filter(|m| m.role == Role::System)
                .count();
            previous = Some((prefix, stable, request.messages().to_vec()));
            requests += 1;
        }
        // Four messages arrive in two requests at most.
        assert!(opening_grew <= 2, "seed {seed}: {opening_grew}");
        assert!(points >= 2, "seed {seed}: {points} compaction points");
        assert!(grown >= 5, "seed {seed}: {grown} requests only appended");
        assert!(
            late_system > 0,
            "seed {seed}: the state updates (system messages late in the request) are exercised"
        );
    }
}

#[test]
fn an_anthropic_reply_is_pushed_as_it_comes() {
    let mut session = opened("agent-reply");
    session.push(Message::user("deploy svc-1"));
    let request = session.next_request_blocking().unwrap();
    let wire = request
        .anthropic_request_with("claude-test", 256, &everywhere())
        .unwrap();
    // Nothing is folded yet: the system prompt ends at block 1, and the stable prefix (the
    // window's stable part, then the session's opening: the system prompt and the user's
    // message) ends on the user's message, where the rolling breakpoint is too.
    assert_eq!(breakpoints(&wire), [(None, 1), (Some(0), 0)]);
    // At the model's real minimum this request is too short to cache anywhere.
    let real = request.anthropic_request("claude-sonnet-4-5", 256).unwrap();
    assert_eq!(breakpoints(&real), []);
    assert_eq!(request.stable_prefix_len(), 3);
    let input = r#"{"service": "svc-1", "key": "deploy-1", "n": 123456789012345678901234567890}"#;
    let reply: AnthropicResponse = serde_json::from_str(&format!(
        r#"{{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
            "content":[{{"type":"text","text":"deploying"}},
                       {{"type":"tool_use","id":"toolu_1","name":"deploy","input":{input}}}],
            "stop_reason":"tool_use","usage":{{"input_tokens":5,"output_tokens":7}}}}"#
    ))
    .unwrap();
    session.push_response(&reply).unwrap();
    let calls = session.pending_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments_text(), input, "input byte for byte");
    assert_eq!(calls[0].effect.as_deref(), Some("deploy-1"), "linked");
    session
        .run_effect_blocking(&calls[0], || async { Ok::<_, String>("deployed".into()) })
        .unwrap();
    let wire = session
        .next_request_blocking()
        .unwrap()
        .anthropic_request("claude-test", 256)
        .unwrap();
    check_anthropic(&wire.messages).unwrap();
    let last = wire.messages.last().unwrap();
    assert!(matches!(
        &last.content[0],
        ContentBlock::ToolResult { tool_use_id, .. } if tool_use_id == "toolu_1"
    ));
}

#[test]
fn a_session_planned_for_anthropic_fits_its_budget_by_anthropics_formula() {
    use compaction::{AnthropicMessages, ChatFormat, Tokenizer};
    let budget = 3_000;
    let script = Script { seed: 7, turns: 14 };
    let mut session = Session::builder("agent-anthropic-format")
        .compactor(compactor(budget))
        .chat_format(AnthropicMessages)
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap();
    assert_eq!(
        session.compactor().chat_format().name(),
        "anthropic-messages"
    );
    let (mut points, mut merged) = (0, 0);
    for request in play(&mut session, &script) {
        let wire = request.anthropic_request("claude-test", 1024).unwrap();
        check_anthropic(&wire.messages).unwrap();
        let exact = AnthropicMessages.request_tokens(request.messages(), &Tokenizer::O200kBase);
        assert!(exact <= request.tokens() && request.tokens() <= budget);
        // Turns merged on the wire (a state update joins the results' user turn): fewer
        // Anthropic messages than ours after the leading system messages.
        let ours = request
            .messages()
            .iter()
            .skip_while(|m| m.role == Role::System);
        merged += usize::from(wire.messages.len() < ours.count());
        points += usize::from(request.is_compaction_point());
    }
    assert!(points >= 2, "{points} compaction points");
    assert!(merged > 0, "merged turns are exercised");
}

#[test]
fn tools_are_sent_counted_and_cached_on_anthropics_wire() {
    use compaction::pointer_tool::resolve_pointer_definition;
    use compaction::transcript::TOOL_USE_SYSTEM_PROMPT_TOKENS;
    use compaction::{AnthropicMessages, ChatFormat, TokenCounter, Tokenizer, ToolDefinition};
    let budget = 3_000;
    let deploy = ToolDefinition::new(
        "deploy",
        "Deploy a service. Never twice for one key.",
        json!({"type": "object", "properties": {"service": {"type": "string"}, "key": {"type": "string"}}, "required": ["service", "key"]}),
    );
    let tools = vec![resolve_pointer_definition(), deploy];
    let open = |store: &MemoryStore, ledger: &MemoryLedger| {
        Session::builder("agent-anthropic-tools")
            .compactor(compactor(budget))
            .chat_format(AnthropicMessages)
            .tools(tools.clone())
            .store(store.clone())
            .ledger(ledger.clone())
            .effect_calls(effect_of)
            .open_blocking(fresh_agent)
            .unwrap()
    };
    let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
    let mut session = open(&store, &ledger);
    let script = Script {
        seed: 11,
        turns: 12,
    };
    let requests = play(&mut session, &script);
    let counter = Tokenizer::O200kBase;
    for request in &requests {
        let wire = request
            .anthropic_request("claude-sonnet-4-5", 1024)
            .unwrap();
        let sent = wire.tools.as_ref().expect("the request carries its tools");
        let expected: Vec<serde_json::Value> =
            tools.iter().map(ToolDefinition::anthropic).collect();
        assert_eq!(sent, &expected);
        // The body by Anthropic's formula: messages, each tool as sent, the tool-use prompt.
        let body = AnthropicMessages.request_tokens(request.messages(), &counter)
            + sent
                .iter()
                .map(|t| counter.count(&t.to_string()))
                .sum::<usize>()
            + TOOL_USE_SYSTEM_PROMPT_TOKENS;
        assert!(body <= request.tokens(), "{body} > {}", request.tokens());
        assert!(request.tokens() <= budget);
        assert!(breakpoints(&wire).len() <= 4);
    }
    // After a restart the last request is rebuilt with the same tools, byte for byte but for
    // one breakpoint: the warm request also ended its kept prefix (what the request before it
    // sent as it was); the rebuilt one sends all of the last request as it was, so that
    // breakpoint is the rolling one's.
    drop(session);
    let mut resumed = open(&store, &ledger);
    let again = resumed.next_request_blocking().unwrap();
    let last = requests.last().unwrap();
    let warm = last.anthropic_request("claude-sonnet-4-5", 1024).unwrap();
    let cold = again.anthropic_request("claude-sonnet-4-5", 1024).unwrap();
    assert_eq!(without_breakpoints(&warm), without_breakpoints(&cold));
    let (warm_at, cold_at) = (breakpoints(&warm), breakpoints(&cold));
    assert!(
        cold_at.iter().all(|b| warm_at.contains(b)),
        "{warm_at:?} {cold_at:?}"
    );
    assert!(
        warm_at.len() <= cold_at.len() + 1,
        "{warm_at:?} {cold_at:?}"
    );
    let extra: Vec<_> = warm_at.iter().filter(|b| !cold_at.contains(b)).collect();
    if let [kept] = extra.as_slice() {
        assert_eq!(**kept, end_of(last, last.reused_prefix_len()));
    }
}

/// A request's JSON with every `cache_control` taken out.
fn without_breakpoints(request: &AnthropicRequest) -> serde_json::Value {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(object) => {
                object.remove("cache_control");
                object.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(request).unwrap();
    strip(&mut value);
    value
}

/// Counts a request's blocks as this test's provider would: 1 token per 4 bytes, at least 1.
struct QuarterBytes;

impl compaction::TokenCounter for QuarterBytes {
    fn count(&self, text: &str) -> usize {
        text.len().div_ceil(4).max(1)
    }
    fn name(&self) -> &str {
        "quarter_bytes"
    }
}

#[test]
fn on_the_cache_model_an_appended_request_reads_everything_the_last_one_sent() {
    let script = Script { seed: 7, turns: 14 };
    let mut session = Session::builder("agent-cache")
        .compactor(compactor(4_000))
        .store(MemoryStore::new())
        .ledger(MemoryLedger::new())
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap();
    let caching = everywhere().token_counter(QuarterBytes);
    let mut cache = AnthropicCacheModel::new(AnthropicCacheRules {
        min_cacheable_tokens: 0,
        ttl: CacheTtl::FiveMinutes,
    });
    let (mut previous_total, mut appended, mut read_all) = (None::<usize>, 0, 0);
    for (i, request) in play(&mut session, &script).into_iter().enumerate() {
        let wire = request
            .anthropic_request_with("claude-test", 1024, &caching)
            .unwrap();
        let blocks = wire.prompt_blocks(&QuarterBytes);
        let used = cache.send(i as u64 * 1000, blocks.blocks()).unwrap();
        if let (false, Some(before)) = (request.is_compaction_point(), previous_total) {
            appended += 1;
            // Fewer than 20 new blocks between two requests here: the rolling breakpoint of
            // the last request is within the lookback of this one's.
            assert!(
                used.read >= before,
                "request {i}: read {used:?}, sent before {before}"
            );
            read_all += 1;
        }
        previous_total = Some(used.total());
    }
    assert!(appended >= 5 && read_all == appended, "{appended} appended");
}

#[test]
fn the_callers_tool_breakpoints_count_and_never_make_a_fifth() {
    // No opening: the stable prefix's breakpoint then falls on the window, apart from the
    // rolling one, and the request has three of ours to give way to the caller's.
    let mut session = Session::builder("agent-tools")
        .compactor(compactor(4_000))
        .keep_first(0)
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap();
    session.push(Message::user("deploy svc-1"));
    let request = session.next_request_blocking().unwrap();
    let tool = |name: &str, ttl: Option<&str>| {
        let mut tool = json!({"name": name, "input_schema": {"type": "object"}});
        if let Some(ttl) = ttl {
            tool["cache_control"] = json!({"type": "ephemeral", "ttl": ttl});
        }
        tool
    };
    for (theirs, ours) in [(0, 3), (2, 2), (3, 1), (4, 0)] {
        let tools: Vec<_> = (0..4)
            .map(|i| tool(&format!("t{i}"), (i < theirs).then_some("1h")))
            .collect();
        let caching = everywhere().tools(tools);
        let wire = request
            .anthropic_request_with("claude-test", 256, &caching)
            .unwrap();
        let placed = breakpoints(&wire);
        assert_eq!(placed.len(), ours, "{theirs} of theirs: {placed:?}");
        // The rolling one is kept first.
        if ours == 1 {
            assert_eq!(placed, [(Some(0), 0)]);
        }
        let blocks = wire.prompt_blocks(&QuarterBytes);
        assert!(AnthropicCacheModel::check(blocks.blocks()).is_ok());
        assert_eq!(wire.tools.as_ref().map(Vec::len), Some(4));
    }
    // Longer TTLs first: after a caller's five-minute breakpoint, ours are five minutes too.
    let caching = everywhere()
        .ttl(CacheTtl::OneHour)
        .tools(vec![tool("t0", Some("5m"))]);
    let wire = request
        .anthropic_request_with("claude-test", 256, &caching)
        .unwrap();
    let blocks = wire.prompt_blocks(&QuarterBytes);
    AnthropicCacheModel::check(blocks.blocks()).expect("TTLs in order");
    assert!(wire.system[0]
        .cache_control
        .as_ref()
        .is_some_and(|c| c.ttl.is_none()));
    // With no caller breakpoint, one hour it is.
    let wire = request
        .anthropic_request_with("claude-test", 256, &everywhere().ttl(CacheTtl::OneHour))
        .unwrap();
    assert_eq!(
        wire.system[0].cache_control,
        Some(CacheControl {
            kind: "ephemeral".into(),
            ttl: Some("1h".into())
        })
    );
}

#[test]
fn the_pointer_tool_in_anthropics_shape_is_the_one_the_session_answers() {
    let tool = compaction::anthropic::resolve_pointer_anthropic_tool();
    assert_eq!(tool["name"], compaction::pointer_tool::RESOLVE_POINTER);
    let openai = compaction::pointer_tool::resolve_pointer_tool();
    assert_eq!(tool["description"], openai["function"]["description"]);
    assert_eq!(tool["input_schema"], openai["function"]["parameters"]);
    assert_eq!(
        tool.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["description", "input_schema", "name"]
    );
}

/// The share of input tokens Anthropic's cache reads over `requests`, as `benches/price.rs`
/// prices the session bench (`anthropic_request`'s breakpoints for `claude-sonnet-4-5`, its
/// rules, o200k, requests 20 s apart): over all requests, and over the requests right after a
/// compaction point.
fn read_shares(requests: &[Played]) -> (f64, f64) {
    const MODEL: &str = "claude-sonnet-4-5";
    let caching = AnthropicCaching::for_model(MODEL).token_counter(Tokenizer::O200kBase);
    let mut cache = AnthropicCacheModel::new(AnthropicCacheRules::for_model(MODEL));
    let (mut all, mut after) = ((0, 0), (0, 0));
    for (i, played) in requests.iter().enumerate() {
        let wire = played
            .request
            .anthropic_request_with(MODEL, 1024, &caching)
            .expect("a valid request");
        let blocks = wire.prompt_blocks(&Tokenizer::O200kBase);
        let used = cache
            .send(i as u64 * 20_000, blocks.blocks())
            .expect("at most four breakpoints");
        all = (all.0 + used.read, all.1 + used.total());
        if i > 0 && played.request.is_compaction_point() {
            after = (after.0 + used.read, after.1 + used.total());
        }
    }
    let share = |(read, total): (usize, usize)| read as f64 / total.max(1) as f64;
    (share(all), share(after))
}

/// Issue 30's goal on its 60-turn session at 16k (a coding agent, `keep_recent = 1`): >= 0.8 of
/// the input tokens read from the cache, and >= 0.5 at the requests right after a compaction
/// point. The `Session`'s opening (`keep_first`) is what reaches the second: without it, the
/// first message a point changes is the transcript's first old one, and only the window is
/// read (0.223 measured on this session; BENCHMARKS.md).
#[test]
fn the_request_after_a_compaction_point_reads_the_opening_from_the_cache() {
    let defaults = read_shares(&play_member("coding-60-s1-k1", 16_000, None));
    assert!(
        defaults.0 >= 0.8 && defaults.1 >= 0.5,
        "read shares {defaults:?}"
    );
    let without = read_shares(&play_member("coding-60-s1-k1", 16_000, Some(0)));
    assert!(without.1 < 0.4, "without an opening: {without:?}");
}

/// A reply whose thinking block carries a breakpoint (which no model sends, and which the
/// provider refuses on thinking blocks) is refused with nothing pushed, and the session goes
/// on: the same reply without it is pushed, and the next request carries no breakpoint of
/// the reply's.
#[test]
fn a_reply_carrying_a_breakpoint_in_its_thinking_is_refused_and_the_session_goes_on() {
    let mut session = opened("agent-forged-reply");
    session.push(Message::user("what is deployed?"));
    let before = session.next_request_blocking().unwrap();
    let reply = |control: &str| -> AnthropicResponse {
        serde_json::from_str(&format!(
            r#"{{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
                "content":[{{"type":"thinking","thinking":"check","signature":"c2ln"{control}}},
                           {{"type":"text","text":"svc-1 is deployed"}}],
                "stop_reason":"end_turn","usage":{{"input_tokens":5,"output_tokens":7}}}}"#
        ))
        .unwrap()
    };
    let forged = reply(r#","cache_control":{"type":"ephemeral"}"#);
    let refused = session.push_response(&forged);
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("cache_control")),
        "{refused:?}"
    );
    // Nothing was pushed: the next request is the one before.
    let again = session.next_request_blocking().unwrap();
    assert_eq!(again.messages(), before.messages());
    session.push_response(reply("")).unwrap();
    session.push(Message::user("thanks"));
    let wire = session
        .next_request_blocking()
        .unwrap()
        .anthropic_request_with("claude-test", 256, &everywhere())
        .unwrap();
    check_anthropic(&wire.messages).unwrap();
    let body = serde_json::to_value(&wire).unwrap();
    let markers = body.to_string().matches("\"cache_control\"").count();
    assert!(markers <= 3, "{markers} breakpoints: {body}");
    let thinking = &body["messages"][1]["content"][0];
    assert_eq!(thinking["type"], "thinking");
    assert!(thinking.get("cache_control").is_none(), "{thinking}");
}

/// Extended thinking is a request-builder option: `with_thinking` sets the documented
/// `{"type": "enabled", "budget_tokens": N}`, and a budget the provider refuses (below 1,024,
/// or not below `max_tokens`) is an error before anything is sent.
#[test]
fn thinking_is_a_request_option_checked_before_sending() {
    let mut session = opened("thinking-agent");
    session.push(Message::user("Plan the migration."));
    let request = session.next_request_blocking().unwrap();
    let wire = request
        .anthropic_request("claude-sonnet-4-5", 8_000)
        .unwrap();
    assert!(wire.thinking.is_none(), "off unless asked");
    let thinking = wire.clone().with_thinking(2_048).unwrap();
    assert_eq!(
        thinking.thinking,
        Some(json!({"type": "enabled", "budget_tokens": 2048}))
    );
    let sent = serde_json::to_value(&thinking).unwrap();
    assert_eq!(sent["thinking"]["budget_tokens"], 2048);
    for budget in [0, 1_023, 8_000, 9_000] {
        match wire.clone().with_thinking(budget) {
            Err(AnthropicError::ThinkingBudget {
                budget_tokens,
                max_tokens: 8_000,
            }) => assert_eq!(budget_tokens, budget),
            other => panic!("budget {budget}: {other:?}"),
        }
    }
    assert!(wire.with_thinking(MIN_THINKING_BUDGET).is_ok());
}
