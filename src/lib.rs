#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub use compaction_core::*;

/// Classifies every field of an agent's state, so compaction knows what it may do with each.
///
/// ```
/// use compaction::{Compactable, Compactor, EffectLog, FnReacquire, Tokenizer};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
/// struct Subtask {
///     #[protected]
///     title: String,
///     #[redundant]
///     notes: Vec<String>,
/// }
///
/// #[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
/// struct AgentState {
///     #[protected(pin)]                         // always in the window, verbatim
///     constraints: Vec<String>,
///     #[protected]                              // verbatim, or spilled behind a pointer
///     config_path: String,
///     #[derivable(pointer = "file://{config_path}")] // evicted behind its pointer, re-read
///     config_contents: String,
///     #[redundant(summarize)]                   // evicted first, or summarized
///     tool_output: String,
///     #[effect(idempotent = false)]             // exact status, never summarized
///     migrations: EffectLog,
///     #[nested]                                 // classified field by field
///     subtask: Subtask,
/// }
///
/// let state = AgentState {
///     constraints: vec!["never touch /etc/prod".into()],
///     config_path: "/srv/app/config.toml".into(),
///     config_contents: "[db]\nurl = \"postgres://db/app\"\n".repeat(200),
///     tool_output: "ls: a b c\n".repeat(500),
///     subtask: Subtask { title: "rotate keys".into(), notes: vec![] },
///     ..AgentState::default()
/// };
/// let compactor = Compactor::builder().budget(300).token_counter(Tokenizer::O200kBase).build()?;
/// let compacted = compactor.compact_blocking(&state)?;
/// let window = compacted.render();
/// assert!(window.contains(r#"constraints [pinned] = ["never touch /etc/prod"]"#));
/// assert!(window.contains("pointer=file:///srv/app/config.toml"));
///
/// // The way back: evicted derivable fields are re-read through their pointer.
/// let contents = state.config_contents.clone();
/// let files = FnReacquire::new(move |_field: &str, _pointer: &str| Ok(contents.clone().into()));
/// let restored = compactor.rehydrate_blocking(&compacted, &files)?;
/// assert_eq!(restored.constraints, state.constraints);
/// assert_eq!(restored.config_contents, state.config_contents);
/// assert_eq!(restored.tool_output, ""); // redundant: gone for good (a tombstone says so)
/// # Ok::<(), compaction::CompactionError>(())
/// ```
///
/// Every named field takes exactly one class; the compiler refuses a field without one, a
/// pointer that names an unprotected field, protected state hidden in an evictable field, and
/// more (see the crate documentation's "What the compiler refuses").
pub use compaction_derive::Compactable;

/// Makes a plain data type acceptable to a summarizer (`#[derive(Summarizable)]`), for
/// `summarize` fields of your own types. Refused on a type that carries protected or effect
/// state.
///
/// ```
/// use compaction::{Compactable, Summarizable};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Summarizable, Serialize, Deserialize, Default)]
/// struct Document {
///     path: String,
///     body: String,
/// }
///
/// #[derive(Compactable, Serialize, Deserialize, Default)]
/// struct State {
///     #[protected]
///     task_id: String,
///     #[derivable(pointer = "https://docs.example/{task_id}", summarize)]
///     documents: Vec<Document>,
/// }
/// ```
pub use compaction_derive::Summarizable;

/// The README shows `examples/fleet.rs` as an `ignore` block (it needs the `postgres` feature,
/// which the README's doc tests are not built with); CI compiles the file. This keeps the two
/// equal.
#[cfg(test)]
mod readme_fleet {
    #[test]
    fn the_readme_fleet_block_is_examples_fleet_rs() {
        let readme = include_str!("../README.md");
        let example = include_str!("../examples/fleet.rs");
        let code = &example[example.find("use compaction::").unwrap()..];
        let start = readme
            .find("```rust,ignore\nuse compaction::{\n    Compactable, Compactor, Effect, EffectLog, NoReacquire, PgLedger")
            .expect("the fleet block in README.md")
            + "```rust,ignore\n".len();
        let end = start + readme[start..].find("```\n").unwrap();
        assert_eq!(
            &readme[start..end],
            code,
            "README.md's fleet block differs from examples/fleet.rs: copy the file into the README"
        );
    }
}
