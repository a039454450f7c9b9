//! The simulator's command line: runs seeds on a backend (on several threads, each over its own
//! range of seeds), prints each failing invariant's first seed shrunk to a minimal trace, a
//! count per invariant, and the throughput in steps per second.
//!
//! ```text
//! cargo run --release -p compaction-sim -- --seeds N [--start S] [--steps K] [--window F] [--backend memory|sqlite|postgres] [--jobs J]
//! cargo run --release -p compaction-sim -- --replay SEED [--steps K] [--window F] [--faults crash,store,...] [--backend B]
//! ```

use compaction_sim::backend::BackendKind;
use compaction_sim::check::INVARIANTS;
use compaction_sim::ctx::{Config, Failure};
use compaction_sim::faults::FaultClasses;
use compaction_sim::run::run;
use compaction_sim::shrink::shrink;
use compaction_sim::sweep::sweep;
use compaction_sim::KNOWN_BREAKS;
use std::process::ExitCode;

// The facade's own throwaway cluster: `initdb`/`pg_ctl` of the machine's PostgreSQL on a free
// loopback port, removed by a watchdog when this process ends.
#[cfg(feature = "postgres")]
#[path = "../../tests/pg/harness.rs"]
mod pg_harness;

const USAGE: &str = "usage: compaction-sim [--seeds N] [--start S] [--steps K] [--window F] \
    [--faults crash,store,ledger,summarizer,model,takeover|none] [--backend memory|sqlite|postgres] \
    [--jobs J] [--http] [--replay SEED] [--list]\n\
    --http calls the model through the library's HTTP clients and a loopback server answering \
    faults (feature http)\n\
    --jobs runs J threads, each over its own range of the seeds (default: the cores)\n\
    --backend postgres uses COMPACTION_SIM_PG_URL, else starts a throwaway server (feature postgres)\n\
    --list prints every failure (seed, invariant, what was seen) instead of shrinking the first";

struct Args {
    seeds: u64,
    start: u64,
    steps: usize,
    window: Option<usize>,
    classes: FaultClasses,
    backend: BackendKind,
    jobs: u64,
    replay: Option<u64>,
    list: bool,
    http: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        seeds: 1_000,
        start: 0,
        steps: 60,
        window: None,
        classes: FaultClasses::ALL,
        backend: BackendKind::Memory,
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        replay: None,
        list: false,
        http: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        if flag == "--list" {
            args.list = true;
            continue;
        }
        if flag == "--http" {
            args.http = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value\n{USAGE}"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--seeds" => args.seeds = number()?,
            "--start" => args.start = number()?,
            "--steps" => args.steps = number()? as usize,
            "--window" => args.window = Some(number()? as usize),
            "--replay" => args.replay = Some(number()?),
            "--faults" => args.classes = classes(&value)?,
            "--backend" => args.backend = BackendKind::parse(&value)?,
            "--jobs" => args.jobs = number()?.max(1),
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn classes(list: &str) -> Result<FaultClasses, String> {
    let mut c = FaultClasses::NONE;
    for name in list.split(',').filter(|n| !n.is_empty() && *n != "none") {
        match name {
            "crash" => c.crash = true,
            "store" => c.store = true,
            "ledger" => c.ledger = true,
            "summarizer" => c.summarizer = true,
            "model" => c.model = true,
            "takeover" => c.takeover = true,
            other => return Err(format!("unknown fault class {other}\n{USAGE}")),
        }
    }
    Ok(c)
}

fn known(invariant: &str) -> bool {
    KNOWN_BREAKS.iter().any(|(name, _)| *name == invariant)
}

/// Connects `--backend postgres` to a server: `COMPACTION_SIM_PG_URL`, else a throwaway one.
fn postgres() -> Result<(), String> {
    let url = match std::env::var("COMPACTION_SIM_PG_URL") {
        Ok(url) => url,
        #[cfg(feature = "postgres")]
        Err(_) => pg_harness::cluster().url("postgres"),
        #[cfg(not(feature = "postgres"))]
        Err(_) => {
            return Err(
                "--backend postgres needs the simulator built with --features postgres".into(),
            )
        }
    };
    compaction_sim::backend::set_postgres_url(url);
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    if args.backend == BackendKind::Postgres {
        if let Err(message) = postgres() {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    }
    let config = |seed| Config {
        fault_window: args.window.unwrap_or(args.steps * 2 / 3),
        classes: args.classes,
        http: args.http,
        ..Config::new(seed, args.steps).on(args.backend)
    };
    if let Some(seed) = args.replay {
        let report = match run(&config(seed)) {
            Ok(report) => report,
            Err(e) => {
                eprintln!("the {} backend did not open: {e}", args.backend.name());
                return ExitCode::FAILURE;
            }
        };
        for line in &report.trace {
            println!("{line}");
        }
        for f in &report.failures {
            println!("FAILED `{}` at step {}: {}", f.invariant, f.step, f.detail);
        }
        return if report.failures.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let list = args.list;
    let range = args.start..args.start + args.seeds;
    let on_failure = |seed: u64, failure: &Failure| {
        if list {
            println!(
                "seed {seed}: `{}` at step {}: {}",
                failure.invariant, failure.step, failure.detail
            );
        }
    };
    let found = match sweep(range, args.jobs, config, on_failure) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("the {} backend did not open: {e}", args.backend.name());
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{} seeds x {} steps = {} steps on {} in {:.2} s ({} jobs): {:.0} steps/s",
        found.seeds,
        args.steps,
        found.steps,
        args.backend.name(),
        found.elapsed.as_secs_f64(),
        found.jobs,
        found.steps_per_second()
    );
    let counts = &found.failed;
    let mut failed = false;
    for invariant in INVARIANTS {
        match counts.get(invariant) {
            None => println!("  ok      {invariant}"),
            Some((n, first)) => {
                let tag = if known(invariant) { "known" } else { "FAILED" };
                failed |= !known(invariant);
                println!("  {tag:<7} {invariant}: {n} seeds (first: {first})");
                if !list {
                    if let Some(shrunk) = shrink(&config(*first), invariant) {
                        println!("seed {first}: {shrunk}");
                    }
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
