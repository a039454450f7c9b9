//! The contract between `#[derive(Compactable)]` and the engine: the traversal out
//! ([`Compactable`], [`Visitor`]), the rebuild in ([`Parts`]), the classification
//! ([`Schema`]) and what may reach a summarizer ([`Summarizable`]).

pub(crate) mod compactable;
pub(crate) mod schema;

pub use compactable::{
    Compactable, NestedField, Part, Parts, PointerFn, RebuildError, Segment, Shape, Visitor,
};
pub use schema::{FieldClass, FieldSchema, Schema, SchemaBuilder};
