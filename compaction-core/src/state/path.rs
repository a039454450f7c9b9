//! Paths into nested state: their segments, the shape of an optional or repeated nested value,
//! and the error that names the path a rebuild failed at.

/// One step of a path into nested state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// A named field.
    Field(&'static str),
    /// An element of a `Vec`.
    Index(usize),
}

/// The shape of an `Option` or `Vec` of nested state, preserved so rebuild knows how many
/// values to rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// `None`.
    Absent,
    /// `Some(_)`.
    Present,
    /// A `Vec` of this length.
    Len(usize),
}

/// Why a state could not be rebuilt from its parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot rebuild `{path}`: {reason}")]
pub struct RebuildError {
    /// Concrete path of the field.
    pub path: String,
    /// What is wrong with its part.
    pub reason: String,
}

/// Appends a path segment to a concrete path string.
pub(crate) fn push_segment(path: &mut String, segment: Segment) {
    match segment {
        Segment::Field(name) => {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(name);
        }
        Segment::Index(i) => {
            path.push('[');
            path.push_str(&i.to_string());
            path.push(']');
        }
    }
}

/// Joins the current path and a field name.
pub(crate) fn child_path(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else {
        format!("{base}.{name}")
    }
}

/// The key under which the shape of `path` is kept (distinct from the value keys).
pub(crate) fn shape_key(path: &str) -> String {
    format!("{path}#shape")
}
