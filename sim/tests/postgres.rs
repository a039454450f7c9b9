//! The simulator on PostgreSQL (feature `postgres`): `COMPACTION_SIM_PG_SEEDS` seeds (default
//! below) on a throwaway server this test starts (the machine's `initdb` and `pg_ctl`; a
//! missing installation fails the test, never skips it), each run in a namespace of its own,
//! every invariant asserted.
#![cfg(feature = "postgres")]

#[path = "../../tests/pg/harness.rs"]
mod harness;

use compaction_sim::backend::{set_postgres_url, BackendKind};
use compaction_sim::ctx::Config;
use compaction_sim::sweep::sweep;

/// Seeds by default: fewer than on memory (every operation is a round trip to the server).
const DEFAULT_SEEDS: u64 = 16;
const STEPS: usize = 40;

#[test]
fn every_invariant_holds_on_postgres() {
    let seeds = std::env::var("COMPACTION_SIM_PG_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_SEEDS);
    set_postgres_url(harness::cluster().url("postgres"));
    let config = |seed| Config::new(seed, STEPS).on(BackendKind::Postgres);
    let found = sweep(0..seeds, 2, config, |_, _| {}).expect("the server answers");
    eprintln!(
        "{seeds} seeds x {STEPS} steps on postgres in {:.1?}: {:.0} steps/s",
        found.elapsed,
        found.steps_per_second()
    );
    let unexpected = found.unexpected(config);
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
}
