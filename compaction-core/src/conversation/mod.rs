//! The conversation: the values an agent exchanges with a model (messages, tool calls with
//! their exact arguments, provider-opaque parts), a transcript's pairing rules, the wire
//! formats' token formulas, and the texts compaction writes into a conversation (markers and
//! the short handles they name). Nothing here plans: the planner (`crate::planner`) reads
//! these types; they never read the planner.

pub(crate) mod answer;
pub(crate) mod arguments;
pub(crate) mod count;
pub(crate) mod format;
pub(crate) mod handle;
pub(crate) mod marker;
pub(crate) mod marker_view;
pub(crate) mod message;
pub(crate) mod opaque;
pub(crate) mod tool;
pub(crate) mod transcript;

#[cfg(test)]
mod tests;
