//! Small windows (issue 14, item 5): below `COMPACT_FORM_BELOW` tokens the default renderer
//! drops its fixed text to what the window needs, and a refusal's smallest budget is exact on
//! both sides of that threshold.

use compaction::render::{COMPACT_FORM_BELOW, COMPACT_NOTICE, REVERIFY_NOTICE};
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
    let small = compactor(100).compact_blocking(&state).unwrap();
    let full = compactor(COMPACT_FORM_BELOW)
        .compact_blocking(&state)
        .unwrap();
    println!(
        "one u32: {} tokens compact, {} full",
        small.tokens(),
        full.tokens()
    );
    assert_eq!(
        small.render(),
        "<<< COMPACTED STATE: compaction #1 of Counter >>>\n## protected (verbatim)\nstep = 3\n\
         <<< END COMPACTED STATE >>>"
    );
    assert!(full.render().contains(REVERIFY_NOTICE));
    assert!(small.tokens() * 2 < full.tokens(), "{small:?} vs {full:?}");
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
    let compacted = compactor(200).compact_blocking(&state).unwrap();
    let window = compacted.render();
    assert!(window.contains(COMPACT_NOTICE), "{window}");
    assert!(!window.contains("left the window:"), "{window}");
    assert!(window.contains("[EVICTED log recover=no]"), "{window}");
    assert!(window.contains(r#""idempotency_key":"dep-1","status":"not_started""#));
    assert!(compacted.tokens() <= 200);
    // Effects alone, nothing evicted: the notice stays (effect statuses need it).
    state.log.clear();
    let window = compactor(200).compact_blocking(&state).unwrap();
    assert!(
        window.render().contains(COMPACT_NOTICE),
        "{}",
        window.render()
    );
}

/// `required_tokens` is the smallest budget that works: it does, one less does not.
fn check_smallest_budget(state: &Notes, budget: usize) -> usize {
    let required = match compactor(budget).compact_blocking(state) {
        Err(CompactionError::ProtectedOverBudget {
            required_tokens, ..
        }) => required_tokens,
        other => panic!("expected a refusal at {budget}, got {other:?}"),
    };
    assert!(required > budget);
    let fits = compactor(required).compact_blocking(state);
    assert!(fits.is_ok(), "{required} refused: {fits:?}");
    let short = compactor(required - 1).compact_blocking(state);
    assert!(
        matches!(short, Err(CompactionError::ProtectedOverBudget { .. })),
        "{} accepted",
        required - 1
    );
    required
}

#[test]
fn the_smallest_budget_is_exact_below_and_across_the_compact_threshold() {
    let small = Notes {
        rules: vec!["rule".into(); 3],
        step: 1,
        log: "x".repeat(4000),
        ..Notes::default()
    };
    let required = check_smallest_budget(&small, 20);
    assert!(required < COMPACT_FORM_BELOW, "{required}");
    // Pinned state that needs more than the threshold in the compact form: a budget that
    // large renders the full form, so that is what the refusal must count.
    let large = Notes {
        rules: (0..60).map(|i| format!("rule number {i}")).collect(),
        step: 1,
        log: "x".repeat(4000),
        ..Notes::default()
    };
    let required = check_smallest_budget(&large, 100);
    assert!(required >= COMPACT_FORM_BELOW, "{required}");
}
