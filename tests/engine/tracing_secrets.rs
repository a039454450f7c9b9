//! What the `tracing` spans and events carry (issue 11 item 5): a subscriber records
//! everything at TRACE level (every span's fields, every later record, every event) over a
//! property run of compactions, cache hits, refusals, resolves and rehydrations, and no
//! protected value, effect record (action, target, key, payload), field value or summary text
//! ever appears in it. Every string of a state carries a unique marker at both ends, so a value
//! logged whole, cut, escaped or quoted is still found. The spans and their counts are checked
//! too, so a pipeline that logged nothing would fail.

use crate::support;

use compaction::{CompactionError, Compactor, FieldOutcome, MemoryLedger, MemoryStore, Tokenizer};
use proptest::prelude::*;
use support::capture::{capturing, Capture, Marker, Recording};
use support::states::{oracle_reacquirer, PropState};
use support::strategies::state;

// ---------------------------------------------------------------------------------------------
// The run

/// Everything an agent does with one state, under the capture; returns the summaries made and
/// whether a compaction succeeded.
fn exercise(state: &PropState, budget: usize) -> (Vec<String>, bool) {
    let store = MemoryStore::new();
    let summarizer = Recording::default();
    let compactor = Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::Heuristic)
        .summarizer(summarizer.clone())
        .store(store.clone())
        .build()
        .unwrap();
    // Twice: the second compaction's summaries come from the cache.
    let mut last = None;
    for _ in 0..2 {
        let Ok(compacted) = compactor.compact_blocking(state) else {
            continue;
        };
        for row in &compacted.report().fields {
            let pointer = match &row.outcome {
                FieldOutcome::Spilled { pointer } => pointer,
                FieldOutcome::Summarized { source, .. } => source,
                _ => continue,
            };
            compactor.resolve_blocking(pointer).unwrap();
        }
        compactor
            .rehydrate_blocking(&compacted, &oracle_reacquirer(state))
            .unwrap();
        last = Some(compacted);
    }
    // A failed rehydration and resolve, after the store lost a spilled value: refused by kind
    // only (their messages name paths and pointers).
    let compacted = last.is_some();
    if let (Some(compacted), Some(hash)) = (last, store.hashes().first()) {
        store.overwrite_unchecked(*hash, b"tampered".to_vec());
        // Fails when the lost blob is one rehydration reads (a summary's source need not be).
        let _ = compactor.rehydrate_blocking(&compacted, &oracle_reacquirer(state));
        let pointer = compaction::Pointer::for_hash(*hash);
        assert!(compactor.resolve_blocking(pointer).is_err());
    }
    // A refusal whose message quotes an effect key: the state's records are in no ledger.
    if !state.migrations.is_empty() {
        let refused = compactor.compact_with_ledger_blocking(state, &MemoryLedger::new());
        assert!(matches!(
            refused,
            Err(CompactionError::EffectNotInLedger { .. })
        ));
    }
    // A refusal: nothing fits in 8 tokens.
    let tiny = Compactor::builder().budget(8).build().unwrap();
    assert!(tiny.compact_blocking(state).is_err());
    let summaries = summarizer.0.lock().unwrap().clone();
    (summaries, compacted)
}

fn budget() -> impl Strategy<Value = usize> {
    prop_oneof![1 => 60usize..400, 3 => 400usize..3_000, 1 => 3_000usize..40_000]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(support::cases(64)))]

    #[test]
    fn no_value_record_or_summary_is_ever_logged(raw in state(), budget in budget()) {
        let mut marker = Marker::default();
        let state = marker.state(&raw);
        let capture = Capture::default();
        let (summaries, compacted) =
            capturing(&capture, || {
                exercise(&state, budget)
            });
        let log = capture.text();
        for needle in &marker.markers {
            prop_assert!(!log.contains(needle.as_str()), "{needle} was logged:\n{log}");
        }
        for summary in summaries.iter().filter(|s| s.chars().count() >= 8) {
            prop_assert!(!log.contains(summary.as_str()), "a summary was logged:\n{log}");
        }
        // The run was traced: compaction spans, the refusal, a decision per field.
        prop_assert!(log.contains("compaction.compact state_type=PropState"), "{log}");
        prop_assert!(log.contains("refusal=protected_over_budget"), "{log}");
        prop_assert!(
            state.migrations.is_empty() || log.contains("refusal=effect_not_in_ledger"),
            "{log}"
        );
        prop_assert!(!compacted || log.contains("field=constraints outcome="), "{log}");
    }
}

/// The smallest budget (in steps of 50) at which `state` has a field summarized: found, not
/// written down, so a change in the window's size does not silently make the test vacuous.
fn summarizing_budget(state: &PropState) -> usize {
    (300..8000)
        .step_by(50)
        .find(|&budget| {
            let compactor = Compactor::builder()
                .budget(budget)
                .summarizer(Recording::default())
                .build()
                .unwrap();
            compactor.compact_blocking(state).is_ok_and(|c| {
                c.report()
                    .fields
                    .iter()
                    .any(|f| matches!(f.outcome, FieldOutcome::Summarized { .. }))
            })
        })
        .expect("some budget summarizes a field of the rich state")
}

/// One compaction's spans and events carry its counts, and the cache's hits.
#[test]
fn spans_carry_the_counts_and_cache_hits() {
    let state = support::fixtures::rich_state();
    let budget = summarizing_budget(&state);
    let capture = Capture::default();
    let (first, second) = capturing(&capture, || {
        let compactor = Compactor::builder()
            .budget(budget)
            .summarizer(Recording::default())
            .build()
            .unwrap();
        let first = compactor.compact_blocking(&state).unwrap();
        let second = compactor.compact_blocking(&state).unwrap();
        compactor
            .rehydrate_blocking(&second, &oracle_reacquirer(&state))
            .unwrap();
        (first, second)
    });
    let log = capture.text();
    let count = |report: &compaction::CompactionReport, kind: fn(&FieldOutcome) -> bool| {
        report.fields.iter().filter(|f| kind(&f.outcome)).count()
    };
    let summarized = count(second.report(), |o| {
        matches!(o, FieldOutcome::Summarized { .. })
    });
    assert!(summarized > 0, "{}", second.report());
    assert_eq!(second.report().cached_summaries().len(), summarized);
    assert!(first.report().cached_summaries().is_empty());
    let kept = count(second.report(), |o| matches!(o, FieldOutcome::Kept));
    let spilled = count(second.report(), |o| {
        matches!(o, FieldOutcome::Spilled { .. })
    });
    let expected = format!(
        "tokens={} budget={budget} kept={kept} spilled={spilled} summarized={summarized}",
        second.tokens()
    );
    assert!(log.contains(&expected), "{expected} not in:\n{log}");
    assert!(log.contains(&format!("cache_hits={summarized}")), "{log}");
    assert!(log.contains("cache_hits=0"), "{log}");
    assert!(log.contains("compaction.summarize field=ci_log"), "{log}");
    assert!(log.contains("cached=true"), "{log}");
    assert!(
        log.contains("compaction.rehydrate state_type=PropState"),
        "{log}"
    );
    // One debug event per field decision, for both compactions.
    let decisions = log.matches("message=field decision").count();
    assert_eq!(
        decisions,
        first.report().fields.len() + second.report().fields.len()
    );
    assert!(log.contains("field=constraints outcome=kept"), "{log}");
}

#[derive(compaction::Compactable, serde::Serialize, serde::Deserialize)]
struct Support {
    #[protected]
    customer: String,
    #[transcript(keep_recent = 1)]
    chat: compaction::Transcript,
}

/// A conversation's folds are summarized under a `compaction.summarize` span, and no message,
/// tool call, tool result or fold summary is logged.
#[test]
fn transcript_folds_are_traced_without_their_text() {
    use compaction::{Message, ToolCall, Transcript};
    let mut marker = Marker::default();
    let mut chat = Transcript::new();
    chat.push(Message::system(marker.mark("You help customers.")));
    for turn in 0..12 {
        let call = format!("call-{turn}");
        chat.push(Message::user(marker.mark(&format!("question {turn}"))));
        chat.push(Message::assistant_with_tools(
            marker.mark("looking it up"),
            vec![ToolCall::new(
                &call,
                "lookup_order",
                serde_json::json!({ "order": marker.mark("order id") }),
            )],
        ));
        let result = marker.mark(&"order line shipped\n".repeat(40));
        chat.push(Message::tool_result(&call, result));
        chat.push(Message::assistant(marker.mark(&format!("answer {turn}"))));
    }
    let state = Support {
        customer: marker.mark("cus_42"),
        chat,
    };
    let summarizer = Recording::default();
    let capture = Capture::default();
    let compacted = capturing(&capture, || {
        Compactor::builder()
            .budget(1_500)
            .summarizer(summarizer.clone())
            .build()
            .unwrap()
            .compact_blocking(&state)
            .unwrap()
    });
    let log = capture.text();
    let summaries = summarizer.0.lock().unwrap().clone();
    assert!(!summaries.is_empty(), "no fold was summarized");
    assert!(compacted.tokens() <= 1_500);
    assert!(log.contains("compaction.summarize field=chat"), "{log}");
    for needle in &marker.markers {
        assert!(
            !log.contains(needle.as_str()),
            "{needle} was logged:\n{log}"
        );
    }
    for summary in &summaries {
        assert!(
            !log.contains(summary.as_str()),
            "a summary was logged:\n{log}"
        );
    }
}
