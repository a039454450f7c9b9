//! Autoref gates between the derive's generated body and the trait a field's class needs
//! (`NestedField`, `EffectRecords`, `Summarizable`, `Default`). Not a public API.
//!
//! `(&&Gate::<T>::NEW).method(..)` selects the `*Yes` trait's real method when `T` has the trait
//! and the `*No` trait's silent fallback when it does not: then the field's own compile check is
//! the one and only error, at the field. The fallbacks are never run: a build that selects one
//! fails (and were one ever reached, visiting panics rather than skip a field in silence). The
//! one exception is `__rebuild_derivable`, whose fallback is the strict rebuild.
//!
//! They live here, once, rather than in every derive's output: declared per struct they were a
//! third of the derive's compile time (type and borrow checking of ten traits per struct).
#![allow(missing_docs)]

use crate::conversation::transcript::Transcript;
use crate::effects::record::EffectRecords;
use crate::state::compactable::{NestedField, Parts, PointerFn, Visitor};
use crate::state::path::RebuildError;
use crate::state::schema::Schema;
use crate::state::summarizable::Summarizable;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;

pub struct Gate<T>(PhantomData<T>);

impl<T> Gate<T> {
    pub const NEW: Self = Gate(PhantomData);
}

pub trait NestedYes<T: NestedField> {
    fn __nested_schema(&self) -> &'static Schema {
        T::nested_schema()
    }
    fn __repeated(&self) -> bool {
        T::REPEATED
    }
    fn __conditional(&self) -> bool {
        T::CONDITIONAL
    }
    fn __visit_nested<'a, V: Visitor<'a>>(
        &self,
        value: &'a T,
        name: &'static str,
        visitor: &mut V,
    ) {
        T::visit_nested(value, name, visitor)
    }
    fn __rebuild_nested(&self, parts: &mut Parts, name: &'static str) -> Result<T, RebuildError> {
        parts.nested(name)
    }
}
impl<T: NestedField> NestedYes<T> for &Gate<T> {}

pub trait NestedNo<T> {
    fn __nested_schema(&self) -> &'static Schema {
        unreachable!()
    }
    fn __repeated(&self) -> bool {
        false
    }
    fn __conditional(&self) -> bool {
        false
    }
    fn __visit_nested<'a, V: Visitor<'a>>(&self, _: &'a T, _: &'static str, _: &mut V) {
        unreachable!()
    }
    fn __rebuild_nested(&self, parts: &mut Parts, name: &'static str) -> Result<T, RebuildError> {
        Err(parts.error(name, "unreachable"))
    }
}
impl<T> NestedNo<T> for Gate<T> {}

pub trait EffectYes<T: EffectRecords> {
    fn __effect<'a, V: Visitor<'a>>(
        &self,
        visitor: &mut V,
        name: &'static str,
        idempotent: bool,
        value: &'a T,
    ) {
        visitor.effect(name, idempotent, value)
    }
    fn __rebuild_effect(&self, parts: &mut Parts, name: &str) -> Result<T, RebuildError> {
        parts.effect(name)
    }
}
impl<T: EffectRecords> EffectYes<T> for &Gate<T> {}

pub trait EffectNo<T> {
    fn __effect<'a, V: Visitor<'a>>(&self, _: &mut V, _: &'static str, _: bool, _: &'a T) {
        unreachable!()
    }
    fn __rebuild_effect(&self, parts: &mut Parts, name: &str) -> Result<T, RebuildError> {
        Err(parts.error(name, "unreachable"))
    }
}
impl<T> EffectNo<T> for Gate<T> {}

pub trait TranscriptYes {
    fn __transcript<'a, V: Visitor<'a>>(
        &self,
        visitor: &mut V,
        name: &'static str,
        keep_recent: usize,
        pin_user: bool,
        value: &'a Transcript,
    ) {
        visitor.transcript(name, keep_recent, pin_user, value)
    }
    fn __as_transcript<'a>(&self, value: &'a Transcript) -> &'a Transcript {
        value
    }
    fn __as_transcript_mut<'a>(&self, value: &'a mut Transcript) -> &'a mut Transcript {
        value
    }
}
impl TranscriptYes for &Gate<Transcript> {}

pub trait TranscriptNo<T> {
    fn __transcript<'a, V: Visitor<'a>>(
        &self,
        _: &mut V,
        _: &'static str,
        _: usize,
        _: bool,
        _: &'a T,
    ) {
        unreachable!()
    }
    // The `HasTranscript` accessors of a field that is not a `Transcript`: the field's own check
    // is the one error, and this is never built into a program.
    fn __as_transcript<'a>(&self, _: &'a T) -> &'a Transcript {
        unreachable!()
    }
    fn __as_transcript_mut<'a>(&self, _: &'a mut T) -> &'a mut Transcript {
        unreachable!()
    }
}
impl<T> TranscriptNo<T> for Gate<T> {}

pub trait SummaryYes<T: Summarizable> {
    fn __derivable_summarizable<'a, V: Visitor<'a>>(
        &self,
        visitor: &mut V,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    ) {
        visitor.derivable_summarizable(name, pointer, value)
    }
    fn __redundant_summarizable<'a, V: Visitor<'a>>(
        &self,
        visitor: &mut V,
        name: &'static str,
        value: &'a T,
    ) {
        visitor.redundant_summarizable(name, value)
    }
}
impl<T: Summarizable> SummaryYes<T> for &Gate<T> {}

pub trait SummaryNo<T> {
    fn __derivable_summarizable<'a, V: Visitor<'a>>(
        &self,
        _: &mut V,
        _: &'static str,
        _: PointerFn<'_>,
        _: &'a T,
    ) {
        unreachable!()
    }
    fn __redundant_summarizable<'a, V: Visitor<'a>>(&self, _: &mut V, _: &'static str, _: &'a T) {
        unreachable!()
    }
}
impl<T> SummaryNo<T> for Gate<T> {}

pub trait DefaultYes<T: Default> {
    fn __rebuild_redundant(&self, parts: &mut Parts, name: &str) -> Result<T, RebuildError>
    where
        T: DeserializeOwned,
    {
        parts.redundant(name)
    }
    fn __rebuild_derivable(&self, parts: &mut Parts, name: &str) -> Result<T, RebuildError>
    where
        T: DeserializeOwned,
    {
        parts.derivable_or_default(name)
    }
}
impl<T: Default> DefaultYes<T> for &Gate<T> {}

pub trait DefaultNo<T> {
    fn __rebuild_redundant(&self, parts: &mut Parts, name: &str) -> Result<T, RebuildError>
    where
        T: DeserializeOwned,
    {
        Err(parts.error(name, "unreachable"))
    }
    /// Not a silent fallback but the strict rule: a derivable field whose type has no
    /// `Default` must be re-acquired (rehydrate's opt-in to `Default` cannot apply to it).
    fn __rebuild_derivable(&self, parts: &mut Parts, name: &str) -> Result<T, RebuildError>
    where
        T: DeserializeOwned,
    {
        parts.derivable(name)
    }
}
impl<T> DefaultNo<T> for Gate<T> {}
