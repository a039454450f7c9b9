//! A tool for the model: `resolve_pointer` reads back, verified, what compaction moved out of
//! the context, for the pointers this agent's compactions issued and no other.
//!
//! Put [`resolve_pointer_tool`] in the `tools` of each chat request; when the model calls it,
//! answer with [`PointerResolver::handle`] and append the returned tool-result message. With
//! the `openai-types` feature, `compaction::openai::resolve_pointer_chat_tool()` gives the same
//! definition as async-openai's tool type.
//!
//! Public names: [`RESOLVE_POINTER`] (the tool's name), [`resolve_pointer_tool`] (its
//! definition), [`resolve_pointer_parameters`] (its JSON schema), [`PointerResolver`] (the
//! handler), [`PointerToolReply`], [`ReadBackClass`] (what a result holds), [`ResolvedSlice`],
//! [`PointerToolError`], [`DEFAULT_MAX_BYTES`].

mod class;
pub(crate) mod definition;
mod resolver;

pub use class::ReadBackClass;
pub use definition::{
    resolve_pointer_definition, resolve_pointer_parameters, resolve_pointer_tool, RESOLVE_POINTER,
    RESOLVE_POINTER_DESCRIPTION,
};
pub use resolver::{
    PointerResolver, PointerToolError, PointerToolReply, ResolvedSlice, DEFAULT_MAX_BYTES,
};
