//! The derive's private support, reached by its generated code as `compaction::__private`: the
//! autoref gates, the compile-time checks, the pointer-template helper, and the items of the
//! contract the generated impls name. Not a public API: names may change in any release.
#![allow(missing_docs)]

mod carriers;
mod checks;
pub mod gates;
mod placeholder;

pub use carriers::{
    assert_evictable, assert_protectable, At, CarriesState, CarriesStateProbe, Evictable, Here,
    HoldsProtectedState, Inside, PlainData, PlainProbe, PlainValue, Probe, Protectable,
};
pub use checks::{
    assert_effect_records, assert_nested, assert_redundant_default, assert_summarizable,
    assert_transcript, IsTranscript, RedundantDefault,
};
pub use placeholder::push_placeholder;
// The contract's items the generated impls name.
pub use crate::state::compactable::{NestedField, Part, Parts, PointerFn, Visitor};
pub use crate::state::path::{RebuildError, Segment, Shape};
pub use crate::state::schema::{schema_for, FieldClass, Schema};
pub use serde;
pub use std::sync::OnceLock;
