//! Many seeds at once: the parallel runner of the command line and of the tests. Each thread
//! takes its own contiguous range of the seeds (as `--start` ranges would), and the sweep
//! merges what they found: per invariant, how many seeds failed it and the smallest.

use crate::ctx::{Config, Failure};
use crate::shrink::shrink;
use crate::KNOWN_BREAKS;
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::{Duration, Instant};

/// Per failed invariant: how many seeds failed it, and the smallest of them.
pub type Failed = BTreeMap<&'static str, (u64, u64)>;

/// What a sweep found.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Per failed invariant: how many seeds failed it, and the smallest of them.
    pub failed: Failed,
    /// Seeds run.
    pub seeds: u64,
    /// Steps run (seeds times steps per seed).
    pub steps: u64,
    /// Wall-clock time of the whole sweep.
    pub elapsed: Duration,
    /// Threads used.
    pub jobs: u64,
}

impl Sweep {
    /// Steps per second of wall-clock time.
    pub fn steps_per_second(&self) -> f64 {
        self.steps as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Every failed invariant not in `KNOWN_BREAKS`, each with its first seed shrunk to a
    /// minimal trace (`config` makes a seed's configuration, as for the sweep).
    pub fn unexpected(&self, config: impl Fn(u64) -> Config) -> Vec<String> {
        self.failed
            .iter()
            .filter(|(invariant, _)| !KNOWN_BREAKS.iter().any(|(name, _)| name == *invariant))
            .map(|(invariant, &(n, seed))| {
                let shrunk = shrink(&config(seed), invariant)
                    .map_or_else(|| format!("seed {seed}"), |s| format!("seed {seed}: {s}"));
                format!("`{invariant}` failed on {n} seeds; the first, {shrunk}")
            })
            .collect()
    }
}

/// Runs `seeds` on `jobs` threads (`config` makes each seed's configuration; `on_failure` sees
/// every failure as it is found). `Err` when a run's backend cannot be opened.
pub fn sweep(
    seeds: Range<u64>,
    jobs: u64,
    config: impl Fn(u64) -> Config + Sync,
    on_failure: impl Fn(u64, &Failure) + Sync,
) -> Result<Sweep, String> {
    let started = Instant::now();
    let count = seeds.end.saturating_sub(seeds.start);
    let jobs = jobs.clamp(1, count.max(1));
    let per_job = count.div_ceil(jobs);
    let (config, on_failure) = (&config, &on_failure);
    let found: Vec<Result<(Failed, u64), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|job| {
                let from = seeds.start + job * per_job;
                let to = (from + per_job).min(seeds.end);
                scope.spawn(move || {
                    let mut failed = Failed::new();
                    let mut steps = 0;
                    for seed in from..to {
                        let run = config(seed);
                        steps += run.steps as u64;
                        for failure in crate::run::run(&run)?.failures {
                            on_failure(seed, &failure);
                            let entry = failed.entry(failure.invariant).or_insert((0, seed));
                            entry.0 += 1;
                        }
                    }
                    Ok((failed, steps))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a runner thread panicked".into()))
            })
            .collect()
    });
    let mut sweep = Sweep {
        seeds: count,
        jobs,
        ..Sweep::default()
    };
    for result in found {
        let (failed, steps) = result?;
        sweep.steps += steps;
        for (invariant, (n, first)) in failed {
            let entry = sweep.failed.entry(invariant).or_insert((0, first));
            entry.0 += n;
            entry.1 = entry.1.min(first);
        }
    }
    sweep.elapsed = started.elapsed();
    Ok(sweep)
}
