//! The contract between `#[derive(Compactable)]` and the engine: the traversal out
//! ([`Compactable`], [`Visitor`]), the rebuild in ([`Parts`]), the classification
//! ([`Schema`]), what may reach a summarizer ([`Summarizable`]) and the conversation a session
//! pushes into ([`HasTranscript`]).

pub(crate) mod compactable;
pub(crate) mod has_transcript;
pub(crate) mod instance;
pub(crate) mod path;
pub(crate) mod schema;
pub(crate) mod summarizable;

pub use compactable::{Compactable, NestedField, Part, Parts, PointerFn, Visitor};
pub use has_transcript::HasTranscript;
pub use path::{RebuildError, Segment, Shape};
#[doc(hidden)]
pub use schema::{schema_for, schema_path};
pub use schema::{FieldClass, FieldSchema, Schema, SchemaBuilder};
pub use summarizable::Summarizable;
