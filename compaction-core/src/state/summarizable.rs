//! What may reach a summarizer: [`Summarizable`], implemented for plain data only.

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

    /// Whether [`summary_source`](Self::summary_source) is this default (the value's compact
    /// JSON): the engine then stores the source as the value itself, without serializing the
    /// value again to compare. `false` (the default) is always safe: the engine compares.
    /// Set by `#[derive(Summarizable)]` and the impls here, which never override the source.
    #[doc(hidden)]
    fn summary_source_is_json(&self) -> bool {
        false
    }
}

/// The body of an impl that keeps the default source, the value's JSON.
macro_rules! json_source {
    () => {
        fn summary_source_is_json(&self) -> bool {
            true
        }
    };
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
    ($($t:ty),*) => { $(impl Summarizable for $t { json_source!(); })* };
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

impl<T: Summarizable> Summarizable for Vec<T> {
    json_source!();
}
impl<T: Summarizable> Summarizable for VecDeque<T> {
    json_source!();
}
impl<T: Summarizable> Summarizable for [T] {
    json_source!();
}
impl<T: Summarizable> Summarizable for Option<T> {
    json_source!();
}
impl<T: Summarizable + ?Sized> Summarizable for Box<T> {
    json_source!();
}
impl<T: Summarizable + ?Sized> Summarizable for &T {
    json_source!();
}
impl<T: Summarizable + Ord> Summarizable for BTreeSet<T> {
    json_source!();
}
impl<T: Summarizable + Eq + std::hash::Hash, S> Summarizable for HashSet<T, S> {
    json_source!();
}
impl<K: Summarizable + Ord, V: Summarizable> Summarizable for BTreeMap<K, V> {
    json_source!();
}
impl<K: Summarizable + Eq + std::hash::Hash, V: Summarizable, S> Summarizable for HashMap<K, V, S> {
    json_source!();
}
impl<A: Summarizable, B: Summarizable> Summarizable for (A, B) {
    json_source!();
}
impl<A: Summarizable, B: Summarizable, C: Summarizable> Summarizable for (A, B, C) {
    json_source!();
}
