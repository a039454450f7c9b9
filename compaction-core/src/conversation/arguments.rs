//! Reading tool-call arguments: `ToolArguments::value` and `ToolArguments::parse`, the parsed
//! views of the exact text, which refuse a repeated key instead of collapsing it; comparing,
//! hashing, showing and building them (from a `serde_json::Value`, or checked text).

use crate::conversation::message::{ToolArguments, ToolArgumentsError};
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::fmt;

impl ToolArguments {
    /// The arguments parsed as a `serde_json::Value`. Refuses a repeated key in any object
    /// ([`ToolArgumentsError::DuplicateKey`]). Numbers follow `serde_json`: an integer beyond
    /// 64 bits reads as the nearest `f64`; use [`parse`](Self::parse) into a type with a `u128`
    /// or string field to read it exactly.
    pub fn value(&self) -> Result<Value, ToolArgumentsError> {
        parse_unique(self.raw().get())
    }

    /// The arguments deserialized into `T`, straight from the text (so a `u128` field reads a
    /// huge integer exactly). Refuses a repeated key in any object first.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ToolArgumentsError> {
        self.value()?;
        serde_json::from_str(self.raw().get()).map_err(|e| ToolArgumentsError::Shape {
            reason: e.to_string(),
        })
    }
}

impl PartialEq for ToolArguments {
    /// Equal when the texts are equal, byte for byte.
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ToolArguments {}

impl std::hash::Hash for ToolArguments {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl From<Value> for ToolArguments {
    /// The value's compact JSON.
    fn from(value: Value) -> Self {
        ToolArguments::from(&value)
    }
}

impl From<&Value> for ToolArguments {
    /// The value's compact JSON.
    fn from(value: &Value) -> Self {
        // A Value always serializes (string keys); the fallback is never taken.
        let raw = serde_json::value::to_raw_value(value)
            .unwrap_or_else(|_| RawValue::from_string("null".to_owned()).expect("JSON"));
        ToolArguments::from_parts(raw, None).expect("a value without padding")
    }
}

impl TryFrom<String> for ToolArguments {
    type Error = ToolArgumentsError;

    /// [`ToolArguments::from_text`].
    fn try_from(text: String) -> Result<Self, ToolArgumentsError> {
        ToolArguments::from_text(text)
    }
}

impl fmt::Display for ToolArguments {
    /// The exact text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ToolArguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolArguments")
            .field(&self.as_str())
            .finish()
    }
}

/// `text` parsed as a `Value`, refusing an object that repeats a key.
pub(crate) fn parse_unique(text: &str) -> Result<Value, ToolArgumentsError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    UniqueKeys
        .deserialize(&mut deserializer)
        .and_then(|v| deserializer.end().map(|()| v))
        .map_err(|e| duplicate_or(e, |reason| ToolArgumentsError::NotJson { reason }))
}

/// The marker a [`UniqueKeys`] error message starts with, so `value` can tell a repeated key
/// from a syntax error (serde_json wraps custom errors with a position).
const DUPLICATE: &str = "compaction: duplicate key ";

fn duplicate_or(
    error: serde_json::Error,
    other: impl FnOnce(String) -> ToolArgumentsError,
) -> ToolArgumentsError {
    let message = error.to_string();
    match message.strip_prefix(DUPLICATE) {
        Some(rest) => {
            // `rest` is the key as JSON, then serde_json's " at line L column C".
            let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<String>();
            match stream.next() {
                Some(Ok(key)) => ToolArgumentsError::DuplicateKey { key },
                _ => other(message),
            }
        }
        None => other(message),
    }
}

/// Deserializes a `Value`, refusing an object that repeats a key.
#[derive(Clone, Copy)]
struct UniqueKeys;

impl<'de> DeserializeSeed<'de> for UniqueKeys {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(UniqueKeys)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                let quoted = serde_json::to_string(&key).unwrap_or_default();
                return Err(de::Error::custom(format!("{DUPLICATE}{quoted}")));
            }
            let value = map.next_value_seed(UniqueKeys)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_is_kept_as_written_whatever_it_holds() {
        for text in [
            "123456789012345678901234567890",
            r#"{"n": 123456789012345678901234567890, "f": 1.10, "e": 1E400}"#,
            "  {\n\t\"a\" : [1 , 2]\r\n}  ",
            r#"{"a":1,"a":2}"#,
            r#""\u00e9\ud83d\ude00""#,
            "-0",
        ] {
            let arguments = ToolArguments::from_text(text).unwrap();
            assert_eq!(arguments.as_str(), text);
            assert_eq!(arguments.to_string(), text);
            assert_eq!(arguments.padded_text().is_some(), text.trim() != text);
            assert_eq!(arguments.raw().get(), text.trim());
        }
    }

    #[test]
    fn text_that_is_not_one_json_value_is_refused() {
        for text in [
            "",
            " ",
            "{",
            "{\"a\":1}}",
            "{\"a\":1} {}",
            "nan",
            "'x'",
            "{a:1}",
        ] {
            assert!(
                matches!(
                    ToolArguments::from_text(text),
                    Err(ToolArgumentsError::NotJson { .. })
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn parsed_views_refuse_repeated_keys_at_any_depth() {
        for (text, key) in [
            (r#"{"a":1,"a":2}"#, "a"),
            (r#"{"x":[{"k":1,"k":1}]}"#, "k"),
            (r#"{"q\"uote":1,"q\"uote":2}"#, "q\"uote"),
        ] {
            let arguments = ToolArguments::from_text(text).unwrap();
            let expected = ToolArgumentsError::DuplicateKey { key: key.into() };
            assert_eq!(arguments.value(), Err(expected.clone()), "{text}");
            assert_eq!(arguments.parse::<Value>(), Err(expected), "{text}");
        }
        let fine = ToolArguments::from_text(r#"{"a":{"a":1},"b":[{"a":2}]}"#).unwrap();
        assert_eq!(fine.value(), Ok(json!({"a": {"a": 1}, "b": [{"a": 2}]})));
    }

    #[test]
    fn parse_reads_huge_integers_exactly_and_reports_the_shape() {
        #[derive(serde::Deserialize)]
        struct Order {
            id: u128,
        }
        let arguments =
            ToolArguments::from_text(r#"{"id":123456789012345678901234567890}"#).expect("JSON");
        assert_eq!(
            arguments.parse::<Order>().unwrap().id,
            123456789012345678901234567890
        );
        assert!(matches!(
            ToolArguments::from(json!({"id": "x"})).parse::<Order>(),
            Err(ToolArgumentsError::Shape { .. })
        ));
    }

    #[test]
    fn from_a_value_is_its_compact_json() {
        let arguments = ToolArguments::from(json!({"path": "a.rs", "n": [1, 2.5]}));
        assert_eq!(arguments.as_str(), r#"{"n":[1,2.5],"path":"a.rs"}"#);
        assert!(arguments.is_object());
        assert!(!ToolArguments::from(json!([1])).is_object());
    }
}
