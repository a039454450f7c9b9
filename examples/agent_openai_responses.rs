//! The coding agent template on OpenAI's Responses API: copy this file. An agent loop on
//! `compaction::Session`, durable on SQLite: it asks the model for the next step, reads files,
//! answers `resolve_pointer` calls, and deploys under the effect ledger (claimed before it runs,
//! committed after). Kill it at any moment (`kill -9`) and run it again with the same `--db`:
//! it resumes from its last checkpoint; a deploy that ran, or may have, never runs again.
//!
//! Run: `cargo run --example agent_openai_responses --features openai,openai-responses [-- --db
//! PATH]`. Env: `OPENAI_BASE_URL` (with `/v1`), `OPENAI_API_KEY`, `OPENAI_MODEL`; without the
//! base URL the loopback test server's scripted model stands in (`support/`, not part of the
//! template, also reads `--world PATH` and `--deploy-ms N`: the fake deploys' log and duration).
//!
//! Glue (wire plumbing beyond the agent's own state, tools and loop): 3 lines, marked `// glue`:
//! the library's `OpenAiClient` (retries of 429 / 5xx) and the request (stateless, `store:
//! false`: each reasoning item comes back encrypted and is replayed unchanged with its turn);
//! `push_response` takes the reply as it comes. With your own async-openai client, send
//! `request.responses_request(..)` with it instead.

mod support; // NOT PART OF THE TEMPLATE: the fake world and the loopback model server
use compaction::openai::OpenAiClient;
use compaction::pointer_tool::resolve_pointer_definition;
use compaction::session::{EffectCall, Session, ToolFailure, ToolRunOutcome};
use compaction::Transcript;
use compaction::{block_on, Compactable, Compactor, Effect, EffectLog, Message, OpenAiChat, Role};
use compaction::{SealKey, SqliteLedger, SqliteStore, Tokenizer, ToolCall, ToolDefinition};
use serde::{Deserialize, Serialize};
use serde_json::json;
use support::{Wire, SERVICES};

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

/// The tools the model may call (the pointer tool reads back what compaction moved out).
fn tools() -> Vec<ToolDefinition> {
    let tool = |name: &str, about: &str, key: &str| {
        let schema =
            json!({"type": "object", "properties": {key: {"type": "string"}}, "required": [key]});
        ToolDefinition::new(name, about, schema)
    };
    let read_file = tool("read_file", "Read a file of the repository.", "path");
    let deploy = tool("deploy", "Deploy a service (a side effect).", "service");
    vec![resolve_pointer_definition(), read_file, deploy]
}

/// `deploy` calls are effects; the key names the deploy, so a retry after a restart is the same.
fn deploy_effect(call: &ToolCall) -> Option<EffectCall> {
    let service = call.arguments.value().ok()?["service"].as_str()?.to_owned();
    let effect = Effect::new("deploy", &service, format!("deploy-{service}"));
    (call.name == "deploy").then(|| EffectCall::new("deploys", effect))
}

/// One tool call: `run_tools` calls it for `read_file`, and for `deploy` under the ledger.
async fn run_tool(call: ToolCall) -> Result<String, ToolFailure> {
    let arguments = call.arguments.value()?;
    match (
        call.name.as_str(),
        arguments["path"].as_str(),
        arguments["service"].as_str(),
    ) {
        ("read_file", Some(path), _) => Ok(support::read_file(path)),
        ("deploy", _, Some(service)) => Ok(support::deploy(service)?),
        (name, ..) => Err(ToolFailure::failed(format!(
            "no tool `{name}` for these arguments"
        ))),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = support::db_from_args("agent_openai_responses")?;
    let (base_url, _loopback) = support::model_server(Wire::Responses)?;
    let client = OpenAiClient::from_env().base_url(base_url); // glue
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into()); // glue
    let compactor = Compactor::builder()
        .budget(4_000)
        .token_counter(Tokenizer::O200kBase)
        .seal_key(SealKey::new("coding-agent", [7u8; 32])?); // yours: from a secret store
    let mut session = Session::builder("coding-agent")
        .compactor(compactor)
        .chat_format(OpenAiChat) // the budget counts the request as this wire bills it
        .tools(tools())
        .store(SqliteStore::open(&db)?)
        .ledger(SqliteLedger::open(&db)?)
        .effect_calls(deploy_effect)
        .open_blocking(|| CodingAgent {
            rules: vec!["Never deploy a service twice.".into()],
            chat: Transcript::from_messages(vec![Message::system("You are a coding agent.")])
                .expect("one system message"),
            ..CodingAgent::default()
        })?;
    match session.resumed_from() {
        Some(sequence) => println!("resumed from checkpoint #{sequence}"),
        None => println!("fresh start in {}", db.display()),
    }
    loop {
        // The model closed its turn (or nothing was said yet): the user's next task, if any.
        let said = session.transcript().messages().iter();
        let given = said.filter(|m| m.role == Role::User).count();
        if given == 0 || session.awaiting_user() {
            let Some(task) = support::task(given) else {
                break session.finish_blocking()?; // the last reply durable: a re-run asks nothing
            };
            session.state_mut().working_on = format!("src/{}.rs", SERVICES[given]);
            session.push(Message::user(task));
        }
        // Compacted, checkpointed, pointers allowed: what to send.
        let request = session.next_request_blocking()?;
        let (sequence, tokens) = (request.sequence(), request.tokens());
        let point = ["", " (compaction point)"][usize::from(request.is_compaction_point())];
        println!("request #{sequence}: {tokens} tokens{point}");
        // Sent; then its calls: pointers by the session, deploys under the ledger, the rest here.
        let reply = block_on(client.responses(&request.responses_request(&model)))?; // glue
        session.push_response(reply)?; // its output items, reasoning kept for the replay
        for run in session.run_tools_blocking(run_tool)? {
            if let (ToolRunOutcome::Effect(outcome), Some(deploy)) =
                (run.outcome, deploy_effect(&run.call))
            {
                println!("deploy {}: {outcome:?}", deploy.effect.target);
            }
        }
    }
    println!("all {} tasks done", SERVICES.len());
    Ok(())
}
