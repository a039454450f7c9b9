//! How big a value's JSON is, found without paying for a value too big for the window: a
//! serializable value behind a trait object ([`JsonValue`]), serialized only up to a cap
//! ([`json_within`]), after a lower-bound walk that rules out a value far bigger than the window
//! at the cost of a few steps (issue 3: "cheap upper and lower bounds, serialized length walks
//! without copying").
//!
//! The walk counts only the bytes JSON cannot do without: string contents (escaping only adds),
//! two quotes per string or key, one byte per scalar, brackets. The walk stops as soon as the
//! bound passes the cap.

use serde::ser::{self, Serialize};
use std::fmt;
use std::io;

/// Bytes of JSON a token may stand for, at most, when deciding a value cannot fit without
/// counting it. Real text runs at 3-5 bytes a token; a value denser than this is judged by its
/// bytes and evicted, which is safe (it only evicts more), and the exact count of the final
/// window still decides the budget.
pub(crate) const MAX_BYTES_PER_TOKEN: usize = 16;

/// A serializable value behind a trait object (serde's `Serialize` is not object safe).
pub(crate) trait JsonValue {
    fn write_json(&self, out: &mut dyn io::Write) -> serde_json::Result<()>;
    /// Whether the compact JSON is certainly longer than `cap` bytes (a lower-bound walk: no
    /// writing, no escaping, stops at the cap).
    fn json_exceeds(&self, cap: usize) -> bool;
}

impl<T: Serialize> JsonValue for T {
    fn write_json(&self, out: &mut dyn io::Write) -> serde_json::Result<()> {
        serde_json::to_writer(out, self)
    }
    fn json_exceeds(&self, cap: usize) -> bool {
        exceeds(self, cap)
    }
}

/// A `Write` that refuses to grow past a cap, so a value too big for the window costs at most
/// the cap to find out. Without a buffer it only measures.
struct CappedBuffer {
    bytes: Option<Vec<u8>>,
    len: usize,
    cap: usize,
}

impl io::Write for CappedBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.len + buf.len() > self.cap {
            return Err(io::Error::other("over cap"));
        }
        self.len += buf.len();
        if let Some(bytes) = &mut self.bytes {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Serializes `value` unless it is longer than `cap` bytes. It is measured first without being
/// stored, so a value over the cap costs no memory to rule out (only one that fits is buffered,
/// at its exact size).
pub(crate) fn json_within(value: &dyn JsonValue, cap: usize) -> Option<String> {
    // Strings alone already over the cap: ruled out in a few steps, nothing serialized.
    if value.json_exceeds(cap) {
        return None;
    }
    let mut measure = CappedBuffer {
        bytes: None,
        len: 0,
        cap,
    };
    value.write_json(&mut measure).ok()?;
    let mut buffer = CappedBuffer {
        bytes: Some(Vec::with_capacity(measure.len)),
        len: 0,
        cap,
    };
    value.write_json(&mut buffer).ok()?;
    String::from_utf8(buffer.bytes?).ok()
}

/// A `Write` that compares what it is given with `expected`, failing at the first difference.
struct SameAs<'e> {
    rest: &'e [u8],
}

impl io::Write for SameAs<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.rest.strip_prefix(buf) {
            Some(rest) => {
                self.rest = rest;
                Ok(buf.len())
            }
            None => Err(io::Error::other("differs")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether the compact JSON of `value` is exactly `expected`, found while serializing it:
/// nothing is buffered, and a difference stops the serialization where it starts.
pub(crate) fn json_is(value: &dyn JsonValue, expected: &[u8]) -> bool {
    let mut same = SameAs { rest: expected };
    value.write_json(&mut same).is_ok() && same.rest.is_empty()
}

/// Whether the compact JSON of `value` is certainly longer than `cap` bytes.
pub(crate) fn exceeds<T: Serialize + ?Sized>(value: &T, cap: usize) -> bool {
    let mut walk = LowerBound { len: 0, cap };
    matches!(value.serialize(&mut walk), Err(Stop::OverCap))
}

struct LowerBound {
    len: usize,
    cap: usize,
}

#[derive(Debug)]
enum Stop {
    OverCap,
    Other,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stop::OverCap => "over cap",
            Stop::Other => "serialize error",
        })
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Stop::Other
    }
}

impl LowerBound {
    fn add(&mut self, n: usize) -> Result<(), Stop> {
        self.len = self.len.saturating_add(n);
        if self.len > self.cap {
            Err(Stop::OverCap)
        } else {
            Ok(())
        }
    }
}

type R = Result<(), Stop>;

macro_rules! scalar {
    ($($name:ident: $t:ty),*) => {$(
        fn $name(self, _: $t) -> R {
            self.add(1)
        }
    )*};
}

impl ser::Serializer for &mut LowerBound {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    scalar!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_f32: f32,
        serialize_f64: f64
    );

    fn serialize_char(self, v: char) -> R {
        self.add(v.len_utf8() + 2)
    }
    fn serialize_str(self, v: &str) -> R {
        self.add(v.len() + 2)
    }
    fn serialize_bytes(self, v: &[u8]) -> R {
        self.add(v.len() + 2)
    }
    fn serialize_none(self) -> R {
        self.add(4)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> R {
        value.serialize(self)
    }
    fn serialize_unit(self) -> R {
        self.add(4)
    }
    fn serialize_unit_struct(self, _: &'static str) -> R {
        self.add(4)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> R {
        self.add(variant.len() + 2)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> R {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> R {
        self.add(variant.len() + 5)?;
        value.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Stop> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, Stop> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Stop> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, Stop> {
        self.add(variant.len() + 7)?;
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, Stop> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Stop> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, Stop> {
        self.add(variant.len() + 7)?;
        Ok(self)
    }
}

macro_rules! compound {
    ($($trait:ident: $method:ident),*) => {$(
        impl ser::$trait for &mut LowerBound {
            type Ok = ();
            type Error = Stop;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> R {
                value.serialize(&mut **self)
            }
            fn end(self) -> R {
                Ok(())
            }
        }
    )*};
}

compound!(
    SerializeSeq: serialize_element,
    SerializeTuple: serialize_element,
    SerializeTupleStruct: serialize_field,
    SerializeTupleVariant: serialize_field
);

impl ser::SerializeMap for &mut LowerBound {
    type Ok = ();
    type Error = Stop;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> R {
        // A key is a string in JSON: at least its two quotes and the colon.
        self.add(1)?;
        key.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> R {
        value.serialize(&mut **self)
    }
    fn end(self) -> R {
        Ok(())
    }
}

impl ser::SerializeStruct for &mut LowerBound {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> R {
        self.add(key.len() + 3)?;
        value.serialize(&mut **self)
    }
    fn end(self) -> R {
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut LowerBound {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> R {
        self.add(key.len() + 3)?;
        value.serialize(&mut **self)
    }
    fn end(self) -> R {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::exceeds;
    use serde::Serialize;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    enum E {
        Unit,
        New(String),
        Tuple(u8, String),
        Struct { a: Vec<u8>, b: Option<f64> },
    }

    #[derive(Serialize)]
    struct S {
        text: String,
        tags: Vec<String>,
        map: BTreeMap<u32, String>,
        e: Vec<E>,
        c: char,
        unit: (),
    }

    /// The bound never exceeds the real length: checked at every cap around it.
    #[test]
    fn never_above_the_real_length() {
        let s = S {
            text: "quote \" backslash \\ newline \n é ✓".repeat(3),
            tags: vec!["a".into(), String::new(), "b\tc".into()],
            map: (0..5).map(|i| (i * 1000, format!("v{i}"))).collect(),
            e: vec![
                E::Unit,
                E::New("n".into()),
                E::Tuple(7, "t".into()),
                E::Struct {
                    a: vec![1, 2, 255],
                    b: None,
                },
                E::Struct {
                    a: vec![],
                    b: Some(1.5e300),
                },
            ],
            c: 'é',
            unit: (),
        };
        let real = serde_json::to_string(&s).unwrap().len();
        for cap in 0..real + 10 {
            if exceeds(&s, cap) {
                assert!(real > cap, "bound says > {cap}, real length {real}");
            }
        }
        assert!(!exceeds(&s, real));
        assert!(exceeds(&"x".repeat(100), 50));
    }
}
