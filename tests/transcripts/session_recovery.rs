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

use compaction::session::{EffectOutcome, Session, SessionError, SessionRequest, ToolFailure};
use compaction::{
    CompactionError, CompactorBuilder, EffectLedger, EffectStatus, Message, ToolCall,
};
use serde_json::json;
use session_driver::{compactor, effect_of, fresh_agent, Agent, SCOPE};
use session_faults::{FlakyLedger, FlakyStore, RateLimited};
use std::sync::atomic::{AtomicUsize, Ordering};

// ---------------------------------------------------------------------------------------------
// A session and its twin.

struct Rig {
    session: Session<Agent>,
    store: FlakyStore,
    ledger: FlakyLedger,
    summarizer: RateLimited,
}

fn rig_with(budget: usize, settings: impl Fn(CompactorBuilder) -> CompactorBuilder) -> Rig {
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

fn rig(budget: usize) -> Rig {
    rig_with(budget, |b| b)
}

/// What a request is compared on.
fn seen(request: &SessionRequest) -> (Vec<Message>, u64, bool, usize, usize) {
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
fn log(tag: &str, bytes: usize) -> String {
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
enum Step {
    User(String),
    Request,
    Reply(String),
    Read { id: String, bytes: usize },
    Deploy { id: String, key: String },
}

fn script(turns: usize) -> Vec<Step> {
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
fn apply(
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
fn says_what_next(error: &SessionError) {
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

fn calls(ids: &[&str]) -> Message {
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

// ---------------------------------------------------------------------------------------------
// 4 and 5. Every error leaves the session as a twin that never saw it.

/// Drives `r` and a twin through `steps`; before step `i`, `fault(i, r)` may arm a fault.
/// A step that fails is checked (typed, says what next, nothing changed) and retried once the
/// fault is gone; every request must equal the twin's.
fn against_twin(
    budget: usize,
    steps: &[Step],
    mut fault: impl FnMut(usize, &Rig) -> bool,
) -> usize {
    let mut r = rig(budget);
    let mut twin = rig(budget);
    let mut failures = 0;
    for (i, step) in steps.iter().enumerate() {
        let expected = apply(&mut twin.session, step).unwrap();
        let armed = fault(i, &r);
        let before = r.session.transcript().clone();
        let got = match apply(&mut r.session, step) {
            Ok(made) => made,
            Err(error) => {
                assert!(armed, "{step:?} failed unprovoked: {error}");
                says_what_next(&error);
                failures += 1;
                if matches!(step, Step::Request) {
                    assert_eq!(r.session.transcript(), &before, "{step:?}: {error}");
                }
                match step {
                    // A read or deploy failed part way: finish it as the step would.
                    Step::Read { id, bytes } if !r.session.pending_calls().is_empty() => {
                        let call = r.session.pending_calls()[0].clone();
                        r.session.answer(&call, log(id, *bytes)).unwrap();
                        None
                    }
                    Step::Deploy { key, .. } if !r.session.pending_calls().is_empty() => {
                        // Only the reply went in: the failed claim pushed nothing.
                        assert_eq!(r.session.transcript().len(), before.len() + 1);
                        let call = r.session.pending_calls()[0].clone();
                        let outcome = r
                            .session
                            .run_effect_blocking(&call, || async {
                                Ok::<_, std::io::Error>(format!("deployed {key}"))
                            })
                            .unwrap();
                        assert_eq!(outcome, EffectOutcome::Committed);
                        None
                    }
                    _ => apply(&mut r.session, step).unwrap(),
                }
            }
        };
        assert_eq!(
            got.as_ref().map(seen),
            expected.as_ref().map(seen),
            "step {i} {step:?}"
        );
        assert_eq!(r.session.sequence(), twin.session.sequence());
        assert_eq!(r.session.transcript(), twin.session.transcript());
    }
    failures
}

#[test]
fn a_checkpoint_save_that_fails_once_is_retried_exactly_as_the_first_try() {
    let steps = script(12);
    let failures = against_twin(2_500, &steps, |_, r| {
        r.store.save.arm();
        true
    });
    let requests = steps.iter().filter(|s| matches!(s, Step::Request)).count();
    assert_eq!(failures, requests, "every first save failed");
}

#[test]
fn a_blob_put_that_fails_is_retried_exactly_as_the_first_try() {
    let steps = script(12);
    let failures = against_twin(2_500, &steps, |_, r| {
        r.store.put.arm();
        true
    });
    assert!(failures > 0, "some request stored a blob");
}

#[test]
fn ledger_failures_at_a_request_leave_the_session_as_it_was() {
    let steps = script(12);
    for which in ["load", "advance", "newest"] {
        let failures = against_twin(2_500, &steps, |i, r| {
            let switch = match which {
                "load" => &r.ledger.load,
                "advance" => &r.ledger.advance,
                _ => &r.ledger.newest,
            };
            if !switch.armed() && i % 2 == 1 {
                switch.arm();
            }
            true
        });
        assert!(failures > 0, "{which}: a request met the fault");
    }
}

#[test]
fn a_ledger_that_cannot_claim_leaves_the_call_pending_and_runs_nothing() {
    let steps = script(12);
    for which in ["record", "begin"] {
        let failures = against_twin(2_500, &steps, |_, r| {
            if which == "record" {
                r.ledger.record.arm()
            } else {
                r.ledger.begin.arm()
            }
            true
        });
        assert!(failures > 0, "{which}: a deploy met the fault");
    }
}

#[test]
fn a_ledger_that_cannot_record_a_commit_leaves_the_outcome_unknown_never_an_error_half_done() {
    let mut r = rig(6_000);
    r.session.push(Message::user("deploy"));
    r.session.next_request_blocking().unwrap();
    let call = ToolCall::new(
        "d1",
        "deploy",
        json!({"service": "api", "key": "deploy-api"}),
    );
    r.session
        .push_response(Message::assistant_with_tools("", vec![call.clone()]))
        .unwrap();
    r.ledger.commit.arm();
    let ran = AtomicUsize::new(0);
    let outcome = r.session.run_effect_blocking(&call, || async {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>("deployed".to_owned())
    });
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    match outcome {
        Ok(EffectOutcome::LeftUnknown { error }) => {
            assert!(error.contains("ledger"), "{error}")
        }
        other => panic!("the tool ran, its outcome is unknown: {other:?}"),
    }
    assert!(
        r.session.pending_calls().is_empty(),
        "the call got its answer"
    );
    let answer = &r.session.transcript().messages().last().unwrap().content;
    assert!(
        answer.contains("deployed") && answer.contains("unknown"),
        "{answer}"
    );
    // The ledger agrees: claimed, never settled.
    let status = compaction::block_on(r.ledger.inner.status(SCOPE, "deploy-api")).unwrap();
    assert_ne!(status, Some(EffectStatus::Committed));
    r.session.next_request_blocking().unwrap();
}

#[test]
fn over_budget_and_misused_calls_leave_the_session_as_it_was() {
    let mut r = rig(2_500);
    let mut twin = rig(2_500);
    for step in script(3) {
        apply(&mut r.session, &step).unwrap();
        apply(&mut twin.session, &step).unwrap();
    }
    let before = r.session.transcript().clone();
    // Protected state over the budget: refused, then fine once it is gone.
    r.session
        .state_mut()
        .rules
        .push("never deploy on Fridays. ".repeat(2_000));
    let error = r.session.next_request_blocking().unwrap_err();
    assert!(matches!(
        error,
        SessionError::Compaction(CompactionError::ProtectedOverBudget { .. })
    ));
    says_what_next(&error);
    r.session.state_mut().rules.pop();
    // A call that is not pending, an effect that is not one.
    let stray = ToolCall::new("nobody", "read_log", json!({}));
    let error = r.session.answer(&stray, "x").unwrap_err();
    says_what_next(&error);
    let error = r
        .session
        .run_effect_blocking(&stray, || async { Ok::<_, std::io::Error>("x".into()) })
        .unwrap_err();
    says_what_next(&error);
    r.session.push_response(calls(&["q1"])).unwrap();
    twin.session.push_response(calls(&["q1"])).unwrap();
    let q1 = r.session.pending_calls()[0].clone();
    let error = r.session.next_request_blocking().unwrap_err();
    assert!(matches!(error, SessionError::CallsPending { .. }));
    says_what_next(&error);
    let error = r
        .session
        .run_effect_blocking(&q1, || async { Ok::<_, std::io::Error>("x".into()) })
        .unwrap_err();
    assert!(matches!(error, SessionError::NotAnEffect { .. }));
    says_what_next(&error);
    assert_eq!(r.session.transcript().len(), before.len() + 1);
    r.session.answer(&q1, "fine").unwrap();
    twin.session.answer(&q1, "fine").unwrap();
    let (got, expected) = (
        r.session.next_request_blocking().unwrap(),
        twin.session.next_request_blocking().unwrap(),
    );
    assert_eq!(seen(&got), seen(&expected));
}

/// A turn whose deploy was left unknown stays in place (an anchor) inside a block, its large
/// results paged as they were when the block was made. When a later turn needs the room, the
/// hard steps page those results further, down to their notes, before refusing (rules 1, 5
/// and 10; the session simulator's seed 2958 at budget 3,000).
#[test]
fn an_anchor_inside_an_older_block_is_paged_down_to_its_notes_before_refusing() {
    let mut r = rig(3_000);
    let reads = |turn: usize, sizes: &[usize]| -> Vec<(ToolCall, String)> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &bytes)| {
                let id = format!("t{turn}-log-{i}");
                let call = ToolCall::new(id.clone(), "read_log", json!({ "id": id }));
                (call, log(&id, bytes))
            })
            .collect()
    };
    let turn = |r: &mut Rig, n: usize, deploy: bool, sizes: &[usize]| {
        r.session
            .push(Message::user(format!("turn {n}: read the logs")));
        r.session.next_request_blocking().unwrap();
        let reads = reads(n, sizes);
        let mut calls: Vec<ToolCall> = reads.iter().map(|(c, _)| c.clone()).collect();
        let deploy = deploy.then(|| {
            ToolCall::new(
                format!("t{n}-deploy"),
                "deploy",
                json!({"service": "svc-1", "key": format!("k{n}")}),
            )
        });
        calls.extend(deploy.clone());
        r.session
            .push_response(Message::assistant_with_tools("", calls))
            .unwrap();
        for (call, content) in &reads {
            r.session.answer(call, content.clone()).unwrap();
        }
        if let Some(call) = deploy {
            let outcome = r
                .session
                .run_effect_blocking(&call, || async {
                    Err::<String, _>(ToolFailure::unknown("timed out after the request went out"))
                })
                .unwrap();
            assert!(
                matches!(outcome, EffectOutcome::LeftUnknown { .. }),
                "{outcome:?}"
            );
        }
        let request = r
            .session
            .next_request_blocking()
            .unwrap_or_else(|e| panic!("turn {n} refused: {e}"));
        assert!(request.tokens() <= 3_000);
        r.session
            .push_response(Message::assistant(format!("turn {n} done.")))
            .unwrap();
    };
    turn(&mut r, 1, true, &[30_000, 30_000, 30_000]);
    turn(&mut r, 2, false, &[400]);
    turn(&mut r, 3, false, &[30_000, 30_000, 30_000]);
    turn(&mut r, 4, false, &[30_000, 30_000, 30_000, 30_000]);
}
