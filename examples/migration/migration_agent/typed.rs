//! The typed agent: its state is a `Compactable` struct, its context the compacted window,
//! its side effects claimed in the durable ledger.

use crate::durable::{Claim, Durable};
use crate::world::{action, ci_log, environment, tool_output, Action, World};
use crate::{AgentState, AGENT_ID, STEPS};
use compaction::{Compacted, CompactionReport, Compactor, Effect, EffectStatus, FieldOutcome};
use std::collections::BTreeMap;

/// The typed agent: its state is a `Compactable` struct; its context is the compacted window.
pub(crate) struct TypedAgent {
    pub(crate) state: AgentState,
    pub(crate) compactor: Compactor,
    /// Where spilled state and checkpoints live, and the durable idempotency guard (a
    /// migration is claimed there before it runs); survives the process.
    pub(crate) durable: Durable,
    pub(crate) budget: usize,
    pub(crate) reports: Vec<CompactionReport>,
    pub(crate) timings: Vec<std::time::Duration>,
    pub(crate) last: Option<Compacted<AgentState>>,
}

impl TypedAgent {
    /// What the model would read now: the last window plus everything added since (exact).
    pub(crate) fn context_tokens(&self) -> usize {
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
    pub(crate) fn compact_if_needed(
        &mut self,
        world: &World,
    ) -> Result<(), Box<dyn std::error::Error>> {
        if self.context_tokens() * 10 < self.budget * 9 {
            return Ok(());
        }
        self.compact(world)
    }

    /// One line per compaction: the context it started from, the window it made, and where
    /// each field went.
    pub(crate) fn print_compaction(
        &self,
        context: usize,
        compacted: &Compacted<AgentState>,
        micros: u128,
    ) {
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
    pub(crate) fn compact(&mut self, world: &World) -> Result<(), Box<dyn std::error::Error>> {
        let context = self.context_tokens();
        let started = std::time::Instant::now();
        let compacted = self.compactor.compact_blocking(&self.state)?;
        let elapsed = started.elapsed();
        self.timings.push(elapsed);
        self.print_compaction(context, &compacted, elapsed.as_micros());
        self.reports.push(compacted.report().clone());
        let reacquire = environment(world);
        // The checkpoint a restarted agent resumes from (the store holds its spilled values).
        self.durable.save_checkpoint(AGENT_ID, &compacted)?;
        self.state = self.compactor.rehydrate_blocking(&compacted, &reacquire)?;
        self.last = Some(compacted);
        Ok(())
    }

    /// Claims the step in the durable ledger, runs it, settles it. A claim that is refused
    /// means the step already ran (in this process or before a restart): it is not run again.
    pub(crate) fn migrate(
        &mut self,
        step: u32,
        world: &mut World,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let key = format!("mig-{step:03}");
        let mut effect = Effect::new("apply_migration", "db://app/tenants", &key);
        if step > 1 {
            effect = effect.depends_on(format!("mig-{:03}", step - 1));
        }
        self.durable.record(&effect)?;
        match self.durable.begin(&key)? {
            Claim::Won => {
                world.apply(&key);
                if step != 4 {
                    self.durable.commit(&key)?;
                    self.state.plan_step = step;
                }
                // Step 4 times out: it stays Unknown until reconciled on the next step.
            }
            Claim::AlreadyCommitted => self.state.plan_step = step,
        }
        self.state.ci_log = ci_log(step);
        Ok(())
    }

    pub(crate) fn turn(
        &mut self,
        turn: u32,
        world: &mut World,
    ) -> Result<(), Box<dyn std::error::Error>> {
        self.state.turn = turn;
        match action(turn) {
            Action::Inspect => self.state.tool_output.push(tool_output(turn)),
            Action::Migrate => {
                // Reconcile an unknown outcome against the world before anything else.
                for effect in self.durable.list(EffectStatus::Unknown)? {
                    let key = effect.idempotency_key;
                    let status = if world.applied.contains_key(&key) {
                        EffectStatus::Committed
                    } else {
                        EffectStatus::NotStarted
                    };
                    self.durable.reconcile(&key, status)?;
                }
                let step = self.state.plan_step + 1;
                if step <= STEPS {
                    self.migrate(step, world)?;
                }
                // The state's ledger field mirrors the durable ledger.
                self.state.migrations = self.durable.load_log("")?;
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
