//! `SqliteLedger`: the effect guard, durable across handles and processes, and the race for a
//! key between 16 threads and 4 OS processes.

use crate::common;

use common::TempDir;

use compaction::sqlite::rusqlite::Connection;
use compaction::sqlite::SqliteErrorKind;
use compaction::{Effect, EffectError, EffectLog, EffectStatus, SqliteLedger, SqliteLedgerError};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Barrier};

fn refused(result: Result<(), SqliteLedgerError>) -> EffectError {
    match result {
        Err(SqliteLedgerError::Effect(e)) => e,
        other => panic!("expected a guard refusal, got {other:?}"),
    }
}

#[test]
fn the_guard_has_the_in_memory_semantics() {
    let dir = TempDir::new("guard");
    let ledger = SqliteLedger::open(dir.db("ledger.db")).unwrap();
    ledger
        .record(&Effect::new("send", "mail://ops", "k1"))
        .unwrap();
    assert!(matches!(
        refused(ledger.commit("k1")),
        EffectError::NotInFlight {
            status: EffectStatus::NotStarted,
            ..
        }
    ));
    ledger.begin("k1").unwrap();
    assert_eq!(ledger.status("k1").unwrap(), Some(EffectStatus::Unknown));
    assert!(matches!(
        refused(ledger.begin("k1")),
        EffectError::OutcomeUnknown { .. }
    ));
    ledger.fail("k1").unwrap();
    assert_eq!(ledger.status("k1").unwrap(), Some(EffectStatus::NotStarted));
    ledger.begin("k1").unwrap();
    ledger.commit("k1").unwrap();
    assert!(matches!(
        refused(ledger.begin("k1")),
        EffectError::AlreadyCommitted { .. }
    ));
    assert!(matches!(
        refused(ledger.fail("k1")),
        EffectError::NotInFlight { .. }
    ));
    assert!(matches!(
        refused(ledger.commit("nope")),
        EffectError::NotFound { .. }
    ));
    assert!(matches!(
        refused(ledger.reconcile("nope", EffectStatus::Committed)),
        EffectError::NotFound { .. }
    ));
    // Same record again: a no-op; a different one under the same key: refused.
    ledger
        .record(&Effect::new("send", "mail://ops", "k1"))
        .unwrap();
    assert!(matches!(
        refused(ledger.record(&Effect::new("send", "mail://dev", "k1"))),
        EffectError::DuplicateKey { .. }
    ));
    assert_eq!(ledger.status("k1").unwrap(), Some(EffectStatus::Committed));
    assert_eq!(ledger.status("never").unwrap(), None);

    // The history is append-only and complete.
    let ops: Vec<(String, Option<EffectStatus>, EffectStatus)> = ledger
        .history("k1")
        .unwrap()
        .into_iter()
        .map(|t| (t.op, t.from, t.to))
        .collect();
    use EffectStatus::*;
    assert_eq!(
        ops,
        [
            ("record".to_string(), None, NotStarted),
            ("begin".to_string(), Some(NotStarted), Unknown),
            ("fail".to_string(), Some(Unknown), NotStarted),
            ("begin".to_string(), Some(NotStarted), Unknown),
            ("commit".to_string(), Some(Unknown), Committed),
        ]
    );
}

#[test]
fn an_unknown_effect_survives_a_restart_until_reconciled() {
    let dir = TempDir::new("reconcile");
    let path = dir.db("ledger.db");
    {
        let ledger = SqliteLedger::open(&path).unwrap();
        ledger
            .begin_effect(&Effect::new("charge", "stripe://cus_42", "pay-1").depends_on("quote-1"))
            .unwrap();
        // The process dies here: no commit, no fail.
    }
    let ledger = SqliteLedger::open(&path).unwrap();
    let unknown = ledger.list(EffectStatus::Unknown).unwrap();
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].idempotency_key, "pay-1");
    assert_eq!(unknown[0].action, "charge");
    assert_eq!(unknown[0].depends_on, ["quote-1"]);
    assert!(matches!(
        refused(ledger.begin("pay-1")),
        EffectError::OutcomeUnknown { .. }
    ));
    // The operator checked the payment provider: the charge went through.
    ledger.reconcile("pay-1", EffectStatus::Committed).unwrap();
    assert!(matches!(
        refused(ledger.begin("pay-1")),
        EffectError::AlreadyCommitted { .. }
    ));
    assert!(ledger.list(EffectStatus::Unknown).unwrap().is_empty());
    assert_eq!(ledger.list(EffectStatus::Committed).unwrap().len(), 1);
    let last = ledger.history("pay-1").unwrap().pop().unwrap();
    assert_eq!(last.op, "reconcile");
    assert_eq!(last.pid, std::process::id());
}

#[test]
fn an_effect_log_field_is_backed_by_the_ledger() {
    let dir = TempDir::new("log");
    let ledger = SqliteLedger::open(dir.db("ledger.db")).unwrap();
    let mut log = EffectLog::new();
    log.record(Effect::new("apply_migration", "db://app", "m1"))
        .unwrap();
    log.record(Effect::new("apply_migration", "db://app", "m2").depends_on("m1"))
        .unwrap();
    log.begin("m1").unwrap();
    log.commit("m1").unwrap();
    log.set_payload("m1", serde_json::json!({"rows": 118_000}))
        .unwrap();
    let summary = ledger.sync_log(&log).unwrap();
    assert_eq!(summary.inserted, 2);
    assert_eq!(ledger.load_log("").unwrap(), log);

    // Another process claims m2 in the ledger; this process's log is now stale.
    ledger.begin("m2").unwrap();
    let summary = ledger.sync_log(&log).unwrap();
    assert_eq!(
        summary.kept,
        [(
            "m2".to_string(),
            EffectStatus::Unknown,
            EffectStatus::NotStarted
        )]
    );
    assert_eq!(ledger.status("m2").unwrap(), Some(EffectStatus::Unknown));
    // The view is refreshed from the ledger, the source of truth.
    let log = ledger.load_log("").unwrap();
    assert_eq!(log.status("m2"), Some(EffectStatus::Unknown));
    assert_eq!(log.get("m2").unwrap().depends_on, ["m1"]);
    assert_eq!(
        log.get("m1").unwrap().payload,
        Some(serde_json::json!({"rows": 118_000}))
    );

    // A status moving forward in the log is applied.
    let mut log = log;
    log.commit("m2").unwrap();
    let summary = ledger.sync_log(&log).unwrap();
    assert_eq!(summary.advanced, 1);
    assert_eq!(ledger.status("m2").unwrap(), Some(EffectStatus::Committed));
    assert_eq!(ledger.history("m2").unwrap().last().unwrap().op, "sync");
}

#[test]
fn a_corrupt_row_is_a_typed_error_not_a_panic() {
    let dir = TempDir::new("corruptrow");
    let path = dir.db("ledger.db");
    let ledger = SqliteLedger::open(&path).unwrap();
    ledger
        .record(&Effect::new("a", "b", "k").depends_on("j"))
        .unwrap();
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE effects SET depends_on = '[\"j' WHERE key = 'k'", [])
        .unwrap();
    let err = ledger.load_log("").unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(backend.kind(), SqliteErrorKind::Corrupt);
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

/// A session syncs its whole log at every request: a row whose status was changed outside the
/// ledger (its history ends elsewhere) stops the sync, which names the key and writes nothing,
/// not even for the keys before it in the log.
#[test]
fn a_sync_stops_at_a_row_changed_outside_the_ledger() {
    let dir = TempDir::new("syncguard");
    let path = dir.db("ledger.db");
    let ledger = SqliteLedger::open(&path).unwrap();
    let mut log = EffectLog::new();
    for key in ["a1", "a2", "a3"] {
        log.record(Effect::new("deploy", key, key)).unwrap();
    }
    ledger.sync_log(&log).unwrap();
    ledger.begin("a2").unwrap();
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE effects SET status = 'committed' WHERE key = 'a2'",
            [],
        )
        .unwrap();
    let history = |key| ledger.history(key).unwrap().len();
    let before = [history("a1"), history("a2"), history("a3")];
    let mut moved = log.clone();
    moved.begin("a1").unwrap();
    moved.begin("a3").unwrap();
    let err = ledger.sync_log(&moved).unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(backend.kind(), SqliteErrorKind::Corrupt);
    assert!(err.to_string().contains("effect `a2`"), "{err}");
    assert_eq!([history("a1"), history("a2"), history("a3")], before);
    assert_eq!(ledger.status("a1").unwrap(), Some(EffectStatus::NotStarted));
}

/// Rounds of the race; each round is a new key.
const ROUNDS: usize = 50;
const THREADS: usize = 16;
const PROCESSES: usize = 4;
const RACE_ENV: &str = "COMPACTION_SQLITE_RACE_DB";

/// Child process of `begin_races_exactly_one_winner`: claims the key the parent names on
/// stdin and prints the outcome. Returns at once when not started as a child.
#[test]
fn child_race_entry() {
    let Ok(path) = std::env::var(RACE_ENV) else {
        return;
    };
    let ledger = SqliteLedger::open(&path).unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let Some(key) = line.strip_prefix("go ") else {
            break;
        };
        let outcome = outcome(&ledger, key);
        writeln!(out, "RESULT {key} {outcome}").unwrap();
        out.flush().unwrap();
    }
}

/// Claims `key`; the winner commits at once (so losers see `unknown` or `committed`).
fn outcome(ledger: &SqliteLedger, key: &str) -> String {
    match ledger.begin(key) {
        // No panics here: a panicking thread would leave the others waiting at the barrier.
        Ok(()) => match ledger.commit(key) {
            Ok(()) => "won".into(),
            Err(e) => format!("error:commit:{e}"),
        },
        Err(SqliteLedgerError::Effect(EffectError::OutcomeUnknown { .. })) => "unknown".into(),
        Err(SqliteLedgerError::Effect(EffectError::AlreadyCommitted { .. })) => "committed".into(),
        Err(e) => format!("error:{e}"),
    }
}

#[test]
fn begin_races_exactly_one_winner() {
    let dir = TempDir::new("race");
    let path = dir.db("ledger.db");
    let ledger = SqliteLedger::open(&path).unwrap();

    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let mut child = Command::new(&exe)
                .args([
                    "--exact",
                    common::test_name(module_path!(), "child_race_entry").as_str(),
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(RACE_ENV, &path)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            // Skip the test harness's own output (it prints `test child_race_entry ... `
            // without a newline before the test runs).
            loop {
                let line = lines.next().expect("child exited before READY").unwrap();
                if line.ends_with("READY") {
                    break;
                }
            }
            (child, stdin, lines)
        })
        .collect();

    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            // Half the threads open their own connection, half share one.
            let ledger = if t % 2 == 0 {
                SqliteLedger::open(&path).unwrap()
            } else {
                ledger.clone()
            };
            let barrier = barrier.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    barrier.wait();
                    let key = format!("round-{round}");
                    tx.send((round, outcome(&ledger, &key))).unwrap();
                }
            })
        })
        .collect();

    for round in 0..ROUNDS {
        let key = format!("round-{round}");
        for (_, stdin, _) in &mut children {
            writeln!(stdin, "go {key}").unwrap();
            stdin.flush().unwrap();
        }
        barrier.wait();
        let mut outcomes = Vec::new();
        for _ in 0..THREADS {
            let (r, outcome) = rx.recv().unwrap();
            assert_eq!(r, round);
            outcomes.push(outcome);
        }
        for (_, _, lines) in &mut children {
            let line = loop {
                let line = lines.next().expect("child exited").unwrap();
                if let Some(at) = line.find("RESULT ") {
                    break line[at..].to_string();
                }
            };
            let rest = line
                .strip_prefix(&format!("RESULT {key} "))
                .unwrap_or_else(|| panic!("round {round}: unexpected line {line}"));
            outcomes.push(rest.to_string());
        }
        let winners = outcomes.iter().filter(|o| *o == "won").count();
        assert_eq!(winners, 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o.as_str(), "won" | "unknown" | "committed")),
            "round {round}: {outcomes:?}"
        );
        assert_eq!(ledger.status(&key).unwrap(), Some(EffectStatus::Committed));
        let begins = ledger
            .history(&key)
            .unwrap()
            .iter()
            .filter(|t| t.op == "begin")
            .count();
        assert_eq!(begins, 1, "round {round}");
    }

    for t in threads {
        t.join().unwrap();
    }
    for (mut child, stdin, _) in children {
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(ledger.list(EffectStatus::Committed).unwrap().len(), ROUNDS);
}
