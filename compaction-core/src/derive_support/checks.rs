//! Marker traits and checks that turn classification mistakes into compile errors: what a
//! `#[redundant]` field needs, which field types the other classes accept (what may be evicted or
//! protected whole is in `carriers`). Called only by the derive's generated code.

use crate::effects::record::EffectRecords;
use crate::state::compactable::NestedField;
use crate::state::summarizable::Summarizable;

/// `Default` as `#[redundant]` fields need it: rehydration restores an evicted redundant field
/// as its default value.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `Default`, which a `#[redundant]` field needs",
    label = "rehydration restores an evicted `#[redundant]` field with `Default::default()`",
    note = "implement or derive `Default` for this type, or classify the field `#[derivable(pointer = \"...\")]` so it is re-acquired instead"
)]
pub trait RedundantDefault {
    /// The value an evicted field is restored to.
    fn restored_default() -> Self;
}

impl<T: Default> RedundantDefault for T {
    fn restored_default() -> Self {
        T::default()
    }
}

/// Compile-time check used by the derive.
pub fn assert_summarizable<T: Summarizable + ?Sized>() {}
/// Compile-time check used by the derive.
pub fn assert_redundant_default<T: RedundantDefault>() {}
/// Compile-time check used by the derive.
pub fn assert_effect_records<T: EffectRecords>() {}
/// Compile-time check used by the derive.
pub fn assert_nested<T: NestedField>() {}
