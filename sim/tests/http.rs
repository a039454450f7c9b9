//! The simulator with the model behind the library's own HTTP clients (feature `http`):
//! `COMPACTION_SIM_HTTP_SEEDS` seeds (default below) against a loopback server that answers
//! faults first (429 and 529 with any `retry-after`, a 401 and an `error` event that echo the
//! key, streams cut at any byte, malformed SSE and JSON), every invariant asserted, the key
//! watched in every error, log line and `Debug`. And the key check itself can fail.
#![cfg(feature = "http")]

use compaction_sim::ctx::Config;
use compaction_sim::run::run;
use compaction_sim::sabotage::Sabotage;
use compaction_sim::sweep::sweep;

const DEFAULT_SEEDS: u64 = 150;
const STEPS: usize = 40;

fn config(seed: u64) -> Config {
    Config {
        http: true,
        ..Config::new(seed, STEPS)
    }
}

#[test]
fn every_invariant_holds_with_the_model_over_http() {
    let seeds = std::env::var("COMPACTION_SIM_HTTP_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_SEEDS);
    let found = sweep(0..seeds, 2, config, |_, _| {}).expect("the model server starts");
    eprintln!(
        "{seeds} seeds x {STEPS} steps over HTTP in {:.1?}: {:.0} steps/s",
        found.elapsed,
        found.steps_per_second()
    );
    let unexpected = found.unexpected(config);
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
}

#[test]
fn a_driver_that_quotes_the_key_is_caught() {
    let caught = (0..40).any(|seed| {
        let sabotaged = Config {
            sabotage: Some(Sabotage::LeakKeyInError),
            ..config(seed)
        };
        let report = run(&sabotaged).expect("the model server starts");
        report
            .failures
            .iter()
            .any(|f| f.invariant == "no_key_leaked")
    });
    assert!(
        caught,
        "`no_key_leaked` never failed with the key in the driver's error"
    );
}
