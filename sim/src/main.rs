//! The simulator's command line: runs seeds, prints each failing invariant's first seed shrunk
//! to a minimal trace, a count per invariant, and the seeds per second.
//!
//! ```text
//! cargo run --release -p compaction-sim -- --seeds N [--start S] [--steps K] [--window F]
//! cargo run --release -p compaction-sim -- --replay SEED [--steps K] [--window F] [--faults crash,store,...]
//! ```

use compaction_sim::check::INVARIANTS;
use compaction_sim::ctx::Config;
use compaction_sim::faults::FaultClasses;
use compaction_sim::run::run;
use compaction_sim::shrink::shrink;
use compaction_sim::KNOWN_BREAKS;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: compaction-sim [--seeds N] [--start S] [--steps K] [--window F] \
    [--faults crash,store,ledger,summarizer,model|none] [--replay SEED] [--list]\n\
    --list prints every failure (seed, invariant, what was seen) instead of shrinking the first";

struct Args {
    seeds: u64,
    start: u64,
    steps: usize,
    window: Option<usize>,
    classes: FaultClasses,
    replay: Option<u64>,
    list: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        seeds: 1_000,
        start: 0,
        steps: 60,
        window: None,
        classes: FaultClasses::ALL,
        replay: None,
        list: false,
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
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn classes(list: &str) -> Result<FaultClasses, String> {
    let mut c = FaultClasses {
        crash: false,
        store: false,
        ledger: false,
        summarizer: false,
        model: false,
    };
    for name in list.split(',').filter(|n| !n.is_empty() && *n != "none") {
        match name {
            "crash" => c.crash = true,
            "store" => c.store = true,
            "ledger" => c.ledger = true,
            "summarizer" => c.summarizer = true,
            "model" => c.model = true,
            other => return Err(format!("unknown fault class {other}\n{USAGE}")),
        }
    }
    Ok(c)
}

fn known(invariant: &str) -> bool {
    KNOWN_BREAKS.iter().any(|(name, _)| *name == invariant)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let config = |seed| Config {
        seed,
        steps: args.steps,
        fault_window: args.window.unwrap_or(args.steps * 2 / 3),
        classes: args.classes,
    };
    if let Some(seed) = args.replay {
        let report = run(&config(seed));
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
    let mut running = std::time::Duration::ZERO;
    let mut counts: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for seed in args.start..args.start + args.seeds {
        let started = Instant::now();
        let report = run(&config(seed));
        running += started.elapsed();
        for failure in &report.failures {
            let entry = counts.entry(failure.invariant).or_insert((0, seed));
            entry.0 += 1;
            if args.list {
                println!(
                    "seed {seed}: `{}` at step {}: {}",
                    failure.invariant, failure.step, failure.detail
                );
            } else if entry.0 == 1 {
                // The first seed of each invariant, shrunk.
                if let Some(shrunk) = shrink(&config(seed), failure.invariant) {
                    println!("seed {seed}: {shrunk}");
                }
            }
        }
    }
    let secs = running.as_secs_f64();
    println!(
        "{} seeds x {} steps in {secs:.2} s: {:.1} seeds/s (shrinking not counted)",
        args.seeds,
        args.steps,
        args.seeds as f64 / secs
    );
    let mut failed = false;
    for invariant in INVARIANTS {
        match counts.get(invariant) {
            None => println!("  ok      {invariant}"),
            Some((n, first)) => {
                let tag = if known(invariant) { "known" } else { "FAILED" };
                failed |= !known(invariant);
                println!("  {tag:<7} {invariant}: {n} seeds (first: {first})");
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
