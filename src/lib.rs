#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
// docs.rs builds with every feature and `--cfg docsrs` (see `[package.metadata.docs.rs]`), and
// marks each feature-gated item with the feature it needs. `doc(cfg)` is not stable on the
// workspace's toolchain (1.95), so the badges are only asked for there.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The surface, by concept. Each item has one path, except the backends' and integrations' main
// types, which are also at the root. `tests/public_api.rs` pins the list of paths.

// Classifying a state (what `#[derive(Compactable)]` implements, for hand-written impls too).
pub use compaction_core::state::PointerFn;
pub use compaction_core::{
    Compactable, FieldClass, FieldSchema, HasTranscript, NestedField, Part, Parts, RebuildError,
    Schema, SchemaBuilder, Segment, Shape, Summarizable, Visitor,
};

// Compacting, and what a compaction reports or refuses.
pub use compaction_core::{block_on, BoxFuture};
pub use compaction_core::{CompactionError, FieldCost};
pub use compaction_core::{
    CompactionReport, FieldOutcome, FieldReport, PagedResult, TranscriptReport,
};
pub use compaction_core::{Compactor, CompactorBuilder, SESSION_HIGH_WATER, SESSION_LOW_WATER};
pub use compaction_core::{TokenCounter, Tokenizer};

// The window a model reads, and custom formats (`render` has the default format's constants).
pub use compaction_core::{
    DefaultRenderer, EffectsView, FieldView, FormView, Renderer, Section, WindowView,
};
pub mod render {
    //! The default window format's thresholds and notices, and the escapes a custom
    //! [`Renderer`](crate::Renderer) applies to text it did not write (see the
    //! [`DefaultRenderer`](crate::DefaultRenderer) for the format).
    pub use compaction_core::window::{
        escape_inline, escape_pointer, COMPACT_FORM_BELOW, COMPACT_NOTICE, REVERIFY_NOTICE,
    };
}

// Summaries.
pub use compaction_core::{Extractive, FnSummarizer, Summarizer, SummarizerError, SummaryRequest};

// The checkpoint: what a compaction returns, its seals and binding, and where it is kept.
pub use compaction_core::checkpoint::{
    CheckpointError, CheckpointInfo, CheckpointRow, CheckpointStore,
};
pub use compaction_core::{CheckpointBinding, Compacted, SealKey, SealKeyError};

// Rehydration: the way back.
pub use compaction_core::{
    DefaultedField, FnReacquire, NoReacquire, Reacquire, ReacquireError, RehydrateOptions,
    Rehydrated,
};

// Stores: content-addressed blobs behind pointers.
pub use compaction_core::store::POINTER_PREFIX;
pub use compaction_core::{
    AsPointer, ContentHash, Fingerprint, MemoryStore, Pointer, Store, StoreError,
};

// Effects: exact statuses, and the ledgers that hold them.
pub use compaction_core::{
    Effect, EffectError, EffectLedger, EffectLog, EffectRecords, EffectStatus, MemoryLedger,
    SyncSummary, Transition,
};

// Transcripts: the conversation as typed state (the planner's details are in `transcript`).
pub use compaction_core::transcript;
pub use compaction_core::{Message, Role, ToolCall, Transcript, TranscriptError};

// The pointer tool a model calls to read what left its context.
pub use compaction_core::pointer_tool;
pub use compaction_core::{
    resolve_pointer_tool, PointerResolver, PointerToolError, PointerToolReply,
};

// Sessions: an agent's loop (compact, checkpoint, resume, its tools under the ledger).
pub use compaction_core::session;
pub use compaction_core::{
    EffectCall, EffectOutcome, ModelResponse, Session, SessionBuilder, SessionError,
    SessionRequest, ToolFailure,
};

// Backends: SQLite (embedded, the default) and PostgreSQL (a fleet).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use compaction_core::backends::postgres;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use compaction_core::backends::sqlite;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use compaction_core::{PgError, PgErrorKind, PgLedger, PgLedgerError, PgStore};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use compaction_core::{
    SqliteError, SqliteErrorKind, SqliteLedger, SqliteLedgerError, SqliteOptions, SqliteStore,
};

// Integrations with outside crates.
#[cfg(feature = "hf-tokenizers")]
#[cfg_attr(docsrs, doc(cfg(feature = "hf-tokenizers")))]
pub use compaction_core::hf_tokenizers;
#[cfg(feature = "openai-types")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-types")))]
pub use compaction_core::openai;
#[cfg(feature = "hf-tokenizers")]
#[cfg_attr(docsrs, doc(cfg(feature = "hf-tokenizers")))]
pub use compaction_core::{HfTokenizer, HfTokenizerError};

// What the derive's generated code names; not an API.
#[doc(hidden)]
pub use compaction_core::__private;

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
/// assert_eq!(restored.tool_output, ""); // evicted (no summarizer here): a tombstone says so
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

/// The README shows the examples that need a cargo feature (`postgres`, `openai`,
/// `openai-types`) as `ignore` blocks, because its doc tests also run without features; CI
/// compiles the files with every feature. These tests keep each block equal to its file, and
/// every `ignore` block backed by one.
#[cfg(test)]
mod readme_examples {
    const README: &str = include_str!("../README.md");
    const OPENER: &str = "```rust,ignore\n";

    /// Each example the README shows, with its text.
    const SHOWN: [(&str, &str); 3] = [
        ("examples/fleet.rs", include_str!("../examples/fleet.rs")),
        (
            "examples/openai_setup.rs",
            include_str!("../examples/openai_setup.rs"),
        ),
        (
            "examples/openai_request.rs",
            include_str!("../examples/openai_request.rs"),
        ),
    ];

    /// The file below its `//!` header: what the README shows.
    fn shown_code(file: &str) -> &str {
        let header: usize = file
            .split_inclusive('\n')
            .take_while(|line| line.starts_with("//!") || line.trim().is_empty())
            .map(str::len)
            .sum();
        &file[header..]
    }

    /// The text of every `ignore` block of the README.
    fn ignored_blocks() -> Vec<&'static str> {
        README
            .match_indices(OPENER)
            .map(|(at, _)| {
                let start = at + OPENER.len();
                let end = start + README[start..].find("```\n").expect("a closed block");
                &README[start..end]
            })
            .collect()
    }

    #[test]
    fn every_example_the_readme_shows_is_its_file_verbatim() {
        let blocks = ignored_blocks();
        for (path, file) in SHOWN {
            let code = shown_code(file);
            assert!(
                code.starts_with("use compaction"),
                "{path}: no code below its header"
            );
            assert!(
                blocks.contains(&code),
                "README.md's block for {path} differs from the file: copy the file (below its \
                 `//!` header) into the README as a rust,ignore block"
            );
        }
    }

    #[test]
    fn every_ignored_readme_block_is_an_example_file() {
        let blocks = ignored_blocks();
        assert_eq!(
            blocks.len(),
            SHOWN.len(),
            "one rust,ignore block per file in SHOWN"
        );
        for block in blocks {
            assert!(
                SHOWN.iter().any(|(_, file)| shown_code(file) == block),
                "a rust,ignore block of README.md is no example file (doc-test it, or show a \
                 file and add it to SHOWN):\n{block}"
            );
        }
    }
}
