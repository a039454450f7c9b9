//! The fast path of the round-trip check (`canonical::check_round_trip`): does a value hold
//! anything JSON cannot bring back? It runs on every non-protected value at every compaction
//! (a value is refused whatever the plan would do with it, so the answer never depends on the
//! budget), evicted values included, so it must cost next to nothing per element:
//!
//! - no allocation and no output: a walk that only answers yes or "ask the canonical check";
//! - a type JSON always brings back is not walked at all: its name is read once
//!   (`std::any::type_name`, as the canonical form already does for hash-ordered sets) and a
//!   `Vec<String>` of 20,000 tool outputs costs one lookup, not 20,000 visits.
//!
//! It may be stricter than the canonical check, never looser: whenever it is not sure (a
//! non-finite float, a map key JSON has no form for, an error from the value's own `Serialize`)
//! it answers `false` and the canonical check decides, with the error's location.

use serde::ser::{self, Serialize};
use std::fmt;

/// `true` when `value` certainly survives the trip through JSON; `false` when the canonical
/// check must decide.
pub(crate) fn round_trips<T: Serialize + ?Sized>(value: &T) -> bool {
    child(value).is_ok()
}

/// What a node is, as far as a map key cares: canonical keys are strings, integers of at most
/// 64 bits, booleans and finite floats.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Key,
    Other,
}

/// "Not sure": the canonical check decides.
#[derive(Debug)]
struct Unsure;

impl fmt::Display for Unsure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not known to round-trip")
    }
}

impl std::error::Error for Unsure {}

impl ser::Error for Unsure {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Unsure
    }
}

fn child<T: Serialize + ?Sized>(value: &T) -> Result<Kind, Unsure> {
    if let Some(kind) = kind_of_plain(std::any::type_name::<T>()) {
        return Ok(kind);
    }
    #[cfg(test)]
    crate::store::count_walked();
    value.serialize(Check)
}

/// The kind of a type whose every value JSON brings back, recognized by its name: scalars
/// without floats, strings, and the standard containers of them. `None`: not known, walk it.
fn kind_of_plain(name: &str) -> Option<Kind> {
    let name = name.trim_start_matches('&').trim_start_matches("mut ");
    match name {
        "str"
        | "alloc::string::String"
        | "bool"
        | "char"
        | "u8"
        | "u16"
        | "u32"
        | "u64"
        | "usize"
        | "i8"
        | "i16"
        | "i32"
        | "i64"
        | "isize"
        | "alloc::borrow::Cow<str>" => return Some(Kind::Key),
        // Wider than JSON's 64-bit integers as map keys: the canonical check decides there.
        "u128" | "i128" | "()" => return Some(Kind::Other),
        _ => {}
    }
    // One generic standard container (or a slice or array) of plain types.
    if let Some(inner) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        let element = inner.rsplit_once("; ").map_or(inner, |(e, _)| e);
        return kind_of_plain(element).map(|_| Kind::Other);
    }
    let (base, args) = name.split_once('<')?;
    let args = split_args(args.strip_suffix('>')?)?;
    match (base, args.as_slice()) {
        // Smart pointers and options serialize as their content (`None` is never a key).
        ("alloc::boxed::Box" | "alloc::rc::Rc" | "alloc::sync::Arc", [inner]) => {
            kind_of_plain(inner)
        }
        ("core::option::Option", [inner]) => kind_of_plain(inner).map(|_| Kind::Other),
        (
            "alloc::vec::Vec"
            | "alloc::collections::vec_deque::VecDeque"
            | "alloc::collections::btree::set::BTreeSet",
            [element],
        )
        | ("std::collections::hash::set::HashSet", [element, ..]) => {
            kind_of_plain(element).map(|_| Kind::Other)
        }
        ("alloc::collections::btree::map::BTreeMap", [key, value])
        | ("std::collections::hash::map::HashMap", [key, value, ..]) => {
            (kind_of_plain(key)? == Kind::Key && kind_of_plain(value).is_some())
                .then_some(Kind::Other)
        }
        _ => None,
    }
}

/// The top-level comma-separated arguments of a generic type's name (`None` if unbalanced).
fn split_args(args: &str) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in args.char_indices() {
        match c {
            '<' | '[' | '(' => depth += 1,
            '>' | ']' | ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                parts.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    (depth == 0).then(|| {
        parts.push(args[start..].trim());
        parts
    })
}

/// The walk itself: answers with the node's kind, stores nothing.
struct Check;

/// A sequence, tuple, map or struct being walked; `key` tracks a map's pending key.
struct Compound {
    key: bool,
}

impl Check {
    fn float(value: f64) -> Result<Kind, Unsure> {
        if value.is_finite() {
            Ok(Kind::Key)
        } else {
            Err(Unsure)
        }
    }
}

macro_rules! keys {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(self, _: $t) -> Result<Kind, Unsure> {
            Ok(Kind::Key)
        }
    )*};
}

impl ser::Serializer for Check {
    type Ok = Kind;
    type Error = Unsure;
    type SerializeSeq = Compound;
    type SerializeTuple = Compound;
    type SerializeTupleStruct = Compound;
    type SerializeTupleVariant = Compound;
    type SerializeMap = Compound;
    type SerializeStruct = Compound;
    type SerializeStructVariant = Compound;

    keys!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_char: char, serialize_str: &str
    );

    fn serialize_i128(self, _: i128) -> Result<Kind, Unsure> {
        Ok(Kind::Other)
    }
    fn serialize_u128(self, _: u128) -> Result<Kind, Unsure> {
        Ok(Kind::Other)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Kind, Unsure> {
        Ok(Kind::Other)
    }
    fn serialize_f32(self, v: f32) -> Result<Kind, Unsure> {
        Check::float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Kind, Unsure> {
        Check::float(v)
    }
    fn serialize_none(self) -> Result<Kind, Unsure> {
        Ok(Kind::Other)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Kind, Unsure> {
        child(value)
    }
    fn serialize_unit(self) -> Result<Kind, Unsure> {
        Ok(Kind::Other)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Kind, Unsure> {
        Ok(Kind::Other)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<Kind, Unsure> {
        Ok(Kind::Key)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Kind, Unsure> {
        child(value)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<Kind, Unsure> {
        child(value).map(|_| Kind::Other)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound, Unsure> {
        Ok(Compound { key: false })
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound, Unsure> {
        Ok(Compound { key: false })
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound, Unsure> {
        Ok(Compound { key: false })
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Compound, Unsure> {
        Ok(Compound { key: false })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound, Unsure> {
        Ok(Compound { key: false })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound, Unsure> {
        Ok(Compound { key: false })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Compound, Unsure> {
        Ok(Compound { key: false })
    }
}

/// serde's four sequence-like traits and two struct-like ones: every child is walked.
macro_rules! compound {
    ($($trait:ident :: $method:ident ($($name:ty)?)),*) => {$(
        impl ser::$trait for Compound {
            type Ok = Kind;
            type Error = Unsure;
            fn $method<T: Serialize + ?Sized>(
                &mut self,
                $(_: $name,)?
                value: &T,
            ) -> Result<(), Unsure> {
                child(value).map(|_| ())
            }
            fn end(self) -> Result<Kind, Unsure> {
                Ok(Kind::Other)
            }
        }
    )*};
}

compound!(
    SerializeSeq::serialize_element(),
    SerializeTuple::serialize_element(),
    SerializeTupleStruct::serialize_field(),
    SerializeTupleVariant::serialize_field(),
    SerializeStruct::serialize_field(&'static str),
    SerializeStructVariant::serialize_field(&'static str)
);

impl ser::SerializeMap for Compound {
    type Ok = Kind;
    type Error = Unsure;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsure> {
        match child(key)? {
            Kind::Key if !self.key => {
                self.key = true;
                Ok(())
            }
            _ => Err(Unsure),
        }
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsure> {
        if !std::mem::replace(&mut self.key, false) {
            return Err(Unsure);
        }
        child(value).map(|_| ())
    }
    fn end(self) -> Result<Kind, Unsure> {
        Ok(Kind::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::take_work;
    use std::collections::{BTreeMap, HashMap, HashSet};

    fn walked<T: Serialize + ?Sized>(value: &T) -> (bool, usize) {
        take_work();
        let ok = round_trips(value);
        (ok, take_work().1)
    }

    #[test]
    fn plain_containers_are_not_walked() {
        let outputs: Vec<String> = (0..20_000).map(|i| format!("line {i}")).collect();
        assert_eq!(walked(&outputs), (true, 0));
        let nested: HashMap<String, Vec<Option<u64>>> =
            [("a".to_string(), vec![Some(1); 5_000])].into();
        assert_eq!(walked(&nested), (true, 0));
        let set: HashSet<(u8, String)> = (0..100).map(|i| (i, i.to_string())).collect();
        // A tuple is not recognized by name: walked, still accepted.
        assert!(walked(&set).0);
        assert_eq!(walked(&[[1u8; 4]; 3]), (true, 0));
        let queue: std::collections::VecDeque<std::collections::BTreeSet<char>> =
            [['a'].into()].into();
        assert_eq!(walked(&queue), (true, 0));
        assert_eq!(walked(&Box::new(Some(7i128))), (true, 0));
        assert_eq!(walked(&BTreeMap::<&str, Box<[u32]>>::new()), (true, 0));
    }

    #[test]
    fn anything_that_could_hold_a_float_is_walked() {
        #[derive(serde::Serialize)]
        struct Item {
            name: String,
            score: f64,
        }
        let items: Vec<Item> = (0..1_000)
            .map(|i| Item {
                name: i.to_string(),
                score: f64::from(i),
            })
            .collect();
        // Each element once (its fields are plain or scalars), nothing more.
        assert_eq!(walked(&items), (true, 1 + 1_000 + 1_000));
        let mut items = items;
        items[700].score = f64::NAN;
        assert!(!walked(&items).0);
        assert!(!round_trips(&vec![Some(f32::INFINITY)]));
    }

    #[test]
    fn unsure_whenever_the_canonical_check_could_refuse() {
        // Keys JSON has no form for; a value whose own Serialize fails.
        let tuple_keys: HashMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(!round_trips(&tuple_keys));
        let wide_keys: BTreeMap<u128, u8> = [(u128::MAX, 1)].into();
        assert!(!round_trips(&wide_keys));
        let float_keys: BTreeMap<String, BTreeMap<String, f64>> =
            [("a".into(), [("b".into(), f64::NEG_INFINITY)].into())].into();
        assert!(!round_trips(&float_keys));
        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: ser::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(ser::Error::custom("no"))
            }
        }
        assert!(!round_trips(&vec![Fails]));
    }

    #[test]
    fn type_names_are_split_at_the_top_level_only() {
        assert_eq!(
            split_args("alloc::string::String, core::option::Option<(u8, [u8; 2])>, S"),
            Some(vec![
                "alloc::string::String",
                "core::option::Option<(u8, [u8; 2])>",
                "S"
            ])
        );
        assert_eq!(split_args("a>, b"), None);
        assert_eq!(kind_of_plain("mycrate::String"), None);
        assert_eq!(kind_of_plain("alloc::vec::Vec<f64>"), None);
        assert_eq!(
            kind_of_plain(std::any::type_name::<HashMap<u32, Vec<String>>>()),
            Some(Kind::Other)
        );
        assert_eq!(kind_of_plain("&str"), Some(Kind::Key));
    }
}
