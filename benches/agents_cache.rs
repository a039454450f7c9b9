//! The prompt cache across compaction points on agents (issue 46): every member of
//! `compaction_fixtures::agents` (the library's agent templates on Anthropic's Messages API and
//! OpenAI's Responses API, thinking or reasoning on and off, 1-6 tools, pointer reads, deploys
//! under the ledger, results of 100 B-200 KB, 60-600 requests) is played through a `Session`
//! at each budget, and its requests are priced in order with `compaction::cache`: Anthropic's
//! model on the request `SessionRequest::anthropic_request` builds (its breakpoints, the
//! session's tools, `claude-sonnet-4-5`: 1,024-token minimum, five-minute TTL), OpenAI's
//! automatic cache on the Responses request (the tools, then each input item of
//! `SessionRequest::responses_input`, one block each, with the session's `prompt_cache_key`).
//! Blocks are counted with o200k; requests are 20 s apart.
//!
//! ```text
//! cargo run --release -p compaction-benches --features openai-responses --example agents_cache -- \
//!     [family | unseen | MEMBER...] [--budgets 8000,16000,32000,64000] [--points]
//! ```
//!
//! One JSON line per (member, budget) on stdout: requests, compaction points, whether the session
//! refused a request (the run stops there), the share of input read from the cache over the run
//! and at the requests right after a compaction point (the point's own request: the first that
//! does not only append), the lowest share at one point, the share the point kept as the
//! previous request sent it and the bound any point of that size could keep (`bound`), the
//! tokens the session expected to be read (`SessionRequest::expected_cache`, by each wire's
//! rules) and the billed input per request. Then a table per wire and budget: min / median /
//! max over the members. `--points` prints, for each compaction point, where its request first
//! differs from the one before (message index, the previous request's stable prefix, what the
//! first changed message was) on stderr. Environment: `STABLE_TTL=1h` prices Anthropic's
//! requests with the stable prefix's breakpoints at one hour (`AnthropicCaching::stable_ttl`);
//! `AGENTS_KEEP_FIRST=N` sets the sessions' opening (`SessionBuilder::keep_first`).

use compaction::anthropic::AnthropicCaching;
use compaction::cache::{
    AnthropicCacheModel, AnthropicCacheRules, CacheUse, OpenAiCacheModel, OpenAiCacheRules,
    PromptBlocks,
};
use compaction::session::{EffectCall, Session, SessionError, SessionRequest, ToolFailure};
use compaction::{AnthropicMessages, CompactionError, Compactor, Effect, Message, Role};
use compaction::{TokenCounter, Tokenizer, ToolCall};
use compaction_fixtures::agents::{
    agent_family, agent_unseen, AgentK1, AgentK2, AgentK3, AgentMember, AgentScript, AgentState,
    Wire,
};
use memo::Memo;
use serde_json::{json, Value};
use std::collections::HashMap;

#[path = "memo.rs"]
mod memo;

/// The Anthropic model whose cache rules price the requests.
const MODEL: &str = "claude-sonnet-4-5";
/// Milliseconds between two requests.
const GAP_MS: u64 = 20_000;

/// `deploy` calls are effects, keyed by the service.
fn deploy_effect(call: &ToolCall) -> Option<EffectCall> {
    let service = call.arguments.value().ok()?["service"].as_str()?.to_owned();
    let effect = Effect::new("deploy", &service, format!("deploy-{service}"));
    (call.name == "deploy").then(|| EffectCall::new("deploys", effect))
}

/// A member's requests, and whether the session refused one (the run stops there).
struct Played {
    requests: Vec<SessionRequest>,
    refused: bool,
}

/// Plays `member` at `budget` to its last request (its last task run to the end).
fn play<S: AgentState>(member: AgentMember, budget: usize) -> Result<Played, String> {
    let compactor = Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase);
    let mut builder = Session::builder(member.to_string())
        .compactor(compactor)
        .tools(member.tool_definitions())
        .effect_calls(deploy_effect);
    if member.wire == Wire::Anthropic {
        builder = builder.chat_format(AnthropicMessages);
    }
    // A screen of the opening's length (`SessionBuilder::keep_first`); the default otherwise.
    if let Some(n) = std::env::var("AGENTS_KEEP_FIRST")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        builder = builder.keep_first(n);
    }
    let mut session = builder.open_blocking(S::fresh).map_err(|e| e.to_string())?;
    let mut script = AgentScript::new(member);
    let mut requests = Vec::new();
    let mut asked = false;
    loop {
        if !asked || session.awaiting_user() {
            if requests.len() >= member.requests {
                return Ok(Played {
                    requests,
                    refused: false,
                });
            }
            let (path, task) = script.next_task();
            session.state_mut().set_working_on(path);
            session.push(Message::user(task));
            asked = true;
        }
        let request = match session.next_request_blocking() {
            Ok(request) => request,
            // The smallest form does not fit (a turn's thinking and calls outgrew the budget):
            // the run ends there, reported as refused, as the agent would stop.
            Err(SessionError::Compaction(
                CompactionError::TranscriptOverBudget { .. }
                | CompactionError::ProtectedOverBudget { .. },
            )) => {
                return Ok(Played {
                    requests,
                    refused: true,
                });
            }
            Err(e) => {
                return Err(format!(
                    "{member} at {budget}, request {}: {e}",
                    requests.len()
                ))
            }
        };
        let reply = script.reply(request.messages());
        requests.push(request);
        session.push_response(reply).map_err(|e| e.to_string())?;
        let outputs: HashMap<String, String> = session
            .pending_calls()
            .iter()
            .map(|call| (call.id.clone(), script.tool_output(call)))
            .collect();
        session
            .run_tools_blocking(|call| {
                let output = outputs.get(&call.id).cloned();
                async move { output.ok_or_else(|| ToolFailure::failed("no output scripted")) }
            })
            .map_err(|e| e.to_string())?;
    }
}

/// What one request read and sent, and whether it came right after a compaction point.
struct Priced {
    used: CacheUse,
    expected: usize,
    after_point: bool,
}

/// Prices `requests` on `wire`'s cache model.
fn price(wire: Wire, requests: &[SessionRequest], memo: &Memo) -> Result<Vec<Priced>, String> {
    let mut caching = AnthropicCaching::for_model(MODEL).token_counter(memo.clone());
    if std::env::var("STABLE_TTL").as_deref() == Ok("1h") {
        caching = caching.stable_ttl(compaction::cache::CacheTtl::OneHour);
    }
    let mut anthropic = AnthropicCacheModel::new(AnthropicCacheRules::for_model(MODEL));
    let mut openai = OpenAiCacheModel::new(OpenAiCacheRules::default());
    let mut priced = Vec::with_capacity(requests.len());
    for (n, request) in requests.iter().enumerate() {
        let now = n as u64 * GAP_MS;
        let used = match wire {
            Wire::Anthropic => {
                let body = request
                    .anthropic_request_with(MODEL, 1024, &caching)
                    .map_err(|e| e.to_string())?;
                anthropic
                    .send(now, body.prompt_blocks(memo).blocks())
                    .map_err(|e| e.to_string())?
            }
            Wire::Responses => {
                let mut blocks = PromptBlocks::new();
                let tools: Vec<Value> = request
                    .tools()
                    .iter()
                    .map(|t| t.openai_responses())
                    .collect();
                let tools = serde_json::to_string(&tools).expect("tools serialize");
                blocks.push(tools.as_bytes(), memo.count(&tools), None);
                for item in request.responses_input() {
                    let item = serde_json::to_string(&item).expect("items serialize");
                    blocks.push(item.as_bytes(), memo.count(&item), None);
                }
                openai.send(now, Some(request.prompt_cache_key()), blocks.blocks())
            }
        };
        let expected = request.expected_cache();
        priced.push(Priced {
            used,
            expected: match wire {
                Wire::Anthropic => {
                    expected.anthropic_tokens(&AnthropicCacheRules::for_model(MODEL))
                }
                Wire::Responses => expected.openai_tokens(&OpenAiCacheRules::default()),
            },
            after_point: n > 0 && request.is_compaction_point(),
        });
    }
    Ok(priced)
}

/// Where a point's request first differs from the one before, on stderr.
fn show_point(
    member: &AgentMember,
    budget: usize,
    n: usize,
    previous: &SessionRequest,
    now: &SessionRequest,
    read: f64,
) {
    let first = previous
        .messages()
        .iter()
        .zip(now.messages())
        .position(|(a, b)| a != b)
        .unwrap_or(previous.messages().len().min(now.messages().len()));
    let changed = previous
        .messages()
        .get(first)
        .map_or("(none)".to_owned(), |m| {
            let text: String = m.content.chars().take(60).collect();
            format!("{:?} {text:?}", m.role)
        });
    eprintln!(
        "{member} {budget} #{n}: read {read:.3}, first differs at {first} (previous stable {}, \
         now stable {}, previous {} messages, now {}): was {changed}",
        previous.stable_prefix_len(),
        now.stable_prefix_len(),
        previous.messages().len(),
        now.messages().len()
    );
}

/// A message's size in one unit for both sides of a share (o200k tokens of its JSON).
fn units(message: &Message, memo: &Memo) -> usize {
    memo.count(&serde_json::to_string(message).expect("messages serialize"))
}

/// At a compaction point: `(kept, bound, total)` in [`units`]. `kept` is the prefix the point
/// left in place (its messages identical to the previous request's); `bound` the longest prefix
/// of the previous request any point reaching the same size could keep: it must still send the
/// current turn (the newest user message and what follows, as this request sends it) and every
/// older user message after the kept prefix (never folded), so it keeps `P[..k]` for the
/// largest `k` whose cost with those fits this request's size.
fn bound(previous: &SessionRequest, now: &SessionRequest, memo: &Memo) -> (usize, usize, usize) {
    let is_user = |m: &Message| m.role == Role::User && !m.content.starts_with("⟦compaction:");
    let sizes: Vec<usize> = now.messages().iter().map(|m| units(m, memo)).collect();
    let total: usize = sizes.iter().sum();
    let kept: usize = sizes[..now.reused_prefix_len().min(sizes.len())]
        .iter()
        .sum();
    let current = now.messages().iter().rposition(is_user).unwrap_or(0);
    let turn: usize = sizes[current..].iter().sum();
    let before = previous.messages();
    let end = before
        .iter()
        .position(|m| *m == now.messages()[current])
        .unwrap_or(before.len());
    let prior: Vec<usize> = before[..end].iter().map(|m| units(m, memo)).collect();
    // Users after k, from the end: cost(k) = prefix(k) + users(k..end) + turn.
    let mut users_after = vec![0; end + 1];
    for k in (0..end).rev() {
        users_after[k] = users_after[k + 1] + if is_user(&before[k]) { prior[k] } else { 0 };
    }
    let (mut prefix, mut best) = (0, 0);
    for k in 0..=end {
        if prefix + users_after[k] + turn <= total {
            best = prefix;
        }
        if k < end {
            prefix += prior[k];
        }
    }
    (kept, best, total)
}

fn share(read: usize, total: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        read as f64 / total as f64
    }
}

/// One (member, budget) row.
struct Row {
    member: AgentMember,
    budget: usize,
    overall: f64,
    after: Option<f64>,
    lowest: Option<f64>,
    kept: Option<f64>,
    bound: Option<f64>,
    billed: f64,
}

fn run(member: AgentMember, budget: usize, points: bool, memo: &Memo) -> Result<Row, String> {
    let Played { requests, refused } = match member.keep_recent {
        1 => play::<AgentK1>(member, budget)?,
        2 => play::<AgentK2>(member, budget)?,
        _ => play::<AgentK3>(member, budget)?,
    };
    let priced = price(member.wire, &requests, memo)?;
    let (mut read, mut total, mut after_read, mut after_total) = (0, 0, 0, 0);
    let (mut kept_units, mut bound_units, mut point_units) = (0, 0, 0);
    let billed: f64 = priced.iter().map(|p| p.used.billed_input()).sum();
    let mut lowest: Option<f64> = None;
    let mut count = 0;
    for (n, p) in priced.iter().enumerate() {
        read += p.used.read;
        total += p.used.total();
        if p.after_point {
            count += 1;
            after_read += p.used.read;
            after_total += p.used.total();
            let at = share(p.used.read, p.used.total());
            let (kept, best, units) = bound(&requests[n - 1], &requests[n], memo);
            kept_units += kept;
            bound_units += best;
            point_units += units;
            lowest = Some(lowest.map_or(at, |l| l.min(at)));
            if points {
                show_point(&member, budget, n, &requests[n - 1], &requests[n], at);
            }
        }
    }
    let expected: usize = priced.iter().map(|p| p.expected).sum();
    let row = Row {
        member,
        budget,
        overall: share(read, total),
        after: (count > 0).then(|| share(after_read, after_total)),
        lowest,
        kept: (count > 0).then(|| share(kept_units, point_units)),
        bound: (count > 0).then(|| share(bound_units, point_units)),
        billed: billed / requests.len().max(1) as f64,
    };
    println!(
        "{}",
        json!({"member": member.to_string(), "budget": budget, "requests": requests.len(),
               "points": count, "refused": refused, "input": total, "read": read, "read_share": row.overall,
               "after_point_read_share": row.after, "lowest_point": row.lowest,
               "after_point_kept_share": row.kept, "after_point_bound_share": row.bound,
               "expected_read": expected, "billed_per_request": row.billed})
    );
    Ok(row)
}

fn summary(values: &mut [f64]) -> String {
    if values.is_empty() {
        return "-".into();
    }
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    format!(
        "{:.3} / {median:.3} / {:.3}",
        values[0],
        values[values.len() - 1]
    )
}

fn main() {
    let mut members = Vec::new();
    let mut budgets = vec![8_000, 16_000, 32_000, 64_000];
    let mut points = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "family" => members.extend(agent_family()),
            "unseen" => members.extend(agent_unseen()),
            "--points" => points = true,
            "--budgets" => {
                let list = args.next().unwrap_or_default();
                budgets = list.split(',').filter_map(|b| b.parse().ok()).collect();
            }
            name => match AgentMember::parse(name) {
                Some(member) => members.push(member),
                None => {
                    eprintln!("agents_cache: not a member or option: {name}");
                    std::process::exit(2);
                }
            },
        }
    }
    if members.is_empty() {
        members = agent_family();
    }
    let memo = Memo::default();
    let mut rows = Vec::new();
    for member in &members {
        for &budget in &budgets {
            match run(*member, budget, points, &memo) {
                Ok(row) => rows.push(row),
                Err(why) => {
                    eprintln!("agents_cache: {why}");
                    std::process::exit(1);
                }
            }
        }
    }
    println!("\n| wire | budget | read share over the run | right after a point | lowest at one point | kept by the point | bound | billed per request |");
    println!("|---|---|---|---|---|---|---|---|");
    for wire in [Wire::Anthropic, Wire::Responses] {
        let mut all: Vec<usize> = budgets.clone();
        all.push(0);
        for budget in all {
            let of: Vec<&Row> = rows
                .iter()
                .filter(|r| r.member.wire == wire && (budget == 0 || r.budget == budget))
                .collect();
            if of.is_empty() {
                continue;
            }
            let mut overall: Vec<f64> = of.iter().map(|r| r.overall).collect();
            let mut after: Vec<f64> = of.iter().filter_map(|r| r.after).collect();
            let mut lowest: Vec<f64> = of.iter().filter_map(|r| r.lowest).collect();
            let mut billed: Vec<f64> = of.iter().map(|r| r.billed).collect();
            let mut kept: Vec<f64> = of.iter().filter_map(|r| r.kept).collect();
            let mut bound: Vec<f64> = of.iter().filter_map(|r| r.bound).collect();
            let budget = if budget == 0 {
                "all".to_owned()
            } else {
                format!("{}k", budget / 1000)
            };
            println!(
                "| {} | {budget} | {} | {} | {} | {} | {} | {} |",
                wire.name(),
                summary(&mut overall),
                summary(&mut after),
                summary(&mut lowest),
                summary(&mut kept),
                summary(&mut bound),
                summary(&mut billed)
            );
        }
    }
}
