//! A fleet on one server (issue 45): N agents, each playing a family session through the
//! `Session`, spread over 2 worker processes (each a pool of connections and T threads that
//! take the agents' requests in turn), on one PostgreSQL the bench starts itself (the tests'
//! harness: 127.0.0.1, the server's default durability, `fsync` and `synchronous_commit` on),
//! and the same on SQLite (a file per agent, the store's and ledger's defaults).
//!
//! Reported per run: requests/s over the run's wall time, p50/p99 time per request (the
//! `next_request` a worker waited for: compaction, checkpoint save, ledger record), bytes
//! written per request (PostgreSQL: `wal_bytes` of `pg_stat_wal`; SQLite: what the workers
//! passed to write(2)), server CPU per request (PostgreSQL: the postmaster's and its
//! children's user and system time), beside the ceiling measured in the same run: the rate of
//! single-row upsert transactions (`Store::put` of a fresh 16 KiB blob, the size class of a
//! request's manifest and new parts) at the same concurrency and durability. `--rows whole`
//! runs the previous format (whole checkpoint rows, as before format 4) for the before/after.
//!
//! ```text
//! cargo run --release -p compaction-benches --features postgres --example fleet -- \
//!     [--agents 10,100,1000] [--requests R] [--backend postgres|sqlite] [--rows parts|whole] \
//!     [--threads T] [--budget B] [--ceiling-seconds S]
//! ```

#[path = "../tests/pg/harness.rs"]
mod harness;

#[path = "whole_rows.rs"]
mod whole_rows;
#[path = "written.rs"]
mod written;

use compaction::postgres::PgOptions;
use compaction::session::Session;
use compaction::{
    block_on, Compactor, ContentHash, EffectLedger, Extractive, PgLedger, PgStore, SqliteLedger,
    SqliteStore, Store, Tokenizer,
};
use compaction_fixtures::family::{family, Member};
use compaction_fixtures::session::{apply, CodingSession, Event, SessionState};
use serde_json::json;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use whole_rows::WholeRows;
use written::written;

/// Worker processes per run.
const WORKERS: usize = 2;

/// The ceiling's row: the size class of a request's manifest and new parts.
const CEILING_ROW: usize = 16 * 1024;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .map(|i| args.get(i + 1).expect(name).clone())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        return worker(&args);
    }
    // The server's default durability (`fsync`, `full_page_writes`), not the tests' cluster's
    // (set before the cluster starts, on this one thread).
    std::env::set_var("COMPACTION_PG_DURABLE", "1");
    let agents: Vec<usize> = arg(&args, "--agents")
        .unwrap_or_else(|| "10,100,1000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("--agents N,M"))
        .collect();
    let requests: usize = arg(&args, "--requests").map_or(30, |n| n.parse().expect("R"));
    let threads: usize = arg(&args, "--threads").map_or(8, |n| n.parse().expect("T"));
    let budget: usize = arg(&args, "--budget").map_or(64_000, |n| n.parse().expect("B"));
    let ceiling_seconds: u64 = arg(&args, "--ceiling-seconds").map_or(5, |n| n.parse().expect("S"));
    let backends =
        arg(&args, "--backend").map_or(vec!["postgres".to_owned(), "sqlite".into()], |b| vec![b]);
    let rows = arg(&args, "--rows").map_or(vec!["parts".to_owned(), "whole".into()], |r| vec![r]);
    for backend in &backends {
        for &n in &agents {
            for mode in &rows {
                let run = Run {
                    backend,
                    agents: n,
                    requests,
                    threads,
                    budget,
                    rows: mode,
                };
                println!("{}", run.play());
            }
        }
        println!("{}", ceiling(backend, threads * WORKERS, ceiling_seconds));
    }
}

struct Run<'a> {
    backend: &'a str,
    agents: usize,
    requests: usize,
    threads: usize,
    budget: usize,
    rows: &'a str,
}

impl Run<'_> {
    /// Starts the workers on a fresh database (or directory), waits for them, and reports.
    fn play(&self) -> serde_json::Value {
        let (target, db) = match self.backend {
            "postgres" => {
                let db = harness::TestDb::new("fleet");
                (db.url().to_owned(), Some(db))
            }
            _ => {
                let dir = std::env::temp_dir().join(format!(
                    "fleet-{}-{}-{}",
                    std::process::id(),
                    self.agents,
                    self.rows
                ));
                std::fs::create_dir_all(&dir).expect("a directory");
                (dir.to_string_lossy().into_owned(), None)
            }
        };
        let admin = db.as_ref().map(|_| harness::cluster().url("postgres"));
        let wal = || admin.as_deref().map(wal_bytes);
        let (wal_before, cpu_before) = (wal(), db.as_ref().map(|_| server_cpu()));
        let start = Instant::now();
        let per_worker = self.agents.div_ceil(WORKERS);
        let children: Vec<_> = (0..WORKERS)
            .map(|w| {
                let first = w * per_worker;
                let count = per_worker.min(self.agents.saturating_sub(first));
                Command::new(std::env::current_exe().expect("this binary"))
                    .args(["--worker", self.backend, &target, self.rows])
                    .args(
                        [first, count, self.requests, self.threads, self.budget]
                            .map(|n| n.to_string()),
                    )
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("a worker starts")
            })
            .collect();
        let mut times: Vec<f64> = Vec::new();
        let (mut written, mut client_cpu) = (0u64, 0.0);
        for child in children {
            let out = child.wait_with_output().expect("a worker ends");
            assert!(out.status.success(), "a worker failed");
            let report: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("a worker's report");
            written += report["written"].as_u64().unwrap_or(0);
            client_cpu += report["cpu_s"].as_f64().unwrap_or(0.0);
            times.extend(
                report["ms"]
                    .as_array()
                    .expect("times")
                    .iter()
                    .filter_map(|t| t.as_f64()),
            );
        }
        let seconds = start.elapsed().as_secs_f64();
        // Let the server reap the workers' backends, whose time then counts in the postmaster's.
        std::thread::sleep(Duration::from_millis(300));
        let requests = times.len().max(1) as f64;
        times.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| {
            times
                .get(((times.len() as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or(0.0)
        };
        let wal_per_request = match (wal_before, wal()) {
            (Some(before), Some(after)) => Some(((after - before) as f64 / requests).round()),
            _ => None,
        };
        let cpu_per_request_ms = cpu_before.map(|before| (server_cpu() - before) * 1e3 / requests);
        if let Some(db) = db {
            drop(db);
        } else {
            let _ = std::fs::remove_dir_all(&target);
        }
        json!({
            "backend": self.backend,
            "rows": self.rows,
            "agents": self.agents,
            "requests": times.len(),
            "requests_per_s": (requests / seconds * 10.0).round() / 10.0,
            "p50_ms": at(0.5),
            "p99_ms": at(0.99),
            "written_per_request": match wal_per_request {
                Some(wal) => json!(wal),
                None => json!((written as f64 / requests).round()),
            },
            "server_cpu_ms_per_request": cpu_per_request_ms,
            "client_cpu_ms_per_request": client_cpu * 1e3 / requests,
            // What this machine's cores allow at that CPU per request, clients and server
            // sharing them: the floor under requests/s here.
            "cpu_bound_requests_per_s": cores() / ((client_cpu * 1e3 / requests
                + cpu_per_request_ms.unwrap_or(0.0)) / 1e3),
            "seconds": seconds,
        })
    }
}

/// The cluster's WAL bytes so far.
fn wal_bytes(url: &str) -> u64 {
    harness::scalar(url, "SELECT wal_bytes FROM pg_stat_wal")
        .and_then(|v| v.parse::<f64>().ok())
        .expect("pg_stat_wal (PostgreSQL 14 or later)") as u64
}

/// CPU seconds the server used so far: the postmaster's own and reaped children's, and its live
/// children's.
fn server_cpu() -> f64 {
    let pid_file = harness::cluster().dir().join("data/postmaster.pid");
    let postmaster: u32 = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|s| s.lines().next()?.trim().parse().ok())
        .expect("the postmaster's pid");
    let ticks = 100.0; // USER_HZ on Linux
    let stat = |pid: u32| -> Option<Vec<u64>> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command's closing parenthesis: state is field 3.
        let rest = &text[text.rfind(')')? + 2..];
        Some(
            rest.split(' ')
                .filter_map(|f| f.parse::<u64>().ok())
                .collect(),
        )
    };
    let mut total = 0u64;
    if let Some(f) = stat(postmaster) {
        // ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
        total += f[10] + f[11] + f[12] + f[13];
    }
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(f) = stat(pid) {
            if f.first() == Some(&u64::from(postmaster)) {
                total += f[10] + f[11];
            }
        }
    }
    total as f64 / ticks
}

/// The ceiling: fresh 16 KiB single-row upserts, `concurrency` threads, `seconds` long.
fn ceiling(backend: &str, concurrency: usize, seconds: u64) -> serde_json::Value {
    let db = (backend == "postgres").then(|| harness::TestDb::new("ceiling"));
    let dir = std::env::temp_dir().join(format!("fleet-ceiling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let pg = db.as_ref().map(|db| {
        let options = PgOptions::default().max_connections(concurrency);
        block_on(PgStore::connect_with(db.url(), "ceiling", &options)).expect("connects")
    });
    let done = Arc::new(Mutex::new(0usize));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let threads: Vec<_> = (0..concurrency)
        .map(|t| {
            let pg = pg.clone();
            let done = Arc::clone(&done);
            let path = dir.join(format!("ceiling-{t}.db"));
            std::thread::spawn(move || {
                let sqlite = pg
                    .is_none()
                    .then(|| SqliteStore::open(&path).expect("opens"));
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let mut bytes = vec![0u8; CEILING_ROW];
                    bytes[..8].copy_from_slice(&n.to_le_bytes());
                    bytes[8..16].copy_from_slice(&(t as u64).to_le_bytes());
                    let hash = ContentHash::of(&bytes);
                    match (&pg, &sqlite) {
                        (Some(pg), _) => block_on(pg.put(&hash, &bytes)).expect("a put"),
                        (_, Some(sqlite)) => block_on(sqlite.put(&hash, &bytes)).expect("a put"),
                        _ => unreachable!(),
                    }
                    n += 1;
                }
                *done.lock().expect("not poisoned") += n as usize;
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a ceiling thread");
    }
    let seconds = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    let done = *done.lock().expect("not poisoned");
    json!({
        "backend": backend,
        "ceiling": "single-row upsert transactions of 16 KiB",
        "concurrency": concurrency,
        "per_s": (done as f64 / seconds * 10.0).round() / 10.0,
    })
}

/// This machine's cores.
fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

/// CPU seconds (user and system) this process has used so far.
fn own_cpu() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat (Linux)");
    let rest = &text[text.rfind(')').expect("a command") + 2..];
    let fields: Vec<u64> = rest.split(' ').filter_map(|f| f.parse().ok()).collect();
    (fields[10] + fields[11]) as f64 / 100.0
}

/// What an agent calls after a tool message: the state's write effects synced to its ledger.
type SyncWrites = Box<dyn Fn(&CodingSession) + Send>;

/// One agent of a worker: its session and the events left to play.
struct Agent {
    session: Session<CodingSession>,
    ledger: SyncWrites,
    events: std::vec::IntoIter<Event>,
    left: usize,
}

/// A worker process: `--worker BACKEND TARGET ROWS FIRST COUNT REQUESTS THREADS BUDGET`.
fn worker(args: &[String]) {
    let (backend, target, rows) = (&args[1], &args[2], &args[3]);
    let n = |i: usize| args[i].parse::<usize>().expect("a number");
    let (first, count, requests, threads, budget) = (n(4), n(5), n(6), n(7), n(8));
    let members: Vec<Member> = family();
    let sessions: Vec<(CodingSession, Vec<Event>)> = members
        .iter()
        .map(|m| {
            let (initial, events) = m.session();
            (initial, truncate(events, requests))
        })
        .collect();
    let options = PgOptions::default().max_connections(threads);
    let pg = (backend == "postgres").then(|| {
        (
            block_on(PgStore::connect_with(target, "fleet", &options)).expect("connects"),
            block_on(PgLedger::connect_with(target, "fleet", &options)).expect("connects"),
        )
    });
    let mut agents: Vec<Agent> = (first..first + count)
        .map(|i| {
            let (initial, events) = sessions[i % sessions.len()].clone();
            let id = format!("agent-{i}");
            let builder = Session::builder(id).compactor(
                Compactor::builder()
                    .budget(budget)
                    .token_counter(Tokenizer::O200kBase)
                    .summarizer(Extractive),
            );
            let (builder, ledger): (_, SyncWrites) = match &pg {
                Some((store, ledger)) => {
                    let builder = builder.ledger(ledger.clone());
                    let builder = if rows == "whole" {
                        builder.store(WholeRows(store.clone()))
                    } else {
                        builder.store(store.clone())
                    };
                    let ledger = ledger.clone();
                    (builder, Box::new(move |s: &CodingSession| sync(&ledger, s)))
                }
                None => {
                    let path = std::path::Path::new(target).join(format!("agent-{i}.db"));
                    let store = SqliteStore::open(&path).expect("opens");
                    let ledger = SqliteLedger::open(&path).expect("opens");
                    let builder = builder.ledger(ledger.clone());
                    let builder = if rows == "whole" {
                        builder.store(WholeRows(store))
                    } else {
                        builder.store(store)
                    };
                    (builder, Box::new(move |s: &CodingSession| sync(&ledger, s)))
                }
            };
            Agent {
                session: builder.open_blocking(|| initial).expect("opens"),
                ledger,
                events: events.into_iter(),
                left: requests,
            }
        })
        .collect();
    // What the requests write and cost, from here (the agents are open).
    let before = written();
    let cpu_before = own_cpu();
    // Each thread takes its share of the agents and plays their requests in turn.
    let mut shares: Vec<Vec<Agent>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, agent) in agents.drain(..).enumerate() {
        shares[i % threads].push(agent);
    }
    let times = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = shares
        .into_iter()
        .map(|mut share| {
            let times = Arc::clone(&times);
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                while share.iter().any(|a| a.left > 0) {
                    for agent in share.iter_mut().filter(|a| a.left > 0) {
                        mine.extend(step(agent));
                    }
                }
                times.lock().expect("not poisoned").extend(mine);
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("a worker thread");
    }
    let times = times.lock().expect("not poisoned").clone();
    let report =
        json!({ "written": written() - before, "cpu_s": own_cpu() - cpu_before, "ms": times });
    println!("{report}");
}

/// Plays `agent`'s events up to its next request and sends it; the request's time in ms.
fn step(agent: &mut Agent) -> Option<f64> {
    for event in agent.events.by_ref() {
        if event == Event::Request {
            let start = Instant::now();
            agent.session.next_request_blocking().expect("a request");
            agent.left -= 1;
            return Some(start.elapsed().as_secs_f64() * 1e3);
        }
        let effect = matches!(&event, Event::Push(m) if !m.tool_calls.is_empty() || m.tool_call_id.is_some());
        apply(agent.session.state_mut(), &event);
        if effect {
            (agent.ledger)(agent.session.state());
        }
    }
    agent.left = 0;
    None
}

fn sync<L: EffectLedger>(ledger: &L, state: &CodingSession) {
    block_on(ledger.sync_log("writes", state.writes())).expect("the ledger accepts");
}

/// The events up to the `requests`th request.
fn truncate(events: Vec<Event>, requests: usize) -> Vec<Event> {
    let mut seen = 0;
    let mut out = Vec::new();
    for event in events {
        let request = event == Event::Request;
        out.push(event);
        if request {
            seen += 1;
            if seen == requests {
                break;
            }
        }
    }
    out
}
