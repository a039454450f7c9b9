//! The plan is minimal: when the all-verbatim window fits the budget, nothing is evicted and
//! nothing is refused. Checked at the boundary: budget = the exact token count of the
//! all-verbatim window (and one more) keeps everything; one less must leave something out or
//! refuse with a requirement above the budget.

use crate::support;

use compaction::{Compactable, CompactionError, Compactor, Extractive, Tokenizer};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use support::strategies::state;

fn compactor(budget: usize) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .build()
        .unwrap()
}

/// Checks the boundary for one state. The full form is used whenever it fits, so at the
/// all-verbatim window's size (and above) the window is that window; one token less, the
/// window is smaller (the compact form of the same values, or something left) or the budget is
/// refused with a requirement above it.
fn check_boundary<S: Compactable + Sync>(state: &S) -> Result<(), TestCaseError> {
    let full = compactor(1 << 30).compact_blocking(state).unwrap();
    prop_assert!(full.report().nothing_evicted(), "{}", full.report());
    let exact = full.tokens();
    for budget in [exact, exact + 1] {
        match compactor(budget).compact_blocking(state) {
            Ok(c) => {
                prop_assert!(
                    c.report().nothing_evicted(),
                    "budget {budget} = all-verbatim {exact}: {}",
                    c.report()
                );
                prop_assert_eq!(c.render(), full.render());
            }
            Err(e) => prop_assert!(false, "budget {budget} refused though {exact} fits: {e}"),
        }
    }
    if exact > 1 {
        match compactor(exact - 1).compact_blocking(state) {
            Ok(c) => {
                prop_assert!(c.tokens() < exact);
                prop_assert_ne!(c.render(), full.render());
            }
            Err(CompactionError::ProtectedOverBudget {
                required_tokens, ..
            }) => prop_assert!(required_tokens > exact - 1),
            Err(e) => prop_assert!(false, "unexpected refusal: {e}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn an_all_verbatim_window_that_fits_is_the_plan(state in state()) {
        check_boundary(&state)?;
    }
}

/// Small states, where the window's fixed lines weigh the most.
#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Small {
    #[protected]
    step: u32,
    #[protected]
    name: String,
    #[redundant]
    note: String,
    #[derivable(pointer = "file://{name}")]
    body: String,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn small_states_at_the_boundary(
        step in any::<u32>(),
        name in "[a-z/]{0,12}",
        note in "[a-z ]{0,24}",
        body in "[a-z ]{0,24}",
    ) {
        check_boundary(&Small { step, name, note, body })?;
    }
}

/// A refusal says, for people, what the smallest working budget is, how much of it is fixed
/// overhead, and which fields are largest; never `FieldCost { .. }` Debug.
#[test]
fn a_refusal_states_the_smallest_budget_and_the_largest_fields() {
    #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
    struct Pinned {
        #[protected(pin)]
        rules: Vec<String>,
        #[protected(pin)]
        goal: String,
        #[redundant]
        log: String,
    }
    let state = Pinned {
        rules: (0..40).map(|i| format!("rule number {i}")).collect(),
        goal: "ship it".into(),
        log: "x".repeat(2000),
    };
    let error = compactor(60).compact_blocking(&state).unwrap_err();
    let CompactionError::ProtectedOverBudget {
        required_tokens,
        ref fields,
        ..
    } = error
    else {
        panic!("not refused: {error}");
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("smallest budget that works is {required_tokens}")),
        "{message}"
    );
    assert!(message.contains("fixed overhead"), "{message}");
    let largest = fields.iter().max_by_key(|f| f.tokens).unwrap();
    assert!(
        message.contains(&format!("{} ({} tokens)", largest.field, largest.tokens)),
        "{message}"
    );
    assert!(!message.contains("FieldCost"), "{message}");
    // And that budget works.
    assert!(compactor(required_tokens).compact_blocking(&state).is_ok());
}

/// A summarizer that overshoots its target names the opt-in that evicts instead.
#[test]
fn a_summarizer_overshoot_names_the_opt_in() {
    #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
    struct Notes {
        #[redundant(summarize)]
        notes: String,
    }
    let long = compaction::FnSummarizer::new(|request: compaction::SummaryRequest<'_>| {
        Ok(request.text.to_owned())
    });
    let compactor = Compactor::builder()
        .budget(300)
        .summarizer(long)
        .build()
        .unwrap();
    let state = Notes {
        notes: "word ".repeat(3000),
    };
    let message = match compactor.compact_blocking(&state) {
        Ok(c) => panic!("compacted:\n{}\n{}", c.render(), c.report()),
        Err(e) => e.to_string(),
    };
    assert!(
        message.contains(".evict_on_summarizer_error(true)"),
        "{message}"
    );
}
