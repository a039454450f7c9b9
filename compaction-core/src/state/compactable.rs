//! The contract between `#[derive(Compactable)]` and the engine: a typed traversal out (split)
//! and a typed rebuild in.

use crate::conversation::transcript::Transcript;
use crate::effects::record::{EffectLog, EffectRecords};
use crate::state::path::{child_path, push_segment, shape_key, RebuildError, Segment, Shape};
use crate::state::schema::Schema;
use crate::state::summarizable::Summarizable;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;

/// Agent state whose every field is classified. Derive it; do not implement it by hand unless
/// you must (the engine checks hand-written traversals against the schema anyway).
///
/// ```
/// use compaction::{Compactable, EffectLog, FieldClass};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default)]
/// struct State {
///     #[protected(pin)]
///     constraints: Vec<String>,
///     #[protected]
///     config_path: String,
///     #[derivable(pointer = "file://{config_path}")]
///     config_contents: String,
///     #[redundant]
///     tool_output: Vec<String>,
///     #[effect(idempotent = false)]
///     migrations: EffectLog,
/// }
///
/// let schema = State::schema();
/// assert_eq!(schema.fields().len(), 5);
/// assert_eq!(schema.field("constraints").unwrap().class, FieldClass::Protected { pin: true });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `Compactable`",
    label = "this type has no field classification",
    note = "add `#[derive(Compactable)]` to `{Self}` and classify each of its fields"
)]
pub trait Compactable: Sized + 'static {
    /// The classification of every field, built once.
    fn schema() -> &'static Schema;

    /// Hands every field to `visitor`, by class, as a borrow.
    fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V);

    /// Rebuilds the value from preserved parts.
    fn rebuild(parts: &mut Parts) -> Result<Self, RebuildError>;
}

impl<T: Compactable> Compactable for Box<T> {
    fn schema() -> &'static Schema {
        T::schema()
    }
    fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V) {
        (**self).visit(visitor)
    }
    fn rebuild(parts: &mut Parts) -> Result<Self, RebuildError> {
        T::rebuild(parts).map(Box::new)
    }
}

/// Builds a derivable field's pointer from protected values, only when it is needed.
pub type PointerFn<'a> = &'a (dyn Fn(&mut String) + 'a);

/// Receives the fields of a state, split by class.
///
/// The split is in the method signatures: only `derivable_summarizable` and
/// `redundant_summarizable` take a [`Summarizable`] value, and only values handed to them can
/// ever reach a summarizer. Protected values and effect records arrive through methods whose
/// values have no route there.
pub trait Visitor<'a> {
    /// A `#[protected]` field.
    fn protected<T: Serialize>(&mut self, name: &'static str, pin: bool, value: &'a T);
    /// A `#[derivable]` field that must not be summarized.
    fn derivable<T: Serialize>(&mut self, name: &'static str, pointer: PointerFn<'_>, value: &'a T);
    /// A `#[derivable(summarize)]` field.
    fn derivable_summarizable<T: Summarizable>(
        &mut self,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    );
    /// A `#[redundant]` field.
    fn redundant<T: Serialize>(&mut self, name: &'static str, value: &'a T);
    /// A `#[redundant(summarize)]` field.
    fn redundant_summarizable<T: Summarizable>(&mut self, name: &'static str, value: &'a T);
    /// An `#[effect]` field.
    fn effect<E: EffectRecords>(&mut self, name: &'static str, idempotent: bool, value: &'a E);
    /// A `#[transcript]` field. Visitors written before transcripts existed see it as a
    /// protected value (kept whole), which is never less safe.
    fn transcript(
        &mut self,
        name: &'static str,
        keep_recent: usize,
        pin_user: bool,
        value: &'a Transcript,
    ) {
        let _ = (keep_recent, pin_user);
        self.protected(name, false, value);
    }
    /// Enters a nested value: a struct field (`Segment::Field`) or a list element
    /// (`Segment::Index`). Every `enter` is matched by a `leave`.
    fn enter(&mut self, segment: Segment);
    /// Leaves the innermost nested value.
    fn leave(&mut self);
    /// Records the shape of an `Option` or `Vec` of nested state at the current path + `name`.
    fn shape(&mut self, name: &'static str, shape: Shape);
}

/// A field type that `#[nested]` accepts: a `Compactable` type, or `Option`/`Vec`/`Box` of one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be `#[nested]`: it is not `Compactable`",
    label = "`#[nested]` needs a type that derives `Compactable`, or an `Option`, `Vec` or `Box` of one",
    note = "derive `Compactable` for the inner type; for a map of state, keep a `Vec` of a struct whose key is a `#[protected]` field; plain data takes another class, e.g. `#[protected]`"
)]
pub trait NestedField: Sized + 'static {
    /// The nested schema.
    fn nested_schema() -> &'static Schema;
    /// Whether one field holds many values (`Vec`).
    const REPEATED: bool;
    /// Whether the value may be absent (`Option`).
    const CONDITIONAL: bool;
    /// Visits the nested value under `name`.
    fn visit_nested<'a, V: Visitor<'a>>(&'a self, name: &'static str, visitor: &mut V);
    /// Rebuilds the nested value under `name`.
    fn rebuild_nested(name: &'static str, parts: &mut Parts) -> Result<Self, RebuildError>;
}

impl<T: Compactable> NestedField for T {
    const REPEATED: bool = false;
    const CONDITIONAL: bool = false;
    fn nested_schema() -> &'static Schema {
        T::schema()
    }
    fn visit_nested<'a, V: Visitor<'a>>(&'a self, name: &'static str, visitor: &mut V) {
        visitor.enter(Segment::Field(name));
        self.visit(visitor);
        visitor.leave();
    }
    fn rebuild_nested(name: &'static str, parts: &mut Parts) -> Result<Self, RebuildError> {
        parts.enter(Segment::Field(name));
        let value = T::rebuild(parts);
        parts.leave();
        value
    }
}

impl<T: Compactable> NestedField for Option<T> {
    const REPEATED: bool = false;
    const CONDITIONAL: bool = true;
    fn nested_schema() -> &'static Schema {
        T::schema()
    }
    fn visit_nested<'a, V: Visitor<'a>>(&'a self, name: &'static str, visitor: &mut V) {
        match self {
            None => visitor.shape(name, Shape::Absent),
            Some(inner) => {
                visitor.shape(name, Shape::Present);
                inner.visit_nested(name, visitor);
            }
        }
    }
    fn rebuild_nested(name: &'static str, parts: &mut Parts) -> Result<Self, RebuildError> {
        match parts.shape(name)? {
            Shape::Absent => Ok(None),
            Shape::Present => T::rebuild_nested(name, parts).map(Some),
            Shape::Len(_) => Err(parts.error(name, "expected an optional value, found a list")),
        }
    }
}

impl<T: Compactable> NestedField for Vec<T> {
    const REPEATED: bool = true;
    const CONDITIONAL: bool = true;
    fn nested_schema() -> &'static Schema {
        T::schema()
    }
    fn visit_nested<'a, V: Visitor<'a>>(&'a self, name: &'static str, visitor: &mut V) {
        visitor.shape(name, Shape::Len(self.len()));
        visitor.enter(Segment::Field(name));
        for (i, item) in self.iter().enumerate() {
            visitor.enter(Segment::Index(i));
            item.visit(visitor);
            visitor.leave();
        }
        visitor.leave();
    }
    fn rebuild_nested(name: &'static str, parts: &mut Parts) -> Result<Self, RebuildError> {
        let len = match parts.shape(name)? {
            Shape::Len(n) => n,
            _ => return Err(parts.error(name, "expected a list, found an optional value")),
        };
        parts.enter(Segment::Field(name));
        let mut out = Vec::with_capacity(len.min(1 << 16));
        let mut result = Ok(());
        for i in 0..len {
            parts.enter(Segment::Index(i));
            let item = T::rebuild(parts);
            parts.leave();
            match item {
                Ok(v) => out.push(v),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        parts.leave();
        result.map(|()| out)
    }
}

/// A preserved value on its way back into a state.
#[derive(Debug, Clone)]
pub enum Part {
    /// Canonical JSON of the value.
    Json(String),
    /// The field was evicted for good: restore `Default`.
    Default,
    /// Effect records.
    Effects(EffectLog),
    /// The shape of an optional or repeated nested value.
    Shape(Shape),
}

/// The preserved parts of one state, keyed by concrete path, read back by the generated
/// `rebuild`.
#[derive(Debug, Default)]
pub struct Parts {
    parts: HashMap<String, Part>,
    path: String,
    marks: Vec<usize>,
}

impl Parts {
    /// Empty parts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the part for a concrete field path.
    pub fn insert(&mut self, path: impl Into<String>, part: Part) {
        self.parts.insert(path.into(), part);
    }

    /// Adds the shape of the nested value at a concrete path.
    pub fn insert_shape(&mut self, path: &str, shape: Shape) {
        self.parts.insert(shape_key(path), Part::Shape(shape));
    }

    /// Enters a nested value.
    pub fn enter(&mut self, segment: Segment) {
        self.marks.push(self.path.len());
        push_segment(&mut self.path, segment);
    }

    /// Leaves the innermost nested value.
    pub fn leave(&mut self) {
        if let Some(len) = self.marks.pop() {
            self.path.truncate(len);
        }
    }

    fn take(&mut self, name: &str) -> Result<(String, Part), RebuildError> {
        let path = child_path(&self.path, name);
        match self.parts.remove(&path) {
            Some(part) => Ok((path, part)),
            None => Err(RebuildError {
                path,
                reason: "no preserved part".into(),
            }),
        }
    }

    /// An error about `name` under the current path.
    pub fn error(&self, name: &str, reason: impl Into<String>) -> RebuildError {
        RebuildError {
            path: child_path(&self.path, name),
            reason: reason.into(),
        }
    }

    /// Takes the part of `name`: `Ok(Some(json))` for a value, `Ok(None)` for an evicted marker.
    fn take_value(&mut self, name: &str) -> Result<(String, Option<String>), RebuildError> {
        let (path, part) = self.take(name)?;
        match part {
            Part::Json(text) => Ok((path, Some(text))),
            Part::Default => Ok((path, None)),
            other => Err(RebuildError {
                path,
                reason: format!("expected a preserved value, found {}", part_kind(&other)),
            }),
        }
    }

    fn required<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, RebuildError> {
        match self.take_value(name)? {
            (path, Some(text)) => decode(path, &text),
            (path, None) => Err(RebuildError {
                path,
                reason: "the value was evicted and nothing re-acquired it".into(),
            }),
        }
    }

    /// A `#[protected]` field: its verbatim value.
    pub fn protected<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, RebuildError> {
        self.required(name)
    }

    /// A `#[derivable]` field: its verbatim or re-acquired value.
    pub fn derivable<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, RebuildError> {
        self.required(name)
    }

    /// A `#[derivable]` field whose type has a `Default`: its verbatim or re-acquired value, or
    /// `Default` when rehydration was allowed to leave it empty
    /// ([`RehydrateOptions::default_unreacquirable`](crate::rehydrate::RehydrateOptions::default_unreacquirable)).
    pub fn derivable_or_default<T: DeserializeOwned + Default>(
        &mut self,
        name: &str,
    ) -> Result<T, RebuildError> {
        // The same rule as a redundant field's: a value, or `Default` for an evicted marker.
        self.redundant(name)
    }

    /// A `#[redundant]` field: its verbatim value, or `Default` when it was evicted.
    pub fn redundant<T: DeserializeOwned + Default>(
        &mut self,
        name: &str,
    ) -> Result<T, RebuildError> {
        match self.take_value(name)? {
            (path, Some(text)) => decode(path, &text),
            (_, None) => Ok(T::default()),
        }
    }

    /// An `#[effect]` field: its records.
    pub fn effect<E: EffectRecords>(&mut self, name: &str) -> Result<E, RebuildError> {
        let (path, part) = self.take(name)?;
        match part {
            Part::Effects(log) => Ok(E::from_effect_log(log)),
            other => Err(RebuildError {
                path,
                reason: format!("expected effect records, found {}", part_kind(&other)),
            }),
        }
    }

    /// A `#[nested]` field.
    pub fn nested<N: NestedField>(&mut self, name: &'static str) -> Result<N, RebuildError> {
        N::rebuild_nested(name, self)
    }

    /// The shape of the optional or repeated nested value `name`.
    pub fn shape(&mut self, name: &str) -> Result<Shape, RebuildError> {
        let path = child_path(&self.path, name);
        match self.parts.remove(&shape_key(&path)) {
            Some(Part::Shape(s)) => Ok(s),
            Some(other) => Err(RebuildError {
                path,
                reason: format!("expected a shape, found {}", part_kind(&other)),
            }),
            None => Err(RebuildError {
                path,
                reason: "no preserved shape".into(),
            }),
        }
    }
}

fn decode<T: DeserializeOwned>(path: String, text: &str) -> Result<T, RebuildError> {
    serde_json::from_str(text).map_err(|e| RebuildError {
        path,
        reason: format!("preserved value does not fit the field's type: {e}"),
    })
}

fn part_kind(part: &Part) -> &'static str {
    match part {
        Part::Json(_) => "a value",
        Part::Default => "an evicted marker",
        Part::Effects(_) => "effect records",
        Part::Shape(_) => "a shape",
    }
}
