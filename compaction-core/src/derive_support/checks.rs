//! Marker traits and checks that turn classification mistakes into compile errors: what an
//! evictable field may hold, what a `#[redundant]` field needs, which field types the other
//! classes accept. Called only by the derive's generated code.

use crate::ledger::{EffectLog, EffectRecords};
use crate::state::compactable::NestedField;
use crate::state::summarizable::Summarizable;
use std::collections::{BTreeMap, HashMap, VecDeque};

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

/// Types that carry protected or effect state somewhere inside: every type that derives
/// `Compactable` with a `#[protected]`, `#[effect]` or `#[nested]` field (the derive writes the
/// impl), `EffectLog`, and `Option`, `Vec`, `Box`, `Arc`, `Rc`, arrays and map values of one.
/// Such a value may never sit in an evictable (`#[redundant]`/`#[derivable]`) field.
///
/// Not a blanket impl over `Compactable`: that would overlap with the `Box` impl below (a
/// `Box<T: Compactable>` is itself `Compactable`), and `Box<Vec<State>>` would slip through.
pub trait CarriesState {}

impl<T: CarriesState + ?Sized> CarriesState for Box<T> {}
impl<T: CarriesState> CarriesState for Option<T> {}
impl<T: CarriesState> CarriesState for Vec<T> {}
impl<T: CarriesState> CarriesState for VecDeque<T> {}
impl<T: CarriesState, const N: usize> CarriesState for [T; N] {}
impl<K, V: CarriesState, S> CarriesState for HashMap<K, V, S> {}
impl<K, V: CarriesState> CarriesState for BTreeMap<K, V> {}
impl<T: CarriesState> CarriesState for std::sync::Arc<T> {}
impl<T: CarriesState> CarriesState for std::rc::Rc<T> {}
impl CarriesState for EffectLog {}

/// Autoref probe: `(&&Probe::<T>::new()).evictability()` resolves to [`CarriesStateProbe`] when
/// `T: CarriesState` and to [`PlainProbe`] otherwise. Used by the derive to reject evictable
/// fields that hold protected state. (A generic type parameter always resolves to the plain case:
/// the check covers the concrete types the author wrote.)
pub struct Probe<T: ?Sized>(std::marker::PhantomData<T>);

impl<T: ?Sized> Probe<T> {
    /// A probe for `T`.
    pub const fn new() -> Self {
        Probe(std::marker::PhantomData)
    }
}

impl<T: ?Sized> Default for Probe<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The verdict for a type that carries protected or effect state.
pub struct HoldsProtectedState;
/// The verdict for a plain value.
pub struct PlainValue;

/// Selected when the probed type carries state.
pub trait CarriesStateProbe {
    /// The verdict.
    fn evictability(&self) -> HoldsProtectedState {
        HoldsProtectedState
    }
}
impl<T: CarriesState + ?Sized> CarriesStateProbe for &Probe<T> {}

/// Selected for every other type.
pub trait PlainProbe {
    /// The verdict.
    fn evictability(&self) -> PlainValue {
        PlainValue
    }
}
impl<T: ?Sized> PlainProbe for Probe<T> {}

/// Only plain values may be evicted. `Field` is a marker type named after the field (so the
/// message can name it), `Type` is the field's type.
#[diagnostic::on_unimplemented(
    message = "field `{Field}` holds `{Type}`, which carries `#[protected]` or `#[effect]` state, so it cannot be evicted",
    label = "evicting `{Field}` would silently drop the protected state inside it",
    note = "classify the field `#[nested]` so the fields inside keep their classes (`Option`, `Vec` and `Box` of such state can be `#[nested]` too); an effect ledger takes `#[effect(idempotent = true|false)]`"
)]
pub trait Evictable<Field, Type: ?Sized> {}
#[diagnostic::do_not_recommend]
impl<Field, Type: ?Sized> Evictable<Field, Type> for PlainValue {}

/// Compile-time check used by the derive: the verdict must be [`PlainValue`].
pub fn assert_evictable<Field, Type: ?Sized, T: Evictable<Field, Type>>(_verdict: T) {}
/// Compile-time check used by the derive.
pub fn assert_summarizable<T: Summarizable + ?Sized>() {}
/// Compile-time check used by the derive.
pub fn assert_redundant_default<T: RedundantDefault>() {}
/// Compile-time check used by the derive.
pub fn assert_effect_records<T: EffectRecords>() {}
/// Compile-time check used by the derive.
pub fn assert_nested<T: NestedField>() {}
/// Compile-time check used by the derive: `#[transcript]` only on a `Transcript`.
pub fn assert_transcript<T: IsTranscript>() {}

/// The type `#[transcript]` accepts.
#[diagnostic::on_unimplemented(
    message = "`#[transcript]` needs a field of type `compaction::Transcript`, found `{Self}`",
    label = "not a `Transcript`",
    note = "declare the field as `compaction::Transcript` (a list of `Message`s), or give it another class"
)]
pub trait IsTranscript {}
impl IsTranscript for crate::transcript::Transcript {}
