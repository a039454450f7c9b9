//! The invariants, checked after every step of a run (with every fault off), each from ground
//! truth: the world's count of executions, the values the run generated, the durable store and
//! ledger read directly, the wire's own formula. None reads a message's wording.
//!
//! | name | what must hold |
//! |---|---|
//! | `effect_once` | no effect really happened twice (the world counts executions) |
//! | `unknown_not_done` | an effect the ledger holds `unknown` is shown `unknown` (window and rehydrated state) and its run's answer is in no message; `run_effect` never says `Committed` of an effect the ledger does not hold committed |
//! | `summarizer_sees_nothing_protected` | no text sent to the summarizer contains a value the run generated as protected: a protected field, a user message, an effect key, a thinking block |
//! | `request_fits_budget` | `tokens() <= budget`, and a recount of the messages and the tools by the wire's formula too |
//! | `request_valid_on_wire` | the request is a valid transcript (`Transcript::validate`) and every call has its result |
//! | `rehydrate_identical` | the last checkpoint rehydrates to the session's state, byte for byte |
//! | `resume_matches_warm` | a session resumed from a copy of the store after a request, given what the warm one got since, sends the warm one's next request byte for byte (memory backend) |
//! | `prefix_claims_true` | `reused_prefix_len()` never claims more than the previous request shares, and a request that is not a compaction point extends the previous one |
//! | `error_changes_nothing` | a step that returns `Err` leaves the state and the sequence as they were |
//! | `progress` | after the fault window every step of the agent's current session succeeds |
//! | `no_message_lost` | every message a session held when its `next_request` succeeded is, in order, in every later checkpoint of the agent (read from the store) and in every session opened later |
//! | `fenced_session_changes_nothing` | a superseded session (a zombie) changes nothing durable: checkpoint row, ledger, sequence, blobs; its requests all fail |
//! | `no_key_leaked` | the model's API key is in no error (`Display` or `Debug`: the clients', the session's), no log line of any crate, no client's `Debug` (runs with `--http`) |
//! | `no_panic` | no step panics (a panic is caught, reported, and the session dropped as in a crash) |

mod durable;

pub use durable::{common_prefix, DurableView, StoredCheckpoint};

use crate::agent::{SimAgent, SCOPE};
use crate::ctx::{Act, Ctx, Failure, Handed, Report};
use crate::twin::Twin;
use compaction::session::{EffectAnswer, EffectOutcome, Session, SessionError};
use compaction::{
    block_on, AnthropicMessages, ChatFormat, EffectLedger, EffectLog, EffectStatus, Message,
    NoReacquire, OpenAiChat, Role, Tokenizer, Transcript,
};
use std::collections::{BTreeMap, BTreeSet};

/// Every invariant, by name, in the order of the table above.
pub const INVARIANTS: [&str; 14] = [
    "effect_once",
    "unknown_not_done",
    "summarizer_sees_nothing_protected",
    "request_fits_budget",
    "request_valid_on_wire",
    "rehydrate_identical",
    "resume_matches_warm",
    "prefix_claims_true",
    "error_changes_nothing",
    "progress",
    "no_message_lost",
    "fenced_session_changes_nothing",
    "no_key_leaked",
    "no_panic",
];

/// Which worker acted in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// The agent's current session (or, when it has none, the open of a new one).
    Primary,
    /// A session superseded by a takeover that keeps acting.
    Zombie,
}

/// What the run tells the checker about a step.
pub struct Step<'a> {
    /// Its index.
    pub index: usize,
    /// Inside the fault window.
    pub in_window: bool,
    /// A fault hit it.
    pub faulted: bool,
    /// Who acted.
    pub actor: Actor,
    /// The durable parts before the step of a zombie a newer session has opened over (read
    /// only for those: a zombie whose takeover failed may still be the agent's newest).
    pub durable_before: Option<&'a Result<DurableView, String>>,
    /// The panic's message, when the step panicked.
    pub panicked: Option<&'a str>,
}

/// What a session looked like before a step: its sequence and what a step can change of its
/// state (the transcript only grows through the session's calls, so its length and last
/// message stand for it; the notes and plan step are changed only by the driver).
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    messages: usize,
    last: Option<Message>,
    notes: usize,
    plan_step: u32,
    sequence: u64,
}

impl Snapshot {
    /// The snapshot of `session`.
    pub fn of(session: &Session<SimAgent>) -> Self {
        let state = session.state();
        Snapshot {
            messages: state.chat.len(),
            last: state.chat.messages().last().cloned(),
            notes: state.notes.len(),
            plan_step: state.plan_step,
            sequence: session.sequence(),
        }
    }
}

/// The checker's memory across steps.
pub struct Checker {
    summarizer_seen: usize,
    budget: usize,
    /// The last request the agent was handed, by the session it came from.
    prev_request: Option<Vec<Message>>,
    /// Every request handed out, by sequence.
    requests: BTreeMap<u64, Vec<Message>>,
    /// A twin resumed from a copy after the last request, while nothing faulted since.
    twin: Option<Twin>,
    /// The messages no later checkpoint may lose: the transcript of the last session whose
    /// `next_request` succeeded, then.
    durable: Vec<Message>,
    stored: StoredCheckpoint,
    failed: BTreeSet<&'static str>,
}

/// The deploys' log as the ledger holds it now.
fn deploys_log(ctx: &Ctx) -> EffectLog {
    block_on(ctx.ledger.inner.load_log(SCOPE)).expect("the ledger reads")
}

fn status(ctx: &Ctx, key: &str) -> Option<EffectStatus> {
    block_on(ctx.ledger.inner.status(SCOPE, key)).expect("the ledger reads")
}

impl Checker {
    /// A checker for a run in `ctx`.
    pub fn new(ctx: &Ctx) -> Self {
        Checker {
            summarizer_seen: 0,
            budget: ctx.budget,
            prev_request: None,
            requests: BTreeMap::new(),
            twin: None,
            durable: Vec::new(),
            stored: StoredCheckpoint::new(ctx),
            failed: BTreeSet::new(),
        }
    }

    fn fail(&mut self, report: &mut Report, invariant: &'static str, step: usize, detail: String) {
        if self.failed.insert(invariant) {
            report.failures.push(Failure {
                invariant,
                step,
                detail,
            });
        }
    }

    /// A second session is opening the agent: the one that ran becomes a zombie, so the
    /// comparisons of one session's consecutive requests start over.
    pub fn taken_over(&mut self) {
        self.twin = None;
        self.prev_request = None;
    }

    /// Checks every invariant after `step` (`result`: `None` for a crash).
    pub fn after_step(
        &mut self,
        ctx: &Ctx,
        step: Step<'_>,
        session: Option<&Session<SimAgent>>,
        before: Option<&Snapshot>,
        result: Option<&Result<Act, SessionError>>,
        report: &mut Report,
    ) {
        let at = step.index;
        if let Some(message) = step.panicked {
            self.fail(
                report,
                "no_panic",
                at,
                format!("the step panicked: {message}"),
            );
        }
        self.check_key(ctx, at, result, report);
        for (key, n) in ctx.world.executions() {
            if n > 1 {
                self.fail(
                    report,
                    "effect_once",
                    at,
                    format!("effect {key} ran {n} times"),
                );
            }
        }
        for text in ctx.summarizer.since(self.summarizer_seen) {
            if let Some(value) = ctx.ground.found_in(&text) {
                let shown = crate::agent::cut(&value, 100);
                let detail = format!("the summarizer was sent a protected value: `{shown}`");
                self.fail(report, "summarizer_sees_nothing_protected", at, detail);
            }
        }
        self.summarizer_seen = ctx.summarizer.count();
        if let (Some(Err(error)), Some(before), Some(session)) = (result, before, session) {
            if &Snapshot::of(session) != before {
                let detail = format!("after `{error}` the state or sequence changed");
                self.fail(report, "error_changes_nothing", at, detail);
            }
        }
        if step.actor == Actor::Zombie {
            self.check_stored(ctx, at, report);
            self.after_zombie(ctx, &step, result, report);
            return;
        }
        if step.faulted || !matches!(result, Some(Ok(_))) {
            // The twin runs fault-free: it compares only stretches the faults left alone.
            self.twin = None;
        }
        match result {
            None => self.prev_request = None,
            Some(Err(error)) => {
                if !step.in_window {
                    let detail = format!("a step failed after the fault window: {error}");
                    self.fail(report, "progress", at, detail);
                }
            }
            Some(Ok(act)) => {
                let session = session.expect("a step that succeeded has a session");
                self.after_act(ctx, at, session, act, report);
            }
        }
        // A user turn, an answer or a pushed reply only changes the session in memory: the
        // store is read again after any other step (a request, an open, an effect, an error or
        // a crash may have written it).
        let in_memory_only = matches!(
            result,
            Some(Ok(Act::User(_)
                | Act::Answered(_)
                | Act::Response(_)
                | Act::ModelFailed { .. }))
        );
        if !in_memory_only {
            self.check_stored(ctx, at, report);
        }
    }

    /// `no_key_leaked`: the run's API key (when it calls the model over HTTP) in no error of
    /// this step, no log line so far, no client's `Debug`.
    #[cfg(feature = "http")]
    fn check_key(
        &mut self,
        ctx: &Ctx,
        at: usize,
        result: Option<&Result<Act, SessionError>>,
        report: &mut Report,
    ) {
        let Some(model) = &ctx.model else {
            return;
        };
        let key = model.key.as_str();
        let texts = match result {
            Some(Ok(Act::ModelFailed { display, debug })) => vec![display.clone(), debug.clone()],
            Some(Err(error)) => vec![error.to_string(), format!("{error:?}")],
            _ => Vec::new(),
        };
        let mut leaks: Vec<String> = texts.into_iter().filter(|t| t.contains(key)).collect();
        leaks.extend(crate::wire::leaked_in_logs(key));
        if model.clients_debug().contains(key) {
            leaks.push("a client's Debug".into());
        }
        if let Some(leak) = leaks.first() {
            let shown = crate::agent::cut(leak, 200);
            self.fail(
                report,
                "no_key_leaked",
                at,
                format!("the API key is in: {shown}"),
            );
        }
    }

    #[cfg(not(feature = "http"))]
    fn check_key(
        &mut self,
        _: &Ctx,
        _: usize,
        _: Option<&Result<Act, SessionError>>,
        _: &mut Report,
    ) {
    }

    /// `no_message_lost` on the store: the newest checkpoint, when it changed, holds every
    /// durable message first.
    fn check_stored(&mut self, ctx: &Ctx, at: usize, report: &mut Report) {
        match self.stored.changed_transcript(ctx) {
            Err(detail) => self.fail(report, "no_message_lost", at, detail),
            Ok(Some(stored)) => {
                let kept = common_prefix(&self.durable, &stored);
                if kept < self.durable.len() {
                    let detail = format!(
                        "the newest checkpoint holds {} messages, of which the first {kept} are \
                         the {} made durable by an earlier request",
                        stored.len(),
                        self.durable.len()
                    );
                    self.fail(report, "no_message_lost", at, detail);
                }
            }
            Ok(None) => {}
        }
    }

    fn after_zombie(
        &mut self,
        ctx: &Ctx,
        step: &Step<'_>,
        result: Option<&Result<Act, SessionError>>,
        report: &mut Report,
    ) {
        let at = step.index;
        if step.durable_before.is_none() {
            return;
        }
        if let Some(Ok(Act::Request(handed))) = result {
            let detail = format!("a superseded session made request {}", handed.sequence);
            self.fail(report, "fenced_session_changes_nothing", at, detail);
        }
        if let Some(Ok(Act::Effect { key, outcome })) = result {
            if *outcome == EffectOutcome::Committed {
                let detail = format!("a superseded session reported effect {key} done");
                self.fail(report, "fenced_session_changes_nothing", at, detail);
            }
        }
        let after = DurableView::read(ctx);
        let changed = match (step.durable_before, &after) {
            (Some(Ok(before)), Ok(after)) => before.changed(after).map(str::to_owned),
            (_, Err(e)) | (Some(Err(e)), _) => Some(format!("(the store did not read: {e})")),
            (None, _) => None,
        };
        if let Some(what) = changed {
            let detail = format!("a superseded session's step changed {what}");
            self.fail(report, "fenced_session_changes_nothing", at, detail);
        }
    }

    fn after_act(
        &mut self,
        ctx: &Ctx,
        at: usize,
        session: &Session<SimAgent>,
        act: &Act,
        report: &mut Report,
    ) {
        match act {
            Act::Opened(from) => {
                self.prev_request = from.and_then(|q| self.requests.get(&q).cloned());
                let held = session.transcript().messages();
                let kept = common_prefix(&self.durable, held);
                if kept < self.durable.len() {
                    let detail = format!(
                        "a session opened (resumed from {from:?}) with {} messages, of which the \
                         first {kept} are the {} made durable",
                        held.len(),
                        self.durable.len()
                    );
                    self.fail(report, "no_message_lost", at, detail);
                }
            }
            Act::Request(request) => self.after_request(ctx, at, session, request, report),
            Act::Effect { key, outcome } => {
                let now = status(ctx, key);
                if *outcome == EffectOutcome::Committed && now != Some(EffectStatus::Committed) {
                    let detail = format!("run_effect said Committed, the ledger holds {now:?}");
                    self.fail(report, "unknown_not_done", at, detail);
                }
                self.check_answers(ctx, at, session.transcript().messages(), report);
            }
            _ => {}
        }
    }

    /// An effect the ledger holds `unknown` whose run answered: its answer is in no message
    /// but one the session recorded as an unknown outcome (`Message::effect_answer`, not the
    /// wording).
    fn check_answers(&mut self, ctx: &Ctx, at: usize, messages: &[Message], report: &mut Report) {
        let log = deploys_log(ctx);
        self.answers_not_done(ctx, at, &log, messages, report);
    }

    fn answers_not_done(
        &mut self,
        ctx: &Ctx,
        at: usize,
        log: &EffectLog,
        messages: &[Message],
        report: &mut Report,
    ) {
        for effect in log.with_status(EffectStatus::Unknown) {
            let key = &effect.idempotency_key;
            let Some(answer) = ctx.world.answer_of(key) else {
                continue;
            };
            let shown_done = messages.iter().find(|m| {
                m.content.contains(&answer)
                    && !matches!(
                        m.effect_answer(),
                        Some(EffectAnswer::LeftUnknown | EffectAnswer::OutcomeUnknown)
                    )
            });
            if let Some(m) = shown_done {
                let detail = format!(
                    "effect {key} is unknown, its run's answer is in a message recorded as {:?}",
                    m.effect_answer()
                );
                self.fail(report, "unknown_not_done", at, detail);
            }
        }
    }

    fn after_request(
        &mut self,
        ctx: &Ctx,
        at: usize,
        session: &Session<SimAgent>,
        request: &Handed,
        report: &mut Report,
    ) {
        let messages = &request.messages[..];
        // Budget, by the session's count and by a recount of messages and tools.
        let format: &dyn ChatFormat = if ctx.anthropic {
            &AnthropicMessages
        } else {
            &OpenAiChat
        };
        let recount = format.request_tokens(messages, &Tokenizer::Heuristic)
            + format.tools_tokens(&request.tools, &Tokenizer::Heuristic);
        if request.tokens > self.budget || recount > self.budget {
            let detail = format!(
                "tokens() {} / recount {recount} (tools included) over the budget {}",
                request.tokens, self.budget
            );
            self.fail(report, "request_fits_budget", at, detail);
        }
        // Valid on the wire.
        if let Err(e) = Transcript::from_messages(messages.to_vec()) {
            self.fail(report, "request_valid_on_wire", at, format!("{e}"));
        } else if let Some(id) = unanswered(messages) {
            let detail = format!("call `{id}` has no result in the request");
            self.fail(report, "request_valid_on_wire", at, detail);
        }
        // What the request made durable: the session's whole transcript, in the store now
        // (read again even if the row looks unchanged: a save may have been lost).
        self.durable = session.transcript().messages().to_vec();
        self.stored.forget();
        // Rehydration, and what the checkpoint shows of live effects (one read of the ledger
        // for both checks of unknown effects).
        let log = deploys_log(ctx);
        match session.last_checkpoint() {
            None => self.fail(report, "rehydrate_identical", at, "no checkpoint".into()),
            Some(checkpoint) => {
                match session
                    .compactor()
                    .rehydrate_blocking(checkpoint, &NoReacquire)
                {
                    Err(e) => {
                        let detail = format!("rehydrate failed: {e}");
                        self.fail(report, "rehydrate_identical", at, detail);
                    }
                    Ok(back) => {
                        if let Some(field) = differs(&back, session.state()) {
                            let detail = format!("field `{field}` came back different");
                            self.fail(report, "rehydrate_identical", at, detail);
                        }
                        self.check_unknowns(at, &log, &back, messages, report);
                    }
                }
            }
        }
        self.answers_not_done(ctx, at, &log, messages, report);
        self.check_twin(ctx, at, session, request, report);
        // What the request claims of the previous one.
        if let Some(prev) = self.prev_request.take() {
            let common = common_prefix(&prev, messages);
            if request.reused > common || (!request.point && common < prev.len()) {
                let detail = format!(
                    "reused_prefix_len {} and compaction point {} after a request of {}                      messages, of which {common} lead this one of {}",
                    request.reused,
                    request.point,
                    prev.len(),
                    messages.len()
                );
                self.fail(report, "prefix_claims_true", at, detail);
            }
        }
        self.prev_request = Some(messages.to_vec());
        self.requests.insert(request.sequence, messages.to_vec());
    }

    /// `resume_matches_warm` (memory backend: the twin runs on copies of the memory store).
    fn check_twin(
        &mut self,
        ctx: &Ctx,
        at: usize,
        session: &Session<SimAgent>,
        request: &Handed,
        report: &mut Report,
    ) {
        let messages = &request.messages[..];
        if let Some(mut twin) = self.twin.take() {
            let detail = match twin.catch_up(ctx, session) {
                Err(setup) => Some(format!("the twin could not follow: {setup}")),
                Ok(Err(e)) => Some(format!("resumed from {}, the twin refused: {e}", twin.from)),
                Ok(Ok(resumed)) if resumed.messages() != messages => Some(format!(
                    "resumed from {}: message {} of {} differs from the warm request's {}",
                    twin.from,
                    common_prefix(resumed.messages(), messages),
                    resumed.messages().len(),
                    messages.len()
                )),
                Ok(Ok(_)) => None,
            };
            if let Some(detail) = detail {
                self.fail(report, "resume_matches_warm", at, detail);
            }
        }
        if ctx.store.inner.as_memory().is_some()
            && (request.sequence.is_multiple_of(3) || request.point)
        {
            match Twin::open(ctx) {
                Ok(twin) => self.twin = Some(twin),
                Err(e) => {
                    let detail = format!("a session resumed from a copy failed to open: {e}");
                    self.fail(report, "resume_matches_warm", at, detail);
                }
            }
        }
    }

    fn check_unknowns(
        &mut self,
        at: usize,
        log: &EffectLog,
        back: &SimAgent,
        messages: &[Message],
        report: &mut Report,
    ) {
        let text: String = messages.iter().map(|m| m.content.as_str()).collect();
        for effect in log.with_status(EffectStatus::Unknown) {
            let key = &effect.idempotency_key;
            let shown = back.deploys.status(key);
            if shown != Some(EffectStatus::Unknown) || !text.contains(key.as_str()) {
                let detail = format!(
                    "effect {key} is unknown in the ledger; the checkpoint shows {shown:?}, the \
                     request names it: {}",
                    text.contains(key.as_str())
                );
                self.fail(report, "unknown_not_done", at, detail);
            }
        }
    }
}

/// The first call of `messages` without a result after it.
fn unanswered(messages: &[Message]) -> Option<String> {
    messages.iter().enumerate().find_map(|(i, m)| {
        m.tool_calls.iter().find_map(|c| {
            let answered = messages[i + 1..]
                .iter()
                .any(|r| r.role == Role::Tool && r.tool_call_id.as_deref() == Some(c.id.as_str()));
            (!answered).then(|| c.id.clone())
        })
    })
}

/// The first field (not the effect log, which the ledger owns) where `a` and `b` differ (the
/// messages compared field by field: contents, ids, arguments text and opaque blocks byte for
/// byte).
fn differs(a: &SimAgent, b: &SimAgent) -> Option<&'static str> {
    if a.rules != b.rules {
        Some("rules")
    } else if a.notes != b.notes {
        Some("notes")
    } else if a.plan_step != b.plan_step {
        Some("plan_step")
    } else if a.chat.messages() != b.chat.messages() {
        Some("chat")
    } else {
        None
    }
}

/// A step's act, for the trace.
pub fn describe_act(act: &Act) -> String {
    match act {
        Act::Opened(None) => "open: fresh".into(),
        Act::Opened(Some(q)) => format!("open: resumed from checkpoint {q}"),
        Act::User(turn) => format!("user turn {turn}"),
        Act::Request(r) => format!(
            "request seq {} ({} msgs, {} tokens, point {}, reused {})",
            r.sequence,
            r.messages.len(),
            r.tokens,
            r.point,
            r.reused
        ),
        Act::Response(what) => format!("reply: {what}"),
        Act::ModelFailed { display, .. } => {
            format!("model call failed: {}", crate::agent::cut(display, 120))
        }
        Act::Answered(what) => format!("answer: {what}"),
        Act::Effect { key, outcome } => format!("effect {key}: {outcome:?}"),
    }
}
