//! The schema fingerprint a checkpoint carries, so it restores only into the type that wrote it:
//! the concrete type (module path and generic arguments) and every field's path, class, Rust
//! type and nesting.

use crate::state::schema::Schema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a checkpoint records of the type that wrote it. Kept readable (not only a hash) so a
/// refusal can say what differs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SchemaFingerprint {
    /// `std::any::type_name` of the state: tells apart two types of one name in two modules
    /// and two instantiations of one generic type.
    pub concrete_type: String,
    /// One line per classified field, in schema order.
    pub fields: Vec<String>,
}

/// How many differences a refusal lists before it says "and N more".
const SHOWN_DIFFERENCES: usize = 6;

impl SchemaFingerprint {
    /// The fingerprint of the state type `S`, whose schema is `schema`, as this build defines
    /// it.
    pub fn of<S: ?Sized>(schema: &Schema) -> Self {
        let fields = schema
            .fields()
            .iter()
            .map(|f| {
                let nesting = if f.conditional { " (conditional)" } else { "" };
                format!("{}: {:?} as `{}`{nesting}", f.path, f.class, f.rust_type)
            })
            .collect();
        SchemaFingerprint {
            concrete_type: std::any::type_name::<S>().to_owned(),
            fields,
        }
    }

    /// What differs between the fields of this fingerprint (a checkpoint's) and `expected`'s
    /// (the type's), readably; `None` when they are the same.
    pub fn field_difference(&self, expected: &SchemaFingerprint) -> Option<String> {
        (self.fields != expected.fields).then(|| difference(&self.fields, &expected.fields))
    }
}

/// The field path a fingerprint line describes.
fn path_of(line: &str) -> &str {
    line.split(": ").next().unwrap_or(line)
}

/// A readable list of what differs between the checkpoint's fields and the type's.
fn difference(found: &[String], expected: &[String]) -> String {
    let by_path = |lines: &[String]| -> BTreeMap<String, String> {
        lines
            .iter()
            .map(|l| (path_of(l).to_owned(), l.clone()))
            .collect()
    };
    let found_map = by_path(found);
    let expected_map = by_path(expected);
    let mut notes = Vec::new();
    for (path, line) in &found_map {
        match expected_map.get(path) {
            None => notes.push(format!("`{path}` is in the checkpoint but not in the type")),
            Some(now) if now != line => {
                notes.push(format!("`{path}` was `{line}`, the type has `{now}`"))
            }
            Some(_) => {}
        }
    }
    for path in expected_map.keys() {
        if !found_map.contains_key(path) {
            notes.push(format!("`{path}` is in the type but not in the checkpoint"));
        }
    }
    if notes.is_empty() {
        notes.push("the fields are declared in another order".into());
    }
    let more = notes.len().saturating_sub(SHOWN_DIFFERENCES);
    notes.truncate(SHOWN_DIFFERENCES);
    let mut text = notes.join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    text
}
