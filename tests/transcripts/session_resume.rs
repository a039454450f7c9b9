//! Sessions survive being killed: random scripted turns (reads with large outputs, the pointer
//! tool, deploys that succeed or fail), the agent stopped at random points (between any two
//! actions, and inside a running effect) and resumed from its store and ledger. No effect ever
//! happens twice, and the first request after resuming is byte for byte the request the
//! uninterrupted agent sent at the same point. In process (the session dropped) and with a
//! real process killed by SIGKILL on SQLite.

use crate::common;
use crate::session_driver;

use common::TempDir;
use compaction::session::{Session, SessionRequest};
use compaction::{
    EffectLedger, EffectStatus, MemoryLedger, MemoryStore, SqliteLedger, SqliteStore,
};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use session_driver::{compactor, effect_of, fresh_agent, Agent, Driver, Script, Step, Stop, World};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Small enough that a few turns compact (and page the larger reads).
const BUDGET: usize = 4_000;
const AGENT: &str = "deployer-1";

/// Effects performed in this process.
#[derive(Default)]
struct Performed(Mutex<Vec<String>>);

impl World for Performed {
    fn perform(&self, key: &str) {
        self.0.lock().unwrap().push(key.to_owned());
    }
}

/// Effects performed by any process: one line each, appended to a file.
struct PerformedFile(PathBuf);

impl World for PerformedFile {
    fn perform(&self, key: &str) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.0)
            .unwrap();
        writeln!(file, "{key}").unwrap();
        file.sync_all().unwrap();
    }
}

fn open<St, L>(store: &St, ledger: &L) -> Session<Agent>
where
    St: compaction::Store + compaction::CheckpointStore + Clone + 'static,
    L: EffectLedger + Clone + 'static,
{
    Session::builder(AGENT)
        .compactor(compactor(BUDGET))
        .store(store.clone())
        .ledger(ledger.clone())
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap_or_else(|e| panic!("the session does not open: {e}"))
}

/// What the ledger holds, as text (the effects a request's window shows).
fn ledger_text<L: EffectLedger>(ledger: &L) -> String {
    let all = compaction::block_on(ledger.load_all()).unwrap();
    serde_json::to_string(&all).unwrap()
}

/// The uninterrupted agent's requests, by the transcript length they were made at, with what
/// its ledger held then.
type Reference = HashMap<usize, (SessionRequest, String)>;

fn reference(script: &Script) -> Reference {
    let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
    let mut session = open(&store, &ledger);
    let mut driver = Driver::default();
    let world = Performed::default();
    let mut requests = HashMap::new();
    for _ in 0..10_000 {
        match driver.step(&mut session, script, &world, Stop::Never) {
            Ok(Some(Step::Request(request))) => {
                let at = session.transcript().len();
                requests.insert(at, (request, ledger_text(&ledger)));
            }
            Ok(Some(Step::Done)) => return requests,
            Ok(Some(_)) => {}
            Ok(None) => unreachable!("the reference never stops inside an effect"),
            Err(e) => panic!("the reference agent failed: {e}"),
        }
    }
    panic!("the reference agent did not finish");
}

/// Checks that `request`, the first after a resume, made with the ledger holding `ledger`, is
/// the uninterrupted agent's at the same point, when its ledger held the same: then the state,
/// the ledger and the conversation are the same, and so must be the request, byte for byte.
/// (When an effect moved in the ledger after the last checkpoint and before the kill, the
/// window shows the ledger as it is now, which the uninterrupted agent never sent at this
/// point.) Returns whether it compared.
fn assert_resent(reference: &Reference, at: usize, ledger: &str, request: &SessionRequest) -> bool {
    let Some((expected, expected_ledger)) = reference.get(&at) else {
        panic!("the uninterrupted agent made no request at transcript length {at}");
    };
    if ledger != expected_ledger {
        return false;
    }
    assert_eq!(
        request.messages(),
        expected.messages(),
        "the first request after resuming differs from the uninterrupted agent's"
    );
    assert_eq!(request.stable_prefix_len(), expected.stable_prefix_len());
    true
}

/// Every effect happened at most once, and the ledger knows each one that happened.
fn assert_once(performed: &[String], ledger: &dyn LedgerStatus) {
    let mut seen = BTreeSet::new();
    for key in performed {
        assert!(
            seen.insert(key),
            "effect `{key}` happened twice: {performed:?}"
        );
        let status = ledger.status_of(key);
        assert!(
            matches!(
                status,
                Some(EffectStatus::Committed | EffectStatus::Unknown)
            ),
            "effect `{key}` happened, and the ledger says {status:?}"
        );
    }
}

/// A ledger's status of a deploy key, whatever the backend.
trait LedgerStatus {
    fn status_of(&self, key: &str) -> Option<EffectStatus>;
}

impl<L: EffectLedger> LedgerStatus for L {
    fn status_of(&self, key: &str) -> Option<EffectStatus> {
        compaction::block_on(self.status(session_driver::SCOPE, key)).unwrap()
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .map_or(24, |n: u32| (n / 40).max(4))
}

/// Kills at random steps (between two actions, or inside a deploy that is running), each
/// followed by a resume on the same store and ledger. Every request of the killed agent is
/// compared with the uninterrupted agent's at the same point while the two have seen the same
/// ledger (see [`assert_resent`]); the first request after a resume is one of them whenever the
/// ledger did not move since the last checkpoint.
#[test]
fn a_killed_session_resumes_without_repeating_an_effect() {
    let config = ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let resent = AtomicUsize::new(0);
    let strategy = (
        any::<u64>(),
        2..7usize,
        prop::collection::btree_map(0..160usize, any::<bool>(), 1..5),
    );
    TestRunner::new(config)
        .run(&strategy, |(seed, turns, kills)| {
            let compared = killed_run(Script { seed, turns }, &kills)?;
            resent.fetch_add(compared, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    // The property was exercised: some resumed agents were compared, byte for byte.
    assert!(
        resent.load(Ordering::Relaxed) > 0,
        "no first request after a resume was compared"
    );
}

/// One killed run of `script`; returns how many first requests after a resume it compared.
fn killed_run(script: Script, kills: &BTreeMap<usize, bool>) -> Result<usize, TestCaseError> {
    let reference = reference(&script);
    let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
    let world = Performed::default();
    let mut session = open(&store, &ledger);
    let mut driver = Driver::default();
    let (mut resumed, mut diverged, mut compared) = (false, false, 0);
    for step in 0..10_000usize {
        let kill = kills.get(&step).copied();
        let stop = if kill == Some(true) {
            Stop::InsideEffect
        } else {
            Stop::Never
        };
        match driver.step(&mut session, &script, &world, stop) {
            Ok(None) => {} // stopped inside the effect: killed below
            Ok(Some(Step::Request(request))) => {
                let at = session.transcript().len();
                let same =
                    !diverged && assert_resent(&reference, at, &ledger_text(&ledger), &request);
                diverged |= !same;
                if same && resumed {
                    compared += 1;
                }
                resumed = false;
            }
            Ok(Some(Step::Done)) => break,
            Ok(Some(_)) => {}
            Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
        }
        if kill.is_some() {
            let sequence = session.sequence();
            drop(session);
            session = open(&store, &ledger);
            prop_assert_eq!(session.resumed_from(), (sequence > 0).then_some(sequence));
            driver = Driver::default();
            resumed = true;
        }
    }
    assert_once(&world.0.lock().unwrap(), &ledger);
    Ok(compared)
}

/// The user turns a session's conversation holds.
fn users(session: &Session<Agent>) -> usize {
    let messages = session.transcript().messages();
    messages
        .iter()
        .filter(|m| m.role == compaction::Role::User)
        .count()
}

/// Killed right after each user message (nothing moved in the ledger since the last
/// checkpoint): every first request after resuming is compared, and equal.
#[test]
fn a_session_killed_between_turns_resends_the_same_request() {
    let script = Script { seed: 7, turns: 6 };
    let reference = reference(&script);
    let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
    let world = Performed::default();
    let mut session = open(&store, &ledger);
    let mut driver = Driver::default();
    let (mut compared, mut resumed) = (0, false);
    let mut killed_in = BTreeSet::new();
    loop {
        match driver
            .step(&mut session, &script, &world, Stop::Never)
            .unwrap()
        {
            Some(Step::Done) => break,
            Some(Step::User) if session.sequence() > 0 && killed_in.insert(users(&session)) => {
                drop(session);
                session = open(&store, &ledger);
                driver = Driver::default();
                resumed = true;
            }
            Some(Step::Request(request)) if resumed => {
                let at = session.transcript().len();
                assert!(assert_resent(
                    &reference,
                    at,
                    &ledger_text(&ledger),
                    &request
                ));
                compared += 1;
                resumed = false;
            }
            _ => {}
        }
    }
    assert_eq!(compared, script.turns - 1);
    assert_once(&world.0.lock().unwrap(), &ledger);
}

/// The agent of the SIGKILL test's child process: the script on SQLite, printing `STEP` after
/// each action, until the script is over or the parent kills it.
#[test]
fn child_session_entry() {
    let Ok(db) = std::env::var(CHILD_DB) else {
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    let script = Script {
        seed,
        turns: CRASH_TURNS,
    };
    let store = SqliteStore::open(&db).unwrap();
    let ledger = SqliteLedger::open(&db).unwrap();
    let world = PerformedFile(performed_path(Path::new(&db)));
    let mut session = open(&store, &ledger);
    let mut driver = Driver::default();
    let mut out = std::io::stdout();
    loop {
        match driver
            .step(&mut session, &script, &world, Stop::Never)
            .unwrap()
        {
            Some(Step::Done) => {
                writeln!(out, "DONE").unwrap();
                return;
            }
            _ => {
                writeln!(out, "STEP").unwrap();
                out.flush().unwrap();
            }
        }
    }
}

const CHILD_DB: &str = "COMPACTION_SESSION_CRASH_DB";
const CHILD_SEED: &str = "COMPACTION_SESSION_CRASH_SEED";
const CRASH_TURNS: usize = 8;

fn performed_path(db: &Path) -> PathBuf {
    db.with_extension("performed")
}

/// A child process runs the agent on SQLite and is killed with SIGKILL after a random number
/// of steps, several times; each time this process resumes the agent from the database and
/// checks the first request against the uninterrupted agent's, then lets a new child go on.
#[test]
fn sigkill_resumes_without_repeating_an_effect() {
    let dir = TempDir::new("session-crash");
    let db = dir.db("agent.db");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("seed {seed}");
    let script = Script {
        seed,
        turns: CRASH_TURNS,
    };
    let reference = reference(&script);
    let exe = std::env::current_exe().unwrap();
    let (mut kills, mut diverged) = (0, false);
    for round in 0..4u64 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                common::test_name(module_path!(), "child_session_entry").as_str(),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DB, &db)
            .env(CHILD_SEED, seed.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stop_after = 3 + session_driver::mix(seed ^ round) % 25;
        let mut steps = 0;
        let mut finished = false;
        for line in stdout.lines() {
            let line = line.unwrap();
            if line.contains("DONE") {
                finished = true;
                break;
            }
            if line.contains("STEP") {
                steps += 1;
                if steps == stop_after {
                    break;
                }
            }
        }
        if !finished {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        let _ = child.wait().unwrap();
        if finished {
            break;
        }
        // Resume here, in this process: the first request is the uninterrupted agent's.
        let store = SqliteStore::open(&db).unwrap();
        let ledger = SqliteLedger::open(&db).unwrap();
        let mut session = open(&store, &ledger);
        let mut driver = Driver::default();
        let world = PerformedFile(performed_path(&db));
        for _ in 0..20 {
            match driver
                .step(&mut session, &script, &world, Stop::Never)
                .unwrap()
            {
                Some(Step::Request(request)) => {
                    // Compared while this agent has seen what the uninterrupted one saw.
                    let at = session.transcript().len();
                    diverged =
                        diverged || !assert_resent(&reference, at, &ledger_text(&ledger), &request);
                    break;
                }
                Some(Step::Done) => break,
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(kills >= 1, "no child was killed");
    let performed: Vec<String> = std::fs::read_to_string(performed_path(&db))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let ledger = SqliteLedger::open(&db).unwrap();
    assert_once(&performed, &ledger);
}
