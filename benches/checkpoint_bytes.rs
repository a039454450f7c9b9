//! What a request writes (issue 45): plays a session through the `Session` on the embedded
//! default (a `SqliteStore` and `SqliteLedger` in one file, exact o200k counts, the session's
//! defaults) and measures, per request, the bytes the process passed to write(2) (`wchar` of
//! `/proc/self/io`: SQLite's WAL frames and checkpoints included) beside the request's new
//! content (the JSON bytes of the messages pushed since the request before), the time the
//! request took, and at the end the time to resume the agent from its file and to load its
//! checkpoint.
//!
//! ```text
//! cargo run --release -p compaction-benches --example checkpoint_bytes -- SESSION BUDGET [--whole] [--seed N]
//! ```
//!
//! `SESSION`: a number of turns (the coding session of `fixtures/src/session.rs`, seed 22 or
//! `--seed N`), a family member by name (`coding-300-s2-k3`), `family` / `unseen` for every
//! member of the family or of its unseen seeds (a line each), or `floor`: what SQLite itself
//! writes for the least a request can write on the embedded default, whatever the format (one
//! transaction that stores NEW bytes of fresh content beside a 4 KiB checkpoint row, and one
//! that records the checkpoint's sequence in the ledger), for NEW in 512 B, 4 KiB, 16 KiB and
//! 64 KiB. `--whole`: checkpoints saved whole (format 3's rows, what every store wrote before
//! incremental checkpoints), through a store that does not keep parts; the baseline.
//!
//! Prints one JSON line a session: the run's totals, the bytes per request over the requests
//! of the first 300 turns and of the last 300, and a digest of every request sent
//! (`requests_sha256`): two runs sent the same requests exactly when it is the same.
//! Environment: `CHECKPOINT_BYTES_REOPEN=K` reopens the session from its file after every K
//! requests, as a restarted worker would (a resume from either format must send what an
//! uninterrupted run sends); `CHECKPOINT_BYTES_DETAIL=1` prints each request's bytes written,
//! blob bytes stored and row size to stderr; `CHECKPOINT_BYTES_KEEP=1` keeps the database file.

#[path = "whole_rows.rs"]
mod whole_rows;
#[path = "written.rs"]
mod written;

use compaction::session::Session;
use compaction::{
    block_on, Compactor, EffectLedger, Extractive, Role, SqliteLedger, SqliteStore, Tokenizer,
};
use compaction_fixtures::family::{Member, SessionKeep2, SessionKeep3};
use compaction_fixtures::session::{self, apply, CodingSession, Event, SessionState};
use serde_json::json;
use std::time::Instant;
use whole_rows::WholeRows;
use written::written;

fn compactor(budget: usize) -> compaction::CompactorBuilder {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
}

/// One request's measures.
struct Sample {
    turn: usize,
    written: u64,
    new_content: usize,
    micros: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: checkpoint_bytes SESSION BUDGET [--whole] [--seed N]";
    let name = args.first().expect(usage).clone();
    let budget: usize = args.get(1).expect(usage).parse().expect(usage);
    let whole = args.iter().any(|a| a == "--whole");
    let seed = args
        .iter()
        .position(|a| a == "--seed")
        .map(|i| args[i + 1].parse::<u64>().expect("--seed N"))
        .unwrap_or(22);
    if name == "floor" {
        return floor();
    }
    if name == "family" || name == "unseen" {
        let members = if name == "family" {
            compaction_fixtures::family::family()
        } else {
            compaction_fixtures::family::unseen()
        };
        for member in members {
            run(&member.to_string(), Some(member), budget, whole, 0);
        }
        return;
    }
    let member = name
        .parse::<usize>()
        .err()
        .map(|_| Member::parse(&name).unwrap_or_else(|| panic!("{usage}: not a member: {name}")));
    run(&name, member, budget, whole, seed);
}

/// The floor: per "request", one transaction storing `new` fresh bytes (as a part) and a 4 KiB
/// checkpoint row (the size of a manifest), and the ledger's sequence record, on one file with the store's and
/// ledger's defaults; bytes passed to write(2) per request over 500 requests.
fn floor() {
    for new in [512usize, 4096, 16 * 1024, 64 * 1024] {
        let dir =
            std::env::temp_dir().join(format!("checkpoint-floor-{}-{new}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("agent.db");
        let store = SqliteStore::open(&path).expect("opens");
        let ledger = SqliteLedger::open(&path).expect("opens");
        let checkpoints: &dyn compaction::CheckpointStore = &store;
        const REQUESTS: u64 = 500;
        let before = written();
        for i in 0..REQUESTS {
            let mut bytes = vec![b'x'; new];
            bytes[..8].copy_from_slice(&i.to_le_bytes());
            let hash = compaction::ContentHash::of(&bytes);
            let json = format!("{{\"request\":{i},\"pad\":\"{}\"}}", "p".repeat(4096));
            let sha = compaction::ContentHash::of(json.as_bytes()).to_hex();
            // The new content as a part of the row: written in the save's own transaction.
            let row = compaction::CheckpointRow::stored(json.into_bytes(), Some(sha))
                .with_parts(vec![compaction::CheckpointPart::stored(hash, bytes)]);
            block_on(checkpoints.save_row("agent", &row)).expect("a save");
            block_on(EffectLedger::advance_checkpoint(&ledger, "agent", i + 1)).expect("a record");
        }
        let per_request = (written() - before) / REQUESTS;
        println!(
            "{}",
            json!({ "floor": "put + checkpoint row + ledger sequence", "new_bytes": new,
                    "written_per_request": per_request })
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Plays one session (a member, or the coding session of `name` turns and `seed`).
fn run(name: &str, member: Option<Member>, budget: usize, whole: bool, seed: u64) {
    let (initial, events) = match (&member, name.parse::<usize>()) {
        (Some(member), _) => member.session(),
        (None, Ok(turns)) => session::session(turns, seed),
        (None, Err(_)) => unreachable!("a member or a number"),
    };
    let label = if member.is_some() {
        name.to_owned()
    } else {
        format!("{name}-turns-seed-{seed}")
    };
    match member.map_or(1, |m| m.keep_recent) {
        1 => play::<CodingSession>(&label, initial, &events, budget, whole),
        2 => play(
            &label,
            SessionKeep2::from_initial(initial),
            &events,
            budget,
            whole,
        ),
        _ => play(
            &label,
            SessionKeep3::from_initial(initial),
            &events,
            budget,
            whole,
        ),
    }
}

fn play<S: SessionState + Clone>(
    label: &str,
    initial: S,
    events: &[Event],
    budget: usize,
    whole: bool,
) {
    let dir =
        std::env::temp_dir().join(format!("checkpoint-bytes-{}-{}", std::process::id(), label));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("agent.db");
    let store = SqliteStore::open(&path).expect("opens");
    let ledger = SqliteLedger::open(&path).expect("opens");
    let open = |fresh: S| -> Session<S> {
        let builder = Session::builder("bench-agent")
            .compactor(compactor(budget))
            .ledger(ledger.clone());
        let builder = if whole {
            builder.store(WholeRows(store.clone()))
        } else {
            builder.store(store.clone())
        };
        builder.open_blocking(|| fresh).expect("opens")
    };
    let mut agent = open(initial.clone());
    let turns = events
        .iter()
        .filter(|e| matches!(e, Event::Push(m) if m.role == Role::User))
        .count();
    let (mut turn, mut new_content) = (0, 0);
    let mut requests = compaction::ContentHash::of(b"");
    let mut sent_requests = 0usize;
    // `CHECKPOINT_BYTES_REOPEN=K`: the session reopened from the file after every K requests.
    let reopen_every = std::env::var("CHECKPOINT_BYTES_REOPEN")
        .ok()
        .map(|k| k.parse::<usize>().expect("CHECKPOINT_BYTES_REOPEN=K"))
        .filter(|k| *k > 0);
    let detail = std::env::var_os("CHECKPOINT_BYTES_DETAIL").is_some();
    let mut last_blobs = 0i64;
    let mut samples = Vec::new();
    for event in events {
        match event {
            Event::Request => {
                let before = written();
                let start = Instant::now();
                let request = agent.next_request_blocking().expect("a request");
                let micros = start.elapsed().as_secs_f64() * 1e6;
                // Every request's messages, chained: two runs sent the same requests exactly
                // when their digests are equal.
                let sent = serde_json::to_vec(&request.into_messages()).expect("JSON");
                requests = compaction::ContentHash::of(
                    format!(
                        "{}{}",
                        requests.to_hex(),
                        compaction::ContentHash::of(&sent).to_hex()
                    )
                    .as_bytes(),
                );
                sent_requests += 1;
                if reopen_every.is_some_and(|k| sent_requests.is_multiple_of(k)) {
                    // The agent resumed from its checkpoint, as a restarted worker would.
                    drop(agent);
                    agent = open(initial.clone());
                }
                if detail {
                    let conn = compaction::sqlite::rusqlite::Connection::open(&path).unwrap();
                    let blobs: i64 = conn
                        .query_row("SELECT coalesce(sum(size), 0) FROM blobs", [], |r| r.get(0))
                        .unwrap();
                    let row: i64 = conn
                        .query_row("SELECT length(json) FROM checkpoints", [], |r| r.get(0))
                        .unwrap();
                    let events: i64 = conn
                        .query_row("SELECT count(*) FROM effect_events", [], |r| r.get(0))
                        .unwrap_or(0);
                    eprintln!(
                        "turn {turn}: wrote {} new {new_content} blobs+parts {} row {row} events {events}",
                        written() - before,
                        blobs - last_blobs
                    );
                    last_blobs = blobs;
                }
                samples.push(Sample {
                    turn,
                    written: written() - before,
                    new_content,
                    micros,
                });
                new_content = 0;
            }
            other => {
                if let Event::Push(message) = other {
                    if message.role == Role::User {
                        turn += 1;
                    }
                    new_content += serde_json::to_vec(message).expect("JSON").len();
                }
                apply(agent.state_mut(), other);
                if let Event::Push(message) = other {
                    if !message.tool_calls.is_empty() || message.tool_call_id.is_some() {
                        let writes = agent.state().writes();
                        block_on(EffectLedger::sync_log(&ledger, "writes", writes))
                            .expect("the ledger accepts");
                    }
                }
            }
        }
    }
    drop(agent);
    // Resume: the agent opened again from its file, three times (the least is reported with
    // the others).
    let mut resumes = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let agent = open(initial.clone());
        resumes.push(start.elapsed().as_secs_f64() * 1e3);
        drop(agent);
    }
    // Of which loading the checkpoint (the row, its parts, each checked, the whole assembled),
    // the rest being the rehydration (the transcript's history read back from its spans) and
    // the ledger.
    let mut loads = Vec::new();
    for _ in 0..3 {
        let checkpoints: &dyn compaction::CheckpointStore = &store;
        let start = Instant::now();
        let loaded = block_on(checkpoints.load::<S>("bench-agent")).expect("loads");
        loads.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(loaded.is_some());
    }
    let window = |keep: &dyn Fn(&Sample) -> bool| {
        let picked: Vec<&Sample> = samples.iter().filter(|s| keep(s)).collect();
        let n = picked.len().max(1) as f64;
        let written: u64 = picked.iter().map(|s| s.written).sum();
        let content: usize = picked.iter().map(|s| s.new_content).sum();
        json!({
            "requests": picked.len(),
            "written_per_request": (written as f64 / n).round(),
            "new_content_per_request": (content as f64 / n).round(),
        })
    };
    let mut micros: Vec<f64> = samples.iter().map(|s| s.micros).collect();
    micros.sort_by(|a, b| a.total_cmp(b));
    let median = micros.get(micros.len() / 2).copied().unwrap_or(0.0);
    let first = window(&|s| s.turn <= 300);
    let last = window(&|s| s.turn > turns.saturating_sub(300));
    let all = window(&|_| true);
    println!(
        "{}",
        json!({
            "session": label,
            "budget": budget,
            "rows": if whole { "whole" } else { "parts" },
            "turns": turns,
            "all": all,
            "first_300_turns": first,
            "last_300_turns": last,
            "median_request_ms": median / 1e3,
            "requests_sha256": requests.to_hex(),
            "reopened_every": reopen_every,
            "resume_ms": resumes,
            "load_checkpoint_ms": loads,
            "file_bytes": std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        })
    );
    if std::env::var_os("CHECKPOINT_BYTES_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("kept {}", path.display());
    }
}
