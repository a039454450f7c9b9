//! The conformance suites every backend runs: [`ledger`] (random operation sequences, compared
//! step by step with the in-memory `EffectLog`), [`store`] (put/get/missing/tamper) and
//! [`checkpoint`] (listing, refusals, tampered rows and blobs, swapped rows, namespaces). A new
//! backend joins each with one line in `tests/backends/conformance_ledger.rs`, `conformance_store.rs`
//! and `conformance_checkpoint.rs`.
#![allow(dead_code)]

pub mod checkpoint;
pub mod fence;
pub mod gc;
pub mod ledger;
pub mod parts;
pub mod store;

/// Proptest cases per backend: `PROPTEST_CASES / 8` (at least 8; 48 by default), so CI's case
/// count scales these suites like the others.
pub fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map(|n| (n / 8).max(8))
        .unwrap_or(48)
}

/// Runs `test` on `cases()` values of `strategy`, panicking with the shrunk failure and the
/// suite's name.
pub fn run_cases<S: proptest::strategy::Strategy>(
    suite: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), proptest::test_runner::TestCaseError>,
) {
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: cases(),
        ..proptest::test_runner::Config::default()
    });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{suite} conformance failed: {e}");
    }
}
