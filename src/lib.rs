// The README is the front page, and `docs/*.md` the guide's chapters (`guide` below). Their
// links to each other are reference links (`[Effects][docs/effects.md]`) whose definitions at
// the end of each file are relative paths, right on GitHub. `guide_links.md` defines the same
// labels for rustdoc (a chapter's module, or a full GitHub address) and comes first: where a
// label is defined twice, the first definition wins.
#![doc = include_str!("guide_links.md")]
#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
// docs.rs builds with every feature and `--cfg docsrs` (see `[package.metadata.docs.rs]`), and
// marks each feature-gated item with the feature it needs. `doc(cfg)` is not stable on the
// workspace's toolchain (1.95), so the badges are only asked for there.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The surface, by concept. Each item has one path, except the backends' and integrations' main
// types, which are also at the root. `tests/api/public_api.rs` pins the list of paths.

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
pub use compaction_core::{
    Compactor, CompactorBuilder, SESSION_HIGH_WATER, SESSION_KEEP_FIRST, SESSION_LOW_WATER,
    SESSION_PAGE_RESULTS_OVER, SESSION_WINDOW_SHARE,
};
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

// Summaries (and the check `compaction verify` runs on every summary cache entry).
pub use compaction_core::summary_cache_problem;
pub use compaction_core::{Extractive, FnSummarizer, Summarizer, SummarizerError, SummaryRequest};

// The checkpoint: what a compaction returns, its seals and binding, and where it is kept.
pub use compaction_core::checkpoint::{
    CheckpointError, CheckpointInfo, CheckpointPart, CheckpointRow, CheckpointStore, TakenEpoch,
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
// What an operator's tool lists and collects on any durable store (the rules are on
// `sqlite::GcOptions` / `postgres::GcOptions`).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub use compaction_core::StoreAdmin;

// Effects: exact statuses, and the ledgers that hold them (with their histories, and the
// check of a status against its history).
pub use compaction_core::{
    history_problem, AnnotatedTransition, Effect, EffectError, EffectLedger, EffectLog,
    EffectRecords, EffectStatus, MemoryLedger, Settlement, SyncSummary, Transition,
};

// Transcripts: the conversation as typed state (the planner's details are in `transcript`),
// and the wire formats a request is planned for.
pub use compaction_core::transcript;
pub use compaction_core::{AnthropicMessages, ChatFormat, OpenAiChat};
pub use compaction_core::{Message, Role, ToolCall, ToolDefinition, Transcript, TranscriptError};

// The providers' prompt caches, modelled from their documentation: what a request reads,
// writes and costs (the benches price sessions with them).
pub use compaction_core::cache;

// The pointer tool a model calls to read what left its context.
pub use compaction_core::pointer_tool;
pub use compaction_core::{
    resolve_pointer_tool, PointerResolver, PointerToolError, PointerToolReply,
};

// Sessions: an agent's loop (compact, checkpoint, resume, its tools under the ledger).
pub use compaction_core::session;
pub use compaction_core::{
    EffectCall, EffectOutcome, ModelResponse, ResponseProblem, Session, SessionBuilder,
    SessionError, SessionRequest, ToolFailure,
};
// One agent, one writer: the fencing token every session takes when it opens.
pub use compaction_core::fence;
pub use compaction_core::fence::{OpenMode, Superseded};

// Backends: SQLite (embedded, the default) and PostgreSQL (a fleet).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use compaction_core::postgres;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use compaction_core::sqlite;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use compaction_core::{PgError, PgErrorKind, PgLedger, PgLedgerError, PgStore};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use compaction_core::{
    SqliteError, SqliteErrorKind, SqliteLedger, SqliteLedgerError, SqliteOptions, SqliteStore,
};

// Integrations with outside crates.
#[cfg(feature = "anthropic-types")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic-types")))]
pub use compaction_core::anthropic;
#[cfg(feature = "hf-tokenizers")]
#[cfg_attr(docsrs, doc(cfg(feature = "hf-tokenizers")))]
pub use compaction_core::hf_tokenizers;
#[cfg(feature = "openai-types")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-types")))]
pub use compaction_core::openai;
#[cfg(feature = "hf-tokenizers")]
#[cfg_attr(docsrs, doc(cfg(feature = "hf-tokenizers")))]
pub use compaction_core::{HfTokenizer, HfTokenizerError};

// The guide's chapters (`docs/*.md`), as modules: rustdoc shows them beside the API, and their
// code blocks run as doc tests.
pub mod guide {
    //! The guide: everything the front page leaves out, one chapter a module. These are the
    //! files under `docs/` of the repository; every code block in them is compiled and tested
    //! as this crate's doc tests (the blocks that need a cargo feature are example files, kept
    //! equal to them by a test).
    //!
    //! | chapter | what it covers |
    //! |---|---|
    //! | [`guarantees`] | what `compact` and `rehydrate` promise, seals and seal keys, bindings and rollback |
    //! | [`compacting`] | the planning order, the window format, summarizers, tokenizers, what the compiler refuses |
    //! | [`effects`] | the effect log, reconciling an unknown outcome, effect scopes |
    //! | [`transcripts`] | the conversation as typed state |
    //! | [`models`] | summaries from a model (OpenAI-compatible servers, Anthropic) |
    //! | [`pointers`] | the `resolve_pointer` tool a model calls |
    //! | [`storage`] | the SQLite store, checkpoints and effect ledger |
    //! | [`operating`] | the `compaction` command line |
    //! | [`postgres`] | a fleet on PostgreSQL, and what each backend promises |
    //! | [`sessions`] | `Session`: the agent loop, the cacheable request, resuming after a crash |
    //! | [`anthropic`] | recipe: an agent on Anthropic's Messages API (features, counter, tools, cache breakpoints) |
    //! | [`errors_async_logging`] | errors, runtimes, logging |
    //! | [`architecture`] | the modules of the core, and where to add |
    //! | [`testing`] | contributing: property, fault, tamper and fuzz tests, benchmarks |

    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/guarantees.md")]
    pub mod guarantees {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/compacting.md")]
    pub mod compacting {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/effects.md")]
    pub mod effects {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/transcripts.md")]
    pub mod transcripts {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/models.md")]
    pub mod models {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/pointers.md")]
    pub mod pointers {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/storage.md")]
    pub mod storage {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/operating.md")]
    pub mod operating {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/postgres.md")]
    pub mod postgres {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/sessions.md")]
    pub mod sessions {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/fleet.md")]
    pub mod fleet {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/anthropic.md")]
    pub mod anthropic {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/errors-async-logging.md")]
    pub mod errors_async_logging {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/architecture.md")]
    pub mod architecture {}
    #[doc = include_str!("guide_links.md")]
    #[doc = include_str!("../docs/testing.md")]
    pub mod testing {}
}

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
/// more (see [What the compiler refuses](crate::guide::compacting#what-the-compiler-refuses)).
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

/// The README and the guide (`docs/*.md`) show the examples that need a cargo feature
/// (`postgres`, `openai`, `openai-types`, `anthropic-types`) as `ignore` blocks, because their doc tests also run
/// without features; CI compiles the files with every feature. These tests keep each block
/// equal to its file, every `ignore` block backed by one, every chapter wired in as a `guide`
/// module (so its other blocks run as doc tests), and the front page short.
#[cfg(test)]
mod doc_examples {
    use std::path::Path;

    const OPENER: &str = "```rust,ignore\n";
    const ROOT: &str = env!("CARGO_MANIFEST_DIR");

    /// Each example the README or a chapter shows, with its text.
    const SHOWN: [(&str, &str); 4] = [
        (
            "examples/anthropic_recipe.rs",
            include_str!("../examples/anthropic_recipe.rs"),
        ),
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

    /// The README and every chapter under `docs/`: (path, text).
    fn pages() -> Vec<(String, String)> {
        let mut pages = vec![("README.md".to_string(), read("README.md"))];
        let mut chapters: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("docs"))
            .expect("the guide's directory, docs/")
            .map(|entry| entry.expect("a docs/ entry").file_name())
            .map(|name| name.into_string().expect("a UTF-8 file name"))
            .filter(|name| name.ends_with(".md"))
            .collect();
        chapters.sort();
        assert!(!chapters.is_empty(), "no chapter under docs/");
        for name in chapters {
            let path = format!("docs/{name}");
            let text = read(&path);
            pages.push((path, text));
        }
        pages
    }

    fn read(path: &str) -> String {
        std::fs::read_to_string(Path::new(ROOT).join(path))
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The file below its `//!` header: what a page shows.
    fn shown_code(file: &str) -> &str {
        let header: usize = file
            .split_inclusive('\n')
            .take_while(|line| line.starts_with("//!") || line.trim().is_empty())
            .map(str::len)
            .sum();
        &file[header..]
    }

    /// The text of every `ignore` block of one page.
    fn ignored_blocks(page: &str) -> Vec<&str> {
        page.match_indices(OPENER)
            .map(|(at, _)| {
                let start = at + OPENER.len();
                let end = start + page[start..].find("```\n").expect("a closed block");
                &page[start..end]
            })
            .collect()
    }

    #[test]
    fn every_example_a_page_shows_is_its_file_verbatim() {
        let pages = pages();
        for (path, file) in SHOWN {
            let code = shown_code(file);
            assert!(
                code.starts_with("use compaction"),
                "{path}: no code below its header"
            );
            let showing: Vec<&str> = pages
                .iter()
                .filter(|(_, text)| ignored_blocks(text).contains(&code))
                .map(|(page, _)| page.as_str())
                .collect();
            assert_eq!(
                showing.len(),
                1,
                "{path} must be shown verbatim by exactly one page, not {showing:?}: copy the file \
                 (below its `//!` header) into its chapter as a rust,ignore block"
            );
        }
    }

    #[test]
    fn every_ignored_block_is_an_example_file() {
        let mut count = 0;
        for (page, text) in pages() {
            for block in ignored_blocks(&text) {
                count += 1;
                assert!(
                    SHOWN.iter().any(|(_, file)| shown_code(file) == block),
                    "a rust,ignore block of {page} is no example file (doc-test it, or show a \
                     file and add it to SHOWN):\n{block}"
                );
            }
        }
        assert_eq!(
            count,
            SHOWN.len(),
            "one rust,ignore block per file in SHOWN"
        );
    }

    /// A chapter that is not a `guide` module would have its code blocks never run.
    #[test]
    fn every_chapter_is_a_guide_module() {
        let lib = include_str!("lib.rs");
        for (page, _) in pages().into_iter().skip(1) {
            let include = format!("#[doc = include_str!(\"../{page}\")]");
            assert!(
                lib.contains(&include),
                "{page} is not included in src/lib.rs's `guide` module: add `{include}` and a \
                 `pub mod` under it"
            );
            let link = format!("[{page}]: crate::guide::");
            assert!(
                include_str!("guide_links.md").contains(&link),
                "src/guide_links.md does not define {page}'s link for rustdoc"
            );
        }
    }

    /// The README is the crate's front page (issue 19): what it is, the commands, the
    /// quickstart, the classes, the guarantees and links. The rest belongs in a chapter.
    #[test]
    fn the_front_page_stays_short() {
        let lines = read("README.md").lines().count();
        assert!(
            lines < 400,
            "README.md has {lines} lines: move detail into a chapter under docs/"
        );
    }
}
