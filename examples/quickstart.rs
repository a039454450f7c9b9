//! Quickstart: classify an agent's state, compact it to a token budget, rehydrate it.
//!
//! Run: `cargo run --example quickstart`
//!
//! Copy this as the skeleton of your own agent: one struct, one attribute per field, one
//! `Compactor`, and the window text goes into your model's context.

use compaction::{
    Compactable, Compactor, Effect, EffectLog, Extractive, FieldOutcome, FnReacquire, MemoryStore,
    Tokenizer,
};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct AgentState {
    /// Stated once by the user; must never be paraphrased or leave the window.
    #[protected(pin)]
    constraints: Vec<String>,
    /// Exact values the next tool call needs; spilled behind a pointer if space runs out.
    #[protected]
    plan_step: u32,
    #[protected]
    config_path: String,
    /// Can be re-read from disk, so it may leave the window behind a `file://` pointer.
    #[derivable(pointer = "file://{config_path}")]
    config_contents: String,
    /// Raw tool output: evicted first, restored empty.
    #[redundant(summarize)]
    tool_output: String,
    /// Side effects with exact status: never summarized.
    #[effect(idempotent = false)]
    migrations: EffectLog,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut state = AgentState {
        constraints: vec!["never modify anything under /etc/prod (read-only)".into()],
        plan_step: 3,
        config_path: "/srv/app/config.toml".into(),
        config_contents: "[db]\npool = 20\n".repeat(50),
        tool_output: "$ ls /srv/app\nconfig.toml  data  logs\n".repeat(300),
        ..AgentState::default()
    };
    state
        .migrations
        .record(Effect::new("apply_migration", "db://app/users", "mig-0003"))?;
    state.migrations.begin("mig-0003")?;
    state.migrations.commit("mig-0003")?;

    const BUDGET: usize = 600; // tokens the window may take in the model's context
    let compactor = Compactor::builder()
        .budget(BUDGET)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(MemoryStore::default())
        .build()?;

    let compacted = compactor.compact_blocking(&state)?;
    println!("{}\n", compacted.render());
    println!(
        "the window above: {} tokens (budget {BUDGET}); field by field:",
        compacted.tokens()
    );
    for field in &compacted.report().fields {
        let what = match &field.outcome {
            FieldOutcome::Kept => "kept verbatim".to_string(),
            FieldOutcome::Summarized { source, .. } => format!("summarized; source at {source}"),
            FieldOutcome::Evicted { pointer } => format!("evicted; re-read from {pointer}"),
            FieldOutcome::Spilled { pointer } => format!("spilled verbatim to {pointer}"),
            FieldOutcome::Tombstoned => "dropped (a tombstone says so)".to_string(),
        };
        println!("  {:<22} {what}", field.field);
    }
    assert!(compacted.tokens() <= BUDGET);

    // Re-acquire what left the window through its pointer (here: pretend to re-read the file).
    let contents = state.config_contents.clone();
    let files = FnReacquire::new(move |_field: &str, pointer: &str| {
        if pointer == "file:///srv/app/config.toml" {
            Ok(serde_json::Value::String(contents.clone()))
        } else {
            Err(format!("cannot re-read {pointer}").into())
        }
    });
    let restored = compactor.rehydrate_blocking(&compacted, &files)?;
    assert_eq!(restored.constraints, state.constraints);
    assert_eq!(restored.plan_step, 3);
    assert_eq!(restored.migrations, state.migrations);
    println!(
        "\nrehydrated: plan_step={} constraints={:?}",
        restored.plan_step, restored.constraints
    );
    Ok(())
}
