//! Nothing wedges a session, continued (see `session_recovery.rs`): every error a store, a
//! ledger or a misuse causes leaves the session as a twin that never saw it.

use crate::session_driver;

use compaction::session::{EffectOutcome, SessionError, ToolFailure};
use compaction::{CompactionError, EffectLedger, EffectStatus, Message, ToolCall};
use serde_json::json;
use session_driver::SCOPE;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::session_recovery::*;

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
