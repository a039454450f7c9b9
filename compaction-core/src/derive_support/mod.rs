//! The derive's private support, reached by its generated code as `compaction::__private`: the
//! autoref gates, the compile-time checks, the pointer-template helper, and the items of the
//! contract the generated impls name. Not a public API: names may change in any release.
#![allow(missing_docs)]

mod carriers;
mod checks;
pub mod gates;
mod placeholder;

pub use carriers::{
    assert_effect_field, assert_evictable, assert_nested_field, assert_protectable,
    assert_transcript_field, At, CarriesState, CarriesStateProbe, ConversationProbe, EffectVerdict,
    EvictVerdict, Evictable, Here, HoldsProtectedState, Inside, IsConversation,
    NestedNotTranscript, NestedVerdict, PlainData, PlainNotTranscript, PlainProbe, PlainValue,
    Probe, ProtectVerdict, Protectable, StateNotEvictable, StateNotProtectable, TakesTranscript,
    TranscriptField,
};
pub use checks::{
    assert_effect_records, assert_nested, assert_redundant_default, assert_summarizable,
    RedundantDefault,
};
pub use placeholder::push_placeholder;
// The contract's items the generated impls name.
pub use crate::state::compactable::{NestedField, Part, Parts, PointerFn, Visitor};
pub use crate::state::path::{RebuildError, Segment, Shape};
pub use crate::state::schema::{schema_for, FieldClass, Schema};
pub use serde;
pub use std::sync::OnceLock;
