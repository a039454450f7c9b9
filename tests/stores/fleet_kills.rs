//! One agent, one writer, across real processes on one SQLite file: two workers run sessions
//! of the agent at once (each open takes it over from the other), and one of them is killed
//! with SIGKILL every 30-300 ms, 24 times. No deploy runs twice, no message a request made
//! durable is lost, no worker fails but by being superseded (`tests/fleet/mod.rs`).

use crate::common;
use crate::fleet;

use common::TempDir;
use compaction::{SqliteLedger, SqliteStore};

const DB_ENV: &str = "COMPACTION_FLEET_SQLITE_DB";
const KILLS: usize = 24;

/// The worker: returns at once unless started by the test below.
#[test]
fn child_fleet_entry() {
    let Ok(path) = std::env::var(DB_ENV) else {
        return;
    };
    let world = format!("{path}.world");
    let open = || {
        let store = SqliteStore::open(&path).expect("the store opens");
        let ledger = SqliteLedger::open(&path).expect("the ledger opens");
        fleet::open(store, ledger)
    };
    fleet::worker(open, world.as_ref());
}

#[test]
fn two_workers_killed_at_random_lose_nothing_and_run_nothing_twice() {
    let dir = TempDir::new("fleet");
    let path = dir.0.join("agent.db");
    let path_text = path.to_str().unwrap().to_owned();
    let entry = common::test_name(module_path!(), "child_fleet_entry");
    let said = fleet::run_fleet(
        || fleet::spawn_worker(&entry, &[(DB_ENV, path_text.as_str())]),
        KILLS,
    );
    let session = fleet::open(
        SqliteStore::open(&path).unwrap(),
        SqliteLedger::open(&path).unwrap(),
    )
    .expect("the agent opens after the kills");
    fleet::check(&said, &session, format!("{path_text}.world").as_ref());
}
