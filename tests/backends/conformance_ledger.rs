//! Every ledger backend runs the same random operation sequences as the in-memory `EffectLog`
//! and must answer every step alike (`tests/conformance/ledger.rs`). A new backend: one line.

use crate::common;
use crate::conformance;
#[cfg(feature = "postgres")]
use crate::pg;

use common::TempDir;
use compaction::sqlite::{SqliteOptions, SyncMode};
use compaction::{MemoryLedger, SqliteLedger};
use conformance::ledger::{check, Fixture};

#[test]
fn memory_ledger_conforms() {
    check(|| Fixture::new(MemoryLedger::new(), ()));
}

#[test]
fn sqlite_ledger_conforms() {
    check(|| {
        let dir = TempDir::new("conformance-ledger");
        // `Normal` sync: the semantics under test do not depend on fsync, the test time does.
        let options = SqliteOptions::new().sync_mode(SyncMode::Normal);
        let ledger = SqliteLedger::open_with(dir.db("ledger.db"), &options).unwrap();
        Fixture::new(ledger, dir)
    });
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_ledger_conforms() {
    check(|| Fixture::new(pg::fresh_ledger(), ()));
}
