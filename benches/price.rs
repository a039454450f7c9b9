//! Prices the session bench's requests (issue 30) with this library's own cache models
//! (`compaction::cache`): every policy's requests, read from the JSONL files
//! `benches/session.rs` and `benches/peers/family.py` write, are sent in order through a
//! simulated Anthropic cache and a simulated OpenAI cache, and what each would bill for input
//! is summed.
//!
//! ```text
//! cargo run --release -p compaction-benches --example price -- FILE.jsonl...
//! ```
//!
//! One JSON line per file on stdout: requests, and per provider the input tokens, the tokens
//! read from the cache, written to it (Anthropic), and the billed input in base input tokens
//! (multiply by the model's input price per token to get money); for Anthropic also the share
//! of input read from the cache at the requests that do not only append to the previous one
//! (the requests right after a compaction point).
//!
//! - **Anthropic**: the request is built by `AnthropicCaching::request`, the placement
//!   `SessionRequest::anthropic_request` uses, for `claude-sonnet-4-5` (minimum cacheable
//!   prefix 1,024 tokens, five-minute TTL): the end of the system prompt, the end of the
//!   request's stable prefix (the `stable` a policy writes; for a policy that writes none, its
//!   leading system messages) and a rolling breakpoint on the last block, never more than four.
//!   Blocks are counted with o200k. Writes cost 1.25x, reads 0.1x.
//! - **OpenAI**: each message is a block (its chat-formula tokens, o200k; the reply priming
//!   last), automatic caching from 1,024 tokens in 128-token steps, one `prompt_cache_key`
//!   per run, cached input at 0.1x (the GPT-5 family's discount).
//!
//! Requests are 20 seconds apart: every entry is still alive at the next request under both
//! providers' shortest TTL, as in an agent's tight loop.

use compaction::anthropic::AnthropicCaching;
use compaction::cache::{
    AnthropicCacheModel, AnthropicCacheRules, CacheUse, OpenAiCacheModel, OpenAiCacheRules,
    PromptBlocks,
};
use compaction::transcript::{chat_tokens, ToolArguments};
use compaction::{Message, Role, ToolCall};
use memo::{digest, Memo};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};

#[path = "memo.rs"]
mod memo;

/// The Anthropic model whose cache rules price the requests.
const MODEL: &str = "claude-sonnet-4-5";
/// Milliseconds between two requests.
const GAP_MS: u64 = 20_000;

/// An OpenAI chat message (as `openai_message` writes it) as our `Message`, arguments kept as
/// written.
fn message(value: &Value) -> Result<Message, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or("");
    let content = text("content").to_owned();
    Ok(match text("role") {
        "system" => Message::system(content),
        "user" => Message::user(content),
        "tool" => Message::tool_result(text("tool_call_id"), content),
        "assistant" => {
            let mut calls = Vec::new();
            for call in value["tool_calls"].as_array().into_iter().flatten() {
                let function = &call["function"];
                let arguments = ToolArguments::from_text(
                    function["arguments"].as_str().unwrap_or("{}").to_owned(),
                )
                .map_err(|e| e.to_string())?;
                let id = call["id"].as_str().unwrap_or("");
                let name = function["name"].as_str().unwrap_or("");
                calls.push(ToolCall::new(id, name, arguments));
            }
            if calls.is_empty() {
                Message::assistant(content)
            } else {
                Message::assistant_with_tools(content, calls)
            }
        }
        other => return Err(format!("unknown role {other:?}")),
    })
}

/// Sums of one provider's cache use over a run.
#[derive(Default)]
struct Sums {
    tokens: usize,
    read: usize,
    written: usize,
    billed: f64,
}

impl Sums {
    fn add(&mut self, used: &CacheUse) {
        self.tokens += used.total();
        self.read += used.read;
        self.written += used.written_5m + used.written_1h;
        self.billed += used.billed_input();
    }
    fn json(&self) -> Value {
        json!({ "tokens": self.tokens, "read": self.read, "written": self.written,
                "billed": self.billed })
    }
}

/// Prices one file's requests.
fn price(path: &str) -> Result<Value, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let memo = Memo::default();
    let caching = AnthropicCaching::for_model(MODEL).token_counter(memo.clone());
    let mut anthropic = AnthropicCacheModel::new(AnthropicCacheRules::for_model(MODEL));
    let mut openai = OpenAiCacheModel::new(OpenAiCacheRules::default());
    // Each message once: (message, its digest, its chat-formula tokens without the priming).
    let mut messages: HashMap<u64, (Message, u64, usize)> = HashMap::new();
    let priming = chat_tokens(&[], &memo);
    let (mut a, mut o, mut after) = (Sums::default(), Sums::default(), Sums::default());
    let (mut requests, mut refused) = (0u64, 0u64);
    let mut previous: Vec<u64> = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("{path}: {e}"))?;
        let item: Value = serde_json::from_str(&line).map_err(|e| format!("{path}: {e}"))?;
        if let Some(id) = item.get("message").and_then(Value::as_u64) {
            let m = message(&item["value"])?;
            let tokens = chat_tokens(std::slice::from_ref(&m), &memo) - priming;
            messages.insert(
                id,
                (m, digest(item["value"].to_string().as_bytes()), tokens),
            );
            continue;
        }
        if item.get("refused").is_some() {
            refused += 1;
            continue;
        }
        let ids: Vec<u64> = item["ids"]
            .as_array()
            .ok_or("a request without ids")?
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        let held: Vec<&(Message, u64, usize)> = ids
            .iter()
            .map(|id| messages.get(id).ok_or(format!("message {id} undefined")))
            .collect::<Result<_, _>>()?;
        let list: Vec<Message> = held.iter().map(|h| h.0.clone()).collect();
        let stable = match item.get("stable").and_then(Value::as_u64) {
            Some(stable) => stable as usize,
            None => list.iter().take_while(|m| m.role == Role::System).count(),
        };
        let now = requests * GAP_MS;
        // What this request sends as the previous one did: a breakpoint ends it (for every
        // policy alike), so its cache entry is read past the provider's block lookback.
        let reused = ids
            .iter()
            .zip(&previous)
            .take_while(|(a, b)| a == b)
            .count();
        let wire = caching
            .request_reusing(MODEL, 1024, &list, stable, reused)
            .map_err(|e| e.to_string())?;
        let used = anthropic
            .send(now, wire.prompt_blocks(&memo).blocks())
            .map_err(|e| e.to_string())?;
        a.add(&used);
        // A request that does not only append to the previous one follows a compaction point.
        if requests > 0 && !ids.starts_with(&previous) {
            after.add(&used);
        }
        let mut blocks = PromptBlocks::new();
        for (_, hash, tokens) in &held {
            blocks.push(&hash.to_le_bytes(), *tokens, None);
        }
        blocks.push(b"priming", priming, None);
        o.add(&openai.send(now, Some("bench"), blocks.blocks()));
        previous = ids;
        requests += 1;
    }
    Ok(json!({
        "file": path, "requests": requests, "refused": refused,
        "anthropic": a.json(), "openai": o.json(),
        "anthropic_after_compaction": after.json(),
    }))
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: price FILE.jsonl...");
        std::process::exit(2);
    }
    let mut failed = false;
    for path in &files {
        match price(path) {
            Ok(row) => println!("{row}"),
            Err(why) => {
                eprintln!("price: {why}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
