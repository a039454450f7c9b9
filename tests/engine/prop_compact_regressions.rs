//! Regressions the compaction property suite found (see `prop_compact.rs`), each kept as a
//! test of its own, and the suite's sharding.

use crate::support;

use compaction::{
    CompactionError, Effect, EffectLog, EffectStatus, MemoryStore, TokenCounter, Tokenizer,
};
use proptest::prelude::*;
use support::states::PropState;
use support::summarizers::Adversary;

use crate::prop_compact::*;

/// Regression (found by this suite's over-budget oracle): the floor pass let what one small
/// protected field saved (kept verbatim instead of a longer pointer) pay for keeping other
/// fields, so the "floor" was not minimal and compaction refused budgets it could meet.
#[test]
fn regression_the_floor_is_minimal() {
    let mut state = support::fixtures::rich_state();
    // Only small protected values: each is shorter verbatim than its pointer.
    state.blocked_on = Some("human approval (not yet given)".into());
    let counter = Tokenizer::O200kBase;
    let upper = verbatim_upper_bound(&state, counter);
    let store = MemoryStore::new();
    let (tiny, _) = compactor(1, counter, Adversary::None, &store);
    match tiny.compact_blocking(&state) {
        Err(CompactionError::ProtectedOverBudget {
            required_tokens, ..
        }) => {
            println!("floor {required_tokens}, upper bound {upper}");
            assert!(
                required_tokens < upper,
                "floor {required_tokens} >= {upper}"
            );
        }
        other => panic!("expected ProtectedOverBudget, got {other:?}"),
    }
    let (enough, _) = compactor(upper, counter, Adversary::None, &store);
    enough.compact_blocking(&state).unwrap();
}

/// Regression: `Extractive` returned an empty extract for targets of 8 to 16 tokens (too
/// small for its cut marker), which the engine rightly refuses, so the built-in summarizer
/// made compaction fail at some budgets.
#[test]
fn regression_extractive_never_returns_a_blank_extract() {
    let texts = [
        " ".repeat(100),
        "\n \t".repeat(50),
        "é".repeat(100),
        "abc ".repeat(100),
        "🦀".repeat(30),
        "x".repeat(20),
    ];
    for text in &texts {
        for target in 1..=64 {
            let out = compaction::Extractive::extract(text, target);
            assert!(
                !out.trim().is_empty(),
                "blank extract of {text:?} at {target}"
            );
            for counter in [
                Tokenizer::O200kBase,
                Tokenizer::Cl100kBase,
                Tokenizer::Heuristic,
            ] {
                assert!(
                    counter.count(&out) <= target,
                    "{out:?} over {target} ({counter:?})"
                );
            }
        }
    }
    // Engine level: the built-in summarizer never makes compaction fail, at any budget.
    let state = support::fixtures::rich_state();
    let store = MemoryStore::new();
    for budget in (300..1_600).step_by(3) {
        let (c, _) = compactor(budget, Tokenizer::Heuristic, Adversary::Extractive, &store);
        match c.compact_blocking(&state) {
            Ok(_) | Err(CompactionError::ProtectedOverBudget { .. }) => {}
            Err(e) => panic!("budget {budget}: {e}"),
        }
    }
}

/// Regression (found by `PROPTEST_CASES=20000`, shrunk): when the planned window came out over
/// budget, demotion also demoted fields the floor pass had kept verbatim because they are
/// shorter than their pointers, so the window only grew, and compaction refused (floor "711")
/// a budget of 455 that a 450-token window meets.
#[test]
fn regression_demotion_never_goes_below_the_floor() {
    let effect = |action: &str, target: &str, key: &str, status, deps: &[&str]| {
        let mut e = Effect::new(action, target, key).with_status(status);
        for d in deps {
            e = e.depends_on(*d);
        }
        e
    };
    let log = |effects: Vec<Effect>| EffectLog::from_effects(effects).unwrap();
    use EffectStatus::{Committed, NotStarted, Unknown};
    let state = PropState {
        constraints: vec!["aa-0__-a_".into(), "## protected (verbatim)".into()],
        config_path: "aa_a_0_00-".into(),
        plan_step: 1_000_000_000,
        amounts: [("numpy<=2.0".to_owned(), 1_000_000_000_000_000_000)].into(),
        blocked_on: None,
        config: String::new(),
        ci_log: "mig–0001".into(),
        transcript: "00aa 0-a-__000_".into(),
        tool_output: vec!["log line ok\n".repeat(200)],
        migrations: log(vec![
            effect("", "", "#0", Committed, &[]),
            effect("-__0000", "", "mig-0001#1", NotStarted, &[]),
            effect("mig-0001", "-a_-a-a0__a", "mig–0001#2", NotStarted, &["#0"]),
            effect(
                "aaa",
                "<<< END COMPACTED STATE >>>",
                "mig-0001#3",
                Unknown,
                &["mig–0001#2", "#0"],
            )
            .with_payload(serde_json::json!({ "out": "mig-0001" })),
            effect("", "", "mig-0001#4", Committed, &["mig-0001#1"]),
        ]),
        reads: log(vec![
            effect("mig-0001", "", "numpy<=2.0#0", Committed, &[]),
            effect("0-_", "0", "do  not#1", NotStarted, &[])
                .with_payload(serde_json::json!({ "out": "\"quoted\" \\ back\\slash" })),
        ]),
        sub: support::states::Leaf {
            id: "0a__".into(),
            qty: 1_000_000_000_000_000_000,
            notes: vec!["mig-0001".into()],
        },
        subs: vec![support::states::Leaf {
            id: "aaa-0a_00_".into(),
            qty: 1_000_000_000_000_000_000,
            notes: vec!["\"quoted\" \\ back\\slash".into()],
        }],
        maybe: None,
    };
    run_case(state, 455, Adversary::None, Tokenizer::Heuristic).unwrap();
}

/// The shards the property above runs in add up to the configured cases, and with a fixed seed
/// (CI's `PROPTEST_RNG_SEED`) each shard draws from a seed of its own, the same on every run.
#[test]
fn the_cases_split_into_shards_add_up_and_draw_apart() {
    use proptest::test_runner::RngSeed;
    use support::shards::shard_configs;
    let fixed = ProptestConfig {
        cases: 2001,
        rng_seed: RngSeed::Fixed(20261129),
        ..ProptestConfig::default()
    };
    for shards in [1, 2, 3, 8] {
        let configs = shard_configs(&fixed, shards);
        assert_eq!(configs.len(), shards);
        assert_eq!(configs.iter().map(|c| c.cases).sum::<u32>(), 2001);
        let seeds: Vec<_> = configs
            .iter()
            .map(|c| format!("{:?}", c.rng_seed))
            .collect();
        let mut distinct = seeds.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), shards, "{seeds:?}");
        assert_eq!(seeds[0], "Fixed(20261129)");
    }
    // Fewer cases than threads: no empty shard.
    let few = ProptestConfig {
        cases: 2,
        ..ProptestConfig::default()
    };
    assert!(shard_configs(&few, 8).iter().all(|c| c.cases == 1));
    assert_eq!(shard_configs(&few, 8).len(), 2);
}
