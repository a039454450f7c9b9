//! Many processes open one fresh SQLite file at the same moment (each a store and a ledger, as
//! two sessions starting side by side do): every open succeeds. Opening switches the file to
//! WAL mode, which SQLite may refuse at once with `SQLITE_BUSY` while another process is doing
//! the same, without calling the busy handler; an open must wait its busy timeout instead.

use crate::common;

use common::TempDir;

use compaction::sqlite::{SqliteLedger, SqliteStore};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PATH_ENV: &str = "COMPACTION_SQLITE_OPEN_RACE_DB";
const GO_ENV: &str = "COMPACTION_SQLITE_OPEN_RACE_GO";
/// Processes per round, and rounds (each on a new file).
const PROCESSES: usize = 8;
const ROUNDS: usize = 12;

/// The child: waits for the go file, then opens the database (ledger or store, by pid parity)
/// and says `OPENED` or `FAILED <error>`. Returns at once when not a child.
#[test]
fn child_open_entry() {
    let (Ok(path), Ok(go)) = (std::env::var(PATH_ENV), std::env::var(GO_ENV)) else {
        return;
    };
    println!("READY");
    let waited = Instant::now();
    while !Path::new(&go).exists() {
        assert!(waited.elapsed() < Duration::from_secs(60), "no go signal");
        std::thread::sleep(Duration::from_micros(200));
    }
    let opened = if std::process::id().is_multiple_of(2) {
        SqliteLedger::open(&path)
            .map(drop)
            .map_err(|e| e.to_string())
    } else {
        SqliteStore::open(&path)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    match opened {
        Ok(()) => println!("OPENED"),
        Err(e) => println!("FAILED {e}"),
    }
}

fn spawn(exe: &Path, db: &Path, go: &Path) -> Child {
    Command::new(exe)
        .args([
            "--exact",
            common::test_name(module_path!(), "child_open_entry").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PATH_ENV, db)
        .env(GO_ENV, go)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn processes_opening_one_fresh_file_at_once_all_succeed() {
    let dir = TempDir::new("open-race");
    let exe = std::env::current_exe().unwrap();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let db = dir.0.join(format!("race-{round}.db"));
        let go = dir.0.join(format!("go-{round}"));
        let mut children: Vec<(Child, BufReader<std::process::ChildStdout>)> = (0..PROCESSES)
            .map(|_| {
                let mut child = spawn(&exe, &db, &go);
                let out = BufReader::new(child.stdout.take().unwrap());
                (child, out)
            })
            .collect();
        // Every child is waiting on the go file before it is made, so they open together.
        for (_, out) in &mut children {
            let mut line = String::new();
            while !line.trim_end().ends_with("READY") {
                line.clear();
                assert!(out.read_line(&mut line).unwrap() > 0, "a child died early");
            }
        }
        std::fs::write(&go, b"go").unwrap();
        for (mut child, mut out) in children {
            let mut said = String::new();
            let mut line = String::new();
            while out.read_line(&mut line).unwrap() > 0 {
                for word in ["OPENED", "FAILED"] {
                    if let Some(at) = line.find(word) {
                        said = line[at..].trim().to_owned();
                    }
                }
                line.clear();
            }
            child.wait().unwrap();
            if said != "OPENED" {
                failures.push(format!("round {round}: {said:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The wait is bounded: a file another connection keeps locked fails the open with `Locked`
/// once the busy timeout has passed, not before and not much after.
#[test]
fn an_open_against_a_held_lock_fails_after_its_busy_timeout() {
    use compaction::sqlite::{rusqlite::Connection, SqliteErrorKind, SqliteOptions};
    let dir = TempDir::new("open-held");
    let db = dir.0.join("held.db");
    let holder = Connection::open(&db).unwrap();
    holder
        .execute_batch("CREATE TABLE t (x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);")
        .unwrap();
    let timeout = Duration::from_millis(400);
    let started = Instant::now();
    let err = SqliteLedger::open_with(&db, &SqliteOptions::new().busy_timeout(timeout))
        .expect_err("the file is locked");
    let elapsed = started.elapsed();
    let compaction::sqlite::SqliteLedgerError::Backend(err) = err else {
        panic!("{err}");
    };
    assert_eq!(err.kind(), SqliteErrorKind::Locked, "{err}");
    assert!(
        elapsed >= timeout - Duration::from_millis(50),
        "{elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}
