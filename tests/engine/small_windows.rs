//! Small windows (issue 14, item 5; issue 20, item 4): when the full form does not fit, the
//! default renderer drops its fixed text to what the window needs; a refusal's smallest budget
//! is exact; and a budget that works keeps working at every larger budget (the form depends on
//! what fits, not on the budget's size).

use compaction::render::{COMPACT_NOTICE, REVERIFY_NOTICE};
use compaction::{
    Compactable, CompactionError, Compactor, Effect, EffectLog, NoReacquire, Tokenizer,
};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Counter {
    #[protected]
    step: u32,
}

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Notes {
    #[protected(pin)]
    rules: Vec<String>,
    #[protected]
    step: u32,
    #[redundant]
    log: String,
    #[effect(idempotent = false)]
    effects: EffectLog,
}

fn compactor(budget: usize) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .build()
        .unwrap()
}

#[test]
fn one_number_costs_a_fraction_of_the_full_form() {
    let state = Counter { step: 3 };
    let full = compactor(1_000).compact_blocking(&state).unwrap();
    assert!(full.render().contains(REVERIFY_NOTICE));
    assert!(full
        .render()
        .starts_with("<<< COMPACTED STATE of Counter >>>\n"));
    // One token short of the full form: the compact one, nothing to re-verify.
    let small = compactor(full.tokens() - 1)
        .compact_blocking(&state)
        .unwrap();
    println!(
        "one u32: {} tokens compact, {} full",
        small.tokens(),
        full.tokens()
    );
    assert_eq!(
        small.render(),
        "<<< COMPACTED STATE of Counter >>>\n## protected (verbatim)\nstep = 3\n\
         <<< END COMPACTED STATE >>>"
    );
    assert!(small.tokens() * 2 < full.tokens(), "{small:?} vs {full:?}");
    // The full form whenever it fits, so a larger budget never gets a window that does not.
    for budget in full.tokens()..full.tokens() + 50 {
        assert_eq!(
            compactor(budget).compact_blocking(&state).unwrap().render(),
            full.render()
        );
    }
    // Nothing to re-verify, and it comes back whole.
    let restored = compactor(100)
        .rehydrate_blocking(&small, &NoReacquire)
        .unwrap();
    assert_eq!(restored, state);
}

#[test]
fn a_compact_window_still_says_what_left_and_how_to_treat_effects() {
    let mut state = Notes {
        rules: vec!["never touch /etc/prod".into()],
        step: 7,
        log: "tool output ".repeat(300),
        ..Notes::default()
    };
    state
        .effects
        .record(Effect::new("deploy", "prod", "dep-1"))
        .unwrap();
    let required = match compactor(10).compact_blocking(&state) {
        Err(CompactionError::ProtectedOverBudget {
            required_tokens, ..
        }) => required_tokens,
        other => panic!("{other:?}"),
    };
    let compacted = compactor(required).compact_blocking(&state).unwrap();
    let window = compacted.render();
    assert!(window.contains(COMPACT_NOTICE), "{window}");
    assert!(!window.contains("left the window:"), "{window}");
    assert!(window.contains("[EVICTED log recover=no]"), "{window}");
    assert!(window.contains(r#""idempotency_key":"dep-1","status":"not_started""#));
    assert!(compacted.tokens() <= required);
    // Effects alone, nothing evicted: the notice stays (effect statuses need it).
    state.log.clear();
    let required = match compactor(10).compact_blocking(&state) {
        Err(CompactionError::ProtectedOverBudget {
            required_tokens, ..
        }) => required_tokens,
        other => panic!("{other:?}"),
    };
    let window = compactor(required).compact_blocking(&state).unwrap();
    assert!(
        window.render().contains(COMPACT_NOTICE),
        "{}",
        window.render()
    );
}

/// `required_tokens` is the smallest budget that works: it does, one less does not, and every
/// budget up to 300 more works too (a budget of 250 compacted, 260 refused, 270 compacted
/// before the form followed what fits).
fn check_smallest_budget(state: &Notes, budget: usize) -> usize {
    let required = match compactor(budget).compact_blocking(state) {
        Err(CompactionError::ProtectedOverBudget {
            required_tokens, ..
        }) => required_tokens,
        other => panic!("expected a refusal at {budget}, got {other:?}"),
    };
    assert!(required > budget);
    let short = compactor(required - 1).compact_blocking(state);
    assert!(
        matches!(short, Err(CompactionError::ProtectedOverBudget { .. })),
        "{} accepted",
        required - 1
    );
    for larger in required..required + 300 {
        let fits = compactor(larger).compact_blocking(state);
        assert!(fits.is_ok(), "{larger} refused: {fits:?}");
        assert!(fits.unwrap().tokens() <= larger);
    }
    required
}

#[test]
fn the_smallest_budget_is_exact_and_every_larger_one_works() {
    let small = Notes {
        rules: vec!["rule".into(); 3],
        step: 1,
        log: "x".repeat(4000),
        ..Notes::default()
    };
    check_smallest_budget(&small, 20);
    // Pinned state whose smallest window is around the budget where the old rule switched
    // forms.
    let large = Notes {
        rules: (0..60).map(|i| format!("rule number {i}")).collect(),
        step: 1,
        log: "x".repeat(4000),
        ..Notes::default()
    };
    check_smallest_budget(&large, 100);
}
