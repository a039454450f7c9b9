//! Marker traits that turn classification mistakes into compile errors.

use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// Types proven safe to hand to a summarizer: plain text, numbers, std collections of such
/// values, `serde_json::Value`, and user types that `#[derive(Summarizable)]`.
///
/// Never implemented for a type that carries protected or effect state (`EffectLog`, or anything
/// deriving `Compactable`): a summary of such state is exactly the silent loss this crate exists
/// to prevent.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not proven safe to summarize",
    label = "a summarizer may only ever see `Summarizable` values",
    note = "derive `Summarizable` for plain data (text, numbers, collections of them); state with `#[protected]` or `#[effect]` fields must never be summarized: drop `summarize` from this field or classify it `#[nested]` (in a `#[derive(Summarizable)]` type: remove that derive)"
)]
pub trait Summarizable: Serialize {
    /// The text a summarizer sees: the raw string for text, compact JSON for anything else.
    fn summary_source(&self) -> Cow<'_, str> {
        Cow::Owned(serde_json::to_string(self).unwrap_or_default())
    }
}

impl Summarizable for String {
    fn summary_source(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl Summarizable for str {
    fn summary_source(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl Summarizable for Cow<'_, str> {
    fn summary_source(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

macro_rules! summarizable_plain {
    ($($t:ty),*) => { $(impl Summarizable for $t {})* };
}
summarizable_plain!(
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    (),
    serde_json::Value,
    std::path::PathBuf
);

impl<T: Summarizable> Summarizable for Vec<T> {}
impl<T: Summarizable> Summarizable for VecDeque<T> {}
impl<T: Summarizable> Summarizable for [T] {}
impl<T: Summarizable> Summarizable for Option<T> {}
impl<T: Summarizable + ?Sized> Summarizable for Box<T> {}
impl<T: Summarizable + ?Sized> Summarizable for &T {}
impl<T: Summarizable + Ord> Summarizable for BTreeSet<T> {}
impl<T: Summarizable + Eq + std::hash::Hash, S> Summarizable for HashSet<T, S> {}
impl<K: Summarizable + Ord, V: Summarizable> Summarizable for BTreeMap<K, V> {}
impl<K: Summarizable + Eq + std::hash::Hash, V: Summarizable, S> Summarizable for HashMap<K, V, S> {}
impl<A: Summarizable, B: Summarizable> Summarizable for (A, B) {}
impl<A: Summarizable, B: Summarizable, C: Summarizable> Summarizable for (A, B, C) {}

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
impl CarriesState for crate::EffectLog {}

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
pub fn assert_effect_records<T: crate::EffectRecords>() {}
/// Compile-time check used by the derive.
pub fn assert_nested<T: crate::NestedField>() {}
