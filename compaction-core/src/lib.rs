//! Runtime of the [`compaction`](https://docs.rs/compaction) crate: typed context compaction
//! for AI agents that never silently loses protected state.
//!
//! Most users depend on the `compaction` facade crate, which re-exports everything here together
//! with `#[derive(Compactable)]`.
//!
//! Data flows one way: a [`Compactable`] state is split by class ([`state`]),
//! planned to the budget ([`plan`]), summarized or spilled ([`summarize`], [`store`]), rendered
//! ([`render`]) and reported ([`report`]); [`rehydrate`] goes back.
#![deny(missing_docs)]

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod checkpoint;
mod compacted;
mod compactor;
#[doc(hidden)]
pub mod derive_support;
pub mod effects;
pub mod error;
mod future;
mod integrations;
pub mod plan;
pub mod pointer_tool;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod rehydrate;
pub mod render;
pub mod report;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod state;
pub mod store;
pub mod summarize;
pub mod tokens;
pub mod transcript;
mod window_fields;

pub use compacted::Compacted;
pub use compactor::{Compactor, CompactorBuilder, SESSION_HIGH_WATER, SESSION_LOW_WATER};
pub use effects::{
    Effect, EffectError, EffectLedger, EffectLog, EffectRecords, EffectStatus, MemoryLedger,
};
pub use error::{CompactionError, FieldCost};
pub use future::{block_on, BoxFuture};
#[cfg(feature = "hf-tokenizers")]
pub use integrations::hf_tokenizers::{self, HfTokenizer, HfTokenizerError};
#[cfg(feature = "openai-types")]
pub use integrations::openai;
pub use pointer_tool::{resolve_pointer_tool, PointerResolver, PointerToolError, PointerToolReply};
#[cfg(feature = "postgres")]
pub use postgres::{PgError, PgErrorKind, PgLedger, PgLedgerError, PgStore};
pub use rehydrate::{
    DefaultedField, FnReacquire, NoReacquire, Reacquire, ReacquireError, RehydrateOptions,
    Rehydrated,
};
pub use render::{
    DefaultRenderer, EffectsView, FieldView, FormView, Renderer, Section, WindowView,
};
pub use report::{CompactionReport, FieldOutcome, FieldReport, TranscriptReport};
#[cfg(feature = "sqlite")]
pub use sqlite::{
    LedgerError, SqliteError, SqliteErrorKind, SqliteLedger, SqliteOptions, SqliteStore,
};
pub use state::{
    Compactable, FieldClass, FieldSchema, NestedField, Part, Parts, RebuildError, Schema,
    SchemaBuilder, Segment, Shape, Summarizable, Visitor,
};
pub use store::{
    AsPointer, ContentHash, Fingerprint, MemoryStore, Pointer, SealKey, SealKeyError, Store,
    StoreError,
};
pub use summarize::{Extractive, FnSummarizer, Summarizer, SummarizerError, SummaryRequest};
pub use tokens::{TokenCounter, Tokenizer};
pub use transcript::{Message, Role, ToolCall, Transcript, TranscriptError};

// Paths of v0.1, before `state/` and `derive_support/`: kept so no public path breaks. The
// derive's generated code still names `markers::CarriesState`.
#[doc(hidden)]
pub use effects as ledger;
#[doc(hidden)]
pub use state as compactable;
#[doc(hidden)]
pub use state as schema;
#[doc(hidden)]
pub mod markers {
    pub use crate::derive_support::{
        assert_effect_records, assert_evictable, assert_nested, assert_redundant_default,
        assert_summarizable, CarriesState, CarriesStateProbe, Evictable, HoldsProtectedState,
        PlainProbe, PlainValue, Probe, RedundantDefault,
    };
    pub use crate::state::Summarizable;
}

#[doc(hidden)]
pub use derive_support as __private;
