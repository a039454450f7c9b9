//! A simulated 60-turn database-migration agent, run twice side by side on the same context
//! budget and the same lossy summarizer: once with a naive "summarize everything" compaction,
//! once with typed compaction. No network, no model: the agent's decisions are read from its own
//! context, exactly where a model would read them.
//!
//! Run: `cargo run --release --example migration_agent` (`-- --help` lists the options). It
//! prints each typed compaction, the typed agent's final window (what the model reads), a
//! verdict table and what the run proved. Exits 0 only if the typed run held every invariant.
//!
//! With the `postgres` feature, `--db postgres://user@host/db --namespace NAME` keeps the
//! typed agent's store, checkpoints and ledger in PostgreSQL instead of a SQLite file.
//!
//! Template for your own agent (copy this directory; `main.rs` holds the state and the run,
//! `typed.rs` the loop, `durable.rs` the backend, `world.rs` the simulated outside world):
//! - `AgentState` is the struct to copy: one attribute per field says what compaction may do.
//! - `TypedAgent::compact_if_needed` is the loop step: when the context reaches 90% of the
//!   budget, compact the state into a window of at most half the budget (room to work before
//!   the next compaction), checkpoint it, and carry on from the rehydrated state.
//! - `TypedAgent::migrate` runs a side effect through the durable ledger: claim, run, settle.
//! - `environment` is your `Reacquire`: how evicted `#[derivable]` fields are read back.

mod durable;
mod naive;
mod report;
mod typed;
mod world;

use compaction::{
    Compactable, Compactor, EffectLog, EffectStatus, FnSummarizer, SummaryRequest, Tokenizer,
};
use durable::{shown, Durable};
use naive::NaiveAgent;
use report::{print_conclusion, print_table, wrap};
use serde::{Deserialize, Serialize};
use typed::TypedAgent;
use world::{adversarial, environment, World};

const CONFIG_PATH: &str = "/srv/app/conf.d/limits.toml";
const STEPS: u32 = 9;
const AGENT_ID: &str = "migration-agent";

/// The agent's working state, every field classified.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct AgentState {
    /// Stated once by the user at turn 1.
    #[protected(pin)]
    constraints: Vec<String>,
    /// Index of the last migration step applied (the plan has nine).
    #[protected]
    plan_step: u32,
    #[protected]
    config_path: String,
    /// The turn the agent is on: lets a restarted agent resume where it stopped.
    #[protected]
    turn: u32,
    /// Re-readable from disk.
    #[derivable(pointer = "file://{config_path}")]
    config_contents: String,
    /// The CI log of the current step: re-fetchable, and fine to summarize.
    #[derivable(pointer = "https://ci.example/runs/{plan_step}", summarize)]
    ci_log: String,
    /// Raw tool output: evicted first.
    #[redundant]
    tool_output: Vec<String>,
    /// Every migration, with its exact status.
    #[effect(idempotent = false)]
    migrations: EffectLog,
}

/// Command-line options.
struct Options {
    turns: u32,
    /// The context budget in tokens: both agents compact at 90% of it.
    budget: usize,
    /// A SQLite file, or a `postgres://` URL.
    db: String,
    /// The namespace (tenant) inside a PostgreSQL database.
    namespace: String,
}

const USAGE: &str = "\
usage: migration_agent [--turns N] [--budget TOKENS] [--db PATH|URL] [--namespace NAME]

  --turns N        turns to simulate (default 60)
  --budget TOKENS  the context budget (default 3000): each agent compacts when its context
                   reaches 90% of it; the typed agent's window is at most half of it
  --db PATH        the SQLite file holding the typed agent's spilled state, checkpoints and
                   effect ledger (default migration_agent.db); run again to resume from it
  --db URL         postgres://user@host:port/database instead (needs the `postgres` feature:
                   cargo run --example migration_agent --features postgres -- --db URL)
  --namespace NAME the tenant inside that PostgreSQL database (default migration-agent)
  -h, --help       this text";

/// `Ok(None)` when `--help` was asked for.
fn options() -> Result<Option<Options>, String> {
    let mut opts = Options {
        turns: 60,
        budget: 3_000,
        db: "migration_agent.db".into(),
        namespace: "migration-agent".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value\n\n{USAGE}"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--turns" => opts.turns = value()?.parse().map_err(|e| format!("--turns: {e}"))?,
            "--budget" => opts.budget = value()?.parse().map_err(|e| format!("--budget: {e}"))?,
            "--db" => opts.db = value()?,
            "--namespace" => opts.namespace = value()?,
            other => return Err(format!("unknown option {other}\n\n{USAGE}")),
        }
    }
    Ok(Some(opts))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = match options() {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return Ok(());
        }
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let summarizer =
        FnSummarizer::new(|req: SummaryRequest<'_>| Ok(adversarial(req.text, req.target_tokens)));
    let durable = Durable::open(&opts.db, &opts.namespace)?;
    // Compaction triggers at 90% of the budget and makes a window of at most half of it, so the
    // agent has room to work before the next one.
    let compactor = durable
        .builder(Compactor::builder())
        .budget(opts.budget / 2)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(summarizer)
        .build()?;
    run(opts, compactor, durable)
}

fn run(
    opts: Options,
    compactor: Compactor,
    durable: Durable,
) -> Result<(), Box<dyn std::error::Error>> {
    let constraints = vec![
        "never modify anything under /etc/prod (read-only)".to_string(),
        "do not re-run a migration that already ran".to_string(),
    ];
    let mut naive_world = World::new();
    let mut naive = NaiveAgent {
        memory: format!(
            "user: {}\nconfig at {CONFIG_PATH}\n",
            constraints.join("; ")
        ),
        budget: opts.budget,
        counter: Tokenizer::O200kBase,
        compactions: 0,
    };
    // The outside world already holds what the durable ledger says committed.
    let mut typed_world = World::new();
    for effect in durable.list(EffectStatus::Committed)? {
        typed_world.apply(&effect.idempotency_key);
    }
    let checkpoint = durable.load_checkpoint::<AgentState>(AGENT_ID)?;
    let resumed = match &checkpoint {
        Some(checkpoint) => {
            let state = compactor.rehydrate_blocking(checkpoint, &environment(&typed_world))?;
            let start_over = if durable::is_postgres(&opts.db) {
                "use another --namespace to start over"
            } else {
                "delete the file to start over"
            };
            println!(
                "resumed from the checkpoint in {} at turn {} (plan step {}); {start_over}\n",
                shown(&opts.db),
                state.turn,
                state.plan_step
            );
            Some(state)
        }
        None => None,
    };
    let first_turn = resumed.as_ref().map_or(1, |s| s.turn + 1);
    let mut typed = TypedAgent {
        state: resumed.unwrap_or_else(|| AgentState {
            constraints,
            config_path: CONFIG_PATH.into(),
            ..AgentState::default()
        }),
        compactor,
        durable,
        budget: opts.budget,
        reports: Vec::new(),
        timings: Vec::new(),
        last: checkpoint,
    };
    println!(
        "{}\n",
        wrap(&format!(
            "migration agent, {} turns. Budget: {} tokens of context. Each agent compacts when \
             its context reaches 90% of it; the typed agent's window is at most half of it, which \
             leaves room to work before the next compaction.",
            opts.turns, opts.budget
        ))
    );
    println!(
        "typed compactions (context = the last window + what the agent added since, counted \
         exactly with o200k):"
    );
    if first_turn > opts.turns {
        println!(
            "  none: the checkpoint is already at turn {}",
            first_turn - 1
        );
    }
    for turn in 1..=opts.turns {
        naive.turn(turn, &mut naive_world);
        if turn >= first_turn {
            typed.turn(turn, &mut typed_world)?;
        }
    }
    if first_turn <= opts.turns {
        // A last checkpoint, so the next run resumes where this one ended.
        typed.compact(&typed_world)?;
    }
    if let Some(window) = &typed.last {
        println!(
            "\nthe typed agent's final window ({} tokens), exactly what the model reads:\n\n{}",
            window.tokens(),
            window.render()
        );
    }
    let summarize = |w: &World| (w.reapplied(), w.prod_writes, w.wrong_path_reads);
    let naive_counts = summarize(&naive_world);
    let typed_counts = summarize(&typed_world);
    print_table(&naive, naive_counts, &typed, typed_counts);
    let windows_fit = typed.reports.iter().all(|r| r.tokens_after <= r.budget);
    let held = typed_counts == (0, 0, 0) && windows_fit;
    print_conclusion(naive_counts, held, &opts);
    if held {
        Ok(())
    } else {
        std::process::exit(1)
    }
}
