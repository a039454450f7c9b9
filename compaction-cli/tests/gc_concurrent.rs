//! `compaction gc` while a second process saves checkpoints in a loop loses nothing: every save
//! succeeds, every saved checkpoint rehydrates, and `verify` finds nothing wrong afterwards.
//!
//! The writer re-stores content that the database already holds as old, unreferenced blobs
//! (left over, as if from an earlier run): exactly the blobs a gc is allowed to remove until the
//! writer's `put` refreshes them and its checkpoint refers to them.
//!
//! A plain `main` (`harness = false`): the same binary is the writer when started with
//! `--writer DB ITERATIONS`.

mod common;

use common::*;
use compaction::{
    block_on, Compacted, Compactor, FnReacquire, MemoryStore, SqliteStore, Store, Tokenizer,
};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ITERATIONS: u32 = 12;
const AGENTS: u32 = 3;

fn writer_compactor<S: Store + Clone + 'static>(store: &S) -> Compactor {
    compactor(store, SPILLING_BUDGET, Tokenizer::O200kBase)
}

fn agent(i: u32) -> String {
    format!("writer-{}", i % AGENTS)
}

fn reacquire() -> impl compaction::Reacquire {
    FnReacquire::new(|_field: &str, _pointer: &str| Ok(serde_json::Value::String(String::new())))
}

/// The second process: compact, save, read back and rehydrate, `ITERATIONS` times.
fn writer(path: &str, iterations: u32) {
    let store = SqliteStore::open(path).unwrap();
    let compactor = writer_compactor(&store);
    for i in 0..iterations {
        let compacted = compactor.compact_blocking(&state(100 + i)).unwrap();
        if let Err(e) = store.save_checkpoint(&agent(i), &compacted) {
            println!("SAVE FAILED {i}: {e}");
            std::process::exit(1);
        }
        let loaded: Compacted<AgentState> = store.load_checkpoint(&agent(i)).unwrap().unwrap();
        if let Err(e) = compactor.rehydrate_blocking(&loaded, &reacquire()) {
            println!("REHYDRATE FAILED {i}: {e}");
            std::process::exit(1);
        }
        println!("SAVED {i}");
    }
}

fn gc_under_a_concurrent_writer_loses_nothing() {
    let fx = fixture("gc-concurrent");
    let db = fx.path.to_str().unwrap();
    let store = SqliteStore::open(&fx.path).unwrap();

    // Everything the writer will store, already in the file as old garbage.
    let rehearsal = MemoryStore::new();
    let compactor = writer_compactor(&rehearsal);
    for i in 0..ITERATIONS {
        compactor.compact_blocking(&state(100 + i)).unwrap();
    }
    for hash in rehearsal.hashes() {
        let bytes = rehearsal.raw(&hash).unwrap();
        block_on(store.put(&hash, &bytes)).unwrap();
        age_blob(&fx.path, &hash, 2 * 3600);
    }

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--writer", db, &ITERATIONS.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map(|l| l.unwrap())
            .collect::<Vec<_>>()
    });

    let started = Instant::now();
    let mut runs = 0;
    let mut removed = 0;
    loop {
        let done = child.try_wait().unwrap().is_some();
        let (code, json) = run_json(&["gc", db, "--json"]);
        assert_eq!(code, 0, "{json}");
        runs += 1;
        removed += json["removed"].as_array().unwrap().len();
        if done {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "writer hangs");
    }
    let status = child.wait().unwrap();
    let lines = reader.join().unwrap();
    assert!(status.success(), "writer failed: {lines:?}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("SAVED ")).count(),
        ITERATIONS as usize,
        "{lines:?}"
    );
    assert!(runs > 1, "gc ran only once: the writer finished first");
    assert!(removed > 0, "gc removed nothing while the writer ran");

    // Nothing lost: verify is clean and every checkpoint rehydrates from this process.
    let (code, stdout, stderr) = run(&["verify", db]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let compactor = writer_compactor(&store);
    for i in 0..AGENTS {
        let loaded: Compacted<AgentState> = store.load_checkpoint(&agent(i)).unwrap().unwrap();
        compactor.rehydrate_blocking(&loaded, &reacquire()).unwrap();
    }
    println!(
        "gc ran {runs} times during the writer's {ITERATIONS} saves and removed {removed} blobs"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--writer") {
        writer(&args[2], args[3].parse().unwrap());
        return;
    }
    // `cargo test -- --list` and filters: this file holds one test.
    if args.iter().any(|a| a == "--list") {
        println!("gc_under_a_concurrent_writer_loses_nothing: test");
        return;
    }
    gc_under_a_concurrent_writer_loses_nothing();
    println!("test gc_under_a_concurrent_writer_loses_nothing ... ok");
}
