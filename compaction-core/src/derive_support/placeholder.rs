//! Pointer templates: how a `#[derivable(pointer = "..{field}..")]` template writes a
//! protected value into the pointer it builds.

/// Appends a protected value to a pointer: strings as they are, anything else as JSON.
pub fn push_placeholder<T: serde::Serialize + ?Sized>(out: &mut String, value: &T) {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => out.push_str(&s),
        Ok(other) => out.push_str(&other.to_string()),
        Err(_) => out.push_str("<unserializable>"),
    }
}
