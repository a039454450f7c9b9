//! The invariants, checked after every step of a run (with every fault off):
//!
//! | name | what must hold |
//! |---|---|
//! | `effect_once` | no effect really happened twice (the world counts executions) |
//! | `unknown_not_done` | an effect the ledger holds `unknown` is shown `unknown` (window and rehydrated state), never reported `Committed` nor answered with the tool's output |
//! | `summarizer_sees_nothing_protected` | no text sent to the summarizer carries a protected value, a user message, an effect key or a thinking block |
//! | `request_fits_budget` | `tokens() <= budget`, and a recount of the messages by the wire's formula too |
//! | `request_valid_on_wire` | the request is a valid transcript (`Transcript::validate`) and every call has its result |
//! | `rehydrate_identical` | the last checkpoint rehydrates to the session's state, byte for byte |
//! | `resume_matches_warm` | a session resumed from a copy of the store after a request, given what the warm one got since, sends the warm one's next request byte for byte |
//! | `prefix_claims_true` | `reused_prefix_len()` never claims more than the previous request shares, and a request that is not a compaction point extends the previous one |
//! | `error_changes_nothing` | a step that returns `Err` leaves the state and the sequence as they were |
//! | `progress` | after the fault window every step succeeds |

use crate::agent::{SimAgent, PROTECTED_TAGS, SCOPE};
use crate::ctx::{Act, Ctx, Failure, Report};
use crate::twin::Twin;
use compaction::session::{EffectOutcome, Session, SessionError, SessionRequest};
use compaction::{
    block_on, AnthropicMessages, ChatFormat, EffectLedger, EffectStatus, Message, NoReacquire,
    OpenAiChat, Role, Tokenizer, Transcript,
};
use std::collections::{BTreeMap, BTreeSet};

/// Every invariant, by name, in the order of the table above.
pub const INVARIANTS: [&str; 10] = [
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
];

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
    /// Every request handed out, by sequence, with the ledger it was made from.
    requests: BTreeMap<u64, (Vec<Message>, String)>,
    /// A twin resumed from a copy after the last request, while nothing faulted since.
    twin: Option<Twin>,
    failed: BTreeSet<&'static str>,
}

fn ledger_view(ctx: &Ctx) -> String {
    let all = block_on(ctx.ledger.inner.load_all()).expect("the memory ledger reads");
    serde_json::to_string(&all).expect("logs serialize")
}

fn status(ctx: &Ctx, key: &str) -> Option<EffectStatus> {
    block_on(ctx.ledger.inner.status(SCOPE, key)).expect("the memory ledger reads")
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

    /// Checks every invariant after step `step` (`result`: `None` for a crash; `faulted`: a
    /// fault hit the step).
    #[allow(clippy::too_many_arguments)]
    pub fn after_step(
        &mut self,
        ctx: &Ctx,
        step: usize,
        in_window: bool,
        faulted: bool,
        session: Option<&Session<SimAgent>>,
        before: Option<&Snapshot>,
        result: Option<&Result<Act, SessionError>>,
        report: &mut Report,
    ) {
        for (key, n) in ctx.world.executions() {
            if n > 1 {
                self.fail(
                    report,
                    "effect_once",
                    step,
                    format!("effect {key} ran {n} times"),
                );
            }
        }
        for text in ctx.summarizer.since(self.summarizer_seen) {
            if let Some(tag) = PROTECTED_TAGS.iter().find(|t| text.contains(**t)) {
                let at = text.find(tag).unwrap_or(0);
                let from = floor(&text, at.saturating_sub(60));
                let to = floor(&text, (at + 100).min(text.len()));
                let detail = format!("`{tag}` sent to the summarizer: …{}…", &text[from..to]);
                self.fail(report, "summarizer_sees_nothing_protected", step, detail);
            }
        }
        self.summarizer_seen = ctx.summarizer.count();
        if faulted || !matches!(result, Some(Ok(_))) {
            // The twin runs fault-free: it compares only stretches the faults left alone.
            self.twin = None;
        }
        match result {
            None => self.prev_request = None,
            Some(Err(error)) => {
                if let (Some(before), Some(session)) = (before, session) {
                    if &Snapshot::of(session) != before {
                        let detail = format!("after `{error}` the state or sequence changed");
                        self.fail(report, "error_changes_nothing", step, detail);
                    }
                }
                if !in_window {
                    let detail = format!("a step failed after the fault window: {error}");
                    self.fail(report, "progress", step, detail);
                }
            }
            Some(Ok(act)) => {
                let session = session.expect("a step that succeeded has a session");
                self.after_act(ctx, step, session, act, report);
            }
        }
    }

    fn after_act(
        &mut self,
        ctx: &Ctx,
        step: usize,
        session: &Session<SimAgent>,
        act: &Act,
        report: &mut Report,
    ) {
        match act {
            Act::Opened(from) => {
                self.prev_request = from.and_then(|q| self.requests.get(&q).map(|r| r.0.clone()));
            }
            Act::Request(request) => self.after_request(ctx, step, session, request, report),
            Act::Effect { key, outcome } => {
                let now = status(ctx, key);
                if *outcome == EffectOutcome::Committed && now != Some(EffectStatus::Committed) {
                    let detail = format!("run_effect said Committed, the ledger holds {now:?}");
                    self.fail(report, "unknown_not_done", step, detail);
                }
                let last = session.transcript().messages().last();
                let answered_done = last.is_some_and(|m| m.content.starts_with("deployed "));
                if now == Some(EffectStatus::Unknown) && answered_done {
                    let detail = format!("effect {key} is unknown, answered with the tool output");
                    self.fail(report, "unknown_not_done", step, detail);
                }
            }
            _ => {}
        }
    }

    fn after_request(
        &mut self,
        ctx: &Ctx,
        step: usize,
        session: &Session<SimAgent>,
        request: &SessionRequest,
        report: &mut Report,
    ) {
        let messages = request.messages();
        let ledger = ledger_view(ctx);
        // Budget, by the session's count and by a recount.
        let recount = if ctx.anthropic {
            AnthropicMessages.request_tokens(messages, &Tokenizer::Heuristic)
        } else {
            OpenAiChat.request_tokens(messages, &Tokenizer::Heuristic)
        };
        if request.tokens() > self.budget || recount > self.budget {
            let detail = format!(
                "tokens() {} / recount {recount} over the budget {}",
                request.tokens(),
                self.budget
            );
            self.fail(report, "request_fits_budget", step, detail);
        }
        // Valid on the wire.
        if let Err(e) = Transcript::from_messages(messages.to_vec()) {
            self.fail(report, "request_valid_on_wire", step, format!("{e}"));
        } else if let Some(id) = unanswered(messages) {
            let detail = format!("call `{id}` has no result in the request");
            self.fail(report, "request_valid_on_wire", step, detail);
        }
        // Rehydration, and what the checkpoint shows of live effects.
        match session.last_checkpoint() {
            None => self.fail(report, "rehydrate_identical", step, "no checkpoint".into()),
            Some(checkpoint) => {
                match session
                    .compactor()
                    .rehydrate_blocking(checkpoint, &NoReacquire)
                {
                    Err(e) => {
                        let detail = format!("rehydrate failed: {e}");
                        self.fail(report, "rehydrate_identical", step, detail);
                    }
                    Ok(back) => {
                        if let Some(field) = differs(&back, session.state()) {
                            let detail = format!("field `{field}` came back different");
                            self.fail(report, "rehydrate_identical", step, detail);
                        }
                        self.check_unknowns(ctx, step, &back, messages, report);
                    }
                }
            }
        }
        // A session resumed from the last request's checkpoint sends this one too.
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
                self.fail(report, "resume_matches_warm", step, detail);
            }
        }
        if request.sequence().is_multiple_of(3) || request.is_compaction_point() {
            match Twin::open(ctx) {
                Ok(twin) => self.twin = Some(twin),
                Err(e) => {
                    let detail = format!("a session resumed from a copy failed to open: {e}");
                    self.fail(report, "resume_matches_warm", step, detail);
                }
            }
        }
        // What the request claims of the previous one.
        if let Some(prev) = self.prev_request.take() {
            let common = common_prefix(&prev, messages);
            if request.reused_prefix_len() > common
                || (!request.is_compaction_point() && common < prev.len())
            {
                let detail = format!(
                    "reused_prefix_len {} and compaction point {} after a request of {} \
                     messages, of which {common} lead this one of {}",
                    request.reused_prefix_len(),
                    request.is_compaction_point(),
                    prev.len(),
                    messages.len()
                );
                self.fail(report, "prefix_claims_true", step, detail);
            }
        }
        self.prev_request = Some(messages.to_vec());
        self.requests
            .insert(request.sequence(), (messages.to_vec(), ledger));
    }

    fn check_unknowns(
        &mut self,
        ctx: &Ctx,
        step: usize,
        back: &SimAgent,
        messages: &[Message],
        report: &mut Report,
    ) {
        let log = block_on(ctx.ledger.inner.load_log(SCOPE)).expect("the memory ledger reads");
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
                self.fail(report, "unknown_not_done", step, detail);
            }
        }
    }
}

/// The largest char boundary at or below `at`.
fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
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

/// How many leading messages `a` and `b` share.
fn common_prefix(a: &[Message], b: &[Message]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
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
            r.sequence(),
            r.messages().len(),
            r.tokens(),
            r.is_compaction_point(),
            r.reused_prefix_len()
        ),
        Act::Response(what) => format!("reply: {what}"),
        Act::Answered(what) => format!("answer: {what}"),
        Act::Effect { key, outcome } => format!("effect {key}: {outcome:?}"),
    }
}
