//! NOT PART OF THE TEMPLATE. The stand-ins `fleet_temporal.rs` runs against, so it runs anywhere
//! with no key (and the crate's kill test with it): the user's six tasks, a repository to read,
//! a deploy that writes its own log (the world: what a deploy changes outside the agent), and
//! a loopback OpenAI-compatible server whose model is a pure function of the conversation it
//! receives (a request sent again after a crash gets the same answer).
#![allow(dead_code)] // the template and the kill test each use a part

use compaction::openai::async_openai::types::chat::ChatCompletionRequestMessage;
use compaction::openai::from_openai_messages;
use compaction::{Message, Role};
use compaction_fixtures::openai_server::{FakeOpenAi, RecordedRequest, Reply};
use compaction_temporal::{
    AgentTurns, AgentWorkflow, Heartbeat, TurnInput, TurnOutcome, UserMessage,
};
use std::error::Error;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use temporalio_client::{
    Client, WorkflowGetResultOptions, WorkflowQueryOptions, WorkflowSignalOptions,
};

/// The services the user asks each agent to fix and deploy, one task each.
pub const SERVICES: [&str; 6] = ["billing", "search", "auth", "mailer", "reports", "gateway"];

/// The user's task `n` (from 0), or `None` once all six were given.
pub fn task(n: usize) -> Option<String> {
    let service = SERVICES.get(n)?;
    Some(format!(
        "Task {}/6: the tests of src/{service}.rs fail; fix them and deploy {service}.",
        n + 1
    ))
}

/// A file of the repository (generated: 60 to 100 lines).
pub fn read_file(path: &str) -> String {
    let lines = 60 + path.len() * 7 % 41;
    (0..lines)
        .map(|i| format!("{path}:{i}: let v{i} = check(\"{path}\", {i})?;\n"))
        .collect()
}

/// The side effect: appends `AGENT SERVICE` to the world's log (`WORLD`), durably, then takes
/// `DEPLOY_MS` (a kill in that time lands after the deploy happened and before the agent heard
/// of it).
pub fn deploy(agent: &str, service: &str) -> std::io::Result<String> {
    let world = std::env::var("WORLD").unwrap_or_else(|_| "/tmp/fleet_temporal.world".into());
    let delay = std::env::var("DEPLOY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(50);
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(world)?;
    // One write: a kill never leaves half a line in the log (an append of this size is atomic).
    log.write_all(format!("{agent} {service}\n").as_bytes())?;
    log.sync_all()?;
    std::thread::sleep(Duration::from_millis(delay));
    Ok(format!("Deployed {service}: healthy."))
}

/// The loopback model server (stops when dropped).
pub fn model_server() -> std::io::Result<FakeOpenAi> {
    FakeOpenAi::start_with(model)
}

/// The base URL of a loopback model server that runs as long as the process.
pub fn model_server_url() -> Result<String, Box<dyn Error>> {
    static SERVER: OnceLock<FakeOpenAi> = OnceLock::new();
    if SERVER.get().is_none() {
        let _ = SERVER.set(model_server()?);
    }
    println!("OPENAI_BASE_URL is not set: the loopback model answers");
    Ok(SERVER.get().expect("set above").base_url())
}

/// The users of `agents` agents: each is given the six tasks one at a time through `say`
/// (the next once every agent answered), then closed; prints turns per second.
pub async fn users<F, Fut>(client: &Client, agents: usize, say: F) -> Result<(), Box<dyn Error>>
where
    F: Fn(String, String) -> Fut,
    Fut: Future<Output = Result<(), Box<dyn Error>>>,
{
    let started = Instant::now();
    let ids: Vec<String> = (0..agents).map(|n| format!("agent-{n}")).collect();
    for (n, task) in (0..).map_while(task).enumerate() {
        for id in &ids {
            say(id.clone(), task.clone()).await?;
        }
        for id in &ids {
            let handle = client.get_workflow_handle::<AgentWorkflow>(id.clone());
            // Until the agent answered: a query needs a live worker, so errors are retried.
            while !handle
                .query(AgentWorkflow::status, (), WorkflowQueryOptions::default())
                .await
                .is_ok_and(|s| s.idle && s.user_messages == n as u64 + 1)
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        println!("{task}: every agent answered");
    }
    let mut turns = 0;
    for id in &ids {
        let handle = client.get_workflow_handle::<AgentWorkflow>(id.clone());
        let close = WorkflowSignalOptions::default();
        handle
            .signal(AgentWorkflow::close, "done".to_owned(), close)
            .await?;
        turns += handle
            .get_result(WorkflowGetResultOptions::default())
            .await?
            .turns;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "engine: {turns} turns in {seconds:.1} s, {:.1} turns/s",
        f64::from(turns) / seconds
    );
    Ok(())
}

/// The same agents and tasks without the engine: two workers share the agents, each turn a
/// direct call of `turns`; prints turns per second and the turn time's p50 / p99.
pub async fn plain(turns: impl AgentTurns, agents: usize) -> Result<(), Box<dyn Error>> {
    let turns = Arc::new(turns);
    let started = Instant::now();
    let workers = (0..2).map(|w| {
        let turns = turns.clone();
        tokio::spawn(async move {
            let mut times = Vec::new();
            for n in (w..agents).step_by(2) {
                for (seq, text) in (0..).map_while(task).enumerate() {
                    let mut messages = vec![UserMessage {
                        seq: seq as u64 + 1,
                        text,
                    }];
                    loop {
                        let input = TurnInput {
                            agent_id: format!("agent-{n}"),
                            messages,
                        };
                        let at = Instant::now();
                        let summary = turns
                            .turn(input, Heartbeat::none())
                            .await
                            .map_err(|e| e.to_string())?;
                        times.push(at.elapsed());
                        messages = Vec::new();
                        if summary.outcome == TurnOutcome::AwaitingUser {
                            break;
                        }
                    }
                }
            }
            Ok::<_, String>(times)
        })
    });
    let mut times = Vec::new();
    for worker in workers.collect::<Vec<_>>() {
        times.extend(worker.await??);
    }
    let seconds = started.elapsed().as_secs_f64();
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    println!(
        "plain: {} turns in {seconds:.1} s, {:.1} turns/s, turn p50 {:.1} ms, p99 {:.1} ms",
        times.len(),
        times.len() as f64 / seconds,
        at(0.5),
        at(0.99)
    );
    Ok(())
}

fn model(request: &RecordedRequest) -> Reply {
    let sent: Result<Vec<ChatCompletionRequestMessage>, _> =
        serde_json::from_value(request.json()["messages"].clone());
    match sent
        .map_err(|e| e.to_string())
        .and_then(|sent| from_openai_messages(&sent).map_err(|e| e.to_string()))
    {
        Ok(messages) => answer(&messages),
        Err(error) => Reply::error(400, &error),
    }
}

/// Reads the task's file, deploys its service once the file was read, then says it is done.
fn answer(messages: &[Message]) -> Reply {
    let Some(task) = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User && m.content.starts_with("Task "))
    else {
        return Reply::summary("Nothing to do yet.");
    };
    let number = task.content[5..].split('/').next().unwrap_or("0");
    let service = task
        .content
        .rsplit("deploy ")
        .next()
        .unwrap_or("")
        .trim_end_matches('.');
    let since: Vec<&Message> = messages
        .iter()
        .rev()
        .take_while(|m| !(m.role == Role::User && m.content == task.content))
        .collect();
    let called = |name: &str| {
        since
            .iter()
            .any(|m| m.tool_calls.iter().any(|c| c.name == name))
    };
    // Ids a real model would not repeat: the task and the conversation's length.
    let id = |name: &str| format!("call_{number}_{name}_{}", messages.len());
    if !called("read_file") {
        let path = format!("{{\"path\":\"src/{service}.rs\"}}");
        Reply::tool_calls("", &[(&id("read"), "read_file", &path)])
    } else if !called("deploy") {
        let arguments = format!("{{\"service\":\"{service}\"}}");
        Reply::tool_calls("", &[(&id("deploy"), "deploy", &arguments)])
    } else {
        Reply::summary(format!("Task {number} done: {service} deployed."))
    }
}
