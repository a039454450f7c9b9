//! One simulated run: the agent loop driven step by step from one seed, each step polled by a
//! tiny executor that notices a crash (an operation that never completes), drops the session
//! there and reopens it from the store with `SessionBuilder::open`, like a restarted process.
//! After every step the invariants of `check.rs` run (with every fault off).

use crate::agent::{effect_of, note, SimAgent};
use crate::check::{self, Checker};
use crate::ctx::{Act, Config, Ctx, Report};
use crate::faults::{die, Decision, Faults, Op};
use crate::model::{file_content, reply, turn_of};
use crate::rng::{hash_bytes, Rng};
use compaction::session::{Session, SessionError, SessionRequest, ToolFailure};
use compaction::{Message, Role, ToolCall};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `future` to completion; `None` when the process crashed inside it (an operation that
/// never completes: memory backends complete at once, so anything else is a crash).
fn drive<T>(faults: &Faults, future: impl Future<Output = T>) -> Option<T> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..64 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        if faults.crashed() {
            return None;
        }
    }
    panic!("a step neither completed nor crashed: a future waits on nothing the simulation runs");
}

/// The driver's memory between steps (lost in a crash, as a process's would be).
#[derive(Default)]
struct Driver {
    pending_request: Option<SessionRequest>,
}

/// One action of the agent loop.
async fn act(
    ctx: &Ctx,
    session: &mut Session<SimAgent>,
    driver: &mut Driver,
    malformed: bool,
) -> Result<Act, SessionError> {
    if let Some(call) = session.pending_calls().into_iter().next() {
        return answer(ctx, session, &call).await;
    }
    if let Some(request) = driver.pending_request.take() {
        let message = reply(ctx.seed, request.messages(), malformed);
        let what = describe(&message);
        session.push_response(message)?;
        return Ok(Act::Response(what));
    }
    let messages = session.transcript().messages();
    let turn_over = messages
        .iter()
        .rev()
        .find(|m| m.role != Role::System)
        .is_none_or(|m| m.role == Role::Assistant && m.tool_calls.is_empty());
    if turn_over {
        let turn = turn_of(messages) + 1;
        if turn.is_multiple_of(3) {
            let state = session.state_mut();
            state.notes.push(note(ctx.seed, turn as usize));
            state.plan_step = turn as u32;
        }
        session.push(Message::user(format!(
            "USR-turn-{turn}: read the logs and deploy svc-{} if they look right",
            turn % 5
        )));
        return Ok(Act::User(turn));
    }
    let request = session.next_request().await?;
    driver.pending_request = Some(request.clone());
    Ok(Act::Request(Box::new(request)))
}

/// Answers the first pending call.
async fn answer(
    ctx: &Ctx,
    session: &mut Session<SimAgent>,
    call: &ToolCall,
) -> Result<Act, SessionError> {
    let args = call.arguments.value().unwrap_or_default();
    match call.name.as_str() {
        "read_file" => {
            let path = args["path"].as_str().unwrap_or("?").to_owned();
            let bytes = args["bytes"].as_u64().unwrap_or(100).min(200_000) as usize;
            session.answer(call, file_content(ctx.seed, &path, bytes))?;
            Ok(Act::Answered(format!("read {path} ({bytes} B)")))
        }
        "resolve_pointer" => {
            let replies = session.answer_pointer_calls().await;
            Ok(Act::Answered(format!("{} pointer calls", replies.len())))
        }
        "deploy" if effect_of(call).is_some() => {
            let key = effect_of(call).expect("an effect").effect.idempotency_key;
            let mut rng = Rng::new(ctx.seed, hash_bytes(1, call.id.as_bytes()));
            let plan = rng.below(100);
            let (world, faults, k) = (ctx.world.clone(), ctx.faults.clone(), key.clone());
            let run = move || async move {
                if let Decision::Crash(after) = faults.decide(Op::EffectRun) {
                    if after {
                        world.perform(&k);
                    }
                    return die().await;
                }
                match plan {
                    0..=11 => Err(ToolFailure::failed("refused before it started")),
                    12..=17 => {
                        if plan.is_multiple_of(2) {
                            world.perform(&k);
                        }
                        Err(ToolFailure::unknown("timed out after the request went out"))
                    }
                    _ => {
                        world.perform(&k);
                        Ok(format!("deployed {}", plan))
                    }
                }
            };
            let outcome = session.run_effect(call, run).await?;
            Ok(Act::Effect { key, outcome })
        }
        other => {
            session.answer(
                call,
                format!("error: no tool `{other}` with these arguments"),
            )?;
            Ok(Act::Answered(format!("unknown tool `{other}`")))
        }
    }
}

/// A reply, in a few words, for the trace.
fn describe(m: &Message) -> String {
    let calls: Vec<String> = m
        .tool_calls
        .iter()
        .map(|c| format!("{}({:?})", c.name, c.id))
        .collect();
    let mut out = format!("{} {:?}", m.role.as_str(), cut40(&m.content));
    if !calls.is_empty() {
        out.push_str(&format!(" calls [{}]", calls.join(", ")));
    }
    if !m.opaque.is_empty() {
        out.push_str(" +thinking");
    }
    if m.tool_call_id.is_some() {
        out.push_str(" +tool_call_id");
    }
    out
}

fn cut40(text: &str) -> &str {
    crate::agent::cut(text, 40)
}

/// Runs `config` and checks every invariant after every step.
pub fn run(config: &Config) -> Report {
    let ctx = Ctx::new(config);
    let mut report = Report::default();
    let mut checker = Checker::new(&ctx);
    let mut crash_rng = Rng::new(config.seed, 0xc4a5);
    let mut session: Option<Session<SimAgent>> = None;
    let mut driver = Driver::default();
    for step in 0..config.steps {
        let in_window = step < config.fault_window;
        let crash_at = crash_rng.chance(150).then(|| 1 + crash_rng.below(8) as u32);
        ctx.faults.begin_step(in_window, crash_at);
        let malformed = in_window && config.classes.model;
        let before = session.as_ref().map(check::Snapshot::of);
        let result = match session.as_mut() {
            None => drive(&ctx.faults, ctx.open()).map(|opened| {
                opened.map(|s| {
                    let from = s.resumed_from();
                    session = Some(s);
                    Act::Opened(from)
                })
            }),
            Some(s) => drive(&ctx.faults, act(&ctx, s, &mut driver, malformed)),
        };
        let events = ctx.faults.take_events();
        let faulted = !events.is_empty();
        let mut line = format!("step {step:>3}{}: ", if in_window { "*" } else { " " });
        match &result {
            None => {
                line.push_str("CRASH (session dropped)");
                session = None;
                driver = Driver::default();
            }
            Some(Ok(act)) => line.push_str(&check::describe_act(act)),
            Some(Err(e)) => line.push_str(&format!("error: {}", cut_error(e))),
        }
        if !events.is_empty() {
            line.push_str(&format!("  [faults: {}]", events.join(", ")));
        }
        report.trace.push(line);
        ctx.faults.suspended(|| {
            checker.after_step(
                &ctx,
                step,
                in_window,
                faulted,
                session.as_ref(),
                before.as_ref(),
                result.as_ref(),
                &mut report,
            )
        });
    }
    report
}

fn cut_error(e: &SessionError) -> String {
    let text = e.to_string();
    crate::agent::cut(&text, 160).to_owned()
}
