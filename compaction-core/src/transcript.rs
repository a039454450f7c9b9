//! Transcripts: the conversation with the model as typed, pair-safe, lossless state.
//!
//! A [`Transcript`] is the list of [`Message`]s an agent sends to a chat API. Compaction makes
//! each request fit a token budget without ever breaking what the API and the agent rely on,
//! and keeps consecutive requests identical as far as it can, so a provider's prompt cache
//! serves them.
//!
#![doc = include_str!("planner/spec.md")]
//!
//! # Markers and handles
//!
//! Tombstones, pages, user runs, folds and state updates are messages whose content starts with
//! [`MARKER_PREFIX`]; they name what they stand for by a short [`Handle`] (`p17`), mapped to its
//! full content address by the [`HandleTable`] a checkpoint keeps. A kept message whose first
//! *visible* character is `⟦` (after whitespace, newlines, a BOM, zero-width and other format
//! characters) is sent with [`VERBATIM_ESCAPE`] in front, so text that imitates a marker is
//! never read as one, by the model or by rehydration.
//!
//! # Public names
//!
//! [`Transcript`], [`Message`], [`Role`], [`ToolCall`] (with [`ToolCall::with_effect_in`]),
//! [`ToolArguments`], [`OpaquePart`], [`TranscriptError`]; the planner [`TranscriptPlanner`] with [`TranscriptPolicy`],
//! [`TranscriptBudget`], [`EffectStatuses`], [`TranscriptPlan`], [`FoldSummaryRequest`],
//! [`PlannedTranscript`], [`MessageOutcome`], [`OutcomeCounts`], [`TranscriptMemory`],
//! [`TranscriptPlanError`]; [`Handle`] and [`HandleTable`]; [`Marker`] (what a marker stands
//! for); the way back
//! [`rehydrate_transcript`], [`rehydrate_from_store`], [`required_blobs`],
//! [`TranscriptRehydrateError`]; the wire-format seam [`ChatFormat`] with [`OpenAiChat`] (the
//! default), [`AnthropicMessages`] and [`SystemPlacement`]; the OpenAI chat formula
//! [`chat_tokens`], [`message_tokens`]; [`MARKER_PREFIX`], [`VERBATIM_ESCAPE`],
//! [`FOLD_LISTED_CALLS`], [`MAX_BLOCKS`], [`REMEMBERED`].

pub use crate::conversation::count::{chat_tokens, message_tokens};
pub use crate::conversation::format::{
    AnthropicMessages, ChatFormat, OpenAiChat, SystemPlacement, TOOL_USE_SYSTEM_PROMPT_TOKENS,
};
pub use crate::conversation::handle::{Handle, HandleParseError, HandleTable, HandleTableError};
pub use crate::conversation::marker::{FOLD_LISTED_CALLS, MARKER_PREFIX, VERBATIM_ESCAPE};
pub use crate::conversation::marker_view::Marker;
pub use crate::conversation::message::{
    Message, OpaqueKind, OpaquePart, OpaquePartError, Role, ToolArguments, ToolArgumentsError,
    ToolCall,
};
pub use crate::conversation::tool::ToolDefinition;
pub use crate::conversation::transcript::{Transcript, TranscriptError};
pub use crate::planner::effects::{AmbiguousKey, EffectStatuses};
pub use crate::planner::error::TranscriptPlanError;
pub use crate::planner::memories::{TranscriptPlanner, REMEMBERED};
pub use crate::planner::memory::TranscriptMemory;
pub use crate::planner::plan::{
    FoldSummaryRequest, MessageOutcome, OutcomeCounts, PlannedTranscript, TranscriptBudget,
    TranscriptPlan,
};
pub use crate::planner::policy::TranscriptPolicy;
pub use crate::planner::rehydrate::{
    rehydrate_from_store, rehydrate_transcript, required_blobs, TranscriptRehydrateError,
};
pub use crate::planner::steps::MAX_BLOCKS;
