//! `#[derive(Compactable)]` and `#[derive(Summarizable)]` for the `compaction` crate.
//!
//! The derive is split like dtolnay's: `ast` reads the input, `attr` parses each field's
//! attribute, `check` enforces the rules between fields, `expand` writes the impl. Every
//! error of one struct is collected in a `ctxt::Ctxt` and reported in one build.
#![deny(missing_docs)]

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod summarizable;
mod template;

use proc_macro::TokenStream;

/// Derives `compaction::Compactable`. Every named field must carry exactly one of
/// `#[protected]`, `#[protected(pin)]`, `#[derivable(pointer = "...")]` (with optional
/// `summarize`), `#[redundant]` (with optional `summarize`), `#[effect(idempotent = true|false)]`
/// (with an optional `scope = "..."`: its scope in a durable ledger, default its path) or
/// `#[nested]`. See the `compaction` crate for what each class guarantees.
#[proc_macro_derive(
    Compactable,
    attributes(protected, derivable, redundant, effect, nested, compaction)
)]
pub fn derive_compactable(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive(&input).into()
}

/// Derives `compaction::Summarizable` for a plain data type whose every field is summarizable.
/// Refused on a type with protected, effect or nested state.
// The class attributes are registered here too, so a `#[protected]` field on a `Summarizable`
// type gets this derive's explanation instead of "cannot find attribute `protected`".
#[proc_macro_derive(
    Summarizable,
    attributes(compaction, protected, derivable, redundant, effect, nested)
)]
pub fn derive_summarizable(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    summarizable::derive(&input).into()
}
