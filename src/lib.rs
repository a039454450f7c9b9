#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub use compaction_core::*;
pub use compaction_derive::{Compactable, Summarizable};
