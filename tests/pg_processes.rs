//! `PgLedger` across real processes (this test binary, started again in a child mode, like
//! `sqlite_crash.rs`): 8 processes x 50 rounds race to claim one key per round (exactly one
//! winner each round), and 50 workers are killed with SIGKILL between claim and commit (no
//! effect ever runs twice; the key reads `unknown`; a restarted worker is refused the key).
//! And one agent, one writer: two workers run sessions of one agent at once, one killed every
//! 30-300 ms (`tests/fleet/mod.rs`: no deploy twice, no durable message lost).

mod common;
mod fleet;
mod pg;

use compaction::{block_on, Effect, EffectError, EffectStatus, PgLedger, PgLedgerError, PgStore};
use pg::harness::{sql, TestDb, CHILD_URL_ENV};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

const MODE_ENV: &str = "COMPACTION_PG_CHILD_MODE";
const FLEET_URL_ENV: &str = "COMPACTION_PG_FLEET_URL";
const FLEET_KILLS: usize = 24;
const FILE_ENV: &str = "COMPACTION_PG_CHILD_FILE";
const NAMESPACE: &str = "fleet";
const WORKERS: usize = 8;
const ROUNDS: usize = 50;
const KILLS: usize = 50;
/// How long a crash worker's effect takes: the window in which it is killed.
const EFFECT_TIME: Duration = Duration::from_millis(100);

fn say(line: String) {
    let mut out = std::io::stdout();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// The child: returns at once unless started by one of the tests below.
#[test]
fn child_entry() {
    let (Ok(url), Ok(mode)) = (std::env::var(CHILD_URL_ENV), std::env::var(MODE_ENV)) else {
        return;
    };
    let ledger = block_on(PgLedger::connect(&url, NAMESPACE)).unwrap();
    say(format!("READY {}", std::process::id()));
    match mode.as_str() {
        "race" => race_worker(&ledger),
        "crash" => crash_worker(&ledger),
        other => panic!("unknown child mode {other}"),
    }
}

/// Claims `round-<n>` for every round number read from stdin; says who won.
fn race_worker(ledger: &PgLedger) {
    for line in std::io::stdin().lock().lines() {
        let round = line.unwrap();
        match block_on(ledger.begin(&format!("round-{round}"))) {
            Ok(()) => say(format!("WON {round}")),
            Err(PgLedgerError::Effect(EffectError::OutcomeUnknown { .. })) => {
                say(format!("LOST {round}"))
            }
            Err(e) => say(format!("ERROR {round} {e}")),
        }
    }
}

/// Claims `k000000, k000001, ...`, performs each effect (a line in the shared file: a second
/// execution would be a second line), takes `EFFECT_TIME`, commits. On start it retries the
/// last three keys of the previous worker, which the ledger must refuse.
fn crash_worker(ledger: &PgLedger) {
    let file = std::env::var(FILE_ENV).unwrap();
    let start = block_on(ledger.effects()).unwrap().len().saturating_sub(3);
    for i in start.. {
        let key = format!("k{i:06}");
        match block_on(ledger.begin(&key)) {
            Ok(()) => {}
            Err(PgLedgerError::Effect(
                EffectError::AlreadyCommitted { .. } | EffectError::OutcomeUnknown { .. },
            )) => {
                say(format!("REFUSED {key}"));
                continue;
            }
            Err(e) => panic!("{e}"),
        }
        say(format!("CLAIMED {key}"));
        let mut performed = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&file)
            .unwrap();
        performed.write_all(format!("{key}\n").as_bytes()).unwrap();
        std::thread::sleep(EFFECT_TIME);
        block_on(ledger.commit(&key)).unwrap();
        say(format!("COMMITTED {key}"));
    }
}

/// A child with its stdout read line by line on a thread.
struct Worker {
    child: Child,
    lines: Receiver<String>,
    pid: String,
    /// Every line read so far.
    seen: Vec<String>,
}

impl Worker {
    fn start(url: &str, mode: &str, file: &str) -> Worker {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env(CHILD_URL_ENV, url)
            .env(MODE_ENV, mode)
            .env(FILE_ENV, file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = read_lines(child.stdout.take().unwrap());
        let mut worker = Worker {
            child,
            lines,
            pid: String::new(),
            seen: Vec::new(),
        };
        worker.pid = worker.expect("READY ");
        worker
    }

    /// The rest of the next line carrying `marker` (earlier lines are skipped).
    fn expect(&mut self, marker: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("worker said no `{marker}`"));
            self.seen.push(line.clone());
            if let Some(at) = line.find(marker) {
                return line[at + marker.len()..].to_string();
            }
        }
    }
}

fn read_lines(stdout: ChildStdout) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn counts(db: &TestDb, query: &str) -> Vec<(String, String)> {
    sql(db.url(), query)
        .into_iter()
        .map(|row| (row[0].clone().unwrap(), row[1].clone().unwrap()))
        .collect()
}

#[test]
fn eight_processes_racing_for_a_key_have_exactly_one_winner_each_round() {
    let db = TestDb::new("race");
    // Create the schema once, so the workers' first connects do not queue on the migration.
    let ledger = block_on(PgLedger::connect(db.url(), NAMESPACE)).unwrap();
    let mut workers: Vec<Worker> = (0..WORKERS)
        .map(|_| Worker::start(db.url(), "race", ""))
        .collect();
    let mut winner_of = BTreeMap::new();
    for round in 0..ROUNDS {
        // Odd rounds' keys are recorded first, as a session records an effect before it
        // claims it: the workers then contend for the lock on an existing row, and each loser
        // must read the winner's claim and its event together (never a status ahead of its
        // history, which would be refused as `Corrupt`).
        if round % 2 == 1 {
            let effect = Effect::new("deploy", "fleet", format!("round-{round}"));
            block_on(ledger.record(&effect)).unwrap();
        }
        // Every worker gets the round at the same moment and claims at once.
        for worker in &mut workers {
            let stdin = worker.child.stdin.as_mut().unwrap();
            writeln!(stdin, "{round}").unwrap();
            stdin.flush().unwrap();
        }
        let mut won = Vec::new();
        for worker in &mut workers {
            let answer = worker.expect("");
            let answer = answer.trim_start_matches("test child_entry ... ");
            if answer == format!("WON {round}") {
                won.push(worker.pid.clone());
            } else {
                assert_eq!(answer, format!("LOST {round}"), "worker {}", worker.pid);
            }
        }
        assert_eq!(won.len(), 1, "round {round}: winners {won:?}");
        winner_of.insert(format!("round-{round}"), won.remove(0));
    }
    for worker in &mut workers {
        drop(worker.child.stdin.take());
        assert!(worker.child.wait().unwrap().success());
    }
    // The ledger agrees: one claim per round, made by the process that was told it won.
    let claims = counts(
        &db,
        "SELECT key, string_agg(pid::text, ',') FROM compaction.effect_events
         WHERE op = 'begin' GROUP BY key ORDER BY key",
    );
    assert_eq!(claims.len(), ROUNDS);
    for (key, pids) in claims {
        assert_eq!(Some(&pids), winner_of.get(&key), "{key}");
    }
    let ledger = block_on(PgLedger::connect(db.url(), NAMESPACE)).unwrap();
    assert_eq!(
        block_on(ledger.list(EffectStatus::Unknown)).unwrap().len(),
        ROUNDS
    );
}

/// A random number from the standard library's per-instance hash keys: enough to vary when
/// to kill, without a dependency.
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

#[test]
fn sigkill_between_claim_and_commit_never_runs_an_effect_twice() {
    let db = TestDb::new("crash");
    let ledger = block_on(PgLedger::connect(db.url(), NAMESPACE)).unwrap();
    let dir = common::TempDir::new("pg-crash");
    let file = dir.db("performed.txt");
    let file_name = file.to_str().unwrap().to_string();
    let mut committed = BTreeSet::new();
    let mut refused = 0;
    for kill in 0..KILLS {
        let mut worker = Worker::start(db.url(), "crash", &file_name);
        // Kill right after the n-th claim: inside its effect, before its commit.
        let claims = 1 + random() % 3;
        let mut victim = String::new();
        for _ in 0..claims {
            victim = worker.expect("CLAIMED ");
        }
        worker.child.kill().unwrap(); // SIGKILL
        assert!(!worker.child.wait().unwrap().success());
        std::thread::sleep(Duration::from_millis(20));
        let rest: Vec<String> = worker.lines.try_iter().collect();
        for line in worker.seen.iter().chain(&rest) {
            if let Some(at) = line.find("COMMITTED ") {
                committed.insert(line[at + 10..].to_string());
            } else if line.contains("REFUSED ") {
                refused += 1;
            }
        }
        assert!(
            !committed.contains(&victim),
            "kill {kill}: {victim} committed"
        );

        // The killed worker's key reads unknown: claimed, never settled, never retryable.
        assert_eq!(
            block_on(ledger.status(&victim)).unwrap(),
            Some(EffectStatus::Unknown),
            "kill {kill}: {victim}"
        );
        let statuses: BTreeMap<String, EffectStatus> = block_on(ledger.effects())
            .unwrap()
            .into_iter()
            .map(|e| (e.idempotency_key, e.status))
            .collect();
        for (key, status) in &statuses {
            assert_ne!(*status, EffectStatus::NotStarted, "kill {kill}: {key}");
        }
        // Every effect ran at most once; every committed one exactly once.
        let performed = std::fs::read_to_string(&file).unwrap_or_default();
        let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
        for key in performed.lines() {
            *runs.entry(key).or_default() += 1;
        }
        let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "kill {kill}: effects ran twice: {twice:?}"
        );
        for (key, status) in &statuses {
            if *status == EffectStatus::Committed {
                assert_eq!(runs.get(key.as_str()), Some(&1), "kill {kill}: {key}");
            }
        }
        // No key was claimed or committed twice.
        let twice = counts(
            &db,
            "SELECT key || ' ' || op, count(*)::text FROM compaction.effect_events
             WHERE op IN ('begin', 'commit') GROUP BY key, op HAVING count(*) > 1",
        );
        assert!(twice.is_empty(), "kill {kill}: {twice:?}");
    }
    let unknown = block_on(ledger.list(EffectStatus::Unknown)).unwrap().len();
    println!(
        "{KILLS} kills between claim and commit: {} committed, {unknown} unknown, {refused} \
         re-claims refused",
        committed.len()
    );
    assert_eq!(unknown, KILLS, "one unknown key per kill");
    assert!(
        refused >= KILLS - 1,
        "restarted workers retried the last keys: {refused}"
    );
}

/// A fleet worker: returns at once unless started by the test below.
#[test]
fn child_fleet_entry() {
    let Ok(url) = std::env::var(FLEET_URL_ENV) else {
        return;
    };
    let world = std::env::var(FILE_ENV).unwrap();
    let open = || {
        let store = block_on(PgStore::connect(&url, NAMESPACE)).expect("the store connects");
        let ledger = block_on(PgLedger::connect(&url, NAMESPACE)).expect("the ledger connects");
        fleet::open(store, ledger)
    };
    fleet::worker(open, world.as_ref());
}

#[test]
fn two_session_workers_killed_at_random_lose_nothing_and_run_nothing_twice() {
    let db = TestDb::new("fleet");
    // Create the schema once, so the workers' first connects do not queue on the migration.
    block_on(PgLedger::connect(db.url(), NAMESPACE)).unwrap();
    let dir = std::env::temp_dir().join(format!("compaction-pg-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let world = dir.join("world");
    let world_text = world.to_str().unwrap().to_owned();
    let said = fleet::run_fleet(
        || {
            fleet::spawn_worker(
                "child_fleet_entry",
                &[(FLEET_URL_ENV, db.url()), (FILE_ENV, world_text.as_str())],
            )
        },
        FLEET_KILLS,
    );
    let store = block_on(PgStore::connect(db.url(), NAMESPACE)).unwrap();
    let ledger = block_on(PgLedger::connect(db.url(), NAMESPACE)).unwrap();
    let session = fleet::open(store, ledger).expect("the agent opens after the kills");
    fleet::check(&said, &session, &world);
    let _ = std::fs::remove_dir_all(&dir);
}
