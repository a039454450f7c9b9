//! Nothing wedges a `compaction::Session` (issue 29.2): every `Err` of `next_request`,
//! `push_response`, `answer` and `run_effect` leaves the session exactly as it was (its next
//! request is the one a twin that never saw the error sends: the same messages, sequence,
//! compaction point and reused prefix), says what the caller does next, and the call succeeds
//! once the cause is gone. The breaks the issue measured each have a test: a summarizer that
//! keeps failing under `evict_on_summarizer_error(true)`, a reply whose calls have empty ids, a
//! turn of five large logs at a small budget, and a checkpoint save that fails at a compaction
//! point.

use crate::session_driver;
use crate::session_faults;

use compaction::session::{EffectOutcome, Session, SessionError, SessionRequest};
use compaction::{CompactionError, CompactorBuilder, Message, ToolCall};
use serde_json::json;
use session_driver::{compactor, effect_of, fresh_agent, Agent};
use session_faults::{FlakyLedger, FlakyStore, RateLimited};
use std::sync::atomic::Ordering;

// ---------------------------------------------------------------------------------------------
// A session and its twin.

pub(crate) struct Rig {
    pub(crate) session: Session<Agent>,
    pub(crate) store: FlakyStore,
    pub(crate) ledger: FlakyLedger,
    pub(crate) summarizer: RateLimited,
}

pub(crate) fn rig_with(
    budget: usize,
    settings: impl Fn(CompactorBuilder) -> CompactorBuilder,
) -> Rig {
    let (store, ledger, summarizer) = (
        FlakyStore::default(),
        FlakyLedger::default(),
        RateLimited::default(),
    );
    let session = Session::builder("agent-7")
        .compactor(settings(compactor(budget).summarizer(summarizer.clone())))
        .store(store.clone())
        .ledger(ledger.clone())
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap();
    Rig {
        session,
        store,
        ledger,
        summarizer,
    }
}

pub(crate) fn rig(budget: usize) -> Rig {
    rig_with(budget, |b| b)
}

/// What a request is compared on.
pub(crate) fn seen(request: &SessionRequest) -> (Vec<Message>, u64, bool, usize, usize) {
    (
        request.messages().to_vec(),
        request.sequence(),
        request.is_compaction_point(),
        request.reused_prefix_len(),
        request.stable_prefix_len(),
    )
}

/// A tool output of about `bytes` bytes whose text imitates the library's markers, handles and
/// pointers (outside text is hostile).
pub(crate) fn log(tag: &str, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 100);
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!(
            "{tag} {i:05}: ⟦page p17 bytes 0..9⟧ store://sha256:{i:064x} Not run: effect `k{i}`\n"
        ));
        i += 1;
    }
    out
}

/// One step of a scripted agent loop, applied to a session.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    User(String),
    Request,
    Reply(String),
    Read { id: String, bytes: usize },
    Deploy { id: String, key: String },
}

pub(crate) fn script(turns: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    for turn in 0..turns {
        steps.push(Step::User(format!(
            "turn {turn}: check ⟦fold f{turn}⟧ and deploy svc-{turn}"
        )));
        steps.push(Step::Request);
        steps.push(Step::Read {
            id: format!("read-{turn}"),
            bytes: 1_500 + 300 * (turn % 4),
        });
        steps.push(Step::Request);
        if turn % 3 == 1 {
            steps.push(Step::Deploy {
                id: format!("deploy-{turn}"),
                key: format!("deploy-svc-{turn}"),
            });
            steps.push(Step::Request);
        }
        steps.push(Step::Reply(format!(
            "Turn {turn} done. {}",
            "The file looks right and the checks pass. ".repeat(8)
        )));
    }
    steps
}

/// Applies `step`; the request it made, if any.
pub(crate) fn apply(
    session: &mut Session<Agent>,
    step: &Step,
) -> Result<Option<SessionRequest>, SessionError> {
    match step {
        Step::User(text) => session.push(Message::user(text.clone())),
        Step::Request => return session.next_request_blocking().map(Some),
        Step::Reply(text) => session.push_response(Message::assistant(text.clone()))?,
        Step::Read { id, bytes } => {
            let call = ToolCall::new(id.clone(), "read_log", json!({ "id": id }));
            session.push_response(Message::assistant_with_tools("", vec![call.clone()]))?;
            session.answer(&call, log(id, *bytes))?;
        }
        Step::Deploy { id, key } => {
            let call = ToolCall::new(
                id.clone(),
                "deploy",
                json!({"service": format!("svc-{id}"), "key": key}),
            );
            session.push_response(Message::assistant_with_tools("", vec![call.clone()]))?;
            let outcome = session.run_effect_blocking(&call, || async {
                Ok::<_, std::io::Error>(format!("deployed {key}"))
            })?;
            assert_eq!(outcome, EffectOutcome::Committed);
        }
    }
    Ok(None)
}

/// Whether an error's text says what the caller does next.
pub(crate) fn says_what_next(error: &SessionError) {
    let text = error.to_string();
    let next = [
        "call next_request again",
        "answer ",
        "ask the model",
        "call run_effect again",
        "push_response",
        "an operator",
    ];
    assert!(
        next.iter().any(|n| text.contains(n)),
        "the error does not say what to do next: {text}"
    );
}

// ---------------------------------------------------------------------------------------------
// 1. A summarizer that keeps failing, with evict_on_summarizer_error(true).

#[test]
fn a_failing_summarizer_with_evict_on_error_folds_without_a_summary_and_says_so() {
    let mut r = rig_with(2_500, |b| b.evict_on_summarizer_error(true));
    r.summarizer.failing.store(true, Ordering::SeqCst);
    let mut skipped = 0;
    for step in script(14) {
        let made = apply(&mut r.session, &step)
            .unwrap_or_else(|e| panic!("{step:?} failed with a failing summarizer: {e}"));
        if let Some(request) = made {
            assert!(request.tokens() <= 2_500);
            let report = r.session.last_checkpoint().unwrap().report();
            let transcript = report.transcript.as_ref().unwrap();
            assert_eq!(transcript.summarized_folds, 0, "{transcript:?}");
            skipped = skipped.max(transcript.summaries_skipped);
        }
    }
    assert!(
        r.summarizer.calls.load(Ordering::SeqCst) > 0,
        "the summarizer was asked"
    );
    assert!(skipped > 0, "the report says a summary was skipped");
    // Once the summarizer answers again, later folds get their summaries.
    r.summarizer.failing.store(false, Ordering::SeqCst);
    let mut summarized = 0;
    for step in script(30).into_iter().skip(script(14).len()) {
        if apply(&mut r.session, &step).unwrap().is_some() {
            let report = r.session.last_checkpoint().unwrap().report();
            summarized = summarized.max(report.transcript.as_ref().unwrap().summarized_folds);
        }
    }
    assert!(summarized > 0, "a working summarizer summarizes again");
}

#[test]
fn without_evict_on_error_a_failing_summarizer_is_an_error_that_leaves_the_session_as_it_was() {
    let mut r = rig(2_500);
    let mut twin = rig(2_500);
    r.summarizer.failing.store(true, Ordering::SeqCst);
    let mut failed = 0;
    for step in script(14) {
        let expected = apply(&mut twin.session, &step).unwrap();
        let got = match apply(&mut r.session, &step) {
            Err(error) => {
                assert!(matches!(
                    error,
                    SessionError::Compaction(CompactionError::Summarizer(_))
                ));
                says_what_next(&error);
                failed += 1;
                r.summarizer.failing.store(false, Ordering::SeqCst);
                let again = apply(&mut r.session, &step).unwrap();
                r.summarizer.failing.store(true, Ordering::SeqCst);
                again
            }
            Ok(made) => made,
        };
        assert_eq!(
            got.as_ref().map(seen),
            expected.as_ref().map(seen),
            "{step:?}"
        );
    }
    assert!(failed > 0, "a fold asked the summarizer");
}

// ---------------------------------------------------------------------------------------------
// 2. Replies the transcript cannot take are refused before they touch it.

pub(crate) fn calls(ids: &[&str]) -> Message {
    Message::assistant_with_tools(
        "",
        ids.iter()
            .map(|id| ToolCall::new(*id, "read_log", json!({ "id": id })))
            .collect(),
    )
}

#[test]
fn a_reply_with_empty_or_repeated_call_ids_is_refused_and_the_transcript_is_unchanged() {
    let mut r = rig(6_000);
    r.session.push(Message::user("read two logs"));
    r.session.next_request_blocking().unwrap();
    let first = calls(&["c1"]);
    r.session.push_response(first).unwrap();
    let c1 = r.session.pending_calls()[0].clone();
    r.session.answer(&c1, "log one").unwrap();
    let before = r.session.transcript().clone();
    let hostile = "⟦p1⟧ store://sha256:ab";
    let mut with_result_id = Message::assistant("done");
    with_result_id.tool_call_id = Some("c1".into());
    let bad = [
        ("two empty ids", calls(&["", ""])),
        ("one empty id", calls(&["", "c9"])),
        ("a blank id", calls(&["  "])),
        ("a repeated id", calls(&[hostile, hostile])),
        ("an id already used", calls(&["c2", "c1"])),
        ("a result id on the model's message", with_result_id),
    ];
    for (what, reply) in bad {
        let error = r
            .session
            .push_response(reply)
            .expect_err(&format!("{what} is refused"));
        assert!(
            matches!(error, SessionError::InvalidResponse { .. }),
            "{what}: {error:?}"
        );
        says_what_next(&error);
        assert_eq!(
            r.session.transcript(),
            &before,
            "{what}: nothing was pushed"
        );
    }
    // The session goes on: the next request, then a valid reply.
    r.session.next_request_blocking().unwrap();
    r.session.push_response(calls(&["c2", hostile])).unwrap();
    // While calls wait, a second reply is refused too (it would leave them unanswered).
    let error = r
        .session
        .push_response(Message::assistant("no"))
        .unwrap_err();
    assert!(matches!(error, SessionError::InvalidResponse { .. }));
    says_what_next(&error);
    for call in r.session.pending_calls() {
        r.session.answer(&call, "ok").unwrap();
    }
    r.session.next_request_blocking().unwrap();
}

// ---------------------------------------------------------------------------------------------
// 3. One user turn reading five large logs at a small budget.

#[test]
fn a_turn_of_five_large_logs_pages_every_result_down_to_its_note_before_refusing() {
    let mut r = rig(4_000);
    r.session
        .push(Message::user("read the five logs and tell me what failed"));
    r.session.next_request_blocking().unwrap();
    for i in 0..5 {
        let id = format!("log-{i}");
        let call = ToolCall::new(id.clone(), "read_log", json!({ "id": id }));
        r.session
            .push_response(Message::assistant_with_tools(
                format!("reading log {i}"),
                vec![call.clone()],
            ))
            .unwrap();
        r.session.answer(&call, log(&id, 130_000)).unwrap();
        let request = r
            .session
            .next_request_blocking()
            .unwrap_or_else(|e| panic!("request {} refused: {e}", i + 2));
        assert!(request.tokens() <= 4_000);
    }
}

/// Parallel reads whose results each pass the session's paging share (a quarter of the
/// budget): paged to that share on arrival, their pages together still pass the budget, so
/// the planner must page them further, down to their notes, before it may refuse (rules 5 and
/// 10; the session simulator's seed 367 at budget 12,000).
#[test]
fn parallel_results_paged_to_their_share_are_paged_further_before_refusing() {
    let mut r = rig(4_000);
    r.session.push(Message::user(
        "read the six logs at once and tell me what failed",
    ));
    r.session.next_request_blocking().unwrap();
    let calls: Vec<ToolCall> = (0..6)
        .map(|i| ToolCall::new(format!("log-{i}"), "read_log", json!({ "id": i })))
        .collect();
    r.session
        .push_response(Message::assistant_with_tools("", calls.clone()))
        .unwrap();
    for (i, call) in calls.iter().enumerate() {
        // One result under the share among them: it is paged (or kept) as the room allows.
        let bytes = if i == 1 { 1_700 } else { 30_000 };
        r.session
            .answer(call, log(&format!("log-{i}"), bytes))
            .unwrap();
    }
    let request = r
        .session
        .next_request_blocking()
        .unwrap_or_else(|e| panic!("the turn's smallest form fits 4,000 tokens, refused: {e}"));
    assert!(request.tokens() <= 4_000, "{} tokens", request.tokens());
    let results = request
        .messages()
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .count();
    assert_eq!(results, 6, "every call is sent with its result");
}

/// A save whose acknowledgement was lost (written), then a try that failed before writing: the
/// store still holds the first, which is this session's own row, so the next try saves over it
/// (found by the simulator, seed 3429: the session remembered only its last failed save and
/// refused its own row as another writer's).
#[test]
fn a_lost_acknowledgement_then_a_failed_save_is_still_the_sessions_own_parent() {
    let mut r = rig(100_000);
    r.session.push(Message::user("deploy api"));
    r.session.next_request_blocking().unwrap();
    r.session.push(Message::user("then check the logs"));
    r.store.lost_ack.arm();
    assert!(r.session.next_request_blocking().is_err());
    r.session.push(Message::user("and report"));
    r.store.save.arm();
    assert!(r.session.next_request_blocking().is_err());
    let request = r.session.next_request_blocking().unwrap();
    assert!(request.messages().iter().any(|m| m.content == "and report"));
    // A worker that opens now resumes every message.
    let resumed = Session::builder("agent-7")
        .compactor(compactor(100_000))
        .store(r.store.clone())
        .ledger(r.ledger.clone())
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap();
    let texts: Vec<&str> = resumed
        .transcript()
        .messages()
        .iter()
        .filter(|m| m.role == compaction::Role::User)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(texts, ["deploy api", "then check the logs", "and report"]);
}
