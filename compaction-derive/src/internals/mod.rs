//! Everything between the syntax tree and the writers: `attr` reads the input into the `ast`,
//! `check` enforces the rules between fields, `ctxt` collects every error, `template` parses
//! pointer templates. Nothing here writes generated code.

pub mod ast;
pub mod attr;
pub mod check;
pub mod ctxt;
pub mod template;
