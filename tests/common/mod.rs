//! The state types the integration tests share: the issue's `MigrationState` and friends.
#![allow(dead_code)]

use compaction::{Compactable, EffectLog, Summarizable};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Subtask {
    #[protected]
    pub title: String,
    #[protected]
    pub blocked_on: Option<String>,
    #[redundant]
    pub notes: Vec<String>,
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct MigrationState {
    #[protected(pin)]
    pub constraints: Vec<String>,
    #[protected]
    pub plan_step: u32,
    #[protected]
    pub config_path: String,
    #[derivable(pointer = "file://{config_path}")]
    pub config_contents: String,
    #[derivable(pointer = "https://ci.example/runs/{plan_step}", summarize)]
    pub ci_log: String,
    #[redundant]
    pub tool_output: Vec<String>,
    #[effect(idempotent = false)]
    pub migrations: EffectLog,
    #[nested]
    pub subtask: Subtask,
}

#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ToolCall {
    pub tool: String,
    pub output: String,
}
