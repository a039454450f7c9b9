//! Canonical JSON: the one byte form of a value that fingerprints, spills and rehydration agree
//! on, and the check that a value survives the trip through JSON at all.
//!
//! Why a serializer of our own instead of `serde_json::to_value`:
//! - **Sets.** serde hands a `HashSet` to the serializer as a plain sequence, in iteration order,
//!   which differs between two equal sets. The container type is not visible in serde's data
//!   model, but it is visible one level up: every child value reaches a serializer through a
//!   generic call (`serialize_field::<T>`, `serialize_element::<T>`, `serialize_some::<T>`, ...),
//!   so this serializer looks at `std::any::type_name::<T>()` of each child and sorts the
//!   elements of a hash-ordered set (by their own canonical JSON). Sequences of any other type
//!   keep their order: for a `Vec` the order is data.
//! - **Maps.** Object keys are sorted here, whatever `serde_json` features another crate turns
//!   on (`preserve_order` would otherwise keep a `HashMap`'s iteration order).
//! - **Round trip.** JSON has no NaN or infinity; `serde_json` writes them as `null`, which does
//!   not deserialize back into a float. A non-finite float is an error naming where it sits.

use crate::store::finite::round_trips;
use serde::ser::{self, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// Why a value has no canonical JSON form.
#[derive(Debug)]
pub(crate) struct CanonicalError {
    /// Where inside the value, as a path suffix (`.a[3]`); empty for the value itself.
    location: String,
    message: String,
}

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "at `{}`: {}", self.location, self.message)
        }
    }
}

impl std::error::Error for CanonicalError {}

impl ser::Error for CanonicalError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        CanonicalError {
            location: String::new(),
            message: msg.to_string(),
        }
    }
}

impl CanonicalError {
    fn within(mut self, segment: &str) -> Self {
        self.location.insert_str(0, segment);
        self
    }
}

/// The canonical JSON text of `value` (compact, object keys sorted, hash-ordered sets sorted).
pub(crate) fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<String, CanonicalError> {
    let value = value.serialize(Canonical::of::<T>(Mode::Build))?;
    serde_json::to_string(&value).map_err(ser::Error::custom)
}

/// Fails when `value` holds anything that JSON cannot bring back (a non-finite float), without
/// building its JSON. The fast walk (`finite.rs`: no allocation, plain types not walked) answers
/// almost always; only a value it is unsure of is walked again here, for the error's location.
pub(crate) fn check_round_trip<T: Serialize + ?Sized>(value: &T) -> Result<(), CanonicalError> {
    if round_trips(value) {
        return Ok(());
    }
    value.serialize(Canonical::of::<T>(Mode::Check)).map(|_| ())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Build,
    Check,
}

/// Whether a value of type `name` serializes as a sequence in hash (arbitrary) order.
fn is_hash_ordered_set(name: &str) -> bool {
    let mut name = name
        .trim_start_matches(['&', ' '])
        .trim_start_matches("mut ");
    // Smart pointers serialize as their content.
    for wrapper in ["alloc::boxed::Box<", "alloc::rc::Rc<", "alloc::sync::Arc<"] {
        if let Some(inner) = name.strip_prefix(wrapper) {
            name = inner.trim_start_matches(['&', ' ']);
        }
    }
    let base = name.split('<').next().unwrap_or(name);
    base.ends_with("::HashSet")
}

#[derive(Clone, Copy)]
struct Canonical {
    mode: Mode,
    unordered: bool,
}

impl Canonical {
    fn of<T: ?Sized>(mode: Mode) -> Self {
        Canonical {
            mode,
            unordered: is_hash_ordered_set(std::any::type_name::<T>()),
        }
    }

    fn child<T: Serialize + ?Sized>(&self, value: &T) -> Result<Value, CanonicalError> {
        #[cfg(test)]
        if self.mode == Mode::Check {
            crate::store::count_walked();
        }
        value.serialize(Canonical::of::<T>(self.mode))
    }

    fn scalar<T: Serialize>(&self, value: T) -> Result<Value, CanonicalError> {
        match self.mode {
            Mode::Check => Ok(Value::Null),
            Mode::Build => serde_json::to_value(value).map_err(ser::Error::custom),
        }
    }

    fn float(&self, value: f64) -> Result<(), CanonicalError> {
        if value.is_finite() {
            Ok(())
        } else {
            Err(ser::Error::custom(format!(
                "{value} is not a finite number: JSON has no form for it, so it could not be restored"
            )))
        }
    }
}

/// Elements of a sequence (or tuple) on their way to an array.
struct SeqBuilder {
    canonical: Canonical,
    items: Vec<Value>,
    count: usize,
    variant: Option<&'static str>,
}

impl SeqBuilder {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        let index = self.count;
        self.count += 1;
        let item = self
            .canonical
            .child(value)
            .map_err(|e| e.within(&format!("[{index}]")))?;
        if self.canonical.mode == Mode::Build {
            self.items.push(item);
        }
        Ok(())
    }

    fn finish(self) -> Result<Value, CanonicalError> {
        if self.canonical.mode == Mode::Check {
            return Ok(Value::Null);
        }
        let mut items = self.items;
        if self.canonical.unordered {
            let mut keyed: Vec<(String, Value)> =
                items.into_iter().map(|v| (v.to_string(), v)).collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            items = keyed.into_iter().map(|(_, v)| v).collect();
        }
        Ok(wrap(self.variant, Value::Array(items)))
    }
}

/// Entries of a map (or struct) on their way to an object with sorted keys.
struct MapBuilder {
    canonical: Canonical,
    entries: BTreeMap<String, Value>,
    pending_key: Option<String>,
    variant: Option<&'static str>,
}

impl MapBuilder {
    fn insert<T: Serialize + ?Sized>(
        &mut self,
        key: String,
        value: &T,
    ) -> Result<(), CanonicalError> {
        let value = self
            .canonical
            .child(value)
            .map_err(|e| e.within(&format!(".{key}")))?;
        if self.canonical.mode == Mode::Build {
            self.entries.insert(key, value);
        }
        Ok(())
    }

    fn key<T: Serialize + ?Sized>(&self, key: &T) -> Result<String, CanonicalError> {
        let build = Canonical {
            mode: Mode::Build,
            unordered: false,
        };
        match key.serialize(build)? {
            Value::String(s) => Ok(s),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            other => Err(ser::Error::custom(format!(
                "a map key must be a string, number or bool, found {other}"
            ))),
        }
    }

    fn finish(self) -> Result<Value, CanonicalError> {
        if self.canonical.mode == Mode::Check {
            return Ok(Value::Null);
        }
        // Inserted in sorted order, so the object is sorted with or without `preserve_order`.
        let object: Map<String, Value> = self.entries.into_iter().collect();
        Ok(wrap(self.variant, Value::Object(object)))
    }
}

/// Externally tagged enum variants, as serde_json writes them: `{"Variant": content}`.
fn wrap(variant: Option<&'static str>, content: Value) -> Value {
    match variant {
        None => content,
        Some(name) => {
            let mut object = Map::new();
            object.insert(name.to_owned(), content);
            Value::Object(object)
        }
    }
}

macro_rules! scalars {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(self, v: $t) -> Result<Value, CanonicalError> {
            self.scalar(v)
        }
    )*};
}

impl ser::Serializer for Canonical {
    type Ok = Value;
    type Error = CanonicalError;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = SeqBuilder;
    type SerializeMap = MapBuilder;
    type SerializeStruct = MapBuilder;
    type SerializeStructVariant = MapBuilder;

    scalars!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char,
        serialize_str: &str, serialize_bytes: &[u8]
    );

    fn serialize_f32(self, v: f32) -> Result<Value, CanonicalError> {
        self.float(f64::from(v))?;
        self.scalar(v)
    }

    fn serialize_f64(self, v: f64) -> Result<Value, CanonicalError> {
        self.float(v)?;
        self.scalar(v)
    }

    fn serialize_none(self) -> Result<Value, CanonicalError> {
        Ok(Value::Null)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, CanonicalError> {
        self.child(value)
    }

    fn serialize_unit(self) -> Result<Value, CanonicalError> {
        Ok(Value::Null)
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<Value, CanonicalError> {
        Ok(Value::Null)
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Value, CanonicalError> {
        self.scalar(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Value, CanonicalError> {
        self.child(value)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, CanonicalError> {
        let content = self
            .child(value)
            .map_err(|e| e.within(&format!(".{variant}")))?;
        Ok(wrap(Some(variant), content))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<SeqBuilder, CanonicalError> {
        Ok(SeqBuilder {
            canonical: self,
            items: Vec::with_capacity(len.unwrap_or(0).min(4096)),
            count: 0,
            variant: None,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<SeqBuilder, CanonicalError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, CanonicalError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, CanonicalError> {
        let mut seq = self.serialize_seq(Some(len))?;
        seq.variant = Some(variant);
        Ok(seq)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<MapBuilder, CanonicalError> {
        Ok(MapBuilder {
            canonical: self,
            entries: BTreeMap::new(),
            pending_key: None,
            variant: None,
        })
    }

    fn serialize_struct(self, _: &'static str, len: usize) -> Result<MapBuilder, CanonicalError> {
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<MapBuilder, CanonicalError> {
        let mut map = self.serialize_map(Some(len))?;
        map.variant = Some(variant);
        Ok(map)
    }
}

/// serde's four sequence-like traits, all building an array.
macro_rules! seq_like {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for SeqBuilder {
            type Ok = Value;
            type Error = CanonicalError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
                self.push(value)
            }
            fn end(self) -> Result<Value, CanonicalError> {
                self.finish()
            }
        }
    )*};
}

seq_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// serde's two struct-like traits, both building an object.
macro_rules! struct_like {
    ($($trait:ident),*) => {$(
        impl ser::$trait for MapBuilder {
            type Ok = Value;
            type Error = CanonicalError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Self::Error> {
                self.insert(key.to_owned(), value)
            }
            fn end(self) -> Result<Value, CanonicalError> {
                self.finish()
            }
        }
    )*};
}

struct_like!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for MapBuilder {
    type Ok = Value;
    type Error = CanonicalError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        self.pending_key = Some(self.key(key)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| ser::Error::custom("a map value came without its key"))?;
        self.insert(key, value)
    }
    fn end(self) -> Result<Value, CanonicalError> {
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    #[derive(serde::Serialize)]
    // Boxed on purpose: a smart pointer serializes as its content and must be seen through.
    #[allow(clippy::box_collection)]
    struct Holder {
        tags: HashSet<String>,
        order: Vec<u32>,
        nested: Option<Box<HashSet<u64>>>,
        by_key: HashMap<String, HashSet<i32>>,
    }

    fn holder(tags: &[&str], nested: &[u64]) -> Holder {
        Holder {
            tags: tags.iter().map(|s| s.to_string()).collect(),
            order: vec![3, 1, 2],
            nested: Some(Box::new(nested.iter().copied().collect())),
            by_key: [("k".to_string(), [5, -1, 9].into_iter().collect())].into(),
        }
    }

    #[test]
    fn equal_sets_give_equal_bytes_and_vectors_keep_their_order() {
        let a = canonical_json(&holder(&["b", "a", "c", "d"], &[9, 1, 5])).unwrap();
        // Many independently built sets: each has its own random iteration order.
        for _ in 0..32 {
            let b = canonical_json(&holder(&["d", "c", "a", "b"], &[5, 9, 1])).unwrap();
            assert_eq!(a, b);
        }
        assert!(a.contains(r#""order":[3,1,2]"#), "{a}");
        assert!(a.contains(r#""tags":["a","b","c","d"]"#), "{a}");
        assert!(a.contains(r#""k":[-1,5,9]"#), "{a}");
    }

    #[test]
    fn matches_serde_json_for_ordinary_values() {
        #[derive(serde::Serialize)]
        enum E {
            Unit,
            New(u8),
            Tuple(u8, String),
            Struct { z: i64, a: f64 },
        }
        let value = (
            vec![
                E::Unit,
                E::New(1),
                E::Tuple(2, "x\n".into()),
                E::Struct { z: -3, a: 0.5 },
            ],
            Some(u128::from(u64::MAX)),
            'c',
            [("b", 1), ("a", 2)].into_iter().collect::<HashMap<_, _>>(),
        );
        let expected = serde_json::to_string(&serde_json::to_value(&value).unwrap()).unwrap();
        assert_eq!(canonical_json(&value).unwrap(), expected);
    }

    #[test]
    fn non_finite_floats_are_refused_with_their_location() {
        #[derive(serde::Serialize)]
        struct Inner {
            x: Vec<f32>,
        }
        let value = vec![
            Inner { x: vec![1.0] },
            Inner {
                x: vec![2.0, f32::NAN],
            },
        ];
        let error = canonical_json(&value).unwrap_err().to_string();
        assert!(error.contains("[1].x[1]"), "{error}");
        let error = check_round_trip(&value).unwrap_err().to_string();
        assert!(error.contains("[1].x[1]"), "{error}");
        assert!(check_round_trip(&f64::INFINITY).is_err());
        assert!(check_round_trip(&vec![1.5f64]).is_ok());
    }
}
