//! The concrete field paths one state must hold, derived from its schema and the recorded
//! shapes of its optional and repeated nested values: what a traversal must visit at compaction,
//! and what a checkpoint must hold before rehydration does any work.
//!
//! The expansion is bounded by the parts present: every element a shape claims must hold at
//! least one part of its own (a value or a shape), so expanding more prefixes than there are
//! parts proves the shapes lie, and the expansion stops there instead of following a length
//! of millions. A list whose elements hold no classified field (nothing to count) is capped at
//! the parts present plus about a million elements.

use crate::state::path::{child_path, Shape};
use crate::state::schema::Schema;
use std::collections::{HashMap, HashSet};

/// Where and why the parts of a state disagree with its schema and shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstanceMismatch {
    /// The concrete path.
    pub path: String,
    /// What disagrees.
    pub reason: String,
}

/// How many elements beyond the parts present a list of field-less nested values may hold.
const EMPTY_ELEMENTS_CAP: usize = 1 << 20;

fn mismatch(path: impl Into<String>, reason: impl Into<String>) -> InstanceMismatch {
    InstanceMismatch {
        path: path.into(),
        reason: reason.into(),
    }
}

/// Checks that `present` (the concrete paths of the values a state holds, in any order) are
/// exactly the leaf paths its schema and `shapes` call for: none missing, none extra, none
/// twice. The work is bounded by the number of parts present, whatever the shapes claim.
pub(crate) fn check_instance<'p>(
    schema: &Schema,
    shapes: &[(String, Shape)],
    present: impl IntoIterator<Item = &'p str>,
) -> Result<(), InstanceMismatch> {
    let mut held: HashSet<&str> = HashSet::new();
    for path in present {
        if !held.insert(path) {
            return Err(mismatch(path, "held twice"));
        }
    }
    let mut shape_at: HashMap<&str, Shape> = HashMap::with_capacity(shapes.len());
    for (path, shape) in shapes {
        if shape_at.insert(path.as_str(), *shape).is_some() {
            return Err(mismatch(path.as_str(), "shape recorded twice"));
        }
    }
    // Each expanded prefix stands for a distinct subtree holding at least one part.
    let limit = held.len() + shape_at.len();
    // A list whose elements hold no classified field has no parts to check its length
    // against: its elements rebuild from nothing, so only a generous cap bounds that work.
    if let Some((path, len)) = shapes.iter().find_map(|(path, shape)| match shape {
        Shape::Len(len) if *len > limit.saturating_add(EMPTY_ELEMENTS_CAP) => Some((path, len)),
        _ => None,
    }) {
        return Err(mismatch(
            path.as_str(),
            format!("claims {len} elements, more than the {limit} parts present"),
        ));
    }
    let mut expected = 0usize;
    for field in schema.fields() {
        let segments: Vec<&str> = field.path.split('.').collect();
        let mut prefixes = vec![String::new()];
        let mut saw_shape = false;
        for segment in &segments[..segments.len() - 1] {
            let (name, repeated) = match segment.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (*segment, false),
            };
            let mut next = Vec::new();
            for prefix in &prefixes {
                let path = child_path(prefix, name);
                match (shape_at.get(path.as_str()), repeated) {
                    (None, false) => next.push(path),
                    (Some(Shape::Present), false) => {
                        saw_shape = true;
                        next.push(path);
                    }
                    (Some(Shape::Absent), false) => saw_shape = true,
                    (Some(Shape::Len(len)), true) => {
                        saw_shape = true;
                        if next.len().saturating_add(*len) > limit {
                            return Err(mismatch(
                                path,
                                format!(
                                    "claims {len} elements, more than the {limit} parts present"
                                ),
                            ));
                        }
                        next.extend((0..*len).map(|i| format!("{path}[{i}]")));
                    }
                    (None, true) => return Err(mismatch(path, "no length recorded for a list")),
                    (Some(shape), _) => {
                        return Err(mismatch(
                            path,
                            format!("recorded shape {shape:?} does not fit the schema"),
                        ))
                    }
                }
            }
            prefixes = next;
        }
        if field.conditional && !saw_shape && !prefixes.is_empty() {
            return Err(mismatch(
                field.path.as_str(),
                "declared under an Option or Vec, but no shape was recorded for it",
            ));
        }
        let leaf = segments[segments.len() - 1];
        for prefix in &prefixes {
            let path = child_path(prefix, leaf);
            if !held.contains(path.as_str()) {
                return Err(mismatch(path, "declared in the schema but never visited"));
            }
            expected += 1;
        }
    }
    if expected != held.len() {
        // Something is held that no schema field and shape calls for.
        let wanted = expected_set(schema, &shape_at);
        let extra = held
            .iter()
            .find(|p| !wanted.contains(**p))
            .map(|p| p.to_string())
            .unwrap_or_default();
        return Err(mismatch(
            extra,
            "held, but the schema and shapes do not call for it",
        ));
    }
    Ok(())
}

/// The leaf paths called for (only run once the count is known to be off, so already bounded).
fn expected_set(schema: &Schema, shape_at: &HashMap<&str, Shape>) -> HashSet<String> {
    let mut out = HashSet::new();
    for field in schema.fields() {
        let segments: Vec<&str> = field.path.split('.').collect();
        let mut prefixes = vec![String::new()];
        for segment in &segments[..segments.len() - 1] {
            let name = segment.strip_suffix("[]").unwrap_or(segment);
            prefixes = prefixes
                .iter()
                .flat_map(|prefix| {
                    let path = child_path(prefix, name);
                    match shape_at.get(path.as_str()) {
                        Some(Shape::Absent) => Vec::new(),
                        Some(Shape::Len(len)) => {
                            (0..*len).map(|i| format!("{path}[{i}]")).collect()
                        }
                        _ => vec![path],
                    }
                })
                .collect();
        }
        let leaf = segments[segments.len() - 1];
        out.extend(prefixes.iter().map(|p| child_path(p, leaf)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::schema::FieldClass;

    fn schema() -> Schema {
        let inner = Schema::builder("Inner")
            .field("x", FieldClass::Protected { pin: false }, "u32")
            .build();
        Schema::builder("Outer")
            .field("top", FieldClass::Protected { pin: true }, "u32")
            .nested("many", &inner, true, true)
            .nested("maybe", &inner, false, true)
            .build()
    }

    fn shapes(len: usize, present: bool) -> Vec<(String, Shape)> {
        let maybe = if present {
            Shape::Present
        } else {
            Shape::Absent
        };
        vec![
            ("many".to_string(), Shape::Len(len)),
            ("maybe".to_string(), maybe),
        ]
    }

    #[test]
    fn a_consistent_instance_passes() {
        let held = ["top", "many[0].x", "many[1].x", "maybe.x"];
        assert_eq!(check_instance(&schema(), &shapes(2, true), held), Ok(()));
        assert_eq!(
            check_instance(&schema(), &shapes(0, false), ["top"]),
            Ok(())
        );
    }

    #[test]
    fn a_skipped_element_an_extra_one_and_a_lying_length_are_refused() {
        let skipped = check_instance(&schema(), &shapes(2, false), ["top", "many[1].x"]);
        assert_eq!(skipped.unwrap_err().path, "many[0].x");
        let extra = check_instance(
            &schema(),
            &shapes(1, false),
            ["top", "many[0].x", "many[1].x"],
        );
        assert_eq!(extra.unwrap_err().path, "many[1].x");
        let huge = check_instance(&schema(), &shapes(usize::MAX, false), ["top", "many[0].x"]);
        assert!(huge.unwrap_err().reason.contains("claims"));
        let no_shape = check_instance(&schema(), &[], ["top"]);
        assert_eq!(no_shape.unwrap_err().path, "many");
    }
}
