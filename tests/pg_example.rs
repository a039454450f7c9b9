//! The migration example against PostgreSQL (`--db postgres://... --namespace ..`): it runs,
//! holds every invariant, resumes from its checkpoint in a second process, and keeps its
//! checkpoint and ledger inside its namespace. The example binary is built first
//! (`cargo build --example migration_agent --features postgres`, as `.ci/run` does).

mod common;
mod pg;

use compaction::{block_on, EffectStatus, PgLedger, PgStore};
use pg::harness::TestDb;
use std::path::PathBuf;
use std::process::Command;

fn example_binary() -> PathBuf {
    common::example_binary("migration_agent", "postgres")
}

/// Runs the example; returns its standard output, panicking with both streams on failure.
fn run_example(url: &str, namespace: &str, turns: u32) -> String {
    let out = Command::new(example_binary())
        .args(["--turns", &turns.to_string(), "--db", url])
        .args(["--namespace", namespace])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    stdout
}

#[test]
fn the_migration_example_runs_resumes_and_stays_in_its_namespace() {
    let db = TestDb::new("example");
    let first = run_example(db.url(), "fleet-a", 40);
    assert!(
        first.contains("verdict: typed compaction held every invariant"),
        "{first}"
    );
    assert!(!first.contains("resumed from"), "{first}");

    // A second process (another worker) resumes from the checkpoint and re-applies nothing.
    let second = run_example(db.url(), "fleet-a", 60);
    assert!(second.contains("resumed from the checkpoint"), "{second}");
    assert!(second.contains("at turn 40"), "{second}");
    assert!(
        second.contains("verdict: typed compaction held every invariant"),
        "{second}"
    );

    let store = block_on(PgStore::connect(db.url(), "fleet-a")).unwrap();
    let names: Vec<String> = block_on(store.list_checkpoints())
        .unwrap()
        .into_iter()
        .map(|c| c.agent_id)
        .collect();
    assert_eq!(names, ["migration-agent"]);
    let ledger = block_on(PgLedger::connect(db.url(), "fleet-a")).unwrap();
    let committed = block_on(ledger.list(EffectStatus::Committed)).unwrap();
    assert!(committed.len() >= 8, "{committed:?}");
    assert!(block_on(ledger.list(EffectStatus::Unknown)).unwrap().len() <= 1);

    // Another namespace of the same database sees none of it.
    let other = block_on(PgStore::connect(db.url(), "fleet-b")).unwrap();
    assert!(block_on(other.list_checkpoints()).unwrap().is_empty());
    let other_ledger = block_on(PgLedger::connect(db.url(), "fleet-b")).unwrap();
    assert!(block_on(other_ledger.effects()).unwrap().is_empty());
}
