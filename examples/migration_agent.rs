//! A simulated 60-turn database-migration agent, run twice side by side on the same context
//! budget and the same lossy summarizer: once with a naive "summarize everything" compaction,
//! once with typed compaction. No network, no model: the agent's decisions are read from its own
//! context, exactly where a model would read them.
//!
//! Run: `cargo run --release --example migration_agent` (`-- --help` lists the options). It
//! prints each typed compaction, the typed agent's final window (what the model reads), a
//! verdict table and what the run proved. Exits 0 only if the typed run held every invariant.
//!
//! Template for your own agent (copy this file):
//! - `AgentState` is the struct to copy: one attribute per field says what compaction may do.
//! - `TypedAgent::compact_if_needed` is the loop step: when the context reaches 90% of the
//!   budget, compact the state into a window of at most half the budget (room to work before
//!   the next compaction), checkpoint it, and carry on from the rehydrated state.
//! - `TypedAgent::migrate` runs a side effect through the durable ledger: claim, run, settle.
//! - `environment` is your `Reacquire`: how evicted `#[derivable]` fields are read back.

use compaction::{
    Compactable, Compacted, CompactionReport, Compactor, Effect, EffectError, EffectLog,
    EffectStatus, FieldOutcome, FnReacquire, FnSummarizer, LedgerError, Reacquire, SqliteLedger,
    SqliteStore, SummaryRequest, TokenCounter, Tokenizer,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// The outside world: the database, the file system, the CI.
#[derive(Default)]
struct World {
    applied: BTreeMap<String, u32>,
    prod_writes: u32,
    files: BTreeMap<String, String>,
    wrong_path_reads: u32,
}

impl World {
    fn new() -> Self {
        let mut files = BTreeMap::new();
        let config = (0..40)
            .map(|i| {
                format!(
                    "tenant_{i} = {{ pool = {}, region = \"eu-west\" }}\n",
                    10 + i
                )
            })
            .collect::<String>();
        files.insert(CONFIG_PATH.to_string(), config);
        World {
            files,
            ..World::default()
        }
    }
    fn apply(&mut self, key: &str) {
        *self.applied.entry(key.to_string()).or_default() += 1;
    }
    fn read(&mut self, path: &str) -> Option<String> {
        let found = self.files.get(path).cloned();
        if found.is_none() {
            self.wrong_path_reads += 1;
        }
        found
    }
    fn reapplied(&self) -> u32 {
        self.applied.values().map(|n| n.saturating_sub(1)).sum()
    }
}

fn tool_output(turn: u32) -> String {
    format!(
        "$ psql -c 'select * from pg_stat_activity' (turn {turn})\n{}",
        (0..12)
            .map(|i| format!(
                "pid={} state=idle query=select {i} from tenants\n",
                4000 + turn * 13 + i
            ))
            .collect::<String>()
    )
}

fn ci_log(step: u32) -> String {
    (0..60)
        .map(|i| format!("[ci step {step}] test tenants::case_{i} ... ok\n"))
        .collect()
}

/// The summarizer the design notes describe: fluent, plausible, and lossy exactly where it hurts.
fn adversarial(text: &str, target: usize) -> String {
    let mut out = text
        .replace(CONFIG_PATH, "the config file")
        .replace(
            "never modify anything under /etc/prod (read-only)",
            "user prefers careful changes in production",
        )
        .replace(
            "do not re-run a migration that already ran",
            "migrations were discussed",
        )
        .replace("timed out", "failed");
    // Plan indices and migration keys become prose.
    for step in (1..=STEPS).rev() {
        out = out
            .replace(
                &format!("plan_step={step}"),
                "working through the migration steps",
            )
            .replace(&format!("mig-{step:03}"), "a migration");
    }
    // A well-behaved length, at least: the engine refuses a summary over its target.
    let mut summary = String::new();
    for word in out.split_whitespace() {
        let candidate = if summary.is_empty() {
            word.to_string()
        } else {
            format!("{summary} {word}")
        };
        if Tokenizer::O200kBase.count(&candidate) > target {
            break;
        }
        summary = candidate;
    }
    summary
}

/// Re-acquires derivable fields from the simulated environment: files and the CI.
fn environment(world: &World) -> impl Reacquire {
    let files = world.files.clone();
    FnReacquire::new(move |_field: &str, pointer: &str| {
        if let Some(path) = pointer.strip_prefix("file://") {
            return files
                .get(path)
                .map(|c| serde_json::Value::String(c.clone()))
                .ok_or_else(|| format!("no file {path}").into());
        }
        if let Some(step) = pointer.strip_prefix("https://ci.example/runs/") {
            return Ok(serde_json::Value::String(ci_log(step.parse()?)));
        }
        Err(format!("unknown pointer {pointer}").into())
    })
}

/// What the agent does on a turn.
enum Action {
    Inspect,
    Migrate,
    VerifyConfig,
    TuneProd,
}

fn action(turn: u32) -> Action {
    match turn {
        t if t % 6 == 5 => Action::Migrate,
        20 | 40 | 58 => Action::VerifyConfig,
        30 | 50 => Action::TuneProd,
        _ => Action::Inspect,
    }
}

/// The baseline: its memory is text, and compaction summarizes all of it.
struct NaiveAgent {
    memory: String,
    budget: usize,
    counter: Tokenizer,
    compactions: u32,
}

impl NaiveAgent {
    fn remember(&mut self, line: &str) {
        self.memory.push_str(line);
        self.memory.push('\n');
        if self.counter.count(&self.memory) * 10 >= self.budget * 9 {
            self.memory = format!(
                "Summary of earlier work: {}\n",
                adversarial(&self.memory, self.budget / 4)
            );
            self.compactions += 1;
        }
    }

    /// Reads the plan step back from memory, as a model would.
    fn plan_step(&self) -> u32 {
        self.memory
            .rmatch_indices("plan_step=")
            .next()
            .and_then(|(i, _)| {
                self.memory[i + 10..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    }

    fn turn(&mut self, turn: u32, world: &mut World) {
        match action(turn) {
            Action::Inspect => self.remember(&tool_output(turn)),
            Action::Migrate => {
                let step = self.plan_step() + 1;
                if step > STEPS {
                    return;
                }
                let key = format!("mig-{step:03}");
                world.apply(&key);
                let outcome = if step == 4 { "timed out" } else { "committed" };
                self.remember(&format!("applied {key}: {outcome} plan_step={step}"));
                if step == 4 {
                    // The outcome was unknown; the memory says it failed, so retry.
                    if self.memory.contains("failed") || !self.memory.contains(&key) {
                        world.apply(&key);
                    }
                }
                self.remember(&ci_log(step));
            }
            Action::VerifyConfig => {
                let path = if self.memory.contains(CONFIG_PATH) {
                    CONFIG_PATH
                } else {
                    "the config file"
                };
                let _ = world.read(path);
            }
            Action::TuneProd => {
                if !self.memory.contains("/etc/prod") {
                    world.prod_writes += 1;
                }
            }
        }
    }
}

/// The typed agent: its state is a `Compactable` struct; its context is the compacted window.
struct TypedAgent {
    state: AgentState,
    compactor: Compactor,
    /// Where spilled state and checkpoints live; survives the process.
    store: SqliteStore,
    /// The durable idempotency guard: a migration is claimed here before it runs.
    ledger: SqliteLedger,
    budget: usize,
    reports: Vec<CompactionReport>,
    timings: Vec<std::time::Duration>,
    last: Option<Compacted<AgentState>>,
}

impl TypedAgent {
    /// What the model would read now: the last window plus everything added since (exact).
    fn context_tokens(&self) -> usize {
        let window = self.last.as_ref().map(|c| c.tokens()).unwrap_or(0);
        let since: usize = self
            .state
            .tool_output
            .iter()
            .map(|t| self.compactor.counter().count(t))
            .sum();
        window + since + self.compactor.counter().count(&self.state.ci_log)
    }

    /// The loop step an author copies: compact at 90% of the budget, rehydrate for tool calls.
    fn compact_if_needed(&mut self, world: &World) -> Result<(), Box<dyn std::error::Error>> {
        if self.context_tokens() * 10 < self.budget * 9 {
            return Ok(());
        }
        self.compact(world)
    }

    /// One line per compaction: the context it started from, the window it made, and where
    /// each field went.
    fn print_compaction(&self, context: usize, compacted: &Compacted<AgentState>, micros: u128) {
        let report = compacted.report();
        let mut line = format!(
            "  turn {:>2}: context {context:>5} -> window {:>4} tokens ({micros} µs)",
            self.state.turn,
            compacted.tokens()
        );
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for field in &report.fields {
            let group = match field.outcome {
                FieldOutcome::Kept => "kept",
                FieldOutcome::Summarized { .. } => "summarized",
                FieldOutcome::Evicted { .. } => "evicted behind its pointer",
                FieldOutcome::Spilled { .. } => "spilled verbatim",
                FieldOutcome::Tombstoned => "dropped (tombstone)",
            };
            groups.entry(group).or_default().push(&field.field);
        }
        for (group, fields) in groups {
            line.push_str(&format!("; {group}: {}", fields.join(", ")));
        }
        println!("{line}");
    }

    /// Compacts, checkpoints, and carries on from the rehydrated state.
    fn compact(&mut self, world: &World) -> Result<(), Box<dyn std::error::Error>> {
        let context = self.context_tokens();
        let started = std::time::Instant::now();
        let compacted = self.compactor.compact_blocking(&self.state)?;
        let elapsed = started.elapsed();
        self.timings.push(elapsed);
        self.print_compaction(context, &compacted, elapsed.as_micros());
        self.reports.push(compacted.report().clone());
        let reacquire = environment(world);
        // The checkpoint a restarted agent resumes from (the store holds its spilled values).
        self.store.save_checkpoint(AGENT_ID, &compacted)?;
        self.state = self.compactor.rehydrate_blocking(&compacted, &reacquire)?;
        self.last = Some(compacted);
        Ok(())
    }

    /// Claims the step in the durable ledger, runs it, settles it. A claim that is refused
    /// means the step already ran (in this process or before a restart): it is not run again.
    fn migrate(&mut self, step: u32, world: &mut World) -> Result<(), Box<dyn std::error::Error>> {
        let key = format!("mig-{step:03}");
        let mut effect = Effect::new("apply_migration", "db://app/tenants", &key);
        if step > 1 {
            effect = effect.depends_on(format!("mig-{:03}", step - 1));
        }
        self.ledger.record(&effect)?;
        match self.ledger.begin(&key) {
            Ok(()) => {
                world.apply(&key);
                if step != 4 {
                    self.ledger.commit(&key)?;
                    self.state.plan_step = step;
                }
                // Step 4 times out: it stays Unknown until reconciled on the next step.
            }
            Err(LedgerError::Effect(EffectError::AlreadyCommitted { .. })) => {
                self.state.plan_step = step
            }
            Err(e) => return Err(e.into()),
        }
        self.state.ci_log = ci_log(step);
        Ok(())
    }

    fn turn(&mut self, turn: u32, world: &mut World) -> Result<(), Box<dyn std::error::Error>> {
        self.state.turn = turn;
        match action(turn) {
            Action::Inspect => self.state.tool_output.push(tool_output(turn)),
            Action::Migrate => {
                // Reconcile an unknown outcome against the world before anything else.
                for effect in self.ledger.list(EffectStatus::Unknown)? {
                    let key = effect.idempotency_key;
                    let status = if world.applied.contains_key(&key) {
                        EffectStatus::Committed
                    } else {
                        EffectStatus::NotStarted
                    };
                    self.ledger.reconcile(&key, status)?;
                }
                let step = self.state.plan_step + 1;
                if step <= STEPS {
                    self.migrate(step, world)?;
                }
                // The state's ledger field mirrors the durable ledger.
                self.state.migrations = self.ledger.load_log("")?;
            }
            Action::VerifyConfig => {
                let path = self.state.config_path.clone();
                self.state.config_contents = world.read(&path).unwrap_or_default();
            }
            Action::TuneProd => {
                let forbidden = self
                    .state
                    .constraints
                    .iter()
                    .any(|c| c.contains("/etc/prod"));
                if !forbidden {
                    world.prod_writes += 1;
                }
            }
        }
        self.compact_if_needed(world)?;
        Ok(())
    }
}

/// Command-line options.
struct Options {
    turns: u32,
    /// The context budget in tokens: both agents compact at 90% of it.
    budget: usize,
    db: std::path::PathBuf,
}

const USAGE: &str = "\
usage: migration_agent [--turns N] [--budget TOKENS] [--db PATH]

  --turns N        turns to simulate (default 60)
  --budget TOKENS  the context budget (default 3000): each agent compacts when its context
                   reaches 90% of it; the typed agent's window is at most half of it
  --db PATH        the SQLite file holding the typed agent's spilled state, checkpoints and
                   effect ledger (default migration_agent.db); run again to resume from it
  -h, --help       this text";

/// `Ok(None)` when `--help` was asked for.
fn options() -> Result<Option<Options>, String> {
    let mut opts = Options {
        turns: 60,
        budget: 3_000,
        db: "migration_agent.db".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value\n\n{USAGE}"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--turns" => opts.turns = value()?.parse().map_err(|e| format!("--turns: {e}"))?,
            "--budget" => opts.budget = value()?.parse().map_err(|e| format!("--budget: {e}"))?,
            "--db" => opts.db = value()?.into(),
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
    let store = SqliteStore::open(&opts.db)?;
    let ledger = SqliteLedger::open(&opts.db)?;
    // Compaction triggers at 90% of the budget and makes a window of at most half of it, so the
    // agent has room to work before the next one.
    let compactor = Compactor::builder()
        .budget(opts.budget / 2)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(summarizer)
        .store(store.clone())
        .build()?;
    run(opts, compactor, store, ledger)
}

fn run(
    opts: Options,
    compactor: Compactor,
    store: SqliteStore,
    ledger: SqliteLedger,
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
    for effect in ledger.list(EffectStatus::Committed)? {
        typed_world.apply(&effect.idempotency_key);
    }
    let checkpoint = store.load_checkpoint::<AgentState>(AGENT_ID)?;
    let resumed = match &checkpoint {
        Some(checkpoint) => {
            let state = compactor.rehydrate_blocking(checkpoint, &environment(&typed_world))?;
            println!(
                "resumed from the checkpoint in {} at turn {} (plan step {}); delete the file to start over\n",
                opts.db.display(),
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
        store,
        ledger,
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

/// (migrations re-applied, writes to /etc/prod, config reads at a wrong path)
type Damage = (u32, u32, u32);

fn print_table(naive: &NaiveAgent, naive_damage: Damage, typed: &TypedAgent, typed_damage: Damage) {
    let row = |label: &str, naive: &dyn std::fmt::Display, typed: &dyn std::fmt::Display| {
        println!("{label:<42} {naive:>14} {typed:>14}")
    };
    println!();
    row("after the run", &"naive summary", &"typed");
    row("compactions", &naive.compactions, &typed.reports.len());
    row("migrations re-applied", &naive_damage.0, &typed_damage.0);
    row(
        "writes to /etc/prod (constraint lost)",
        &naive_damage.1,
        &typed_damage.1,
    );
    row(
        "config read at a wrong path",
        &naive_damage.2,
        &typed_damage.2,
    );
    let steps = format!("plan steps completed (of {STEPS})");
    row(&steps, &naive.plan_step(), &typed.state.plan_step);
    let mut timings = typed.timings.clone();
    timings.sort();
    if let Some(median) = timings.get(timings.len() / 2) {
        row(
            "median compaction time (typed, µs)",
            &"-",
            &median.as_micros(),
        );
    }
}

/// The closing paragraph: what this run showed, in words.
fn print_conclusion((n_re, n_prod, n_path): Damage, held: bool, opts: &Options) {
    println!();
    if !held {
        println!("verdict: typed compaction VIOLATED an invariant (see the table above)");
        return;
    }
    println!("verdict: typed compaction held every invariant.\n");
    let proved = format!(
        "What this run proved. Both agents had the same budget and the same summarizer, one that \
         turns facts into fluent prose. The naive agent's memory went through it: it re-applied \
         {n_re} migration(s), wrote to /etc/prod {n_prod} time(s) and read the config at a wrong \
         path {n_path} time(s). The typed agent did none of that: its constraints stayed pinned \
         in every window, its plan step and config path were kept verbatim or spilled behind a \
         verified store:// pointer (never summarized), the migration that timed out stayed \
         `unknown` until it was reconciled against the world, every window fit its budget, and \
         every rehydration restored the protected state byte for byte. Run the same command \
         again: the typed agent resumes from its checkpoint in {} and re-applies nothing.",
        opts.db.display()
    );
    println!("{}", wrap(&proved));
}

/// Breaks prose into lines of at most 96 columns, for a terminal.
fn wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line_len = 0;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if line_len > 0 && line_len + 1 + len > 96 {
            out.push('\n');
            line_len = 0;
        } else if line_len > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(word);
        line_len += len;
    }
    out
}
