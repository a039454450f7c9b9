//! The coding agent templates (`examples/agent_anthropic.rs`, `agent_openai_chat.rs`,
//! `agent_openai_responses.rs`) as real processes, one test per wire: killed with SIGKILL while
//! a deploy runs, then again mid-loop, then resumed to the end. No deploy ever runs twice (the
//! world's own log and the ledger's history agree), the one killed mid-deploy stays `unknown`
//! and is never retried, and the run finishes every task. And two processes of the same agent
//! side by side, on one SQLite file and on PostgreSQL, killed at random: each deploy has exactly
//! one winner, and the loser says why it did not run it. The example binaries are built first
//! (`cargo build --example agent_anthropic --example agent_openai_chat --example
//! agent_openai_responses --features openai,anthropic,openai-responses`, as `.ci/run` does).

mod common;
#[cfg(feature = "postgres")]
mod pg;

use common::{KillRng, TempDir};
use compaction::{block_on, EffectLedger, EffectStatus, SqliteLedger};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SERVICES: [&str; 6] = ["billing", "search", "auth", "mailer", "reports", "gateway"];

fn example_binary(template: &str) -> PathBuf {
    common::example_binary(template, "openai,anthropic,openai-responses")
}

fn command(dir: &TempDir, template: &str, deploy_ms: u32) -> Command {
    let mut command = Command::new(example_binary(template));
    command
        .args(["--deploy-ms", &deploy_ms.to_string()])
        .arg("--db")
        .arg(dir.db("agent.db"))
        .arg("--world")
        .arg(dir.db("world.log"))
        // The loopback server, whatever the environment says.
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL");
    command
}

/// Runs the agent and SIGKILLs it as soon as it prints a line for which `kill_after` holds;
/// returns the lines it printed.
fn run_and_kill(mut command: Command, kill_after: impl Fn(&str, usize) -> bool) -> Vec<String> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        let stop = kill_after(&line, lines.len());
        lines.push(line);
        if stop {
            child.kill().unwrap(); // SIGKILL on unix
            child.wait().unwrap();
            return lines;
        }
    }
    panic!(
        "the agent ended before the kill point ({:?}):\n{}",
        child.wait(),
        lines.join("\n")
    );
}

/// How many times each service was deployed, by the world's own log.
fn world_deploys(world: &Path) -> Vec<usize> {
    let log = std::fs::read_to_string(world).unwrap_or_default();
    SERVICES
        .iter()
        .map(|s| log.lines().filter(|l| *l == format!("deploy-{s}")).count())
        .collect()
}

fn killed_twice_then_resumed(template: &str) {
    let dir = TempDir::new(&format!("agent-template-{template}"));
    // Killed while `auth` deploys: it happened (the world logged it) but was never committed.
    let first = run_and_kill(command(&dir, template, 400), |line, _| {
        line == "deploying auth ..."
    });
    assert!(first.iter().any(|l| l == "deploy search: Committed"));
    assert_eq!(world_deploys(&dir.db("world.log")), [1, 1, 1, 0, 0, 0]);

    // Resumed, and killed again a few requests later (between any two steps).
    let second = run_and_kill(command(&dir, template, 0), |line, _| {
        line.starts_with("request #") && line.contains("(compaction point)")
    });
    assert!(
        second
            .iter()
            .any(|l| l.starts_with("resumed from checkpoint #")),
        "{second:?}"
    );
    assert!(
        second.iter().any(|l| l == "deploy auth: OutcomeUnknown"),
        "the deploy killed mid-run is refused, not run again: {second:?}"
    );

    // Resumed to the end.
    let out = command(&dir, template, 0).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("resumed from checkpoint #"), "{stdout}");
    assert!(stdout.contains("all 6 tasks done"), "{stdout}");

    // Run again once finished: its last reply is durable (`Session::finish`), so it asks the
    // model nothing.
    let again = command(&dir, template, 0).output().unwrap();
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(again.contains("all 6 tasks done"), "{again}");
    assert!(
        !again.contains("request #"),
        "a finished agent asked again: {again}"
    );

    // No deploy ran twice: the world logged each at most once, and the ledger claimed each
    // once (one `begin`); a committed deploy happened exactly once.
    let ledger = SqliteLedger::open(dir.db("agent.db")).unwrap();
    let world = world_deploys(&dir.db("world.log"));
    for (service, ran) in SERVICES.iter().zip(world) {
        let key = format!("deploy-{service}");
        let history = block_on(EffectLedger::history(&ledger, "deploys", &key)).unwrap();
        let begins = history.iter().filter(|t| t.op == "begin").count();
        let status = block_on(EffectLedger::status(&ledger, "deploys", &key)).unwrap();
        assert!(
            ran <= 1 && begins == 1,
            "{key}: ran {ran}, claimed {begins}"
        );
        match status {
            Some(EffectStatus::Committed) => assert_eq!(ran, 1, "{key}"),
            Some(EffectStatus::Unknown) => {}
            other => panic!("{key}: {other:?}"),
        }
    }
    let auth = block_on(EffectLedger::status(&ledger, "deploys", "deploy-auth")).unwrap();
    assert_eq!(auth, Some(EffectStatus::Unknown), "left for an operator");
}

#[test]
fn the_openai_chat_agent_killed_mid_deploy_resumes_and_never_deploys_twice() {
    killed_twice_then_resumed("agent_openai_chat");
}

#[test]
fn the_openai_responses_agent_killed_mid_deploy_resumes_and_never_deploys_twice() {
    killed_twice_then_resumed("agent_openai_responses");
}

#[test]
fn the_anthropic_agent_killed_mid_deploy_resumes_and_never_deploys_twice() {
    killed_twice_then_resumed("agent_anthropic");
}

/// What one process of a race printed, and how it ended.
struct Run {
    lines: Vec<String>,
    stderr: String,
    killed: bool,
    success: bool,
}

/// Runs `command`, SIGKILLing it as soon as the lines it printed so far satisfy `kill` (on its
/// own thread, so two run side by side).
fn run_in_thread(
    mut command: Command,
    kill: impl Fn(&[String]) -> bool + Send + 'static,
) -> std::thread::JoinHandle<Run> {
    std::thread::spawn(move || {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        let mut killed = false;
        for line in stdout.lines() {
            lines.push(line.unwrap());
            if kill(&lines) {
                child.kill().unwrap();
                killed = true;
                break;
            }
        }
        let out = child.wait_with_output().unwrap();
        Run {
            lines,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            killed,
            success: out.status.success(),
        }
    })
}

/// The first round makes the race certain, not likely (a seed once let one process finish
/// every task while the other was killed before its first deploy): `a` is held inside its
/// first deploy, `billing` (claimed; the deploy takes ten minutes, far longer than `b` needs),
/// `b` starts only then and must meet that claim, never settled while it runs; `b` is killed a
/// random number of lines after it says what became of `billing` (or ends), and `a` after `b`
/// ends.
fn held_claim_round(command: impl Fn(u32) -> Command, rng: &mut KillRng) -> [Run; 2] {
    let mut a = command(600_000)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut a_lines = Vec::new();
    for line in BufReader::new(a.stdout.take().unwrap()).lines() {
        a_lines.push(line.unwrap());
        if a_lines.last().unwrap() == "deploying billing ..." {
            break;
        }
    }
    assert_eq!(
        a_lines.last().map(String::as_str),
        Some("deploying billing ..."),
        "the first process ended before its first deploy"
    );
    let after = rng.below(8) as usize;
    let b = run_in_thread(command(150), move |lines| {
        let said = lines.iter().position(|l| l.starts_with("deploy billing: "));
        said.is_some_and(|at| lines.len() > at + after)
    })
    .join();
    // Killed before `b`'s outcome is unwrapped, so a failing `b` leaves no process behind.
    a.kill().unwrap();
    let b = b.unwrap();
    let out = a.wait_with_output().unwrap();
    let a = Run {
        lines: a_lines,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        killed: true,
        success: false,
    };
    [a, b]
}

/// Two sessions of the same agent in two processes on one database, side by side: first one
/// held inside a deploy while the other runs (`held_claim_round`), then rounds of both killed
/// at random points, then both run to the end: each deploy is claimed by exactly
/// one of them (one `begin` in the ledger's history) and ran at most once (the world's log),
/// and every time a session does not run a deploy, what it printed says why (the ledger shows
/// it committed, or claimed and never settled); a process that fails says why on stderr.
fn two_sessions_race<L: EffectLedger>(
    template: &str,
    dir: &TempDir,
    db: &str,
    open_ledger: impl FnOnce() -> L,
) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut rng = KillRng(seed);
    let command = |deploy_ms: u32| {
        let mut command = Command::new(example_binary(template));
        command
            .args(["--deploy-ms", &deploy_ms.to_string()])
            .args(["--db", db])
            .arg("--world")
            .arg(dir.db("world.log"))
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_BASE_URL");
        command
    };
    let mut runs = Vec::from(held_claim_round(command, &mut rng));
    assert!(
        runs[1]
            .lines
            .iter()
            .any(|l| l == "deploy billing: OutcomeUnknown"),
        "seed {seed}: the second session must meet the first's claim on billing and not run it: \
         {:?} {}",
        runs[1].lines,
        runs[1].stderr
    );
    for round in 1..6 {
        // The last round runs both to the end; before it, each is killed at a random line.
        let kill = |rng: &mut KillRng| {
            let at = (round < 5).then(|| 3 + rng.below(40) as usize);
            move |lines: &[String]| Some(lines.len()) == at
        };
        let a = run_in_thread(command(150), kill(&mut rng));
        let b = run_in_thread(command(150), kill(&mut rng));
        runs.push(a.join().unwrap());
        runs.push(b.join().unwrap());
    }
    let last = &runs[runs.len() - 2..];
    assert!(
        last.iter()
            .any(|r| r.lines.iter().any(|l| l.contains("all 6 tasks done"))),
        "seed {seed}: neither finished: {:?}",
        last.iter()
            .map(|r| (&r.lines, &r.stderr))
            .collect::<Vec<_>>()
    );
    for run in &runs {
        assert!(
            run.killed || run.success || !run.stderr.trim().is_empty(),
            "seed {seed}: a process failed without saying why: {:?}",
            run.lines
        );
        for line in &run.lines {
            let Some(outcome) = line
                .strip_prefix("deploy ")
                .and_then(|l| l.split_once(": "))
            else {
                continue;
            };
            assert!(
                ["Committed", "AlreadyCommitted", "OutcomeUnknown"].contains(&outcome.1),
                "seed {seed}: {line}"
            );
        }
    }
    // What every round together saw (printed for a rerun): deploys refused because the other
    // had claimed them, and sessions that lost at their checkpoint (the other saved a newer one
    // first: `CheckpointRollback`) and stopped saying so.
    let refused = runs
        .iter()
        .flat_map(|r| &r.lines)
        .filter(|l| l.ends_with(": AlreadyCommitted") || l.ends_with(": OutcomeUnknown"))
        .count();
    for run in &runs {
        let end = if run.killed {
            "killed".to_owned()
        } else if run.success {
            "finished".to_owned()
        } else {
            format!("failed: {}", run.stderr.trim())
        };
        println!("{} lines, {end}", run.lines.len());
    }
    let failed = runs.iter().filter(|r| !r.killed && !r.success).count();
    let kills = runs.iter().filter(|r| r.killed).count();
    println!("{kills} kills, {refused} deploys refused, {failed} sessions stopped");
    let ledger = open_ledger();
    let world = world_deploys(&dir.db("world.log"));
    for (service, ran) in SERVICES.iter().zip(world) {
        let key = format!("deploy-{service}");
        let history = block_on(ledger.history("deploys", &key)).unwrap();
        let begins = history.iter().filter(|t| t.op == "begin").count();
        let status = block_on(ledger.status("deploys", &key)).unwrap();
        assert!(
            ran <= 1 && begins == 1,
            "seed {seed}: {key}: ran {ran}, claimed {begins}"
        );
        let committed = runs
            .iter()
            .flat_map(|r| &r.lines)
            .filter(|l| **l == format!("deploy {service}: Committed"))
            .count();
        match status {
            Some(EffectStatus::Committed) => {
                assert_eq!(ran, 1, "seed {seed}: {key}");
                assert!(committed <= 1, "seed {seed}: {key} committed twice");
            }
            Some(EffectStatus::Unknown) => assert_eq!(committed, 0, "seed {seed}: {key}"),
            other => panic!("seed {seed}: {key}: {other:?}"),
        }
    }
}

#[test]
fn two_sessions_of_one_agent_on_one_sqlite_file_never_deploy_twice() {
    let dir = TempDir::new("session-race-sqlite");
    let db = dir.db("race.db");
    two_sessions_race("agent_openai_chat", &dir, &db.display().to_string(), || {
        SqliteLedger::open(&db).unwrap()
    });
}

/// The same race on PostgreSQL (the test's own throwaway server): both processes keep their
/// checkpoints and the ledger in one namespace of one database (the Anthropic template, built
/// with the `postgres` feature: `.ci/run` builds it with every feature).
#[cfg(feature = "postgres")]
#[test]
fn two_sessions_of_one_agent_on_postgres_never_deploy_twice() {
    let db = pg::harness::TestDb::new("session_race");
    let dir = TempDir::new("session-race-pg");
    two_sessions_race("agent_anthropic", &dir, db.url(), || {
        block_on(compaction::PgLedger::connect(db.url(), "coding-agent")).unwrap()
    });
}
