//! The simulated outside world (database, files, CI), the lossy summarizer, the `Reacquire`
//! that reads evicted fields back, and what the agent does on each turn.

use crate::{CONFIG_PATH, STEPS};
use compaction::{FnReacquire, Reacquire, TokenCounter, Tokenizer};
use std::collections::BTreeMap;

/// The outside world: the database, the file system, the CI.
#[derive(Default)]
pub(crate) struct World {
    pub(crate) applied: BTreeMap<String, u32>,
    pub(crate) prod_writes: u32,
    pub(crate) files: BTreeMap<String, String>,
    pub(crate) wrong_path_reads: u32,
}

impl World {
    pub(crate) fn new() -> Self {
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
    pub(crate) fn apply(&mut self, key: &str) {
        *self.applied.entry(key.to_string()).or_default() += 1;
    }
    pub(crate) fn read(&mut self, path: &str) -> Option<String> {
        let found = self.files.get(path).cloned();
        if found.is_none() {
            self.wrong_path_reads += 1;
        }
        found
    }
    pub(crate) fn reapplied(&self) -> u32 {
        self.applied.values().map(|n| n.saturating_sub(1)).sum()
    }
}

pub(crate) fn tool_output(turn: u32) -> String {
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

pub(crate) fn ci_log(step: u32) -> String {
    (0..60)
        .map(|i| format!("[ci step {step}] test tenants::case_{i} ... ok\n"))
        .collect()
}

/// The summarizer the design notes describe: fluent, plausible, and lossy exactly where it hurts.
pub(crate) fn adversarial(text: &str, target: usize) -> String {
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
pub(crate) fn environment(world: &World) -> impl Reacquire {
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
pub(crate) enum Action {
    Inspect,
    Migrate,
    VerifyConfig,
    TuneProd,
}

pub(crate) fn action(turn: u32) -> Action {
    match turn {
        t if t % 6 == 5 => Action::Migrate,
        20 | 40 | 58 => Action::VerifyConfig,
        30 | 50 => Action::TuneProd,
        _ => Action::Inspect,
    }
}
