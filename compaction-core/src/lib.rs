//! Runtime of the [`compaction`](https://docs.rs/compaction) crate: typed context compaction
//! for AI agents that never silently loses protected state.
//!
//! Most users depend on the `compaction` facade crate, which re-exports everything here together
//! with `#[derive(Compactable)]`.
//!
//! Data flows one way: a [`Compactable`] state is split by class ([`state`]),
//! planned to the budget ([`plan`]), summarized or spilled ([`summaries`], [`store`]), rendered
//! ([`window`]) and reported ([`report`]); [`rehydrate`] goes back.
#![deny(missing_docs)]
// Feature badges on docs.rs (`doc(cfg)` is not stable on the workspace's toolchain, 1.95).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod binding;
pub mod cache;
pub mod checkpoint;
mod compactor;
mod conversation;
#[doc(hidden)]
pub mod derive_support;
pub mod effects;
pub mod error;
pub mod fence;
mod future;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod gc;
mod integrations;
// Each of its modules is behind its feature (empty without any).
mod model_calls;
pub mod plan;
mod planner;
pub mod pointer_tool;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
pub mod rehydrate;
pub mod report;
pub mod session;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub mod sqlite;
pub mod state;
pub mod store;
pub mod summaries;
pub mod tokens;
pub mod transcript;
mod utf8;
pub mod window;

pub use binding::CheckpointBinding;
pub use checkpoint::Compacted;
pub use checkpoint::{SealKey, SealKeyError};
pub use compactor::{
    Compactor, CompactorBuilder, SESSION_HIGH_WATER, SESSION_KEEP_FIRST, SESSION_LOW_WATER,
    SESSION_PAGE_RESULTS_OVER, SESSION_WINDOW_SHARE,
};
pub use effects::{
    history_problem, AnnotatedTransition, Effect, EffectError, EffectLedger, EffectLog,
    EffectRecords, EffectStatus, MemoryLedger, Settlement, SyncSummary, Transition,
};
pub use error::{CompactionError, FieldCost};
pub use future::{block_on, BoxFuture};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub use gc::StoreAdmin;
#[cfg(feature = "anthropic-types")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic-types")))]
pub use integrations::anthropic;
#[cfg(feature = "hf-tokenizers")]
#[cfg_attr(docsrs, doc(cfg(feature = "hf-tokenizers")))]
pub use integrations::hf_tokenizers::{self, HfTokenizer, HfTokenizerError};
#[cfg(feature = "openai-types")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-types")))]
pub use integrations::openai;
pub use pointer_tool::{resolve_pointer_tool, PointerResolver, PointerToolError, PointerToolReply};
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::{PgError, PgErrorKind, PgLedger, PgLedgerError, PgStore};
pub use rehydrate::{
    DefaultedField, FnReacquire, NoReacquire, Reacquire, ReacquireError, RehydrateOptions,
    Rehydrated,
};
pub use report::{CompactionReport, FieldOutcome, FieldReport, PagedResult, TranscriptReport};
pub use session::{
    EffectCall, EffectOutcome, ModelResponse, ResponseProblem, Session, SessionBuilder,
    SessionError, SessionRequest, ToolFailure,
};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::{
    SqliteError, SqliteErrorKind, SqliteLedger, SqliteLedgerError, SqliteOptions, SqliteStore,
};
pub use state::{
    Compactable, FieldClass, FieldSchema, HasTranscript, NestedField, Part, Parts, RebuildError,
    Schema, SchemaBuilder, Segment, Shape, Summarizable, Visitor,
};
pub use store::{AsPointer, ContentHash, Fingerprint, MemoryStore, Pointer, Store, StoreError};
pub use summaries::{
    summary_cache_problem, Extractive, FnSummarizer, Summarizer, SummarizerError, SummaryRequest,
};
pub use tokens::{TokenCounter, Tokenizer};
pub use transcript::{
    AnthropicMessages, ChatFormat, Message, OpenAiChat, Role, ToolCall, ToolDefinition, Transcript,
    TranscriptError,
};
pub use window::{
    DefaultRenderer, EffectsView, FieldView, FormView, Renderer, Section, WindowView,
};

#[doc(hidden)]
pub use derive_support as __private;
