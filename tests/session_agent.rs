//! The coding agent template (`examples/session_agent.rs`) as a real process, on both wires:
//! killed with SIGKILL while a deploy runs, then again mid-loop, then resumed to the end. No
//! deploy ever runs twice (the world's own log and the ledger's history agree), the one killed
//! mid-deploy stays `unknown` and is never retried, and the run finishes. The example binary is
//! built first (`cargo build --example session_agent --features openai,anthropic`, as `.ci/run`
//! does).

mod common;

use common::TempDir;
use compaction::{block_on, EffectLedger, EffectStatus, SqliteLedger};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SERVICES: [&str; 6] = ["billing", "search", "auth", "mailer", "reports", "gateway"];

fn example_binary() -> PathBuf {
    common::example_binary("session_agent", "openai,anthropic")
}

fn command(dir: &TempDir, wire: &str, deploy_ms: u32) -> Command {
    let mut command = Command::new(example_binary());
    command
        .args(["--wire", wire, "--deploy-ms", &deploy_ms.to_string()])
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

fn killed_twice_then_resumed(wire: &str) {
    let dir = TempDir::new(&format!("session-agent-{wire}"));
    // Killed while `auth` deploys: it happened (the world logged it) but was never committed.
    let first = run_and_kill(command(&dir, wire, 400), |line, _| {
        line == "deploying auth ..."
    });
    assert!(first.iter().any(|l| l == "deploy search: Committed"));
    assert_eq!(world_deploys(&dir.db("world.log")), [1, 1, 1, 0, 0, 0]);

    // Resumed, and killed again a few requests later (between any two steps).
    let second = run_and_kill(command(&dir, wire, 0), |line, _| {
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
    let out = command(&dir, wire, 0).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("resumed from checkpoint #"), "{stdout}");
    assert!(stdout.contains("all 6 tasks done"), "{stdout}");

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
fn the_openai_agent_killed_mid_deploy_resumes_and_never_deploys_twice() {
    killed_twice_then_resumed("openai");
}

#[test]
fn the_anthropic_agent_killed_mid_deploy_resumes_and_never_deploys_twice() {
    killed_twice_then_resumed("anthropic");
}
