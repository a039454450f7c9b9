//! The coding agent template: a real agent loop on `compaction::Session`, durable on SQLite. Each
//! turn it asks the model for the next step, reads files, answers the model's `resolve_pointer`
//! calls, and deploys under the effect ledger (`run_effect`: claimed before it runs, committed
//! after). Kill it at any moment (`kill -9`) and run it again with the same `--db`: it resumes
//! from its last checkpoint, and a deploy that already ran, or may have, is never run again.
//!
//! Run: `cargo run --example session_agent --features openai,anthropic [-- --wire anthropic]`
//! (options: `--db PATH` (with the `postgres` feature, a `postgres://` URL too), `--world PATH`:
//! the deploys' own log, `--deploy-ms N`).
//!
//! `--wire openai` (the default) speaks OpenAI chat completions (`OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`, `OPENAI_MODEL`); `--wire anthropic` the Messages API with a cache breakpoint
//! at the stable prefix (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_MODEL`). Without
//! the base URL it starts the loopback test server of this repository, whose scripted model
//! stands in for yours. On the Messages wire the library's `AnthropicClient` makes the call
//! (retries of 429 / 529 / 5xx included); on the chat wire `post` below is a minimal plain-HTTP
//! client (loopback, a local llama.cpp or vLLM): use your async-openai client for a hosted API.

use compaction::anthropic::{check_anthropic, AnthropicClient, ContentBlock};
use compaction::anthropic::{from_anthropic, to_anthropic, AnthropicMessage, AnthropicRequest};
use compaction::openai::async_openai::types::chat::{
    ChatCompletionRequestMessage, CreateChatCompletionResponse,
};
use compaction::openai::from_openai_messages;
use compaction::pointer_tool::{
    resolve_pointer_parameters, RESOLVE_POINTER, RESOLVE_POINTER_DESCRIPTION,
};
use compaction::session::{
    EffectCall, Session, SessionBuilder, SessionRequest, ToolFailure, ToolRunOutcome,
};
use compaction::{AnthropicMessages, OpenAiChat};
use compaction::{Compactable, Compactor, Effect, EffectLedger, EffectLog, Message, Role};
use compaction::{SealKey, SqliteLedger, SqliteStore, Tokenizer, ToolCall, Transcript};
use compaction_fixtures::openai_server::{FakeOpenAi, RecordedRequest, Reply};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::error::Error;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Compactable, Serialize, Deserialize, Default)]
struct CodingAgent {
    /// Rules the model sees on every request, verbatim.
    #[protected(pin)]
    rules: Vec<String>,
    /// The file the current task is about (changes each task: sent late, as a state update).
    #[protected]
    working_on: String,
    /// The conversation: the current task verbatim, older turns folded.
    #[transcript(keep_recent = 1)]
    chat: Transcript,
    /// Deploys, their status read from the ledger at every request.
    #[effect(idempotent = false)]
    deploys: EffectLog,
}

const SERVICES: [&str; 6] = ["billing", "search", "auth", "mailer", "reports", "gateway"];

fn task(n: usize) -> String {
    let service = SERVICES[n];
    let total = SERVICES.len();
    format!(
        "Task {}/{total}: the tests of src/{service}.rs fail; fix them and deploy {service}.",
        n + 1
    )
}

/// `deploy` calls are effects; the key names the deploy, so a retry after a restart is the same.
fn deploy_effect(call: &ToolCall) -> Option<EffectCall> {
    let service = call.arguments.value().ok()?["service"].as_str()?.to_owned();
    let effect = Effect::new("deploy", &service, format!("deploy-{service}"));
    (call.name == "deploy").then(|| EffectCall::new("deploys", effect))
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse()?;
    let session = Session::builder("coding-agent").compactor(
        Compactor::builder()
            .budget(4_000)
            .token_counter(Tokenizer::O200kBase)
            .seal_key(SealKey::new("session-agent", [7u8; 32])?), // yours: from a secret store
    );
    // The budget is counted the way the wire bills the request.
    let session = match args.anthropic {
        true => session.chat_format(AnthropicMessages),
        false => session.chat_format(OpenAiChat),
    };
    // With the `postgres` feature, `--db postgres://...` puts the checkpoints and the ledger in
    // the `session-agent` namespace of that database instead (several workers may share it).
    #[cfg(feature = "postgres")]
    if let Some(url) = args.db.to_str().filter(|db| db.starts_with("postgres")) {
        let store = compaction::block_on(compaction::PgStore::connect(url, "session-agent"))?;
        let ledger = compaction::block_on(compaction::PgLedger::connect(url, "session-agent"))?;
        return run(&args, session.store(store), ledger);
    }
    let ledger = SqliteLedger::open(&args.db)?;
    run(&args, session.store(SqliteStore::open(&args.db)?), ledger)
}

/// The agent loop on `session`, whose deploys `ledger` guards.
fn run<L: EffectLedger + Clone + 'static>(
    args: &Args,
    session: SessionBuilder<CodingAgent>,
    ledger: L,
) -> Result<(), Box<dyn Error>> {
    let (model, _loopback) = Model::connect(args.anthropic)?;
    let mut session = session
        .ledger(ledger.clone())
        .effect_calls(deploy_effect)
        .open_blocking(|| CodingAgent {
            rules: vec!["Never deploy a service twice.".into()],
            chat: Transcript::from_messages(vec![Message::system("You are a coding agent.")])
                .expect("one system message"),
            ..CodingAgent::default()
        })?;
    match session.resumed_from() {
        Some(sequence) => println!("resumed from checkpoint #{sequence}"),
        // A PostgreSQL URL may hold a password: it is not printed.
        None if args.db.to_string_lossy().starts_with("postgres") => {
            println!("fresh start in PostgreSQL")
        }
        None => println!("fresh start in {}", args.db.display()),
    }
    loop {
        // The model closed its turn: the next task, if any.
        let last = session.transcript().messages().last();
        if last.is_none_or(|m| {
            m.role == Role::System || m.role == Role::Assistant && m.tool_calls.is_empty()
        }) {
            let done = session
                .transcript()
                .messages()
                .iter()
                .filter(|m| m.role == Role::User)
                .count();
            if done == SERVICES.len() {
                break;
            }
            session.state_mut().working_on = format!("src/{}.rs", SERVICES[done]);
            session.push(Message::user(task(done)));
        }
        // Compacted, checkpointed, pointers allowed: what to send.
        let request = session.next_request_blocking()?;
        println!(
            "request #{}: {} messages, {} tokens, stable prefix {}{}",
            request.sequence(),
            request.messages().len(),
            request.tokens(),
            request.stable_prefix_len(),
            if request.is_compaction_point() {
                " (compaction point)"
            } else {
                ""
            }
        );
        model.ask(&mut session, &request)?;
        // Every call of the reply: the pointer tool by the session, deploys under the ledger
        // (never twice, never while unknown), the rest here.
        let (world, delay) = (&args.world, args.deploy_delay);
        let runs = session.run_tools_blocking(|call| async move {
            match (call.name.as_str(), deploy_effect(&call)) {
                ("read_file", _) => Ok::<_, ToolFailure>(read_file(
                    call.arguments.value()?["path"].as_str().unwrap_or(""),
                )),
                (_, Some(EffectCall { effect, .. })) => Ok(deploy(world, &effect.target, delay)?),
                (name, None) => Ok(format!("Unknown tool `{name}`.")),
            }
        })?;
        for run in runs {
            match (run.outcome, deploy_effect(&run.call)) {
                (ToolRunOutcome::Pointer(reply), _) => match reply.outcome {
                    Ok(slice) => println!(
                        "read back {} bytes of {}",
                        slice.end - slice.start,
                        slice.pointer
                    ),
                    Err(error) => println!("resolve_pointer refused: {error}"),
                },
                (ToolRunOutcome::Effect(outcome), Some(call)) => {
                    println!("deploy {}: {outcome:?}", call.effect.target)
                }
                _ => {}
            }
        }
    }
    for service in SERVICES {
        let status = compaction::block_on(EffectLedger::status(
            &ledger,
            "deploys",
            &format!("deploy-{service}"),
        ))?;
        println!("deploy-{service}: {status:?}");
    }
    println!(
        "all {} tasks done (checkpoint #{})",
        SERVICES.len(),
        session.sequence()
    );
    Ok(())
}

/// The side effect: appends to the world's own log (what a deploy tool changes outside the
/// agent), then takes a while.
fn deploy(world: &Path, service: &str, delay: Duration) -> Result<String, std::io::Error> {
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(world)?;
    writeln!(log, "deploy-{service}")?;
    log.sync_all()?;
    println!("deploying {service} ...");
    std::thread::sleep(delay);
    Ok(format!("Deployed {service}: healthy."))
}

/// A file of the repository the agent works on (generated: 60 to 100 lines).
fn read_file(path: &str) -> String {
    let lines = 60 + path.len() * 7 % 41;
    (0..lines)
        .map(|i| format!("{path}:{i}: let v{i} = check(\"{path}\", {i})?;\n"))
        .collect()
}

/// The tools the model may call: (name, description, JSON schema of the arguments).
fn tools() -> Vec<(&'static str, &'static str, Value)> {
    let object = |key: &str| json!({"type": "object", "properties": {key: {"type": "string"}}, "required": [key]});
    vec![
        (
            RESOLVE_POINTER,
            RESOLVE_POINTER_DESCRIPTION,
            resolve_pointer_parameters(),
        ),
        (
            "read_file",
            "Read a file of the repository.",
            object("path"),
        ),
        (
            "deploy",
            "Deploy a service to production (a side effect).",
            object("service"),
        ),
    ]
}

/// The model's endpoint on one wire.
struct Model {
    anthropic: bool,
    url: String,
    name: String,
    key: Option<String>,
    /// The Messages API client (the Anthropic wire).
    client: Option<AnthropicClient>,
}

impl Model {
    /// Your server when the wire's base URL is set; else the loopback test server (returned
    /// too: dropping it stops it).
    fn connect(anthropic: bool) -> Result<(Model, Option<FakeOpenAi>), Box<dyn Error>> {
        let (env, model, default) = match anthropic {
            true => ("ANTHROPIC", "ANTHROPIC_MODEL", "claude-sonnet-4-5"),
            false => ("OPENAI", "OPENAI_MODEL", "gpt-4o-mini"),
        };
        let name = std::env::var(model).unwrap_or_else(|_| default.to_owned());
        let key = std::env::var(format!("{env}_API_KEY")).ok();
        let (base, loopback) = match std::env::var(format!("{env}_BASE_URL")) {
            Ok(base) => (base, None),
            Err(_) => {
                let server = FakeOpenAi::start_with(loopback_model)?;
                println!("{env}_BASE_URL is not set: the loopback test server plays the model");
                let base = if anthropic {
                    server.root_url() + "/v1"
                } else {
                    server.base_url()
                };
                (base, Some(server))
            }
        };
        let path = if anthropic {
            "/messages"
        } else {
            "/chat/completions"
        };
        // The client adds `/v1/messages` to the server's root.
        let root = base.trim_end_matches('/').trim_end_matches("/v1");
        let client =
            anthropic.then(|| AnthropicClient::new(key.clone().unwrap_or_default()).base_url(root));
        Ok((
            Model {
                anthropic,
                url: base.trim_end_matches('/').to_owned() + path,
                name,
                key,
                client,
            },
            loopback,
        ))
    }

    /// Sends `request` and pushes the model's reply onto the session.
    fn ask(
        &self,
        session: &mut Session<CodingAgent>,
        request: &SessionRequest,
    ) -> Result<(), Box<dyn Error>> {
        let tools = tools();
        let key = self.key.clone().unwrap_or_default();
        if self.anthropic {
            let mut body = request.anthropic_request(&self.name, 1_024)?;
            check_anthropic(&body.messages)?; // the documented rules: alternation, tool pairs
            let tools = tools.into_iter().map(|(name, description, schema)| {
                json!({"name": name, "description": description, "input_schema": schema})
            });
            body.tools = Some(tools.collect());
            let client = self.client.as_ref().ok_or("no Messages API client")?;
            session.push_response(compaction::block_on(client.send(&body))?)?;
        } else {
            let tools = tools.into_iter().map(|(name, description, schema)| {
                json!({"type": "function", "function": {"name": name, "description": description, "parameters": schema}})
            });
            let body = json!({
                "model": self.name,
                "messages": request.openai_messages(),
                "tools": tools.collect::<Vec<_>>(),
                "prompt_cache_key": request.prompt_cache_key(),
            });
            let bearer = format!("Bearer {key}");
            let reply = post(
                &self.url,
                &[("authorization", bearer.as_str())],
                &body.to_string(),
            )?;
            session.push_response(serde_json::from_str::<CreateChatCompletionResponse>(
                &reply,
            )?)?;
        }
        Ok(())
    }
}

/// POSTs JSON over plain HTTP/1.1 and returns the 200 response's body.
fn post(url: &str, headers: &[(&str, &str)], body: &str) -> Result<String, Box<dyn Error>> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("this example's client speaks plain http:// only")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = std::net::TcpStream::connect(host)?;
    let mut head = format!("POST /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    head += &format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    stream.write_all(format!("{head}\r\n{body}").as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (status, body) = response
        .split_once("\r\n\r\n")
        .ok_or("a truncated response")?;
    match status.starts_with("HTTP/1.1 200") {
        true => Ok(body.to_owned()),
        false => Err(format!(
            "the model server answered {}: {body}",
            status.lines().next().unwrap_or("")
        )
        .into()),
    }
}

// --- The loopback model: stands in for yours, a pure function of the request it receives (so
// --- a request sent again after a restart gets the same answer).

fn loopback_model(request: &RecordedRequest) -> Reply {
    let reply = match loopback_reply(request) {
        Ok(reply) => reply,
        Err(error) => return Reply::error(400, &error.to_string()),
    };
    if request.path.ends_with("/messages") {
        let content = to_anthropic(&[reply]).map(|c| c.messages[0].content.clone());
        return Reply::Raw(
            json!({
                "id": "msg_loopback", "type": "message", "role": "assistant", "model": "loopback",
                "content": content.unwrap_or_default(), "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            })
            .to_string(),
        );
    }
    if reply.tool_calls.is_empty() {
        return Reply::summary(reply.content);
    }
    let calls: Vec<_> = reply
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments_text()))
        .collect();
    Reply::tool_calls(&reply.content, &calls)
}

/// Reads the task, then the file (and, every other task, reads back what compaction moved out
/// of the window), then deploys, then reports.
fn loopback_reply(request: &RecordedRequest) -> Result<Message, Box<dyn Error>> {
    let messages = if request.path.ends_with("/messages") {
        let sent: AnthropicRequest = serde_json::from_str(&request.body)?;
        // One block a message: a merged turn (a fold, then a reply) reads back in order.
        let blocks = sent.messages.iter().flat_map(|m| {
            let turn = |block: &ContentBlock| AnthropicMessage {
                role: m.role,
                content: vec![block.clone()],
            };
            m.content.iter().map(turn)
        });
        from_anthropic(&sent.system, &blocks.collect::<Vec<_>>())?
    } else {
        let sent: Vec<ChatCompletionRequestMessage> =
            serde_json::from_value(request.json()["messages"].clone())?;
        from_openai_messages(&sent)?
    };
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
        return Ok(Message::assistant_with_tools(
            format!("Reading src/{service}.rs."),
            calls,
        ));
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

struct Args {
    anthropic: bool,
    db: PathBuf,
    world: PathBuf,
    deploy_delay: Duration,
}

impl Args {
    fn parse() -> Result<Args, Box<dyn Error>> {
        let mut args = Args {
            anthropic: false,
            db: std::env::temp_dir().join("session_agent.db"),
            world: std::env::temp_dir().join("session_agent.world"),
            deploy_delay: Duration::from_millis(50),
        };
        let mut argv = std::env::args().skip(1);
        while let Some(flag) = argv.next() {
            let value = argv.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--wire" if value == "openai" || value == "anthropic" => args.anthropic = value == "anthropic",
                "--db" => args.db = value.into(),
                "--world" => args.world = value.into(),
                "--deploy-ms" => args.deploy_delay = Duration::from_millis(value.parse()?),
                _ => return Err(format!("unknown option {flag} {value} (--wire openai|anthropic, --db, --world, --deploy-ms)").into()),
            }
        }
        Ok(args)
    }
}
