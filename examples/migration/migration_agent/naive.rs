//! The baseline agent: its memory is text, and compaction summarizes all of it.

use crate::world::{action, adversarial, ci_log, tool_output, Action, World};
use crate::{CONFIG_PATH, STEPS};
use compaction::{TokenCounter, Tokenizer};

/// The baseline: its memory is text, and compaction summarizes all of it.
pub(crate) struct NaiveAgent {
    pub(crate) memory: String,
    pub(crate) budget: usize,
    pub(crate) counter: Tokenizer,
    pub(crate) compactions: u32,
}

impl NaiveAgent {
    pub(crate) fn remember(&mut self, line: &str) {
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
    pub(crate) fn plan_step(&self) -> u32 {
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

    pub(crate) fn turn(&mut self, turn: u32, world: &mut World) {
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
