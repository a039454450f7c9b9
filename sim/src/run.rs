//! One simulated run: the agent loop driven step by step from one seed, each step polled by a
//! tiny executor that notices a crash (an operation that never completes), drops the session
//! there and reopens it from the store with `SessionBuilder::open`, like a restarted process.
//! With takeovers on, a second session of the agent opens at random steps while the first
//! still runs; the first becomes a zombie that keeps acting for a while (every write it tries
//! must be refused). After every step the invariants of `check.rs` run (with every fault off).

use crate::agent::{effect_of, note, SimAgent};
use crate::check::{self, Actor, Checker};
use crate::ctx::{Act, Config, Ctx, Handed, Report};
use crate::faults::{die, Decision, Faults, Op};
use crate::model::{file_content, reply, turn_of};
use crate::rng::{hash_bytes, Rng};
use crate::sabotage::Sabotage;
use compaction::session::{Session, SessionError, ToolFailure};
use compaction::{Message, Role, ToolCall};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Wakes the simulator's thread (the SQLite and PostgreSQL backends complete on other threads).
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// How long one operation may take before the simulator calls it wedged (a real server's
/// slowest answer is far below it).
const WEDGED: Duration = Duration::from_secs(120);

/// Polls `future` to completion; `None` when the process crashed inside it (the fault plan
/// said so, and the operation never completes).
fn drive<T>(faults: &Faults, future: impl Future<Output = T>) -> Option<T> {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let started = Instant::now();
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        if faults.crashed() {
            return None;
        }
        assert!(
            started.elapsed() < WEDGED,
            "a step neither completed nor crashed in {WEDGED:?}: an operation is wedged"
        );
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// Runs `step`; `Err` with the panic's message when it panicked (the session is then dropped,
/// as in a crash, and `no_panic` fails).
fn guarded<T>(step: impl FnOnce() -> Option<T>) -> Result<Option<T>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)).map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

/// The driver's memory between steps (lost in a crash, as a process's would be).
#[derive(Default)]
struct Driver {
    pending_request: Option<Handed>,
}

/// A session and its driver: the agent's process.
struct Worker {
    session: Session<SimAgent>,
    driver: Driver,
}

/// What a sabotaged driver makes of a request before handing it to the model.
fn hand(ctx: &Ctx, mut handed: Handed) -> Handed {
    match ctx.sabotage {
        Some(Sabotage::DropToolResult) => {
            if let Some(at) = handed.messages.iter().rposition(|m| m.role == Role::Tool) {
                handed.messages.remove(at);
            }
        }
        Some(Sabotage::RewriteHandedPrefix) => {
            if let Some(first) = handed.messages.first_mut() {
                first
                    .content
                    .push_str(&format!(" (request {})", handed.sequence));
            }
        }
        _ => {}
    }
    handed
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
        let mut message = reply(ctx.seed, &request.messages, malformed);
        if ctx.sabotage == Some(Sabotage::EchoNoteInReply) {
            if let Some(newest) = session.state().notes.last() {
                message.content = format!("{} As noted: {newest}", message.content);
            }
        }
        let what = describe(&message);
        ctx.ground.protect_reply(&message);
        #[cfg(feature = "http")]
        if let Some(model) = &ctx.model {
            let called = model
                .call(&ctx.faults, &request.request, &message, ctx.anthropic)
                .await;
            return match called {
                Ok(reply) => {
                    reply.push(session)?;
                    Ok(Act::Response(what))
                }
                Err(mut error) => {
                    if ctx.sabotage == Some(Sabotage::LeakKeyInError) {
                        error.display = format!("{} (with key {})", error.display, model.key);
                    }
                    driver.pending_request = Some(request);
                    Ok(Act::ModelFailed {
                        display: error.display,
                        debug: error.debug,
                    })
                }
            };
        }
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
            let note = note(ctx.seed, turn as usize);
            ctx.ground.protect(note.clone());
            let state = session.state_mut();
            state.notes.push(note);
            state.plan_step = turn as u32;
        }
        let text = format!(
            "USR-turn-{turn}: read the logs and deploy svc-{} if they look right",
            turn % 5
        );
        ctx.ground.protect(text.clone());
        session.push(Message::user(text));
        if ctx.sabotage == Some(Sabotage::PushThenFail) {
            // Answering a call nobody made: the session refuses, after the push above.
            let nobody = ToolCall::new("call-nobody-made", "read_file", serde_json::json!({}));
            session.answer(&nobody, "")?;
        }
        return Ok(Act::User(turn));
    }
    let request = session.next_request().await?;
    if ctx.sabotage == Some(Sabotage::EditStateAfterRequest) {
        session.state_mut().plan_step += 1000;
    }
    let handed = hand(ctx, Handed::of(&request));
    driver.pending_request = Some(handed.clone());
    Ok(Act::Request(Box::new(handed)))
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
            if ctx.sabotage == Some(Sabotage::PanicInTool) {
                panic!("the read_file tool fell over");
            }
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
            let twice = ctx.sabotage == Some(Sabotage::RunEffectTwice);
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
                        if twice {
                            world.perform(&k);
                        }
                        // A text no other run answers, and not the key (which is protected).
                        let output =
                            format!("deployed as release r{:012x}", hash_bytes(9, k.as_bytes()));
                        world.answered(&k, &output);
                        Ok(output)
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

/// Runs `config` and checks every invariant after every step; `Err` when its backend cannot be
/// opened.
pub fn run(config: &Config) -> Result<Report, String> {
    let ctx = Ctx::new(config)?;
    let mut report = Report::default();
    let mut checker = Checker::new(&ctx);
    let mut crash_rng = Rng::new(config.seed, 0xc4a5);
    // Drawn whether or not takeovers are on, so turning them off leaves every other choice.
    let mut takeover_rng = Rng::new(config.seed, 0x7a6e);
    let mut primary: Option<Worker> = None;
    let mut zombie: Option<Worker> = None;
    // The newest epoch a session opened with: a zombie below it is superseded for certain (an
    // open that failed may have taken an epoch or not).
    let mut newest_open: Option<u64> = None;
    for step in 0..config.steps {
        let in_window = step < config.fault_window;
        let crash_at = crash_rng.chance(150).then(|| 1 + crash_rng.below(8) as u32);
        let (take_over, zombie_acts, zombie_quits) = (
            takeover_rng.chance(40),
            takeover_rng.chance(350),
            takeover_rng.chance(150),
        );
        let faults_on = in_window || config.sabotage == Some(Sabotage::FaultsOutlastWindow);
        ctx.faults.begin_step(faults_on, crash_at);
        let malformed = in_window && config.classes.model;
        if zombie.is_some() && zombie_quits {
            zombie = None;
        }
        let took_over = config.classes.takeover
            && in_window
            && take_over
            && zombie.is_none()
            && primary.is_some();
        if took_over {
            // A second worker opens this agent while this one still runs: this step is its open.
            zombie = primary.take();
            checker.taken_over();
        }
        let actor = if !took_over && zombie.is_some() && zombie_acts {
            Actor::Zombie
        } else {
            Actor::Primary
        };
        let worker = match actor {
            Actor::Zombie => zombie.as_mut(),
            Actor::Primary => primary.as_mut(),
        };
        let before = worker.as_ref().map(|w| check::Snapshot::of(&w.session));
        let superseded = actor == Actor::Zombie
            && worker
                .as_ref()
                .and_then(|w| w.session.epoch())
                .zip(newest_open)
                .is_some_and(|(own, newest)| own < newest);
        let durable_before =
            superseded.then(|| ctx.faults.suspended(|| check::DurableView::read(&ctx)));
        let mut panicked = None;
        let result = match worker {
            None => {
                let opened = guarded(|| drive(&ctx.faults, ctx.open())).unwrap_or_else(|p| {
                    panicked = Some(p);
                    None
                });
                opened.map(|opened| {
                    opened.map(|session| {
                        let from = session.resumed_from();
                        newest_open = newest_open.max(session.epoch());
                        primary = Some(Worker {
                            session,
                            driver: Driver::default(),
                        });
                        Act::Opened(from)
                    })
                })
            }
            Some(w) => guarded(|| {
                drive(
                    &ctx.faults,
                    act(&ctx, &mut w.session, &mut w.driver, malformed),
                )
            })
            .unwrap_or_else(|p| {
                panicked = Some(p);
                None
            }),
        };
        let events = ctx.faults.take_events();
        let faulted = !events.is_empty();
        let who = if actor == Actor::Zombie {
            " zombie"
        } else {
            ""
        };
        let mut line = format!("step {step:>3}{}{who}: ", if in_window { "*" } else { " " });
        match &result {
            None => {
                line.push_str(match &panicked {
                    Some(_) => "PANIC (session dropped)",
                    None => "CRASH (session dropped)",
                });
                match actor {
                    Actor::Zombie => zombie = None,
                    Actor::Primary => primary = None,
                }
            }
            Some(Ok(act)) => line.push_str(&check::describe_act(act)),
            Some(Err(e)) => line.push_str(&format!("error: {}", cut_error(e))),
        }
        if !events.is_empty() {
            line.push_str(&format!("  [faults: {}]", events.join(", ")));
        }
        report.trace.push(line);
        let session = match actor {
            Actor::Zombie => zombie.as_ref(),
            Actor::Primary => primary.as_ref(),
        }
        .map(|w| &w.session);
        ctx.faults.suspended(|| {
            checker.after_step(
                &ctx,
                check::Step {
                    index: step,
                    in_window,
                    faulted,
                    actor,
                    durable_before: durable_before.as_ref(),
                    panicked: panicked.as_deref(),
                },
                session,
                before.as_ref(),
                result.as_ref(),
                &mut report,
            )
        });
    }
    Ok(report)
}

fn cut_error(e: &SessionError) -> String {
    let text = e.to_string();
    crate::agent::cut(&text, 160).to_owned()
}
