//! Conversions both ways between our messages and OpenAI Responses input and output items
//! (async-openai's `responses` types): messages, `function_call`, `function_call_output` and
//! `reasoning` items. What one side cannot carry is a typed error, never dropped.

use crate::checkpoint::Compacted;
use crate::conversation::message::{
    Message, OpaqueKind, OpaquePart, Role, ToolArguments, ToolCall,
};
use crate::integrations::openai::responses_rules::ResponsesError;
use crate::pointer_tool::definition::{
    resolve_pointer_parameters, RESOLVE_POINTER, RESOLVE_POINTER_DESCRIPTION,
};
use crate::session::request::SessionRequest;
use async_openai::types::responses::{
    CompactionSummaryItemParam, EasyInputContent, EasyInputMessage, FunctionCallOutput,
    FunctionCallOutputItemParam, FunctionTool, FunctionToolCall, InputContent, InputItem,
    InputRole, Item, MessageItem, MessageType, OutputItem, OutputMessageContent, ReasoningItem,
    Role as WireRole, Tool,
};
use serde_json::Value;

/// Our messages as Responses input items, in order. System, developer, user and assistant text
/// become `message` items (plain text content); a tool message a `function_call_output` with
/// its `call_id`; an assistant message its `reasoning` items first (our
/// [`OpenAiReasoning`](OpaqueKind::OpenAiReasoning) parts, every field unchanged), then its
/// text as a `message` item (when it has text, or no calls), then one `function_call` per call
/// whose `arguments` are the model's text byte for byte. `ToolCall::effect` is our own
/// bookkeeping and is not sent. Pairing is not checked: see
/// [`check_responses_input`](super::check_responses_input).
///
/// Refused: a participant `name` (Responses messages have none), another provider's opaque
/// part (Anthropic thinking).
///
/// ```
/// use compaction::openai::{check_responses_input, from_responses_input, to_responses_input};
/// use compaction::transcript::OpaquePart;
/// use compaction::{Message, ToolCall};
/// use serde_json::json;
///
/// let call = ToolCall::new("call_1", "read_file", json!({"path": "a.rs"}));
/// let turn = Message::assistant_with_tools("", vec![call])
///     .with_opaque([OpaquePart::openai_reasoning("rs_1", "gAAAAB-opaque")]);
/// let chat = vec![
///     Message::user("read a.rs"),
///     turn,
///     Message::tool_result("call_1", "fn main() {}"),
/// ];
/// let items = to_responses_input(&chat)?;
/// check_responses_input(&items)?; // every call answered, reasoning before its call
/// let wire = serde_json::to_value(&items)?;
/// assert_eq!(wire[1]["type"], "reasoning");
/// assert_eq!(wire[1]["encrypted_content"], "gAAAAB-opaque");
/// assert_eq!(wire[2]["arguments"], r#"{"path":"a.rs"}"#);
/// assert_eq!(from_responses_input(&items)?, chat); // and back
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_responses_input(messages: &[Message]) -> Result<Vec<InputItem>, ResponsesError> {
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        if message.name.is_some() {
            return Err(ResponsesError::Named { index });
        }
        let follows_assistant = index > 0 && messages[index - 1].role == Role::Assistant;
        push_message(&mut out, message, index, follows_assistant, Foreign::Refuse)?;
    }
    Ok(out)
}

/// What a conversion does with an opaque part another API replays (Anthropic thinking).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Foreign {
    /// `ForeignOpaque`: the caller asked for this message as it is.
    Refuse,
    /// Not sent (documented on `Compacted::responses_input`).
    LeaveOut,
}

/// Appends `message`'s items. `follows_assistant`: the message before it is an assistant
/// message, whose items a call-only message would otherwise join when read back.
pub(super) fn push_message(
    out: &mut Vec<InputItem>,
    message: &Message,
    index: usize,
    follows_assistant: bool,
    foreign: Foreign,
) -> Result<(), ResponsesError> {
    let text = |role| easy_message(role, message.content.clone());
    match message.role {
        Role::System => out.push(text(WireRole::System)),
        Role::Developer => out.push(text(WireRole::Developer)),
        Role::User => out.push(text(WireRole::User)),
        Role::Tool => out.push(InputItem::Item(Item::FunctionCallOutput(
            FunctionCallOutputItemParam {
                call_id: message.tool_call_id.clone(),
                output: FunctionCallOutput::Text(message.content.clone()),
                id: None,
                status: None,
                name: None,
                namespace: None,
                caller: None,
            },
        ))),
        Role::Assistant => {
            let mut reasoning = 0;
            for part in &message.opaque {
                let item = match part.kind() {
                    OpaqueKind::OpenAiReasoning => Item::Reasoning(reasoning_item(part, index)?),
                    OpaqueKind::OpenAiCompaction => Item::Compaction(compaction_item(part, index)?),
                    foreign_kind => match foreign {
                        Foreign::Refuse => {
                            return Err(ResponsesError::ForeignOpaque {
                                index,
                                kind: foreign_kind.wire_type(),
                            })
                        }
                        Foreign::LeaveOut => continue,
                    },
                };
                out.push(InputItem::Item(item));
                reasoning += 1;
            }
            // Read back, items join the assistant message before them unless a message item
            // or reasoning starts a new one: a call-only message after an assistant message
            // gets an empty text item to start its own.
            let calls = &message.tool_calls;
            if !message.content.is_empty()
                || calls.is_empty()
                || (reasoning == 0 && follows_assistant)
            {
                out.push(text(WireRole::Assistant));
            }
            for call in calls {
                out.push(InputItem::Item(Item::FunctionCall(function_call(call))));
            }
        }
    }
    Ok(())
}

fn easy_message(role: WireRole, text: String) -> InputItem {
    InputItem::EasyMessage(EasyInputMessage {
        r#type: MessageType::Message,
        role,
        content: EasyInputContent::Text(text),
        phase: None,
    })
}

fn function_call(call: &ToolCall) -> FunctionToolCall {
    FunctionToolCall {
        arguments: call.arguments_text().to_owned(),
        call_id: call.id.clone(),
        name: call.name.clone(),
        ..Default::default()
    }
}

/// `part` as async-openai's reasoning item, refused when that item would not send every field
/// of the block unchanged (checked by value: the block's bytes are async-openai's to write).
fn reasoning_item(part: &OpaquePart, index: usize) -> Result<ReasoningItem, ResponsesError> {
    let not_carried = |reason: String| ResponsesError::ReasoningNotCarried { index, reason };
    let item: Item = serde_json::from_str(part.block()).map_err(|e| not_carried(e.to_string()))?;
    let Item::Reasoning(reasoning) = item else {
        return Err(not_carried("not a reasoning item".to_owned()));
    };
    let sent = serde_json::to_value(Item::Reasoning(reasoning.clone()))
        .map_err(|e| not_carried(e.to_string()))?;
    let block: Value =
        serde_json::from_str(part.block()).map_err(|e| not_carried(e.to_string()))?;
    if without_nulls(sent) != without_nulls(block) {
        return Err(not_carried(
            "async-openai's reasoning item would change a field".to_owned(),
        ));
    }
    Ok(reasoning)
}

/// `value` with every object member whose value is `null` removed (an absent optional field
/// and a `null` one say the same).
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// Responses input items as our messages. A `message` item of role system, developer or user
/// becomes that message; `function_call_output` a tool message; an assistant turn, its
/// `reasoning` items, its assistant `message` and its `function_call`s in that order, one
/// assistant message (a reasoning item after the turn's text or calls, or a message item
/// after its text or calls, starts the next one). A reasoning item becomes an
/// [`OpaquePart`] whose block is the item as async-openai writes it (every field as received).
///
/// Message and function-call item ids (`msg_…`, `fc_…`) and a message's `status` are the
/// server's bookkeeping and are not kept: a stateless request (`store: false`) pairs a call
/// with its output by `call_id`. A `compaction` item (OpenAI's server-side compaction) is an
/// [`OpaquePart`] of the assistant turn it arrived with, like reasoning, stored as
/// async-openai writes the input item (the output's `created_by` is not an input field).
/// Refused: a `compaction_trigger` item ([`ResponsesError::Compaction`]), content that is not one text part (images, files,
/// several parts, a refusal, annotations, a cache breakpoint), a message `phase`, a namespaced,
/// asynchronous or program-called function call, an output that is not text, item references,
/// and every other item type.
pub fn from_responses_input(items: &[InputItem]) -> Result<Vec<Message>, ResponsesError> {
    let mut turns = Turns::default();
    for (index, item) in items.iter().enumerate() {
        let piece = match item {
            InputItem::EasyMessage(m) => {
                if m.phase.is_some() {
                    return Err(unsupported(index, "a message phase"));
                }
                let text = match &m.content {
                    EasyInputContent::Text(text) => text.clone(),
                    EasyInputContent::ContentList(parts) => input_text(parts, index)?,
                };
                message_piece(m.role, text)
            }
            InputItem::Item(item) => item_piece(item, index)?,
            InputItem::CompactionTrigger(_) => return Err(ResponsesError::Compaction { index }),
            InputItem::ItemReference(_) => return Err(unsupported(index, "an item reference")),
            other => return Err(unsupported(index, format!("a `{}` item", type_of(other)))),
        };
        turns.push(piece);
    }
    Ok(turns.finish())
}

/// A response's `output` items as our messages, to push onto the transcript: usually one
/// assistant message (reasoning, text, calls), more when the model interleaved them (see
/// [`from_responses_input`] for the grouping and what is refused; an output message's
/// `logprobs` are response metadata and are not kept).
pub fn from_responses_output(output: &[OutputItem]) -> Result<Vec<Message>, ResponsesError> {
    let mut turns = Turns::default();
    for (index, item) in output.iter().enumerate() {
        let piece = match item {
            OutputItem::Message(m) => {
                if m.phase.is_some() {
                    return Err(unsupported(index, "a message phase"));
                }
                Piece::Text(output_text(&m.content, index)?)
            }
            OutputItem::FunctionCall(call) => Piece::Call(call_piece(call, index)?),
            OutputItem::Reasoning(reasoning) => {
                Piece::Reasoning(reasoning_part(reasoning.clone(), index)?)
            }
            OutputItem::Compaction(body) => {
                Piece::Reasoning(compaction_part(body.clone().into(), index)?)
            }
            other => return Err(unsupported(index, format!("a `{}` item", type_of(other)))),
        };
        turns.push(piece);
    }
    Ok(turns.finish())
}

/// The `resolve_pointer` tool (see [`crate::pointer_tool`]) as a Responses function tool, for
/// the `tools` of a request.
pub fn resolve_pointer_response_tool() -> Tool {
    Tool::Function(FunctionTool {
        name: RESOLVE_POINTER.to_owned(),
        parameters: Some(resolve_pointer_parameters()),
        strict: None,
        description: Some(RESOLVE_POINTER_DESCRIPTION.to_owned()),
        ..Default::default()
    })
}

/// One input item, read.
enum Piece {
    /// A whole message that is not the assistant's.
    Whole(Message),
    /// An assistant turn's reasoning item.
    Reasoning(OpaquePart),
    /// An assistant turn's text.
    Text(String),
    /// An assistant turn's call.
    Call(ToolCall),
}

/// Assistant turns put together from their items.
#[derive(Default)]
struct Turns {
    out: Vec<Message>,
    /// The assistant message being read, and whether its text or calls were read yet.
    open: Option<(Message, bool)>,
}

impl Turns {
    fn push(&mut self, piece: Piece) {
        match piece {
            Piece::Whole(message) => {
                self.close();
                self.out.push(message);
            }
            Piece::Reasoning(part) => self.turn(true).0.opaque.push(part),
            Piece::Text(text) => {
                let (turn, started) = self.turn(true);
                turn.content = text;
                *started = true;
            }
            Piece::Call(call) => {
                let (turn, started) = self.turn(false);
                turn.tool_calls.push(call);
                *started = true;
            }
        }
    }

    /// The assistant turn being read (a new one when there is none, or when `starts_turn` and
    /// the open one's text or calls were read already: reasoning or text after them).
    fn turn(&mut self, starts_turn: bool) -> &mut (Message, bool) {
        if starts_turn && matches!(self.open, Some((_, true))) {
            self.close();
        }
        self.open
            .get_or_insert_with(|| (Message::assistant(""), false))
    }

    fn close(&mut self) {
        if let Some((turn, _)) = self.open.take() {
            self.out.push(turn);
        }
    }

    fn finish(mut self) -> Vec<Message> {
        self.close();
        self.out
    }
}

fn unsupported(index: usize, what: impl Into<String>) -> ResponsesError {
    ResponsesError::Unsupported {
        index,
        what: what.into(),
    }
}

/// The `type` an item serializes with (`web_search_call`, ...), for error messages.
fn type_of(item: &impl serde::Serialize) -> String {
    serde_json::to_value(item)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn message_piece(role: WireRole, text: String) -> Piece {
    match role {
        WireRole::User => Piece::Whole(Message::user(text)),
        WireRole::System => Piece::Whole(Message::system(text)),
        WireRole::Developer => Piece::Whole(Message::developer(text)),
        WireRole::Assistant => Piece::Text(text),
    }
}

fn item_piece(item: &Item, index: usize) -> Result<Piece, ResponsesError> {
    Ok(match item {
        Item::Message(MessageItem::Input(m)) => {
            let role = match m.role {
                InputRole::User => WireRole::User,
                InputRole::System => WireRole::System,
                InputRole::Developer => WireRole::Developer,
            };
            message_piece(role, input_text(&m.content, index)?)
        }
        Item::Message(MessageItem::Output(m)) => {
            if m.phase.is_some() {
                return Err(unsupported(index, "a message phase"));
            }
            Piece::Text(output_text(&m.content, index)?)
        }
        Item::FunctionCall(call) => Piece::Call(call_piece(call, index)?),
        Item::FunctionCallOutput(output) => {
            if output.namespace.is_some() || output.caller.is_some() {
                return Err(unsupported(index, "a namespaced or program-called output"));
            }
            let Some(call_id) = output.call_id.clone() else {
                return Err(ResponsesError::OutputWithoutCallId { index });
            };
            let text = match &output.output {
                FunctionCallOutput::Text(text) => text.clone(),
                FunctionCallOutput::Content(parts) => input_text(parts, index)?,
            };
            Piece::Whole(Message::tool_result(call_id, text))
        }
        Item::Reasoning(reasoning) => Piece::Reasoning(reasoning_part(reasoning.clone(), index)?),
        Item::Compaction(item) => Piece::Reasoning(compaction_part(item.clone(), index)?),
        other => return Err(unsupported(index, format!("a `{}` item", type_of(other)))),
    })
}

/// The text of input content: one plain text part (or none), else `Unsupported`.
fn input_text(parts: &[InputContent], index: usize) -> Result<String, ResponsesError> {
    match parts {
        [] => Ok(String::new()),
        [InputContent::InputText(part)] if part.prompt_cache_breakpoint.is_none() => {
            Ok(part.text.clone())
        }
        [InputContent::InputText(_)] => Err(unsupported(index, "a prompt cache breakpoint")),
        [InputContent::InputImage(_)] => Err(unsupported(index, "an image part")),
        [InputContent::InputFile(_)] => Err(unsupported(index, "a file part")),
        _ => Err(unsupported(index, "several content parts")),
    }
}

/// The text of an output message: one `output_text` part without annotations (or none).
fn output_text(parts: &[OutputMessageContent], index: usize) -> Result<String, ResponsesError> {
    match parts {
        [] => Ok(String::new()),
        [OutputMessageContent::OutputText(part)] if part.annotations.is_empty() => {
            Ok(part.text.clone())
        }
        [OutputMessageContent::OutputText(_)] => Err(unsupported(index, "annotations")),
        [OutputMessageContent::Refusal(_)] => Err(unsupported(index, "a refusal")),
        _ => Err(unsupported(index, "several content parts")),
    }
}

fn call_piece(call: &FunctionToolCall, index: usize) -> Result<ToolCall, ResponsesError> {
    if call.namespace.is_some() || call.caller.is_some() || call.r#async.is_some() {
        return Err(unsupported(
            index,
            "a namespaced, program-called or asynchronous function call",
        ));
    }
    // Kept as the model wrote it: no parse-and-print round trip.
    let arguments = ToolArguments::from_text(call.arguments.as_str()).map_err(|e| {
        ResponsesError::ArgumentsNotJson {
            index,
            call_id: call.call_id.clone(),
            reason: e.to_string(),
        }
    })?;
    Ok(ToolCall::new(
        call.call_id.clone(),
        call.name.clone(),
        arguments,
    ))
}

/// A reasoning item as our opaque part: its block is the item as async-openai writes it.
fn reasoning_part(reasoning: ReasoningItem, index: usize) -> Result<OpaquePart, ResponsesError> {
    let block = serde_json::to_string(&Item::Reasoning(reasoning)).map_err(|e| {
        ResponsesError::ReasoningNotCarried {
            index,
            reason: e.to_string(),
        }
    })?;
    OpaquePart::from_block(OpaqueKind::OpenAiReasoning, block).map_err(|e| {
        ResponsesError::ReasoningNotCarried {
            index,
            reason: e.to_string(),
        }
    })
}

/// A compaction item as our opaque part: its block is the input item as async-openai writes it.
fn compaction_part(
    item: CompactionSummaryItemParam,
    index: usize,
) -> Result<OpaquePart, ResponsesError> {
    let not_carried = |reason: String| ResponsesError::CompactionNotCarried { index, reason };
    let block =
        serde_json::to_string(&Item::Compaction(item)).map_err(|e| not_carried(e.to_string()))?;
    OpaquePart::from_block(OpaqueKind::OpenAiCompaction, block)
        .map_err(|e| not_carried(e.to_string()))
}

/// `part` as async-openai's compaction item, refused when that item would not send every field
/// of the block unchanged (checked by value, as for reasoning).
fn compaction_item(
    part: &OpaquePart,
    index: usize,
) -> Result<CompactionSummaryItemParam, ResponsesError> {
    let not_carried = |reason: String| ResponsesError::CompactionNotCarried { index, reason };
    let item: Item = serde_json::from_str(part.block()).map_err(|e| not_carried(e.to_string()))?;
    let Item::Compaction(compaction) = item else {
        return Err(not_carried("not a compaction item".to_owned()));
    };
    let sent = serde_json::to_value(Item::Compaction(compaction.clone()))
        .map_err(|e| not_carried(e.to_string()))?;
    let block: Value =
        serde_json::from_str(part.block()).map_err(|e| not_carried(e.to_string()))?;
    if without_nulls(sent) != without_nulls(block) {
        return Err(not_carried(
            "async-openai's compaction item would change a field".to_owned(),
        ));
    }
    Ok(compaction)
}

#[cfg_attr(docsrs, doc(cfg(feature = "openai-responses")))]
impl<S> Compacted<S> {
    /// [`messages`](Compacted::messages) as Responses input items: the window's system message,
    /// then the transcript's kept, stubbed, tombstoned and folded messages, each assistant turn
    /// with its `reasoning` items first and unchanged. The list always passes
    /// [`check_responses_input`](super::check_responses_input): a `Compacted`'s messages were
    /// checked like [`Transcript::validate`](crate::Transcript::validate) when it was made or
    /// loaded, and compaction never separates a reasoning item from its turn.
    ///
    /// Send it with `store: false` and `include: ["reasoning.encrypted_content"]`, so each
    /// reasoning item carries its encrypted content and nothing is looked up by id. Left out,
    /// as the chat request leaves them out: a participant `name` (Responses messages have no
    /// field for it) and another API's opaque parts (Anthropic thinking); they stay in the
    /// checkpoint and the transcript. [`to_responses_input`] refuses them instead.
    pub fn responses_input(&self) -> Vec<InputItem> {
        let window = Message::system(self.render());
        let messages: Vec<&Message> = std::iter::once(&window)
            .chain(self.transcript_messages())
            .collect();
        checked_input(&messages)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "openai-responses")))]
impl SessionRequest {
    /// The request as Responses input items, as
    /// [`Compacted::responses_input`](crate::Compacted::responses_input) makes them (each
    /// assistant turn with its `reasoning` items first and unchanged; a participant `name` and
    /// another API's opaque parts left out). Send it with `store: false`,
    /// `include: ["reasoning.encrypted_content"]`, the tools in their Responses shape
    /// ([`ToolDefinition::openai_responses`](crate::ToolDefinition::openai_responses)) and
    /// [`prompt_cache_key`](Self::prompt_cache_key).
    pub fn responses_input(&self) -> Vec<InputItem> {
        checked_input(&self.messages().iter().collect::<Vec<_>>())
    }
}

/// `messages` (a checkpoint's, checked when it was made or loaded) as input items.
fn checked_input(messages: &[&Message]) -> Vec<InputItem> {
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let follows_assistant = index > 0 && messages[index - 1].role == Role::Assistant;
        // Every message converts: its reasoning parts have the documented shape (checked
        // when each part was made), and a name or foreign part is left out, not refused.
        // Its items are added whole or not at all, so no reasoning item is ever sent
        // without the rest of its turn.
        let mut items = Vec::new();
        let pushed = push_message(
            &mut items,
            message,
            index,
            follows_assistant,
            Foreign::LeaveOut,
        );
        debug_assert!(
            pushed.is_ok(),
            "a checked message did not convert: {pushed:?}"
        );
        if pushed.is_ok() {
            out.append(&mut items);
        }
    }
    out
}
