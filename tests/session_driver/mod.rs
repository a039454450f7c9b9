//! A deterministic agent that the session tests drive step by step: a scripted user, a model
//! that is a pure function of the request it receives, a read tool with large outputs, the
//! pointer tool, and a side-effecting `deploy` whose outcome (done or failed) is scripted per
//! key and attempt. Each step is one action of an agent loop, so a test can stop ("kill") the
//! agent between any two, or inside a running effect, then resume it.
// Each test binary uses a part of what is shared.
#![allow(dead_code)]

pub mod family;

use compaction::session::{EffectCall, Session, SessionError, SessionRequest};
use compaction::{
    Compactable, Compactor, Effect, EffectLog, MemoryLedger, MemoryStore, Message, Role, SealKey,
    Tokenizer, ToolCall, Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The agent's state.
#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
pub struct Agent {
    #[protected(pin)]
    pub rules: Vec<String>,
    #[protected]
    pub plan_step: u32,
    #[transcript(keep_recent = 1)]
    pub chat: Transcript,
    #[effect(idempotent = false)]
    pub deploys: EffectLog,
}

/// The agent a session starts from.
pub fn fresh_agent() -> Agent {
    Agent {
        rules: vec!["never deploy on Fridays".into()],
        chat: Transcript::from_messages(vec![Message::system("You deploy services.")])
            .expect("a system message is a valid transcript"),
        ..Agent::default()
    }
}

/// The ledger scope of `deploys`.
pub const SCOPE: &str = "deploys";

/// Which calls are effects: `deploy`, keyed by its turn.
pub fn effect_of(call: &ToolCall) -> Option<EffectCall> {
    if call.name != "deploy" {
        return None;
    }
    let args = call.arguments.value().ok()?;
    let key = args["key"].as_str()?.to_owned();
    let service = args["service"].as_str()?.to_owned();
    Some(EffectCall::new(SCOPE, Effect::new("deploy", service, key)))
}

/// The compactor settings every run shares (keyed seals, a small budget that compacts often).
pub fn compactor(budget: usize) -> compaction::CompactorBuilder {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .seal_key(SealKey::new("test", [9u8; 32]).expect("a valid key"))
}

/// A session of the driver's agent `agent_id` at a 4,000-token budget on `store` and `ledger`
/// (opened fresh, or resumed from the store's checkpoint).
pub fn open_on(agent_id: &str, store: &MemoryStore, ledger: &MemoryLedger) -> Session<Agent> {
    Session::builder(agent_id)
        .compactor(compactor(4_000))
        .store(store.clone())
        .ledger(ledger.clone())
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .expect("a memory store opens")
}

/// Plays `script` on `session` to its end (no crash), recording effects in `world`; returns
/// every request the session made.
pub fn play_to_end(
    session: &mut Session<Agent>,
    script: &Script,
    world: &dyn World,
) -> Vec<SessionRequest> {
    let mut driver = Driver::default();
    let mut requests = Vec::new();
    loop {
        match driver.step(session, script, world, Stop::Never).unwrap() {
            Some(Step::Done) => return requests,
            Some(Step::Request(request)) => requests.push(request),
            Some(_) => {}
            None => unreachable!("Stop::Never never stops inside an effect"),
        }
    }
}

/// splitmix64: every scripted choice is a hash of the seed and what it is about.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The script: how many user turns, and the seed of every choice.
#[derive(Debug, Clone, Copy)]
pub struct Script {
    pub seed: u64,
    pub turns: usize,
}

impl Script {
    fn pick(&self, what: u64, a: u64, b: u64) -> u64 {
        mix(self.seed ^ mix(what ^ mix(a ^ mix(b))))
    }

    /// Whether attempt `attempt` of the deploy of turn `turn` fails (never the third).
    pub fn deploy_fails(&self, turn: usize, attempt: usize) -> bool {
        attempt < 2 && self.pick(1, turn as u64, attempt as u64).is_multiple_of(3)
    }

    /// The output of reading the file of turn `turn`: 20 to 120 lines.
    pub fn file(&self, turn: usize) -> String {
        let lines = 20 + self.pick(2, turn as u64, 0) % 100;
        (0..lines)
            .map(|i| format!("src/svc_{turn}.rs:{i}: let value_{i} = compute({turn}, {i});\n"))
            .collect()
    }
}

/// Where performed effects are recorded: a list in memory, or a file across processes.
pub trait World {
    /// Records that the effect `key` happened (called by the tool, before it returns).
    fn perform(&self, key: &str);
}

/// The user message of turn `turn`.
pub fn user_message(turn: usize) -> String {
    format!("turn {turn}: read src/svc_{turn}.rs and deploy svc-{turn} if it looks right")
}

/// The turn a transcript is in: how many user messages it holds (the current one included).
fn turn_of(messages: &[Message]) -> usize {
    messages.iter().filter(|m| m.role == Role::User).count()
}

/// The model: a pure function of the request it receives.
pub fn model(script: &Script, request: &SessionRequest) -> Message {
    model_of(script, request.messages())
}

/// The model of [`model`], on the messages as they arrive (a server's parsed request).
pub fn model_of(script: &Script, messages: &[Message]) -> Message {
    // The turn, from the newest user message (always verbatim: older ones may have left).
    let turn = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User && m.content.starts_with("turn "))
        .and_then(|m| m.content[5..].split(':').next()?.parse().ok())
        .unwrap_or(0usize);
    // What the model answers: the newest message that is not the compactor's note (a state
    // update may come last, after the results it follows).
    let last = messages
        .iter()
        .rev()
        .find(|m| m.role != Role::System)
        .or(messages.last())
        .expect("a request is never empty");
    // Ids a real model would not repeat: from a hash of the whole request.
    let digest = serde_json::to_vec(&messages[1..])
        .expect("messages serialize")
        .iter()
        .fold(script.seed, |h, b| mix(h ^ u64::from(*b)));
    let id = |n: usize| format!("call_{turn}_{n}_{digest:016x}");
    let deploy = |n: usize| {
        ToolCall::new(
            id(n),
            "deploy",
            json!({"service": format!("svc-{turn}"), "key": format!("deploy-{turn}")}),
        )
    };
    match last.role {
        Role::User => {
            let mut calls = vec![ToolCall::new(
                id(0),
                "read_file",
                json!({"path": format!("src/svc_{turn}.rs")}),
            )];
            // Sometimes the model reads back what left its context.
            let pointer = messages.iter().find_map(|m| {
                m.content
                    .find("store://sha256:")
                    .map(|at| &m.content[at..at + 79])
            });
            if let Some(pointer) =
                pointer.filter(|_| script.pick(3, turn as u64, 0).is_multiple_of(3))
            {
                calls.push(ToolCall::new(
                    id(1),
                    "resolve_pointer",
                    json!({ "pointer": pointer }),
                ));
            }
            Message::assistant_with_tools("", calls)
        }
        Role::Tool => {
            // The results of the model's last message: deploy after reading, retry a failed
            // deploy (the same key), else close the turn.
            let failed = last.content.starts_with("Failed:");
            let deployed = messages
                .iter()
                .rev()
                .take_while(|m| m.role != Role::User)
                .any(|m| m.tool_calls.iter().any(|c| c.name == "deploy"));
            let attempts = messages
                .iter()
                .rev()
                .take_while(|m| m.role != Role::User)
                .filter(|m| m.tool_calls.iter().any(|c| c.name == "deploy"))
                .count();
            if (!deployed && !script.pick(4, turn as u64, 0).is_multiple_of(4))
                || (failed && attempts < 3)
            {
                Message::assistant_with_tools("", vec![deploy(0)])
            } else {
                Message::assistant(format!(
                    "turn {turn} done: {}",
                    &last.content[..last.content.len().min(40)]
                ))
            }
        }
        _ => Message::assistant(format!("turn {turn}: nothing to do")),
    }
}

/// What a step did.
#[derive(Debug)]
pub enum Step {
    /// A user message was pushed.
    User,
    /// A request was made (and is the model's input).
    Request(SessionRequest),
    /// The model's response was pushed.
    Response,
    /// A call was answered.
    Answered,
    /// The script is over.
    Done,
}

/// Where to stop inside a step (the kill points a test picks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Run the step whole.
    Never,
    /// If the step runs an effect that succeeds: stop after the effect happened, before
    /// `run_effect` returns (the session is dropped with the effect claimed).
    InsideEffect,
}

/// The driver's memory between steps (not persisted: a killed agent loses it).
#[derive(Debug, Default)]
pub struct Driver {
    /// The request the model has not answered yet.
    pub pending_request: Option<SessionRequest>,
}

impl Driver {
    /// One action of the agent loop. `Ok(None)`: the session was stopped inside an effect (the
    /// caller must drop it).
    pub fn step(
        &mut self,
        session: &mut Session<Agent>,
        script: &Script,
        world: &dyn World,
        stop: Stop,
    ) -> Result<Option<Step>, SessionError> {
        if let Some(call) = session.pending_calls().into_iter().next() {
            return self.answer(session, script, world, &call, stop);
        }
        if let Some(request) = self.pending_request.take() {
            session.push_response(model(script, &request))?;
            return Ok(Some(Step::Response));
        }
        let messages = session.transcript().messages();
        let turn_over = match messages.last() {
            None => true,
            Some(last) => {
                last.role == Role::System
                    || (last.role == Role::Assistant && last.tool_calls.is_empty())
            }
        };
        if turn_over {
            let turn = turn_of(messages);
            if turn == script.turns {
                return Ok(Some(Step::Done));
            }
            if turn % 3 == 2 {
                session.state_mut().plan_step = turn as u32;
            }
            session.push(Message::user(user_message(turn)));
            return Ok(Some(Step::User));
        }
        let request = session.next_request_blocking()?;
        self.pending_request = Some(request.clone());
        Ok(Some(Step::Request(request)))
    }

    fn answer(
        &mut self,
        session: &mut Session<Agent>,
        script: &Script,
        world: &dyn World,
        call: &ToolCall,
        stop: Stop,
    ) -> Result<Option<Step>, SessionError> {
        let turn = turn_of(session.transcript().messages()) - 1;
        match call.name.as_str() {
            "read_file" => session.answer(call, script.file(turn))?,
            "resolve_pointer" => {
                session.answer_pointer_calls_blocking();
            }
            "deploy" => {
                let key = format!("deploy-{turn}");
                let attempt = session
                    .transcript()
                    .messages()
                    .iter()
                    .flat_map(|m| &m.tool_calls)
                    .filter(|c| {
                        c.name == "deploy"
                            && c.id != call.id
                            && c.effect.as_deref() == Some(key.as_str())
                    })
                    .count();
                let fails = script.deploy_fails(turn, attempt);
                let hang = stop == Stop::InsideEffect && !fails;
                let run = || async move {
                    if fails {
                        return Err(format!("deploy of svc-{turn} timed out before it started"));
                    }
                    world.perform(&key);
                    if hang {
                        std::future::pending::<()>().await;
                    }
                    Ok(format!("deployed svc-{turn}"))
                };
                if hang {
                    let mut effect = pin!(session.run_effect(call, run));
                    let mut cx = Context::from_waker(Waker::noop());
                    match effect.as_mut().poll(&mut cx) {
                        Poll::Pending => return Ok(None),
                        Poll::Ready(done) => {
                            done?;
                        }
                    }
                } else {
                    compaction::block_on(session.run_effect(call, run))?;
                }
            }
            other => panic!("the model called an unknown tool `{other}`"),
        }
        Ok(Some(Step::Answered))
    }
}
