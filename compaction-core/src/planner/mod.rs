//! The transcript planner: what each request of an agent sends, within its budget, from its
//! memory of the last request; the blocks, pages and markers it writes; and the way back
//! (rehydration). Its rules and the order of a compaction point's steps are this module's spec,
//! below (the same text is the public `transcript` module's documentation). How a message
//! moves between its forms is drawn in docs/architecture.md.
//!
//! Where each part lives: [`next_request`] (the order of one plan: find the memory, check,
//! append or compaction point, finish, commit), [`steps`] (a compaction point's decisions),
//! [`build`] (writing them: blocks, chunks, markers), [`fold_rule`] (what a fold may send to
//! a summarizer: the one rule), [`page`], [`span`], [`tally`], [`layout`] (anchors and
//! zones), [`opening`] (the first messages kept in place), [`memory`] and [`memories`] (what
//! is remembered between requests), [`arrival`] (what a new result is sent as), [`plan`] (the
//! plan's types), [`policy`], [`effects`], [`error`], [`rehydrate`].
//!
#![doc = include_str!("spec.md")]

pub(crate) mod arrival;
pub(crate) mod build;
pub(crate) mod effects;
pub(crate) mod error;
pub(crate) mod fold_rule;
pub(crate) mod layout;
pub(crate) mod memories;
pub(crate) mod memory;
pub(crate) mod next_request;
pub(crate) mod opening;
pub(crate) mod page;
pub(crate) mod plan;
pub(crate) mod policy;
pub(crate) mod rehydrate;
pub(crate) mod span;
pub(crate) mod steps;
pub(crate) mod tally;

#[cfg(test)]
mod tests;
