//! Crash safety of `SqliteLedger`: a child process claims and commits effects in a loop and is
//! killed with SIGKILL at random moments. After every kill the database opens, no effect ran
//! twice, no key committed twice, and every key claimed but not committed reads `Unknown`.

use crate::common;

use common::{KillRng, TempDir};

use compaction::sqlite::rusqlite::{self, Connection};
use compaction::{EffectError, EffectStatus, SqliteLedger, SqliteLedgerError};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Kills. The issue asks for at least 100.
const KILLS: usize = 120;
const CRASH_ENV: &str = "COMPACTION_SQLITE_CRASH_DB";

/// The child: claims keys `k000000, k000001, ...` in order, performs each effect (a row in
/// the append-only `performed` table: a second execution of any effect would show as a second
/// row), commits it, and reports each step on stdout. On start it retries the last three keys
/// of the previous run, which the ledger must refuse. Returns at once when not a child.
#[test]
fn child_crash_entry() {
    let Ok(path) = std::env::var(CRASH_ENV) else {
        return;
    };
    let ledger = SqliteLedger::open(&path).unwrap();
    let effects = Connection::open(&path).unwrap();
    effects.busy_timeout(Duration::from_secs(5)).unwrap();
    effects
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS performed (key TEXT NOT NULL, pid INTEGER NOT NULL);
             CREATE INDEX IF NOT EXISTS performed_by_key ON performed (key);",
        )
        .unwrap();
    let mut out = std::io::stdout();
    let mut say = |line: String| {
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    };
    say("READY".into());
    let start = ledger.effects().unwrap().len().saturating_sub(3);
    for i in start..start + 1_000_000 {
        let key = format!("k{i:06}");
        match ledger.begin(&key) {
            Ok(()) => {}
            Err(SqliteLedgerError::Effect(
                EffectError::AlreadyCommitted { .. } | EffectError::OutcomeUnknown { .. },
            )) => {
                say(format!("REFUSED {key}"));
                continue;
            }
            Err(e) => panic!("{e}"),
        }
        say(format!("CLAIMED {key}"));
        effects
            .execute(
                "INSERT INTO performed (key, pid) VALUES (?1, ?2)",
                rusqlite::params![key, std::process::id()],
            )
            .unwrap();
        ledger.commit(&key).unwrap();
        say(format!("COMMITTED {key}"));
    }
}

fn count_query(conn: &Connection, sql: &str) -> Vec<(String, i64)> {
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn sigkill_never_double_commits_and_leaves_claims_unknown() {
    let dir = TempDir::new("crash");
    let path = dir.0.join("ledger.db");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut rng = KillRng(seed);
    let exe = std::env::current_exe().unwrap();

    // Everything the children said, over all runs.
    let mut claimed = BTreeSet::new();
    let mut committed = BTreeSet::new();
    let mut refused = 0usize;
    let mut killed_mid_effect = 0usize;

    for kill in 0..KILLS {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                common::test_name(module_path!(), "child_crash_entry").as_str(),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = Vec::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("child did not get ready");
            let ready = line.ends_with("READY");
            lines.push(line);
            if ready {
                break;
            }
        }
        // Vary the moment: sometimes at once, mostly within the first tens of milliseconds,
        // sometimes later.
        let delay_us = match rng.next() % 10 {
            0 => 0,
            1..=7 => rng.next() % 30_000,
            _ => 30_000 + rng.next() % 70_000,
        };
        std::thread::sleep(Duration::from_micros(delay_us));
        child.kill().unwrap(); // SIGKILL on unix
        let status = child.wait().unwrap();
        assert!(!status.success(), "child {kill} was not killed: {status:?}");
        reader.join().unwrap();
        lines.extend(rx.try_iter());

        let mut last_claimed = None;
        for line in &lines {
            let line = line.trim_start_matches("test child_crash_entry ... ");
            if let Some(key) = line.strip_prefix("CLAIMED ") {
                claimed.insert(key.to_string());
                last_claimed = Some(key.to_string());
            } else if let Some(key) = line.strip_prefix("COMMITTED ") {
                committed.insert(key.to_string());
                last_claimed = None;
            } else if line.starts_with("REFUSED ") {
                refused += 1;
            }
        }

        // The database opens after the kill.
        let ledger = SqliteLedger::open(&path)
            .unwrap_or_else(|e| panic!("kill {kill}: database does not open: {e}"));
        let raw = Connection::open(&path).unwrap();
        let statuses: BTreeMap<String, EffectStatus> = ledger
            .effects()
            .unwrap()
            .into_iter()
            .map(|e| (e.idempotency_key, e.status))
            .collect();

        // No key is ever back to NotStarted: the child never calls `fail`.
        for (key, status) in &statuses {
            assert_ne!(*status, EffectStatus::NotStarted, "kill {kill}: {key}");
        }
        // Every effect ran at most once; no key was claimed or committed twice.
        if raw
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'performed'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
            > 0
        {
            let twice = count_query(
                &raw,
                "SELECT key, count(*) FROM performed GROUP BY key HAVING count(*) > 1",
            );
            assert!(
                twice.is_empty(),
                "kill {kill}: effects ran twice: {twice:?}"
            );
            // A committed key's effect ran exactly once.
            let wrong = count_query(
                &raw,
                "SELECT e.key, (SELECT count(*) FROM performed p WHERE p.key = e.key) AS n
                 FROM effects e WHERE e.status = 'committed' AND n != 1",
            );
            assert!(
                wrong.is_empty(),
                "kill {kill}: committed without effect: {wrong:?}"
            );
        }
        for op in ["begin", "commit"] {
            let twice = count_query(
                &raw,
                &format!(
                    "SELECT key, count(*) FROM effect_events WHERE op = '{op}'
                     GROUP BY key HAVING count(*) > 1"
                ),
            );
            assert!(twice.is_empty(), "kill {kill}: {op} twice: {twice:?}");
        }
        // What the child said agrees with the ledger: a claimed key is Unknown (or Committed,
        // if the kill fell between the commit and its report); a reported commit is Committed.
        for key in &claimed {
            let status = statuses.get(key).copied();
            if committed.contains(key) {
                assert_eq!(status, Some(EffectStatus::Committed), "kill {kill}: {key}");
            } else {
                assert!(
                    matches!(
                        status,
                        Some(EffectStatus::Unknown | EffectStatus::Committed)
                    ),
                    "kill {kill}: claimed {key} reads {status:?}"
                );
            }
        }
        if let Some(key) = last_claimed {
            if statuses.get(&key) == Some(&EffectStatus::Unknown) {
                killed_mid_effect += 1;
            }
        }
    }

    let ledger = SqliteLedger::open(&path).unwrap();
    let unknown = ledger.list(EffectStatus::Unknown).unwrap().len();
    let done = ledger.list(EffectStatus::Committed).unwrap().len();
    println!(
        "{KILLS} kills: {} keys claimed, {done} committed, {unknown} left unknown, \
         {killed_mid_effect} kills between claim and commit, {refused} re-claims refused",
        claimed.len()
    );
    assert!(!claimed.is_empty(), "the children never claimed anything");
    assert_eq!(unknown + done, ledger.effects().unwrap().len());
}
