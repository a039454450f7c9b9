//! The values of a conversation: `Message`, `Role`, `ToolCall`, a call's exact `ToolArguments`
//! and a turn's provider-opaque `OpaquePart`s, with their serialization (byte-for-byte for what
//! the model or the provider wrote). A leaf: the pairing rules over a list of them are in
//! `conversation.rs`, reading arguments in `arguments.rs`, checking and building opaque parts
//! in `opaque.rs`.

use crate::conversation::answer::EffectAnswer;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt: pinned, verbatim.
    System,
    /// Developer instructions (the newer name for system messages): pinned, verbatim.
    Developer,
    /// The user: protected, never summarized.
    User,
    /// The model's replies, possibly calling tools.
    Assistant,
    /// A tool result, answering one call by its id.
    Tool,
}

impl Role {
    /// The role's wire name (`system`, `developer`, `user`, `assistant`, `tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// System and developer messages: kept verbatim in every compaction.
    pub fn is_pinned(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// One tool call an assistant message makes.
///
/// Serialized as `{"id", "name", "arguments", "effect"?, "effect_scope"?}` with `arguments` the model's JSON
/// embedded as written (huge integers, repeated keys and spacing included); when whitespace
/// surrounds that JSON, `arguments_text` carries the whole text beside it. Reading it back takes
/// `serde_json` (the format of checkpoints and stored spans), which gives the text back byte for
/// byte.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "CallIn")]
pub struct ToolCall {
    /// The call's id; its result names it in `tool_call_id`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments: the JSON text exactly as the model wrote it (see [`ToolArguments`]).
    pub arguments: ToolArguments,
    /// The idempotency key of the `EffectLog` record this call performs, when it has side
    /// effects. A call whose effect is live (`not_started` or `unknown`) is never folded.
    pub effect: Option<String>,
    /// The ledger scope of that record (an `#[effect]` field's scope: its path, or its
    /// `#[effect(scope = "...")]`). `None`: the key is looked up in every scope of the state and
    /// refused when more than one holds it (see [`with_effect`](Self::with_effect)).
    pub effect_scope: Option<String>,
}

impl ToolCall {
    /// A call without side effects. `arguments` is a `serde_json::Value` (`json!({..})`, kept
    /// as its compact JSON) or [`ToolArguments`] (the model's text, kept as written).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<ToolArguments>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            effect: None,
            effect_scope: None,
        }
    }

    /// The exact argument text a request carries, byte for byte: what every adapter sends and
    /// what a planner counts.
    pub fn arguments_text(&self) -> &str {
        self.arguments.as_str()
    }

    /// Links the call to the effect record with this idempotency key, in whichever scope of the
    /// state's ledgers holds it. When two scopes hold the same key (a committed `order-42` in
    /// `refunds`, an unknown one in `charges`), compaction refuses the call
    /// (`CompactionError::AmbiguousEffect`) instead of guessing which one it is: name the scope
    /// with [`with_effect_in`](Self::with_effect_in). A key no scope holds is treated as live
    /// (the call is never folded).
    pub fn with_effect(mut self, key: impl Into<String>) -> Self {
        self.effect = Some(key.into());
        self.effect_scope = None;
        self
    }

    /// Links the call to the effect record `key` of ledger scope `scope` (the `#[effect]`
    /// field's path, or its `#[effect(scope = "...")]`): the unambiguous form.
    ///
    /// ```
    /// use compaction::ToolCall;
    /// use serde_json::json;
    ///
    /// let call = ToolCall::new("c1", "charge", json!({"order": 42}))
    ///     .with_effect_in("charges", "order-42");
    /// assert_eq!(call.effect_scope.as_deref(), Some("charges"));
    /// assert_eq!(call.effect.as_deref(), Some("order-42"));
    /// ```
    pub fn with_effect_in(mut self, scope: impl Into<String>, key: impl Into<String>) -> Self {
        self.effect = Some(key.into());
        self.effect_scope = Some(scope.into());
        self
    }
}

/// A [`ToolCall`] as written: the arguments embedded as raw JSON.
#[derive(Serialize)]
struct CallOut<'a> {
    id: &'a str,
    name: &'a str,
    arguments: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments_text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    effect: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    effect_scope: Option<&'a str>,
}

impl Serialize for ToolCall {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        CallOut {
            id: &self.id,
            name: &self.name,
            arguments: self.arguments.raw(),
            arguments_text: self.arguments.padded_text(),
            effect: self.effect.as_deref(),
            effect_scope: self.effect_scope.as_deref(),
        }
        .serialize(serializer)
    }
}

/// A [`ToolCall`] as read, before its arguments are checked against `arguments_text`.
#[derive(Deserialize)]
struct CallIn {
    id: String,
    name: String,
    arguments: Box<RawValue>,
    #[serde(default)]
    arguments_text: Option<String>,
    #[serde(default)]
    effect: Option<String>,
    #[serde(default)]
    effect_scope: Option<String>,
}

impl TryFrom<CallIn> for ToolCall {
    type Error = String;

    fn try_from(read: CallIn) -> Result<Self, String> {
        let arguments = ToolArguments::from_parts(read.arguments, read.arguments_text)
            .ok_or("`arguments_text` is not `arguments` with whitespace around it")?;
        Ok(ToolCall {
            id: read.id,
            name: read.name,
            arguments,
            effect: read.effect,
            effect_scope: read.effect_scope,
        })
    }
}

/// One message of a conversation with a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
    /// Tool calls (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers (tool messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// An optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Provider-opaque parts of an assistant turn (thinking with its signature, redacted
    /// thinking, encrypted reasoning), replayed byte-for-byte before the text and calls. Never
    /// summarized, never separated from their turn: see [`OpaquePart`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opaque: Vec<OpaquePart>,
    /// What the session did with the effect call this tool result answers, when
    /// `Session::run_effect` wrote it (not public: only the session sets it; a checkpoint keeps
    /// it). Never sent on a wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) effect_answer: Option<EffectAnswer>,
}

impl Message {
    fn of(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            opaque: Vec::new(),
            effect_answer: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::of(Role::System, content)
    }

    /// A developer message.
    pub fn developer(content: impl Into<String>) -> Self {
        Self::of(Role::Developer, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::of(Role::User, content)
    }

    /// An assistant message without tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::of(Role::Assistant, content)
    }

    /// An assistant message that calls tools.
    pub fn assistant_with_tools(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls: calls,
            ..Self::of(Role::Assistant, content)
        }
    }

    /// The result of the call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Self::of(Role::Tool, content)
        }
    }

    /// Sets the participant name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Appends provider-opaque parts (assistant messages only: see [`OpaquePart`]).
    pub fn with_opaque(mut self, parts: impl IntoIterator<Item = OpaquePart>) -> Self {
        self.opaque.extend(parts);
        self
    }

    /// What the session did with the effect call this result answers, when
    /// [`Session::run_effect`](crate::session::Session::run_effect) pushed it: the session's
    /// record, set by the session only, so a tool's output that imitates the session's words
    /// never passes for it. `None` for every other message.
    pub fn effect_answer(&self) -> Option<EffectAnswer> {
        self.effect_answer
    }
}

/// A tool call's arguments: the JSON text exactly as the model wrote it.
///
/// Providers send arguments as text (`"arguments": "{\"path\":\"a.rs\"}"`). Parsing that text
/// into a `serde_json::Value` and printing it again is not the identity: an integer beyond 64
/// bits (`123456789012345678901234567890`) becomes a float (`1.2345678901234568e+29`), a
/// duplicate key collapses to its last value, whitespace and key order change. So the text is
/// kept as written and every adapter sends it back unchanged; the model, the prompt cache and
/// the effect ledger see the same bytes the model produced.
///
/// - **Always JSON.** [`from_text`](Self::from_text) refuses text that is not one JSON value
///   ([`ToolArgumentsError::NotJson`]); the adapters map that to their own typed error
///   (for example `OpenAiMessageError::ArgumentsNotJson`). Non-JSON arguments are never
///   carried: no wire format has a place for them (Anthropic's `tool_use.input` is an object),
///   and tombstones and folds quote arguments as JSON.
/// - **Duplicate keys are kept, never collapsed.** The text carries them as written; the parsed
///   views [`value`](Self::value) and [`parse`](Self::parse) refuse them
///   ([`ToolArgumentsError::DuplicateKey`]) rather than pick one in silence.
/// - **Counted as sent.** [`as_str`](Self::as_str) (also
///   [`ToolCall::arguments_text`](crate::transcript::ToolCall::arguments_text)) is the text a
///   request carries, so it is the text token counts are taken of.
///
/// Built from a `serde_json::Value` (`ToolCall::new(id, name, json!({..}))`), the text is the
/// value's compact JSON.
///
/// ```
/// use compaction::transcript::ToolArguments;
///
/// let text = r#"{"order": 123456789012345678901234567890, "note":"as written"}"#;
/// let arguments = ToolArguments::from_text(text)?;
/// assert_eq!(arguments.as_str(), text); // byte-for-byte, huge integer and spacing included
/// let order: u128 = arguments.value()?["order"].to_string().parse().unwrap_or(0);
/// assert_ne!(order, 123456789012345678901234567890); // a Value holds it as a float ...
/// #[derive(serde::Deserialize)]
/// struct Refund { order: u128 }
/// assert_eq!(arguments.parse::<Refund>()?.order, 123456789012345678901234567890); // ... a type, exactly
///
/// assert!(ToolArguments::from_text(r#"{"a":1,"a":2}"#)?.value().is_err()); // never collapsed
/// assert!(ToolArguments::from_text("{truncated").is_err());
/// # Ok::<(), compaction::transcript::ToolArgumentsError>(())
/// ```
#[derive(Clone)]
pub struct ToolArguments {
    /// The JSON value, without surrounding whitespace.
    raw: Box<RawValue>,
    /// The whole text, when whitespace surrounds the value (rare: then `raw` alone would not
    /// give the text back).
    padded: Option<Box<str>>,
}

/// Why tool-call arguments could not be taken or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolArgumentsError {
    /// The text is not one JSON value.
    #[error("the arguments are not JSON: {reason}")]
    NotJson {
        /// The parser's message (position and what it expected; never the text).
        reason: String,
    },
    /// An object in the arguments repeats a key: a parsed view would have to drop one value.
    /// The text itself keeps both and is sent as written.
    #[error("the arguments repeat the key `{key}` in one object")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// The arguments are JSON but not the shape asked for ([`ToolArguments::parse`]).
    #[error("the arguments do not have the expected shape: {reason}")]
    Shape {
        /// The deserializer's message.
        reason: String,
    },
}

impl ToolArguments {
    /// Arguments from the text the model wrote, kept byte-for-byte. Refuses text that is not
    /// exactly one JSON value (surrounding whitespace allowed, and kept).
    pub fn from_text(text: impl Into<String>) -> Result<Self, ToolArgumentsError> {
        let text = text.into();
        let raw = RawValue::from_string(text.clone()).map_err(|e| ToolArgumentsError::NotJson {
            reason: e.to_string(),
        })?;
        // `from_string` keeps the value without the whitespace around it.
        let padded = (raw.get().len() != text.len()).then(|| text.into_boxed_str());
        Ok(ToolArguments { raw, padded })
    }

    /// The exact text, as the model wrote it: what every adapter sends and what token counts
    /// are taken of.
    pub fn as_str(&self) -> &str {
        self.padded.as_deref().unwrap_or_else(|| self.raw.get())
    }

    /// The exact text, owned.
    pub fn into_string(self) -> String {
        match self.padded {
            Some(text) => text.into(),
            None => self.raw.get().to_owned(),
        }
    }

    /// Whether the arguments are a JSON object (what Anthropic's `tool_use.input` must be).
    pub fn is_object(&self) -> bool {
        self.raw.get().starts_with('{')
    }

    /// The text without the surrounding whitespace, as a raw JSON value: what a JSON document
    /// (our serialization, Anthropic's `input`) can embed.
    pub(crate) fn raw(&self) -> &RawValue {
        &self.raw
    }

    /// The whole text when whitespace surrounds the value (our serialization then carries it
    /// beside the embedded value), else `None`.
    pub(crate) fn padded_text(&self) -> Option<&str> {
        self.padded.as_deref()
    }

    /// Arguments from a raw value and, when whitespace surrounded it, the whole text (as our
    /// serialization carries them). `None` when the text is not that value with whitespace.
    pub(crate) fn from_parts(raw: Box<RawValue>, padded: Option<String>) -> Option<Self> {
        match padded {
            None => Some(ToolArguments { raw, padded: None }),
            Some(text) => {
                let whole = ToolArguments::from_text(text).ok()?;
                (whole.raw.get() == raw.get()).then_some(whole)
            }
        }
    }
}

/// What an [`OpaquePart`] is, and so which wire format replays it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OpaqueKind {
    /// An Anthropic `thinking` block: the reasoning text and its `signature`.
    AnthropicThinking,
    /// An Anthropic `redacted_thinking` block: encrypted reasoning (`data`).
    AnthropicRedactedThinking,
    /// An OpenAI Responses `reasoning` item (its `encrypted_content`, summary and id).
    OpenAiReasoning,
    /// An Anthropic `compaction` block (server-side compaction, a beta of the Messages API):
    /// the provider's own summary of the context before it (`content`; `null` when the
    /// provider's compaction failed, which the API takes back as a no-op). The provider reads
    /// it in place of what came before it; ours keeps the history too, so nothing it stands
    /// for is lost here.
    AnthropicCompaction,
    /// An OpenAI Responses `compaction` item (server-side compaction, or the
    /// `/responses/compact` endpoint): encrypted (`encrypted_content`), readable only by the
    /// provider that made it.
    OpenAiCompaction,
}

impl OpaqueKind {
    /// The block's `type` on the wire (`thinking`, `redacted_thinking`, `reasoning`,
    /// `compaction`).
    pub fn wire_type(self) -> &'static str {
        match self {
            OpaqueKind::AnthropicThinking => "thinking",
            OpaqueKind::AnthropicRedactedThinking => "redacted_thinking",
            OpaqueKind::OpenAiReasoning => "reasoning",
            OpaqueKind::AnthropicCompaction | OpaqueKind::OpenAiCompaction => "compaction",
        }
    }

    /// Whether Anthropic's Messages API replays it.
    pub fn is_anthropic(self) -> bool {
        matches!(
            self,
            OpaqueKind::AnthropicThinking
                | OpaqueKind::AnthropicRedactedThinking
                | OpaqueKind::AnthropicCompaction
        )
    }
}

/// One provider-opaque part of an assistant message: the provider's JSON block, exactly as it
/// arrived, and its [`OpaqueKind`].
///
/// # The rules every planner keeps
///
/// A provider signs or encrypts these parts and checks them when they come back: a changed
/// byte, a part moved to another turn, or a turn sent without the parts it had (while its tool
/// calls are still being answered) is rejected or silently degrades the model. So:
///
/// 1. **Never summarized, never shown to a summarizer.** The text a summarizer reads of a
///    folded run leaves every part out (they are ciphertext or signed reasoning: a summary of
///    them is neither).
/// 2. **Replayed byte-for-byte.** A kept assistant message keeps its parts unchanged, in order.
///    [`block`](OpaquePart::block) is the provider's JSON block exactly as it arrived.
/// 3. **Never separated from their assistant turn.** No stub, tombstone or marker carries
///    them, and no message keeps them without the rest of its turn: the assistant message, its
///    tool calls and the results that answer them stay or go together.
/// 4. **Folded only with the whole turn**, and then stored in the fold's span (the serialized
///    messages), so rehydration gives them back with the turn.
/// 5. **Counted.** Each part costs the tokens of its [`block`](OpaquePart::block) text. That
///    over-counts (a provider bills thinking it strips from old turns at zero, and ciphertext
///    by its plaintext), which keeps the budget hard.
///
/// On the wire the parts come first in their turn, in the order they arrived: Anthropic wants
/// thinking blocks before the text and `tool_use` blocks of the assistant message, and OpenAI's
/// Responses API wants the `reasoning` item before the turn's `message` and `function_call`
/// items. A provider's own `compaction` block or item (its server-side compaction) arrives
/// before the reply it belongs to and is kept the same way: an opaque part of that assistant
/// turn, replayed exactly, never summarized. Only assistant
/// messages carry them ([`TranscriptError::OpaqueOutsideAssistant`](crate::transcript::TranscriptError::OpaqueOutsideAssistant)).
///
/// ```
/// use compaction::transcript::{OpaqueKind, OpaquePart};
/// use compaction::Message;
///
/// // As it came in an Anthropic response's `content`:
/// let block = r#"{"type":"thinking","thinking":"Check a.rs first.","signature":"EqQBCgIYAhIM"}"#;
/// let part = OpaquePart::from_block(OpaqueKind::AnthropicThinking, block)?;
/// assert_eq!(part.block(), block);
/// let turn = Message::assistant("Reading a.rs.").with_opaque([part]);
/// let json = serde_json::to_string(&turn).unwrap();
/// assert_eq!(serde_json::from_str::<Message>(&json).unwrap(), turn); // byte-for-byte
/// # Ok::<(), compaction::transcript::OpaquePartError>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct OpaquePart {
    pub(super) kind: OpaqueKind,
    pub(super) block: Box<RawValue>,
}

/// Why a block is not an opaque part of the kind named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpaquePartError {
    /// The block is not a JSON object, or repeats one of the fields checked (`type`,
    /// `thinking`, `signature`, `data`).
    #[error("the {kind:?} block is not a JSON object without repeated fields: {reason}")]
    NotAnObject {
        /// The kind named.
        kind: OpaqueKind,
        /// What is wrong.
        reason: String,
    },
    /// The block's `type` is not the kind's (`thinking`, `redacted_thinking`, `reasoning`).
    #[error("the block's type is {found:?}, not `{expected}`")]
    WrongType {
        /// The type the kind has on the wire.
        expected: &'static str,
        /// The block's `type`, if it is a string.
        found: Option<String>,
    },
    /// A field the kind needs (`signature`, `thinking`, `data`) is missing or not a string.
    #[error("the `{expected_type}` block has no string `{field}`")]
    MissingField {
        /// The block's type.
        expected_type: &'static str,
        /// The field.
        field: &'static str,
    },
    /// An OpenAI reasoning item that is not the documented shape (a field the Responses API
    /// does not list, a missing `summary`, a value of the wrong type): the Responses adapter
    /// could not send it unchanged.
    #[error("the `reasoning` item does not have the documented shape: {reason}")]
    Shape {
        /// The parser's message.
        reason: String,
    },
}

impl OpaquePart {
    /// What the part is.
    pub fn kind(&self) -> OpaqueKind {
        self.kind
    }

    /// The provider's JSON block, exactly as it arrived: what is replayed, and what the
    /// planner counts the part's tokens of.
    pub fn block(&self) -> &str {
        self.block.get()
    }

    /// The block as a raw JSON value, for adapters that embed it in a request.
    pub fn raw_block(&self) -> &RawValue {
        &self.block
    }
}

impl PartialEq for OpaquePart {
    /// Same kind, and the same block byte for byte.
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.block() == other.block()
    }
}

impl Eq for OpaquePart {}
