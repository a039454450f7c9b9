//! Shrinking a failing seed: replay it with fewer steps (up to the failing one: a run is a
//! prefix of every longer run of the same seed), each fault class off in turn, and a shorter
//! fault window, keeping each change that still fails the same invariant. What is left is the
//! minimal configuration and its trace.

use crate::ctx::{Config, Failure, Report};
use crate::faults::FaultClasses;
use crate::run::run;

/// A shrunk failure: the smallest configuration found, its failure and its trace.
#[derive(Debug)]
pub struct Shrunk {
    /// The configuration that still fails.
    pub config: Config,
    /// Its failure of the invariant.
    pub failure: Failure,
    /// Its trace, one line per step.
    pub trace: Vec<String>,
}

fn fails(config: &Config, invariant: &str) -> Option<(Failure, Report)> {
    let report = run(config).ok()?;
    let failure = report
        .failures
        .iter()
        .find(|f| f.invariant == invariant)?
        .clone();
    Some((failure, report))
}

/// Shrinks `config`, which fails `invariant`.
pub fn shrink(config: &Config, invariant: &str) -> Option<Shrunk> {
    let (mut failure, mut report) = fails(config, invariant)?;
    let mut best = Config {
        steps: failure.step + 1,
        ..*config
    };
    let mut try_config = |candidate: Config, best: &mut Config| {
        if let Some((f, r)) = fails(&candidate, invariant) {
            *best = Config {
                steps: f.step + 1,
                ..candidate
            };
            failure = f;
            report = r;
        }
    };
    type Off = fn(&mut FaultClasses);
    let offs: [Off; 6] = [
        |c| c.takeover = false,
        |c| c.crash = false,
        |c| c.store = false,
        |c| c.ledger = false,
        |c| c.summarizer = false,
        |c| c.model = false,
    ];
    for off in offs {
        let mut candidate = best;
        off(&mut candidate.classes);
        if candidate.classes != best.classes {
            try_config(candidate, &mut best);
        }
    }
    let mut window = best.fault_window.min(best.steps);
    while window > 0 {
        window /= 2;
        let candidate = Config {
            fault_window: window,
            ..best
        };
        try_config(candidate, &mut best);
    }
    // The trace of exactly the shrunk configuration.
    let (failure, report) = fails(&best, invariant)?;
    let _ = report.failures.len();
    Some(Shrunk {
        config: best,
        failure,
        trace: report.trace,
    })
}

impl std::fmt::Display for Shrunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.config;
        writeln!(
            f,
            "invariant `{}` failed at step {}: {}",
            self.failure.invariant, self.failure.step, self.failure.detail
        )?;
        writeln!(
            f,
            "replay: cargo run --release -p compaction-sim{} -- --replay {} --steps {} --window {} --faults {} --backend {}{}",
            if c.http { " --features http" } else { "" },
            c.seed,
            c.steps,
            c.fault_window,
            c.classes.names().join(","),
            c.backend.name(),
            if c.http { " --http" } else { "" },
        )?;
        writeln!(f, "trace (* = inside the fault window):")?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}
