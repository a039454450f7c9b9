//! The plan is minimal: when the all-verbatim window fits the budget, nothing is evicted and
//! nothing is refused. Checked at the boundary: budget = the exact token count of the
//! all-verbatim window (and one more) keeps everything; one less must leave something out or
//! refuse with a requirement above the budget.

mod support;

use compaction::{Compactable, CompactionError, Compactor, Extractive, Tokenizer};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use support::strategies::state;

fn compactor(budget: usize) -> Compactor {
    // A fresh compactor each time, so every window is "compaction #1" and windows compare.
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .build()
        .unwrap()
}

/// Checks the boundary for one state; `name` labels failures.
fn check_boundary<S: Compactable + Sync>(state: &S) -> Result<(), TestCaseError> {
    let whole = compactor(1 << 30).compact_blocking(state).unwrap();
    prop_assert!(whole.report().nothing_evicted(), "{}", whole.report());
    let exact = whole.tokens();
    for budget in [exact, exact + 1] {
        match compactor(budget).compact_blocking(state) {
            Ok(c) => {
                prop_assert!(
                    c.report().nothing_evicted(),
                    "budget {budget} = all-verbatim {exact}: {}",
                    c.report()
                );
                prop_assert_eq!(c.render(), whole.render());
            }
            Err(e) => prop_assert!(false, "budget {budget} refused though {exact} fits: {e}"),
        }
    }
    if exact > 1 {
        match compactor(exact - 1).compact_blocking(state) {
            Ok(c) => {
                prop_assert!(c.tokens() < exact);
                prop_assert!(!c.report().nothing_evicted());
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
