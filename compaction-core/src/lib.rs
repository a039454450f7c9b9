//! Runtime of the [`compaction`](https://docs.rs/compaction) crate: typed context compaction
//! for AI agents that never silently loses protected state.
//!
//! Most users depend on the `compaction` facade crate, which re-exports everything here together
//! with `#[derive(Compactable)]`.
//!
//! Data flows one way: a [`Compactable`] state is split by class ([`schema`], [`compactable`]),
//! planned to the budget ([`plan`]), summarized or spilled ([`summarize`], [`store`]), rendered
//! ([`render`]) and reported ([`report`]); [`rehydrate`] goes back.
#![deny(missing_docs)]

mod block_on;
pub mod compactable;
mod compacted;
mod compactor;
pub mod error;
mod gates;
mod json_len;
pub mod ledger;
pub mod markers;
pub mod plan;
pub mod rehydrate;
pub mod render;
pub mod report;
pub mod schema;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod store;
pub mod summarize;
pub mod tokens;
pub mod transcript;

pub use block_on::block_on;
pub use compactable::{
    Compactable, NestedField, Part, Parts, RebuildError, Segment, Shape, Visitor,
};
pub use compacted::{Compacted, Section};
pub use compactor::{Compactor, CompactorBuilder};
pub use error::{CompactionError, FieldCost};
pub use ledger::{Effect, EffectError, EffectLog, EffectRecords, EffectStatus};
pub use markers::Summarizable;
pub use rehydrate::{FnReacquire, NoReacquire, Reacquire, ReacquireError};
pub use render::{DefaultRenderer, EffectsView, FieldView, FormView, Renderer, WindowView};
pub use report::{CompactionReport, FieldOutcome, FieldReport};
pub use schema::{FieldClass, FieldSchema, Schema, SchemaBuilder};
#[cfg(feature = "sqlite")]
pub use sqlite::{
    LedgerError, SqliteError, SqliteErrorKind, SqliteLedger, SqliteOptions, SqliteStore,
};
pub use store::{AsPointer, ContentHash, Fingerprint, MemoryStore, Pointer, Store, StoreError};
pub use summarize::{Extractive, FnSummarizer, Summarizer, SummarizerError, SummaryRequest};
pub use tokens::{TokenCounter, Tokenizer};
pub use transcript::{Message, Role, ToolCall, Transcript, TranscriptError};

/// A boxed `Send` future, as the object-safe forms of the async traits return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Items the derive's generated code uses. Not a public API: names may change in any release.
#[doc(hidden)]
pub mod __private {
    /// The derive's autoref gates (declared once here, not in every derive's output).
    pub mod gates {
        pub use crate::gates::*;
    }
    pub use crate::compactable::{
        NestedField, Part, Parts, PointerFn, RebuildError, Segment, Shape, Visitor,
    };
    pub use crate::markers::{
        assert_effect_records, assert_evictable, assert_nested, assert_redundant_default,
        assert_summarizable, CarriesStateProbe, PlainProbe, Probe,
    };
    pub use crate::schema::{schema_for, FieldClass, Schema};
    pub use serde;
    pub use std::sync::OnceLock;

    /// Appends a protected value to a pointer: strings as they are, anything else as JSON.
    pub fn push_placeholder<T: serde::Serialize + ?Sized>(out: &mut String, value: &T) {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::String(s)) => out.push_str(&s),
            Ok(other) => out.push_str(&other.to_string()),
            Err(_) => out.push_str("<unserializable>"),
        }
    }
}
