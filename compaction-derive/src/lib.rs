//! `#[derive(Compactable)]` and `#[derive(Summarizable)]` for the `compaction` crate.
//!
//! Laid out like serde_derive: this file holds the entry points only; `expand` (the
//! `Compactable` impl) and `summarizable` (the `Summarizable` impl) are peers that write code;
//! `bound` holds the generic bounds both need; `internals` reads and checks the input
//! (`attr` builds the `ast`, `check` enforces the rules between fields, `ctxt` collects every
//! error of one struct so they are all reported in one build, `template` parses pointers).
//! Every import points down that list.
#![deny(missing_docs)]

mod bound;
mod expand;
mod internals;
mod summarizable;

use proc_macro::TokenStream;

/// Derives `compaction::Compactable`. Every named field must carry exactly one of
/// `#[protected]`, `#[protected(pin)]`, `#[derivable(pointer = "...")]` (with optional
/// `summarize`), `#[redundant]` (with optional `summarize`), `#[effect(idempotent = true|false)]`
/// (with an optional `scope = "..."`: its scope in a durable ledger, default its path) or
/// `#[nested]`. See the `compaction` crate for what each class guarantees.
///
/// `#[nested]` takes a `Compactable` type, or an `Option`, `Vec` or `Box` of one; its fields are
/// classified in place. In a `Vec`, newer is kept before older: the later elements come back
/// into the window first and leave it last (put the newest last, as `push` does).
#[proc_macro_derive(
    Compactable,
    attributes(
        protected, derivable, redundant, effect, transcript, nested, compaction
    )
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
    attributes(
        compaction, protected, derivable, redundant, effect, transcript, nested
    )
)]
pub fn derive_summarizable(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    summarizable::derive(&input).into()
}
