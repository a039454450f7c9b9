//! The `resolve_pointer` handler: answers a model's call with the verified bytes behind a
//! pointer this agent's compactions issued, cut to a size limit, or with a clear error.

use crate::checkpoint::Compacted;
use crate::compactor::Compactor;
use crate::conversation::handle::Handle;
use crate::conversation::marker::{escape, MARKER_PREFIX};
use crate::conversation::message::ToolArguments;
use crate::conversation::message::{Message, Role, ToolCall};
use crate::error::CompactionError;
use crate::future::block_on;
use crate::pointer_tool::class::{message_class, pointer_classes, result_class, ReadBackClass};
use crate::pointer_tool::definition::RESOLVE_POINTER;
use crate::store::Pointer;
use crate::utf8::{ceil_char_boundary, floor_char_boundary};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The most bytes of content one result carries unless configured otherwise (about 4k tokens
/// of English text); longer content comes in parts.
pub const DEFAULT_MAX_BYTES: usize = 16 * 1024;
/// The smallest limit accepted: one result always holds at least one whole UTF-8 character.
const MIN_MAX_BYTES: usize = 4;
/// The most characters of the model's own text an error repeats back.
const ECHO_CHARS: usize = 100;

/// Why a `resolve_pointer` call got no content. The model reads the same reason as text in the
/// tool result; the caller gets this value to log, count or alert on (`Resolve` means the store
/// lost or corrupted a blob this agent issued).
#[derive(Debug, thiserror::Error)]
pub enum PointerToolError {
    /// The call is for another tool: check [`PointerResolver::handles`] before answering.
    #[error("the call is for tool `{name}`, not `{RESOLVE_POINTER}`")]
    WrongTool {
        /// The tool the call names.
        name: String,
    },
    /// The arguments are not `{"pointer": "store://sha256:..", "offset": n}`.
    #[error("bad arguments: {reason}")]
    BadArguments {
        /// What is wrong with them.
        reason: String,
    },
    /// The `pointer` argument is not a `store://sha256:<64 hex>` pointer.
    #[error("`{text}` is not a store pointer (expected store://sha256:<64 hex digits>)")]
    InvalidPointer {
        /// The text given (cut to 100 characters).
        text: String,
    },
    /// The pointer is well formed but none of this agent's compactions issued it (made up,
    /// copied from text, or another agent's). Whether the store holds it is not revealed.
    #[error("{pointer} was not issued by this agent's compactions")]
    NotIssued {
        /// The pointer asked for.
        pointer: Pointer,
    },
    /// The handle (`p17`) is well formed but none of this agent's compactions showed it: the
    /// same refusal as a made-up pointer.
    #[error("{handle} was not issued by this agent's compactions")]
    HandleNotIssued {
        /// The handle asked for.
        handle: Handle,
    },
    /// `index` was given for content that is not a compacted range (a user run or a fold), or
    /// the range does not hold that message.
    #[error("{reason}")]
    NoSuchMessage {
        /// What is wrong, in words the model reads.
        reason: String,
    },
    /// The blob of an issued pointer could not be read or failed verification.
    #[error("{pointer} could not be resolved: {source}")]
    Resolve {
        /// The pointer.
        pointer: Pointer,
        /// `Integrity` (the bytes do not match the pointer) or `Store` (missing, backend down).
        #[source]
        source: CompactionError,
    },
    /// The blob is not UTF-8 text, so it cannot be put in a message.
    #[error("{pointer} holds {bytes} bytes of binary data, not text")]
    NotText {
        /// The pointer.
        pointer: Pointer,
        /// The blob's size.
        bytes: usize,
    },
    /// `offset` is at or past the end of the content.
    #[error("offset {offset} is past the end of {pointer} ({total} bytes)")]
    OffsetPastEnd {
        /// The pointer.
        pointer: Pointer,
        /// The offset asked for.
        offset: usize,
        /// The content's size.
        total: usize,
    },
    /// The checkpoint given to [`PointerResolver::allow_compacted`] does not match its seal
    /// (its plain SHA-256, or, under a compactor with a [`SealKey`](crate::SealKey), its keyed
    /// seal), so its pointers are not trusted.
    #[error("the compacted state does not match its seal; its pointers are not trusted")]
    Unsealed,
    /// The checkpoint given to [`PointerResolver::allow_compacted`] is sealed but the compactor
    /// would not rehydrate it (another agent's or namespace's, another format): its pointers are
    /// not trusted. `source` is what [`Compactor::verify_checkpoint`] said.
    #[error("the compacted state is not this agent's to use: {source}")]
    NotTrusted {
        /// The compactor's refusal.
        #[source]
        source: CompactionError,
    },
}

/// Which bytes of the content a successful result holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSlice {
    /// The pointer resolved (the full address behind a handle).
    pub pointer: Pointer,
    /// The message of a compacted range read by index, if the call gave one.
    pub index: Option<usize>,
    /// First byte returned.
    pub start: usize,
    /// One past the last byte returned.
    pub end: usize,
    /// The whole content's size in bytes.
    pub total: usize,
}

impl ResolvedSlice {
    /// Whether the result holds only part of the content.
    pub fn is_partial(&self) -> bool {
        self.start > 0 || self.end < self.total
    }
}

/// The answer to one call: the tool-result message to append to the transcript (always, so
/// the call never stays without its result), and what happened.
#[derive(Debug)]
pub struct PointerToolReply {
    /// The tool result, with the call's `tool_call_id`: the content, or the reason there is
    /// none.
    pub message: Message,
    /// The bytes returned, or why none were.
    pub outcome: Result<ResolvedSlice, PointerToolError>,
    /// The class of what the result holds ([`ReadBackClass::Disposable`] for an error or a
    /// note): what a fold may do with it.
    pub class: ReadBackClass,
}

/// Answers `resolve_pointer` calls for one agent.
///
/// The model names what to read by the short handle a marker shows (`p17`, mapped through the
/// handle table of the latest checkpoint allowed) or by a full `store://sha256:` pointer; for a
/// user run or a fold, `index` reads one message of the range exactly.
///
/// It resolves only pointers this agent's compactions issued: feed it every [`Compacted`] the
/// agent produces ([`allow_compacted`](Self::allow_compacted)), including the checkpoints of
/// this agent id loaded after a restart. A checkpoint is trusted exactly when its compactor
/// would rehydrate it ([`Compactor::verify_checkpoint`]: seals, keyed seals, the agent it is
/// bound to). Any other pointer (made up, quoted in a message, or
/// another agent's in the same store) is refused with the same text whether or not the store
/// holds it, so a model cannot read another agent's blobs by guessing or being told a hash.
///
/// The content is verified against its pointer and cut to [`max_bytes`](Self::with_max_bytes)
/// (default [`DEFAULT_MAX_BYTES`]); a cut result begins with a note giving the bytes it holds
/// and the `offset` to pass for the rest. Texts compaction writes begin with
/// [`MARKER_PREFIX`]; content that begins like that (or with the
/// [`VERBATIM_ESCAPE`](crate::transcript::VERBATIM_ESCAPE)) is sent with the escape in front,
/// as in transcripts, so stored text can never pass for a note or an error.
///
/// ```
/// use compaction::pointer_tool::{resolve_pointer_tool, PointerResolver};
/// use compaction::{Compactable, Compactor, Message, Tokenizer, ToolCall, Transcript};
/// use serde::{Deserialize, Serialize};
/// use serde_json::json;
///
/// #[derive(Compactable, Serialize, Deserialize)]
/// struct Agent {
///     #[transcript(keep_recent = 1)]
///     chat: Transcript,
/// }
///
/// let mut agent = Agent { chat: Transcript::new() };
/// agent.chat.push(Message::user("read the log"));
/// agent.chat.push(Message::assistant_with_tools("", vec![
///     ToolCall::new("c1", "read_file", json!({"path": "app.log"})),
/// ]));
/// agent.chat.push(Message::tool_result("c1", "GET /health 200\n".repeat(300)));
/// agent.chat.push(Message::user("what failed?"));
///
/// let compactor = Compactor::builder().budget(300).token_counter(Tokenizer::O200kBase).build()?;
/// let compacted = compactor.compact_blocking(&agent)?;
/// let mut resolver = PointerResolver::new();
/// resolver.allow_compacted(&compactor, &compacted).expect("sealed");
///
/// // The model got `resolve_pointer_tool()` in its tools; the tombstone shows the handle `p1`.
/// assert!(compacted.messages()[3].content.contains("resolve_pointer(\"p1\")"));
/// let call = ToolCall::new("c2", "resolve_pointer", json!({ "pointer": "p1" }));
/// assert!(PointerResolver::handles(&call));
/// let reply = resolver.handle_blocking(&compactor, &call);
/// assert_eq!(reply.message.tool_call_id.as_deref(), Some("c2"));
/// assert_eq!(reply.message.content, "GET /health 200\n".repeat(300));
/// # let _ = resolve_pointer_tool();
/// # Ok::<(), compaction::CompactionError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PointerResolver {
    issued: HashSet<Pointer>,
    /// The handles the markers showed, with their addresses: the latest checkpoint's table wins
    /// (it is the one the model's context was made with).
    handles: HashMap<Handle, Pointer>,
    /// Compacted ranges: their address and the input messages they hold.
    spans: HashMap<Pointer, (usize, usize)>,
    /// What each issued pointer holds, from the checkpoints that issued it (the stricter class
    /// when two say different things); a pointer without one is classed protected.
    classes: HashMap<Pointer, ReadBackClass>,
    max_bytes: usize,
}

impl Default for PointerResolver {
    fn default() -> Self {
        PointerResolver {
            issued: HashSet::new(),
            handles: HashMap::new(),
            spans: HashMap::new(),
            classes: HashMap::new(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

impl PointerResolver {
    /// A resolver that allows no pointer yet, cutting at [`DEFAULT_MAX_BYTES`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Cuts results at `bytes` bytes of content (at least 4, so one character always fits).
    #[must_use]
    pub fn with_max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes.max(MIN_MAX_BYTES);
        self
    }

    /// The most bytes of content one result carries.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Allows every pointer `compacted` references ([`Compacted::pointers`]): call it with each
    /// compaction of this agent (and each checkpoint of its id loaded from a store), passing
    /// the agent's `compactor`. Returns how many pointers were new.
    ///
    /// `compacted` is checked as [`rehydrate`](Compactor::rehydrate) checks it
    /// ([`Compactor::verify_checkpoint`]), so a checkpoint the compactor would not restore
    /// allows nothing: a broken plain or keyed seal is `Unsealed`; another agent's or
    /// namespace's checkpoint, or one of another format, is `NotTrusted`.
    pub fn allow_compacted<S>(
        &mut self,
        compactor: &Compactor,
        compacted: &Compacted<S>,
    ) -> Result<usize, PointerToolError> {
        match compactor.verify_checkpoint(compacted) {
            Ok(()) => {}
            Err(CompactionError::Integrity { .. }) => return Err(PointerToolError::Unsealed),
            Err(source) => return Err(PointerToolError::NotTrusted { source }),
        }
        let before = self.issued.len();
        self.issued.extend(compacted.pointers());
        if let Some(table) = compacted.handles() {
            for (handle, pointer) in table.iter() {
                self.handles.insert(handle, pointer.clone());
            }
        }
        self.spans.extend(compacted.spans());
        for (pointer, class) in pointer_classes(compacted) {
            self.classes
                .entry(pointer)
                .and_modify(|known| *known = known.stricter(class))
                .or_insert(class);
        }
        Ok(self.issued.len() - before)
    }

    /// The full address behind a handle the markers showed (`p17`), if this resolver knows it.
    pub fn pointer_for(&self, handle: Handle) -> Option<&Pointer> {
        self.handles.get(&handle)
    }

    /// Allows one pointer the agent's own code issued (e.g. kept from an earlier process).
    pub fn allow_pointer(&mut self, pointer: Pointer) -> &mut Self {
        self.issued.insert(pointer);
        self
    }

    /// Whether `pointer` may be resolved.
    pub fn is_allowed(&self, pointer: &Pointer) -> bool {
        self.issued.contains(pointer)
    }

    /// How many pointers may be resolved.
    pub fn allowed_count(&self) -> usize {
        self.issued.len()
    }

    /// Whether `call` is a `resolve_pointer` call (the ones [`handle`](Self::handle) answers).
    pub fn handles(call: &ToolCall) -> bool {
        call.name == RESOLVE_POINTER
    }

    /// Answers `call`: the tool-result message (same `tool_call_id`) with the verified content,
    /// or with the reason there is none. Never panics, whatever the arguments.
    pub async fn handle(&self, compactor: &Compactor, call: &ToolCall) -> PointerToolReply {
        let outcome = self.resolve(compactor, call).await;
        // An error or a note holds only the tool's own words and the model's: disposable.
        let (content, class) = match &outcome {
            Ok((slice, text, class)) => (content_of(slice, text), *class),
            Err(error) => (error_text(error), ReadBackClass::Disposable),
        };
        PointerToolReply {
            message: Message::tool_result(call.id.clone(), content),
            outcome: outcome.map(|(slice, _, _)| slice),
            class,
        }
    }

    /// [`handle`](Self::handle) for synchronous callers.
    pub fn handle_blocking(&self, compactor: &Compactor, call: &ToolCall) -> PointerToolReply {
        block_on(self.handle(compactor, call))
    }

    /// The slice to return, its text and the class of what it holds.
    async fn resolve(
        &self,
        compactor: &Compactor,
        call: &ToolCall,
    ) -> Result<(ResolvedSlice, String, ReadBackClass), PointerToolError> {
        if !Self::handles(call) {
            return Err(PointerToolError::WrongTool {
                name: echo(&call.name),
            });
        }
        // A repeated key (`{"pointer":"a","pointer":"b"}`) is refused, never collapsed.
        let arguments = call
            .arguments
            .value()
            .map_err(|e| PointerToolError::BadArguments {
                reason: echo(&e.to_string()),
            })?;
        let (text, offset, index) = parse_arguments(&arguments)?;
        let pointer = if text.trim_start().starts_with("store://") {
            Pointer::parse(&text)
                .map_err(|_| PointerToolError::InvalidPointer { text: echo(&text) })?
        } else {
            let handle: Handle = text
                .parse()
                .map_err(|_| PointerToolError::InvalidPointer { text: echo(&text) })?;
            self.handles
                .get(&handle)
                .cloned()
                .ok_or(PointerToolError::HandleNotIssued { handle })?
        };
        if !self.is_allowed(&pointer) {
            return Err(PointerToolError::NotIssued { pointer });
        }
        let (content, class) = match (self.spans.get(&pointer).copied(), index) {
            (Some(range), Some(index)) => message_text(compactor, &pointer, range, index).await?,
            (Some((first, end)), None) => (
                format!(
                    "{MARKER_PREFIX}range⟧ this handle holds messages #{first}..#{}; call \
                     {RESOLVE_POINTER} again with index=N to read message #N exactly.",
                    end - 1
                ),
                ReadBackClass::Disposable,
            ),
            (None, Some(_)) => {
                return Err(PointerToolError::NoSuchMessage {
                    reason: "`index` reads a message of a user run or a fold; this content is \
                             one text: call again without index"
                        .into(),
                })
            }
            (None, None) => {
                let bytes = compactor.resolve(&pointer).await.map_err(|source| {
                    PointerToolError::Resolve {
                        pointer: pointer.clone(),
                        source,
                    }
                })?;
                let total = bytes.len();
                let text = String::from_utf8(bytes).map_err(|_| PointerToolError::NotText {
                    pointer: pointer.clone(),
                    bytes: total,
                })?;
                let class = self.classes.get(&pointer).copied();
                (text, class.unwrap_or(ReadBackClass::Protected))
            }
        };
        let total = content.len();
        if offset >= total && !(offset == 0 && total == 0) {
            return Err(PointerToolError::OffsetPastEnd {
                pointer,
                offset,
                total,
            });
        }
        let start = floor_char_boundary(&content, offset);
        let end = floor_char_boundary(&content, start.saturating_add(self.max_bytes));
        // A character longer than the limit cannot happen (limit >= 4), but never return
        // nothing for content that has something.
        let end = if end == start && start < total {
            ceil_char_boundary(&content, start + 1)
        } else {
            end
        };
        let text = content[start..end].to_owned();
        let slice = ResolvedSlice {
            pointer,
            index,
            start,
            end,
            total,
        };
        Ok((slice, text, class))
    }
}

/// What the model reads of message `index` of a compacted range: a user or tool message's
/// text exactly; an assistant or system message as its JSON (its calls and parts with it); and
/// the class of what it read (a tool message's is its call's, looked up in the range).
async fn message_text(
    compactor: &Compactor,
    pointer: &Pointer,
    (first, end): (usize, usize),
    index: usize,
) -> Result<(String, ReadBackClass), PointerToolError> {
    if !(first..end).contains(&index) {
        return Err(PointerToolError::NoSuchMessage {
            reason: format!(
                "this handle holds messages #{first}..#{}, not #{index}",
                end - 1
            ),
        });
    }
    let message = compactor
        .resolve_message(pointer, index)
        .await
        .map_err(|source| PointerToolError::Resolve {
            pointer: pointer.clone(),
            source,
        })?
        .ok_or_else(|| PointerToolError::NoSuchMessage {
            reason: format!("message #{index} is not in this range"),
        })?;
    let class = if message.role == Role::Tool {
        match call_in_range(compactor, pointer, first, index, &message).await {
            Some(call) => message_class(&message, Some(&call)),
            None => result_class(None),
        }
    } else {
        message_class(&message, None)
    };
    let text = match message.role {
        Role::User | Role::Tool => message.content,
        _ => serde_json::to_string(&message).unwrap_or_default(),
    };
    Ok((text, class))
}

/// The call tool message `index` of a range answers: in the nearest assistant message before
/// it within the range (`None`: not there, or the span could not be read).
async fn call_in_range(
    compactor: &Compactor,
    pointer: &Pointer,
    first: usize,
    index: usize,
    result: &Message,
) -> Option<ToolCall> {
    let id = result.tool_call_id.as_deref()?;
    for at in (first..index).rev() {
        let message = compactor.resolve_message(pointer, at).await.ok()??;
        match message.role {
            Role::Tool => continue,
            Role::Assistant => return message.tool_calls.into_iter().find(|c| c.id == id),
            _ => return None,
        }
    }
    None
}

/// `pointer`, `offset` and `index` from the call's arguments (an object, or a string holding
/// one: some clients pass the model's raw argument text).
fn parse_arguments(arguments: &Value) -> Result<(String, usize, Option<usize>), PointerToolError> {
    let bad = |reason: String| PointerToolError::BadArguments { reason };
    let parsed;
    let object = match arguments {
        Value::Object(object) => object,
        Value::String(raw) => {
            parsed = ToolArguments::from_text(raw.as_str())
                .and_then(|text| text.value())
                .map_err(|e| bad(format!("the arguments are not valid JSON ({e})")))?;
            parsed.as_object().ok_or_else(|| {
                bad("the arguments must be a JSON object with a `pointer`".to_owned())
            })?
        }
        _ => {
            return Err(bad(
                "the arguments must be a JSON object with a `pointer`".to_owned()
            ))
        }
    };
    if let Some(key) = object
        .keys()
        .find(|key| !matches!(key.as_str(), "pointer" | "offset" | "index"))
    {
        return Err(bad(format!(
            "unknown argument `{}` (only `pointer`, `offset` and `index`)",
            echo(key)
        )));
    }
    let pointer = match object.get("pointer") {
        Some(Value::String(text)) => text.clone(),
        Some(_) => return Err(bad("`pointer` must be a string".to_owned())),
        None => return Err(bad("the `pointer` argument is missing".to_owned())),
    };
    let offset = match object.get("offset") {
        None | Some(Value::Null) => 0,
        Some(value) => value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| bad("`offset` must be a non-negative integer".to_owned()))?,
    };
    let index = match object.get("index") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad("`index` must be a non-negative integer".to_owned()))?,
        ),
    };
    Ok((pointer, offset, index))
}

/// The result's content: the text (escaped when it begins like a marker), after a note when it
/// is only part of the content.
fn content_of(slice: &ResolvedSlice, text: &str) -> String {
    if !slice.is_partial() {
        return escape(text).into_owned();
    }
    let rest = if slice.end < slice.total {
        format!(
            "cut at the size limit; call {RESOLVE_POINTER} with offset={} for the rest",
            slice.end
        )
    } else {
        "the end of the content".to_owned()
    };
    // The note is first, so nothing in the content can forge or hide it.
    format!(
        "{MARKER_PREFIX}part {}⟧ bytes {}..{} of {} follow ({rest}):\n{text}",
        slice.pointer, slice.start, slice.end, slice.total
    )
}

/// What the model reads when a call gets no content.
fn error_text(error: &PointerToolError) -> String {
    let advice = match error {
        PointerToolError::WrongTool { .. } => "",
        PointerToolError::BadArguments { .. } | PointerToolError::InvalidPointer { .. } => {
            " Pass {\"pointer\": \"p17\"} with a handle (or a store://sha256: pointer) copied \
             exactly from your context."
        }
        PointerToolError::NotIssued { .. } | PointerToolError::HandleNotIssued { .. } => {
            " Only pointers that compaction wrote into your context can be resolved; do not \
             guess the content."
        }
        PointerToolError::Resolve { .. }
        | PointerToolError::Unsealed
        | PointerToolError::NotTrusted { .. } => " The content is unavailable; do not guess it.",
        PointerToolError::NotText { .. } => " It cannot be shown as text.",
        PointerToolError::OffsetPastEnd { .. } => " Call again with a smaller offset.",
        PointerToolError::NoSuchMessage { .. } => "",
    };
    format!("{MARKER_PREFIX}error⟧ {RESOLVE_POINTER} failed: {error}.{advice}")
}

/// The model's text, cut for repeating it in an error.
fn echo(text: &str) -> String {
    match text.char_indices().nth(ECHO_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
