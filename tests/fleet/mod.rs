//! A fleet of real worker processes running sessions of one agent on one backend, killed with
//! SIGKILL at random (shared by `tests/stores/fleet_kills.rs` for SQLite and
//! `tests/pg_processes.rs` for PostgreSQL). Two workers run at once, so each open takes the
//! agent over from a live one (the everyday case: a restarted worker while the old one runs).
//!
//! A worker loops: push a user message, `next_request` (on `Ok` it says `DURABLE <text>`),
//! reply with a deploy call keyed by the turn, run it under the ledger (the run appends
//! `RAN <key>` to the world file). Superseded, it opens the agent again. After the kills the
//! parent checks, from ground truth: no deploy ran twice (the world file), every message a
//! worker said was durable is in the agent's final checkpoint, and no worker failed otherwise
//! than by being superseded.
#![allow(dead_code)]

use crate::common::KillRng;
use compaction::session::{EffectCall, Session, SessionError};
use compaction::{
    Compactable, Compactor, Effect, EffectLog, Message, SealKey, ToolCall, Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The agent every worker runs.
pub const AGENT: &str = "fleet-agent";

/// Its state: a rule, the conversation, the deploys.
#[derive(Compactable, Serialize, Deserialize, Default, Debug)]
pub struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    pub chat: Transcript,
    #[effect(idempotent = false)]
    deploys: EffectLog,
}

fn fresh() -> Agent {
    Agent {
        rules: vec!["never deploy a turn twice".into()],
        ..Agent::default()
    }
}

fn effect_of(call: &ToolCall) -> Option<EffectCall> {
    let n = call.arguments.value().ok()?.get("n")?.as_u64()?;
    let key = format!("deploy-{n}");
    Some(EffectCall::new(
        "deploys",
        Effect::new("deploy", "api", key),
    ))
}

/// Opens the agent on `(store, ledger)` as every worker and the final check do.
pub fn open<T, L>(store: T, ledger: L) -> Result<Session<Agent>, SessionError>
where
    T: compaction::Store + compaction::CheckpointStore + Clone + 'static,
    L: compaction::EffectLedger + 'static,
{
    let key = SealKey::new("fleet", [9u8; 32]).expect("a 32-byte key");
    Session::builder(AGENT)
        .compactor(Compactor::builder().budget(60_000).seal_key(key))
        .store(store)
        .ledger(ledger)
        .effect_calls(effect_of)
        .open_blocking(fresh)
}

fn say(line: String) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The worker's loop (never returns: the parent kills it). `open` opens the agent on new
/// handles of the backend; `world` is the file every real run of a deploy appends to.
pub fn worker(open: impl Fn() -> Result<Session<Agent>, SessionError>, world: &Path) {
    let pid = std::process::id();
    let reopen = || loop {
        match open() {
            Ok(session) => return session,
            Err(e) => {
                say(format!("OPEN-RETRY {e}"));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    let mut session = reopen();
    say("READY".into());
    let failed = |session: &mut Session<Agent>, error: SessionError| {
        if !matches!(error, SessionError::Superseded { .. }) {
            say(format!("FAILED {error}"));
        }
        *session = reopen();
    };
    for i in 0.. {
        let text = format!("w{pid}-m{i}");
        session.push(Message::user(&text));
        if let Err(e) = session.next_request_blocking() {
            failed(&mut session, e);
            continue;
        }
        say(format!("DURABLE {text}"));
        let turn = session
            .transcript()
            .messages()
            .iter()
            .filter(|m| m.role == compaction::Role::User)
            .count();
        let call = ToolCall::new(format!("call-{pid}-{i}"), "deploy", json!({ "n": turn }));
        if let Err(e) = session.push_response(Message::assistant_with_tools("", vec![call.clone()]))
        {
            failed(&mut session, e);
            continue;
        }
        let key = format!("deploy-{turn}");
        let ran = session.run_effect_blocking(&call, || async {
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(world)
                .map_err(|e| e.to_string())?;
            writeln!(file, "RAN {key} {pid}").map_err(|e| e.to_string())?;
            std::thread::sleep(Duration::from_millis(5));
            Ok::<_, String>(format!("deployed turn {turn}"))
        });
        if let Err(e) = ran {
            failed(&mut session, e);
        }
    }
}

/// What the workers said, over the whole run.
#[derive(Default)]
pub struct Said {
    pub durable: Vec<String>,
    pub failed: Vec<String>,
    pub kills: usize,
}

/// Keeps two workers (`spawn` starts one) alive for `kills` rounds, killing one at random
/// every 30 to 300 ms and starting another; then kills the rest and returns what they said.
pub fn run_fleet(spawn: impl Fn() -> Child, kills: usize) -> Said {
    let mut rng = KillRng::from_clock();
    println!("fleet seed {}", rng.0);
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut readers = Vec::new();
    let start = |readers: &mut Vec<_>| {
        let mut child = spawn();
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::clone(&lines);
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        }));
        child
    };
    let mut workers: Vec<Child> = (0..2).map(|_| start(&mut readers)).collect();
    for _ in 0..kills {
        std::thread::sleep(Duration::from_millis(30 + rng.next() % 270));
        let victim = (rng.next() % 2) as usize;
        let mut dead = std::mem::replace(&mut workers[victim], start(&mut readers));
        dead.kill().unwrap(); // SIGKILL
        dead.wait().unwrap();
    }
    for mut worker in workers {
        worker.kill().unwrap();
        worker.wait().unwrap();
    }
    for reader in readers {
        reader.join().unwrap();
    }
    let mut said = Said {
        kills,
        ..Said::default()
    };
    for line in lines.lock().unwrap().iter() {
        // The test harness prefixes a child's first line with its own.
        let line = line.rsplit("... ").next().unwrap_or(line);
        if let Some(text) = line.strip_prefix("DURABLE ") {
            said.durable.push(text.to_owned());
        } else if let Some(error) = line.strip_prefix("FAILED ") {
            said.failed.push(error.to_owned());
        }
    }
    said
}

/// The checks: no deploy ran twice, every durable message is in `final_session`'s
/// transcript, no worker failed but by being superseded, and the fleet made progress.
pub fn check(said: &Said, final_session: &Session<Agent>, world: &Path) {
    let ran = std::fs::read_to_string(world).unwrap_or_default();
    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
    for line in ran.lines() {
        let key = line.split(' ').nth(1).unwrap_or(line);
        *runs.entry(key).or_default() += 1;
    }
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "deploys that ran twice: {twice:?}");
    let held: std::collections::BTreeSet<&str> = final_session
        .transcript()
        .messages()
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    let lost: Vec<&String> = said
        .durable
        .iter()
        .filter(|t| !held.contains(t.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} durable messages are not in the final checkpoint: {lost:?}",
        lost.len(),
        said.durable.len()
    );
    assert!(said.failed.is_empty(), "workers failed: {:?}", said.failed);
    // Not vacuous: the workers got work done between the kills (a slow machine does less).
    assert!(
        said.durable.len() >= 3,
        "the fleet made {} durable requests over {} kills",
        said.durable.len(),
        said.kills
    );
    assert!(!runs.is_empty(), "no deploy ran");
    println!(
        "{} kills: {} durable requests, {} deploys run once each, {} messages in the checkpoint",
        said.kills,
        said.durable.len(),
        runs.len(),
        held.len()
    );
}

/// A worker process of this test binary: `entry` is the child entry test's full name, `env`
/// what tells it the backend.
pub fn spawn_worker(entry: &str, env: &[(&str, &str)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", entry, "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.spawn().unwrap()
}
