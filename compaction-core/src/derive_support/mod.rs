//! Items the derive's generated code uses, reached as `compaction::__private`. Not a public API:
//! names may change in any release.
#![allow(missing_docs)]

pub mod checks;
pub mod gates;
