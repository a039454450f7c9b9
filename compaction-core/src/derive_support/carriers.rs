//! Which types carry protected or effect state, decided by the compiler: the trait that state
//! types, `EffectLog` and every std container of either implement, the autoref probe that turns
//! it into a verdict for one field's type, and the checks that reject a carrier where it would be
//! evicted (`#[redundant]`, `#[derivable]`) or spilled whole (`#[protected]`).
//!
//! "Carries state" is an *or* over a type's parts (a tuple carries state when any element does),
//! which overlapping impls cannot say. So each impl names the path it found, as the trait's
//! `Where` parameter (`At<1, Inside<Here>>`: in the second parameter, inside a container, here):
//! the impls never overlap, and a type with several paths to state is a carrier all the same.

use crate::conversation::transcript::Transcript;
use crate::effects::record::EffectLog;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, LinkedList, VecDeque};
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::{Arc, Mutex, RwLock};

/// Types that carry protected or effect state somewhere inside, `Where` being the path to it:
/// every type that derives `Compactable` with a `#[protected]`, `#[effect]` or `#[nested]` field
/// (the derive writes `impl CarriesState for T`, so `Where = Here`), `EffectLog`, `Transcript`, and every std
/// container, smart pointer, cell, lock, tuple, `Result` and map (key or value) of one, however
/// deep. Such a value may never be evicted whole, nor protected whole.
///
/// Not a blanket impl over `Compactable`: a derived type with only `#[redundant]` fields carries
/// nothing and may be evicted whole.
pub trait CarriesState<Where = Here> {}

/// The path ends here: the type itself carries state.
pub struct Here;
/// Inside the one type a container holds (its elements, its pointee, its locked value).
pub struct Inside<W>(PhantomData<W>);
/// In type parameter `N` of a type with several (tuple element, `Ok`/`Err`, map key/value).
pub struct At<const N: usize, W>(PhantomData<W>);

impl CarriesState for EffectLog {}
// A conversation holds user messages, which are never summarized nor dropped: it takes
// `#[transcript]`, never `#[redundant]`/`#[derivable]` (evicted whole) or `#[protected]`.
impl CarriesState for Transcript {}

/// `Container<T>` carries state when `T` does.
macro_rules! carries_inside {
    (unsized: $($unsized:ty),*; sized: $($sized:ty),*;) => {
        $(impl<T: CarriesState<W> + ?Sized, W> CarriesState<Inside<W>> for $unsized {})*
        $(impl<T: CarriesState<W>, W> CarriesState<Inside<W>> for $sized {})*
    };
}
carries_inside!(
    unsized: Box<T>, Rc<T>, Arc<T>, Cell<T>, RefCell<T>, Mutex<T>, RwLock<T>;
    sized: [T], Option<T>, Vec<T>, VecDeque<T>, LinkedList<T>, BinaryHeap<T>, BTreeSet<T>;
);
impl<T: CarriesState<W>, W, S> CarriesState<Inside<W>> for HashSet<T, S> {}
impl<T: CarriesState<W>, W, const N: usize> CarriesState<Inside<W>> for [T; N] {}
impl<B: CarriesState<W> + ToOwned + ?Sized, W> CarriesState<Inside<W>> for Cow<'_, B> {}

impl<T: CarriesState<W>, E, W> CarriesState<At<0, W>> for Result<T, E> {}
impl<T, E: CarriesState<W>, W> CarriesState<At<1, W>> for Result<T, E> {}
impl<K: CarriesState<W>, V, W> CarriesState<At<0, W>> for BTreeMap<K, V> {}
impl<K, V: CarriesState<W>, W> CarriesState<At<1, W>> for BTreeMap<K, V> {}
impl<K: CarriesState<W>, V, S, W> CarriesState<At<0, W>> for HashMap<K, V, S> {}
impl<K, V: CarriesState<W>, S, W> CarriesState<At<1, W>> for HashMap<K, V, S> {}

/// A tuple carries state when its element `N` does, for each `N` (arities 1 to 12, as std's).
macro_rules! carries_in_tuple {
    ($(($($all:ident)+): $($n:tt $element:ident),+;)*) => {$(
        carries_in_tuple!(@each ($($all)+) $($n $element),+);
    )*};
    (@each $all:tt $($n:tt $element:ident),+) => {$(
        carries_in_tuple!(@one $all $n $element);
    )+};
    (@one ($($all:ident)+) $n:tt $element:ident) => {
        impl<$($all,)+ W> CarriesState<At<$n, W>> for ($($all,)+) where $element: CarriesState<W> {}
    };
}
carries_in_tuple!(
    (A): 0 A;
    (A B): 0 A, 1 B;
    (A B C): 0 A, 1 B, 2 C;
    (A B C D): 0 A, 1 B, 2 C, 3 D;
    (A B C D E): 0 A, 1 B, 2 C, 3 D, 4 E;
    (A B C D E F): 0 A, 1 B, 2 C, 3 D, 4 E, 5 F;
    (A B C D E F G): 0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G;
    (A B C D E F G H): 0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H;
    (A B C D E F G H I): 0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I;
    (A B C D E F G H I J): 0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J;
    (A B C D E F G H I J K): 0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J, 10 K;
    (A B C D E F G H I J K L): 0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J, 10 K, 11 L;
);

/// Autoref probe: `(&&Probe::<T>::new()).verdict()` resolves to [`CarriesStateProbe`] when
/// `T: CarriesState<_>` by any path and to [`PlainProbe`] otherwise. A type parameter resolves
/// to the plain case here; the bound [`PlainData`] checks it where the type is filled in.
pub struct Probe<T: ?Sized>(PhantomData<T>);

impl<T: ?Sized> Probe<T> {
    /// A probe for `T`.
    pub const fn new() -> Self {
        Probe(PhantomData)
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

/// Selected when the probed type carries state. (A type with several paths to state leaves `W`
/// ambiguous; the failed check below is then its one error, as rustc reports no ambiguity in a
/// body that already has an error.)
pub trait CarriesStateProbe<W> {
    /// The verdict.
    fn verdict(&self) -> HoldsProtectedState {
        HoldsProtectedState
    }
}
impl<T: CarriesState<W> + ?Sized, W> CarriesStateProbe<W> for &Probe<T> {}

/// The verdict for a conversation (`Transcript`): it takes `#[transcript]` and no other class.
pub struct IsConversation;

/// Selected first, for a `Transcript` (the derive probes with `&&&Probe`): its own verdict, so
/// the checks can say `#[transcript]` where they would say `#[nested]` for other state.
pub trait ConversationProbe {
    /// The verdict.
    fn verdict(&self) -> IsConversation {
        IsConversation
    }
}
impl ConversationProbe for &&Probe<Transcript> {}

/// A conversation in a field of another class: never satisfied (by the field's type), so the
/// message names the class it takes. Checked through the verdict traits' impls for
/// [`IsConversation`].
#[diagnostic::on_unimplemented(
    message = "field `{Field}` is a conversation (`compaction::Transcript`): classify it `#[transcript]`",
    label = "a `Transcript` takes `#[transcript]` (optionally `keep_recent = N`, `pin_user`)",
    note = "`#[transcript]` keeps every tool call with its result and every user message verbatim or behind a pointer; evicted, protected or nested whole, the conversation would not be planned message by message"
)]
pub trait TakesTranscript<Field> {}

/// Selected for every other type.
pub trait PlainProbe {
    /// The verdict.
    fn verdict(&self) -> PlainValue {
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

/// Only plain values may be protected whole: state protected whole would be kept or spilled as
/// one value, its pinned fields and live effects included.
#[diagnostic::on_unimplemented(
    message = "field `{Field}` holds `{Type}`, which has compaction classes of its own, so it cannot be `#[protected]` whole",
    label = "`#[protected]` would keep or spill `{Field}` as one value, its pinned fields and live effects included",
    note = "classify the field `#[nested]` so the fields inside keep their classes (`Option`, `Vec` and `Box` of such state can be `#[nested]` too); an effect ledger takes `#[effect(idempotent = true|false)]`"
)]
pub trait Protectable<Field, Type: ?Sized> {}
#[diagnostic::do_not_recommend]
impl<Field, Type: ?Sized> Protectable<Field, Type> for PlainValue {}

/// What `#[transcript]` accepts, by the field type's verdict: a conversation. Compile-time
/// check used by the derive on `#[transcript]` fields.
pub fn assert_transcript_field<Field, Type: ?Sized, T: TranscriptField<Field, Type>>(_verdict: T) {}

/// The verdicts `#[transcript]` accepts: only [`IsConversation`]; the others fail through a
/// trait whose message names the class the type takes.
pub trait TranscriptField<Field, Type: ?Sized> {}
impl<Field, Type: ?Sized> TranscriptField<Field, Type> for IsConversation {}
impl<Field, Type: ?Sized + NestedNotTranscript<Field>> TranscriptField<Field, Type>
    for HoldsProtectedState
{
}
impl<Field, Type: ?Sized + PlainNotTranscript<Field>> TranscriptField<Field, Type> for PlainValue {}

/// State with classes of its own under `#[transcript]`: never satisfied.
#[diagnostic::on_unimplemented(
    message = "field `{Field}` holds `{Self}`, which is compaction state, not a conversation: classify it `#[nested]`",
    label = "`#[transcript]` takes a `compaction::Transcript`",
    note = "`#[nested]` keeps the classes of the fields inside (`Option`, `Vec` and `Box` of such state too); an `EffectLog` takes `#[effect(idempotent = true|false)]`"
)]
pub trait NestedNotTranscript<Field> {}

/// Plain data under `#[transcript]`: never satisfied.
#[diagnostic::on_unimplemented(
    message = "field `{Field}` holds `{Self}`, which is plain data, not a conversation: `#[transcript]` takes a `compaction::Transcript`",
    label = "not a `Transcript`",
    note = "a chat history is a `compaction::Transcript` (a list of `Message`s, `Transcript::from_messages`); other plain data takes `#[protected]`, `#[derivable(pointer = \"...\")]` or `#[redundant]`"
)]
pub trait PlainNotTranscript<Field> {}

/// Compile-time check used by the derive on `#[redundant]` and `#[derivable]` fields: the
/// verdict must be [`PlainValue`].
pub fn assert_evictable<Field, Type: ?Sized, T: EvictVerdict<Field, Type>>(_verdict: T) {}
/// Compile-time check used by the derive on `#[protected]` fields: the verdict must be
/// [`PlainValue`].
pub fn assert_protectable<Field, Type: ?Sized, T: ProtectVerdict<Field, Type>>(_verdict: T) {}
/// Compile-time check used by the derive on `#[nested]` fields: not a conversation.
pub fn assert_nested_field<Field, Type: ?Sized, T: NestedVerdict<Field, Type>>(_verdict: T) {}
/// Compile-time check used by the derive on `#[effect]` fields: not a conversation.
pub fn assert_effect_field<Field, Type: ?Sized, T: EffectVerdict<Field, Type>>(_verdict: T) {}

// The verdict traits carry no message of their own, so the error of a failed check is the one
// of the trait their impl needs (rustc reports the root's message when it has one): each
// verdict thus gets the message that fits it.

/// State evicted whole: never satisfied by the field's type (the verdict traits' leaf).
#[diagnostic::on_unimplemented(
    message = "field `{Field}` holds `{Self}`, which carries `#[protected]` or `#[effect]` state, so it cannot be evicted",
    label = "evicting `{Field}` would silently drop the protected state inside it",
    note = "classify the field `#[nested]` so the fields inside keep their classes (`Option`, `Vec` and `Box` of such state can be `#[nested]` too); an effect ledger takes `#[effect(idempotent = true|false)]`"
)]
pub trait StateNotEvictable<Field> {}

/// State protected whole: never satisfied by the field's type (the verdict traits' leaf).
#[diagnostic::on_unimplemented(
    message = "field `{Field}` holds `{Self}`, which has compaction classes of its own, so it cannot be `#[protected]` whole",
    label = "`#[protected]` would keep or spill `{Field}` as one value, its pinned fields and live effects included",
    note = "classify the field `#[nested]` so the fields inside keep their classes (`Option`, `Vec` and `Box` of such state can be `#[nested]` too); an effect ledger takes `#[effect(idempotent = true|false)]`"
)]
pub trait StateNotProtectable<Field> {}

/// The verdicts `#[redundant]` and `#[derivable]` accept.
pub trait EvictVerdict<Field, Type: ?Sized> {}
impl<Field, Type: ?Sized> EvictVerdict<Field, Type> for PlainValue {}
impl<Field, Type: ?Sized + StateNotEvictable<Field>> EvictVerdict<Field, Type>
    for HoldsProtectedState
{
}
impl<Field, Type: ?Sized + TakesTranscript<Field>> EvictVerdict<Field, Type> for IsConversation {}

/// The verdicts `#[protected]` accepts.
pub trait ProtectVerdict<Field, Type: ?Sized> {}
impl<Field, Type: ?Sized> ProtectVerdict<Field, Type> for PlainValue {}
impl<Field, Type: ?Sized + StateNotProtectable<Field>> ProtectVerdict<Field, Type>
    for HoldsProtectedState
{
}
impl<Field, Type: ?Sized + TakesTranscript<Field>> ProtectVerdict<Field, Type> for IsConversation {}

/// The verdicts `#[nested]` accepts: any but a conversation (whether the type is a
/// `NestedField` is `assert_nested`'s check, whose message fits plain types better than the
/// `Compactable` one a bound here would surface).
pub trait NestedVerdict<Field, Type: ?Sized> {}
impl<Field, Type: ?Sized> NestedVerdict<Field, Type> for PlainValue {}
impl<Field, Type: ?Sized> NestedVerdict<Field, Type> for HoldsProtectedState {}
impl<Field, Type: ?Sized + TakesTranscript<Field>> NestedVerdict<Field, Type> for IsConversation {}

/// The verdicts `#[effect]` accepts: any but a conversation (whether the type records effects
/// is `assert_effect_records`'s check).
pub trait EffectVerdict<Field, Type: ?Sized> {}
impl<Field, Type: ?Sized> EffectVerdict<Field, Type> for PlainValue {}
impl<Field, Type: ?Sized> EffectVerdict<Field, Type> for HoldsProtectedState {}
impl<Field, Type: ?Sized + TakesTranscript<Field>> EffectVerdict<Field, Type> for IsConversation {}

/// Types proven to carry no protected or effect state: the bound the derive puts on a generic
/// `#[protected]`, `#[redundant]` or `#[derivable]` field, checked where the type parameter is
/// filled in (the autoref check above cannot see through a type parameter). The dual of
/// [`CarriesState`], and as structural: std's plain values, every container of plain data, and
/// the types the derives prove plain (`#[derive(Summarizable)]`, and `#[derive(Compactable)]`
/// with no protected, effect or nested field).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not proven free of `#[protected]` and `#[effect]` state, so a generic field cannot hold it whole",
    label = "filled in for a type parameter of a `#[protected]`, `#[redundant]` or `#[derivable]` field",
    note = "such a field is kept, spilled or evicted as one value; for plain data, derive `Summarizable` on the type (or `Compactable` with only `#[redundant]` and `#[derivable]` fields); when it holds state, classify the field `#[nested]`"
)]
pub trait PlainData {}

macro_rules! plain_data {
    (leaves: $($leaf:ty),*; unsized: $($unsized:ty),*; sized: $($sized:ty),*;) => {
        $(impl PlainData for $leaf {})*
        $(impl<T: PlainData + ?Sized> PlainData for $unsized {})*
        $(impl<T: PlainData> PlainData for $sized {})*
    };
}
plain_data!(
    leaves: bool, char, u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64,
        (), str, String, std::path::Path, std::path::PathBuf, std::time::Duration,
        serde_json::Value;
    unsized: Box<T>, Rc<T>, Arc<T>, Cell<T>, RefCell<T>, Mutex<T>, RwLock<T>, &T;
    sized: [T], Option<T>, Vec<T>, VecDeque<T>, LinkedList<T>, BinaryHeap<T>, BTreeSet<T>;
);
impl<T: ?Sized> PlainData for PhantomData<T> {}
impl<T: PlainData, S> PlainData for HashSet<T, S> {}
impl<T: PlainData, const N: usize> PlainData for [T; N] {}
impl<B: PlainData + ToOwned + ?Sized> PlainData for Cow<'_, B> {}
impl<T: PlainData, E: PlainData> PlainData for Result<T, E> {}
impl<K: PlainData, V: PlainData> PlainData for BTreeMap<K, V> {}
impl<K: PlainData, V: PlainData, S> PlainData for HashMap<K, V, S> {}

/// A tuple is plain when every element is.
macro_rules! plain_tuple {
    ($(($($element:ident)+))*) => {$(
        impl<$($element: PlainData),+> PlainData for ($($element,)+) {}
    )*};
}
plain_tuple!((A) (A B) (A B C) (A B C D) (A B C D E) (A B C D E F) (A B C D E F G)
    (A B C D E F G H) (A B C D E F G H I) (A B C D E F G H I J) (A B C D E F G H I J K)
    (A B C D E F G H I J K L));
