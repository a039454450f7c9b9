//! The contract between `#[derive(Compactable)]` and the engine: the traversal out
//! ([`Compactable`], [`Visitor`]), the rebuild in ([`Parts`]), the classification
//! ([`Schema`]) and what may reach a summarizer ([`Summarizable`]).

pub(crate) mod compactable;
pub(crate) mod path;
pub(crate) mod schema;
pub(crate) mod summarizable;

pub use compactable::{Compactable, NestedField, Part, Parts, PointerFn, Visitor};
pub use path::{RebuildError, Segment, Shape};
#[doc(hidden)]
pub use schema::{schema_for, schema_path};
pub use schema::{FieldClass, FieldSchema, Schema, SchemaBuilder};
pub use summarizable::Summarizable;
