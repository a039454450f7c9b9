//! The window a model reads: each field (`field.rs`: what became of it, the model a checkpoint
//! keeps, and how a renderer sees it), the whole text ([`render`]: the renderer, and the
//! documented default format with its compact form), and the escaping that keeps outside text
//! on its own line (`escape.rs`).

pub(crate) mod escape;
pub(crate) mod field;
#[cfg(test)]
mod field_tests;
pub mod render;

pub use escape::{escape_inline, escape_pointer};
pub use field::{EffectsView, FieldView, FormView, Section};
pub(crate) use field::{Entry, Form, IndexedRecord, KeptPayload, SpilledRecords, SummaryValue};
pub use render::{
    DefaultRenderer, Renderer, WindowView, COMPACT_FORM_BELOW, COMPACT_NOTICE, REVERIFY_NOTICE,
};
