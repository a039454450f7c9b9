//! NOT PART OF THE TEMPLATE. The stand-ins the coding agent templates (`agent_anthropic.rs`,
//! `agent_openai_chat.rs`, `agent_openai_responses.rs`) run against, so they run anywhere with
//! no key: the fake world (the user's six tasks, a repository to read, a deploy that writes its
//! own log) and the loopback model server with its scripted model. Your agent has a real user,
//! real tools and a real provider instead; copy the template, not this file.
#![allow(dead_code)] // each template uses the part its wire needs

use compaction::pointer_tool::RESOLVE_POINTER;
use compaction::{Message, Role, ToolCall};
use compaction_fixtures::openai_server::{anthropic_sse, FakeOpenAi, RecordedRequest, Reply};
use serde_json::{json, Value};
use std::error::Error;
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The services the user asks the agent to fix and deploy, one task each.
pub const SERVICES: [&str; 6] = ["billing", "search", "auth", "mailer", "reports", "gateway"];

/// The user's task `n` (from 0), or `None` once all six were given.
pub fn task(n: usize) -> Option<String> {
    let service = SERVICES.get(n)?;
    let total = SERVICES.len();
    Some(format!(
        "Task {}/{total}: the tests of src/{service}.rs fail; fix them and deploy {service}.",
        n + 1
    ))
}

/// Where the deploys write their own log, and how long each takes.
struct World {
    log: PathBuf,
    delay: Duration,
}

static WORLD: OnceLock<World> = OnceLock::new();

/// Reads the command line (`--db PATH`, `--world PATH`: the deploys' log, `--deploy-ms N`)
/// and returns the database path (default: `NAME.db` in the temporary directory).
pub fn db_from_args(name: &str) -> Result<PathBuf, Box<dyn Error>> {
    let mut db = std::env::temp_dir().join(format!("{name}.db"));
    let mut world = World {
        log: std::env::temp_dir().join(format!("{name}.world")),
        delay: Duration::from_millis(50),
    };
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        let value = argv.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--db" => db = value.into(),
            "--world" => world.log = value.into(),
            "--deploy-ms" => world.delay = Duration::from_millis(value.parse()?),
            _ => return Err(format!("unknown option {flag} (--db, --world, --deploy-ms)").into()),
        }
    }
    let _ = WORLD.set(world);
    Ok(db)
}

/// The side effect: appends `deploy-SERVICE` to the world's own log (what a deploy changes
/// outside the agent), then takes a while.
pub fn deploy(service: &str) -> std::io::Result<String> {
    let world = WORLD.get_or_init(|| World {
        log: std::env::temp_dir().join("coding-agent.world"),
        delay: Duration::from_millis(50),
    });
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&world.log)?;
    writeln!(log, "deploy-{service}")?;
    log.sync_all()?;
    println!("deploying {service} ...");
    std::thread::sleep(world.delay);
    Ok(format!("Deployed {service}: healthy."))
}

/// A file of the repository the agent works on (generated: 60 to 100 lines).
pub fn read_file(path: &str) -> String {
    let lines = 60 + path.len() * 7 % 41;
    (0..lines)
        .map(|i| format!("{path}:{i}: let v{i} = check(\"{path}\", {i})?;\n"))
        .collect()
}

/// The wire a template speaks.
#[derive(Clone, Copy, PartialEq)]
pub enum Wire {
    /// Anthropic's Messages API.
    Anthropic,
    /// OpenAI chat completions.
    Chat,
    /// OpenAI's Responses API.
    Responses,
}

/// The model server's base URL: `ANTHROPIC_BASE_URL` or `OPENAI_BASE_URL` when set (yours);
/// else the loopback test server's, started here (returned too: dropping it stops it).
pub fn model_server(wire: Wire) -> Result<(String, Option<FakeOpenAi>), Box<dyn Error>> {
    let var = match wire {
        Wire::Anthropic => "ANTHROPIC_BASE_URL",
        Wire::Chat | Wire::Responses => "OPENAI_BASE_URL",
    };
    if let Ok(url) = std::env::var(var) {
        return Ok((url, None));
    }
    let server = FakeOpenAi::start_with(loopback_model)?;
    println!("{var} is not set: the loopback test server plays the model");
    let url = match wire {
        Wire::Anthropic => server.root_url(),
        Wire::Chat | Wire::Responses => server.base_url(),
    };
    Ok((url, Some(server)))
}

// --- The loopback model: a pure function of the request it receives (so a request sent again
// --- after a restart gets the same answer), in the dialect of the route asked.

fn loopback_model(request: &RecordedRequest) -> Reply {
    match sent_messages(request).and_then(|sent| script(&sent)) {
        Ok(reply) => render(request, reply),
        Err(error) => Reply::error(400, &error.to_string()),
    }
}

/// The conversation the request carries, as our messages.
fn sent_messages(request: &RecordedRequest) -> Result<Vec<Message>, Box<dyn Error>> {
    match request.path.as_str() {
        #[cfg(feature = "anthropic-types")]
        "/v1/messages" => {
            use compaction::anthropic::{from_anthropic, AnthropicMessage, AnthropicRequest};
            let sent: AnthropicRequest = serde_json::from_str(&request.body)?;
            // One block a message: a merged turn (a fold, then a reply) reads back in order.
            let blocks = sent.messages.iter().flat_map(|m| {
                let turn = |block: &compaction::anthropic::ContentBlock| AnthropicMessage {
                    role: m.role,
                    content: vec![block.clone()],
                };
                m.content.iter().map(turn)
            });
            Ok(from_anthropic(&sent.system, &blocks.collect::<Vec<_>>())?)
        }
        #[cfg(feature = "openai-responses")]
        "/v1/responses" => {
            use compaction::openai::async_openai::types::responses::InputItem;
            let input = request.json()["input"].clone();
            reasoning_replayed(&input)?;
            let items: Vec<InputItem> = serde_json::from_value(input)?;
            Ok(compaction::openai::from_responses_input(&items)?)
        }
        #[cfg(feature = "openai-types")]
        "/v1/chat/completions" => {
            use compaction::openai::async_openai::types::chat::ChatCompletionRequestMessage;
            let sent: Vec<ChatCompletionRequestMessage> =
                serde_json::from_value(request.json()["messages"].clone())?;
            Ok(compaction::openai::from_openai_messages(&sent)?)
        }
        other => Err(format!("the loopback model does not serve {other}").into()),
    }
}

/// The Responses wire's rule the loopback enforces: every `function_call` it made comes back
/// after the `reasoning` item of its turn, unchanged (as OpenAI needs for a stateless request).
fn reasoning_replayed(input: &Value) -> Result<(), Box<dyn Error>> {
    let items = input.as_array().ok_or("no input items")?;
    for (at, item) in items.iter().enumerate() {
        if item["type"] != "function_call" {
            continue;
        }
        let call_id = item["call_id"].as_str().unwrap_or("");
        let turn = call_id.split('_').nth(1).unwrap_or("");
        let reasoning = items[..at]
            .iter()
            .rev()
            .find(|i| i["type"] != "function_call" && i["role"] != "assistant");
        let sent = reasoning.and_then(|r| r["encrypted_content"].as_str());
        if !sent.is_some_and(|e| e.starts_with(&format!("enc-task{turn}-"))) {
            return Err(format!("the reasoning item of {call_id} was not sent back").into());
        }
    }
    Ok(())
}

/// `reply` in the dialect of the route asked.
fn render(request: &RecordedRequest, reply: Message) -> Reply {
    match request.path.as_str() {
        #[cfg(feature = "anthropic-types")]
        "/v1/messages" => {
            let content = compaction::anthropic::to_anthropic(&[reply])
                .map(|c| c.messages[0].content.clone());
            let whole = json!({
                "id": "msg_loopback", "type": "message", "role": "assistant",
                "model": "loopback", "content": content.unwrap_or_default(),
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            });
            // A streamed request gets the same reply as its event stream.
            match request.json()["stream"].as_bool() {
                Some(true) => Reply::Sse(anthropic_sse(&whole)),
                _ => Reply::Raw(whole.to_string()),
            }
        }
        "/v1/responses" => {
            let first = reply
                .tool_calls
                .first()
                .map_or("answer", |c| c.name.as_str());
            let task = reply.content.split(['/', ' ']).nth(1).unwrap_or("");
            let turn = reply
                .tool_calls
                .first()
                .map_or(task, |c| c.id.split('_').nth(1).unwrap_or(""));
            let mut output = vec![json!({
                "id": format!("rs_{turn}_{first}"), "type": "reasoning", "summary": [],
                "encrypted_content": format!("enc-task{turn}-{first}"),
            })];
            output.push(json!({
                "id": format!("msg_{turn}_{first}"), "type": "message", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
            }));
            output.extend(reply.tool_calls.iter().map(|c| {
                json!({
                    "id": format!("fc_{}", c.id), "type": "function_call", "status": "completed",
                    "call_id": c.id, "name": c.name, "arguments": c.arguments_text(),
                })
            }));
            Reply::Raw(
                json!({
                        "id": "resp_loopback", "object": "response", "created_at": 1_700_000_000u32,
                        "status": "completed", "model": "loopback", "output": output,
                        "usage": {
                    "input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 2,
                },
                    })
                .to_string(),
            )
        }
        _ if reply.tool_calls.is_empty() => Reply::summary(reply.content),
        _ => {
            let calls: Vec<_> = (reply.tool_calls.iter())
                .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments_text()))
                .collect();
            Reply::tool_calls(&reply.content, &calls)
        }
    }
}

/// The model: reads the task's file (and, every other task, reads back what compaction moved
/// out of the window), then deploys, then reports.
fn script(messages: &[Message]) -> Result<Message, Box<dyn Error>> {
    let at = messages
        .iter()
        .rposition(|m| m.role == Role::User && m.content.starts_with("Task "))
        .ok_or("no task")?;
    let number: usize = messages[at].content[5..]
        .split('/')
        .next()
        .unwrap_or("")
        .parse()?;
    let service = SERVICES.get(number.wrapping_sub(1)).ok_or("no such task")?;
    let called = |name: &str| {
        messages[at..]
            .iter()
            .flat_map(|m| &m.tool_calls)
            .any(|c| c.name == name)
    };
    let call = |name: &str, arguments: Value| {
        ToolCall::new(format!("call_{number}_{name}"), name, arguments)
    };
    if !called("read_file") {
        let mut calls = vec![call(
            "read_file",
            json!({"path": format!("src/{service}.rs")}),
        )];
        let handle = messages.iter().find_map(|m| {
            let start = m.content.find("resolve_pointer(\"")? + "resolve_pointer(\"".len();
            Some(m.content[start..].split('"').next()?.to_owned())
        });
        if let Some(handle) = handle.filter(|_| number.is_multiple_of(2)) {
            calls.push(call(RESOLVE_POINTER, json!({"pointer": handle})));
        }
        let text = format!("Reading src/{service}.rs.");
        return Ok(Message::assistant_with_tools(text, calls));
    }
    if !called("deploy") {
        let calls = vec![call("deploy", json!({"service": service}))];
        return Ok(Message::assistant_with_tools("Fixed; deploying.", calls));
    }
    let result = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .map_or("", |m| m.content.as_str());
    Ok(Message::assistant(format!(
        "Task {number} done. {}",
        result.lines().next().unwrap_or("")
    )))
}
