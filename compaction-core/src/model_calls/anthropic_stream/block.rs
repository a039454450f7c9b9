//! One content block under assembly: the fields of its `content_block_start` in the order they
//! came, each kept as its JSON text, with each delta appended to the field it extends
//! (`text_delta` to `text`, `thinking_delta` to `thinking`, `signature_delta` to `signature`,
//! `citations_delta` to `citations`, `input_json_delta` to `input`, which the joined
//! fragments replace; `compaction_delta` replaces the fields it carries). Whole, it is the JSON
//! text of the block the non-streamed reply holds. The delta types and which block takes
//! which: <https://docs.anthropic.com/en/docs/build-with-claude/streaming>.

use crate::integrations::anthropic::wire::ContentBlock;
use crate::model_calls::anthropic_stream::error::AnthropicStreamError;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A JSON object's members in their order, each value as its JSON text (a `Map` of `Value`s
/// would sort the keys and re-write numbers).
pub(super) struct Ordered(pub(super) Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut members: Vec<(String, Box<RawValue>)> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if members.iter().any(|(k, _)| *k == key) {
                        return Err(A::Error::custom(format!("the key `{key}` repeats")));
                    }
                    let value = map.next_value()?;
                    members.push((key, value));
                }
                Ok(Ordered(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// A `content_block_delta`'s `delta`: its type and its other members, each as its JSON text
/// (a delta this library does not know is applied by its members, so they are all kept).
pub(super) struct Delta {
    pub(super) kind: String,
    members: Vec<(String, Box<RawValue>)>,
}

impl<'de> Deserialize<'de> for Delta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Ordered(mut members) = Ordered::deserialize(deserializer)?;
        let at = members.iter().position(|(key, _)| key == "type");
        let kind = at
            .map(|at| members.remove(at).1)
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
            .ok_or_else(|| D::Error::custom("a delta without a string `type`"))?;
        Ok(Delta { kind, members })
    }
}

impl Delta {
    /// The member `name` as it came.
    fn raw(&self, name: &str) -> Option<&RawValue> {
        let found = self.members.iter().find(|(key, _)| key == name);
        found.map(|(_, value)| value.as_ref())
    }

    /// The member `name`, a string.
    fn string(&self, name: &str) -> Option<String> {
        serde_json::from_str(self.raw(name)?.get()).ok()
    }
}

/// The block types whose deltas Anthropic documents ("Content block delta types",
/// https://docs.anthropic.com/en/docs/build-with-claude/streaming): on these a delta type this
/// library does not know is refused (applying it blindly could change the reply); on any other
/// block it is kept raw by its members (see [`BlockBuilder::apply_raw`]).
const MODELED_BLOCKS: [&str; 6] = [
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "compaction",
];

/// One member's value: as it came, or a string some delta extended.
enum Member {
    Raw(Box<RawValue>),
    Text(String),
}

/// A block being assembled.
pub(super) struct BlockBuilder {
    index: usize,
    kind: String,
    members: Vec<(String, Member)>,
    /// The `input_json_delta` fragments joined, once one came.
    input: Option<String>,
    /// The citations `citations_delta` added, in order.
    citations: Vec<Box<RawValue>>,
    pub(super) stopped: bool,
}

impl BlockBuilder {
    /// The block `content_block_start` gave for `index`.
    pub(super) fn start(index: usize, block: Ordered) -> Result<Self, AnthropicStreamError> {
        let kind = block
            .0
            .iter()
            .find(|(key, _)| key == "type")
            .and_then(|(_, value)| serde_json::from_str::<String>(value.get()).ok())
            .ok_or_else(|| AnthropicStreamError::BadEvent {
                event: "content_block_start".to_owned(),
                reason: format!("block {index} has no `type`"),
            })?;
        let members = block.0.into_iter().map(|(k, v)| (k, Member::Raw(v)));
        Ok(BlockBuilder {
            index,
            kind,
            members: members.collect(),
            input: None,
            citations: Vec::new(),
            stopped: false,
        })
    }

    /// Applies one delta.
    pub(super) fn apply(&mut self, delta: Delta) -> Result<(), AnthropicStreamError> {
        let (field, piece) = match delta.kind.as_str() {
            "text_delta" => ("text", delta.string("text")),
            "thinking_delta" => ("thinking", delta.string("thinking")),
            "signature_delta" => {
                // A thinking block may start without its `signature` key
                // (`{"type":"thinking","thinking":""}`: the streaming guide's examples,
                // proxies and gateways write it so; recorded API traffic has `"signature":
                // ""`): the signature then goes after the block's other fields, where the
                // non-streamed reply has it.
                if self.kind == "thinking" && !self.has("signature") {
                    let empty = Member::Text(String::new());
                    self.members.push(("signature".to_owned(), empty));
                }
                ("signature", delta.string("signature"))
            }
            "input_json_delta" => {
                let piece = delta
                    .string("partial_json")
                    .ok_or_else(|| self.mismatch(&delta.kind))?;
                if !self.has("input") {
                    return Err(self.mismatch(&delta.kind));
                }
                self.input.get_or_insert_with(String::new).push_str(&piece);
                return Ok(());
            }
            "citations_delta" => {
                let citation = delta
                    .raw("citation")
                    .ok_or_else(|| self.mismatch(&delta.kind))?;
                if !self.has("text") {
                    return Err(self.mismatch(&delta.kind));
                }
                self.citations.push(citation.to_owned());
                return Ok(());
            }
            // Server-side compaction streams its block as a start with the fields empty
            // (`"content": null`, `"encrypted_content": null`) and one `compaction_delta`
            // carrying them whole (Anthropic's compaction guide, "Streaming"): each field the
            // delta carries replaces the block's, as Anthropic's SDKs apply it, so the block is
            // the non-streamed reply's.
            "compaction_delta" if self.kind == "compaction" => {
                for (key, value) in delta.members {
                    self.set(key, Member::Raw(value));
                }
                return Ok(());
            }
            "compaction_delta" => return Err(self.mismatch(&delta.kind)),
            _ if !MODELED_BLOCKS.contains(&self.kind.as_str()) => {
                self.apply_raw(delta);
                return Ok(());
            }
            other => {
                return Err(AnthropicStreamError::UnknownDelta {
                    index: self.index,
                    delta: other.to_owned(),
                })
            }
        };
        let piece = piece.ok_or_else(|| self.mismatch(&delta.kind))?;
        match self.append(field, &piece) {
            true => Ok(()),
            false => Err(self.mismatch(&delta.kind)),
        }
    }

    /// A delta this block cannot take.
    fn mismatch(&self, delta: &str) -> AnthropicStreamError {
        AnthropicStreamError::DeltaMismatch {
            index: self.index,
            block: self.kind.clone(),
            delta: delta.to_owned(),
        }
    }

    /// Appends `piece` to the string member `field`, in place; false when the block has no
    /// such member or it is not a string.
    fn append(&mut self, field: &str, piece: &str) -> bool {
        let Some((_, member)) = self.members.iter_mut().find(|(key, _)| key == field) else {
            return false;
        };
        if let Member::Raw(raw) = member {
            match serde_json::from_str::<String>(raw.get()) {
                Ok(text) => *member = Member::Text(text),
                Err(_) => return false,
            }
        }
        if let Member::Text(text) = member {
            text.push_str(piece);
        }
        true
    }

    /// A delta type nobody told this library of, on a block type it does not model either:
    /// kept rather than refused (a new server-side block would otherwise wedge every reply
    /// that has one). Each member extends the block's member of that name as the documented
    /// deltas do: a string appended to a string (`text_delta`, `thinking_delta`), anything
    /// else replacing it (`compaction_delta`), a member the block lacks added after the others.
    /// Appended in place: a block's text grows with each delta, never copied whole per delta.
    fn apply_raw(&mut self, delta: Delta) {
        for (key, value) in delta.members {
            let piece = serde_json::from_str::<String>(value.get()).ok();
            if !piece.is_some_and(|piece| self.append(&key, &piece)) {
                self.set(key, Member::Raw(value));
            }
        }
    }

    /// Sets the member `key` in place, or adds it after the others.
    fn set(&mut self, key: String, value: Member) {
        match self.members.iter_mut().find(|(k, _)| *k == key) {
            Some((_, member)) => *member = value,
            None => self.members.push((key, value)),
        }
    }

    fn has(&self, field: &str) -> bool {
        self.members.iter().any(|(key, _)| key == field)
    }

    /// The whole block: its JSON text (members in their order, compact), read as a
    /// [`ContentBlock`] as the non-streamed reply's block is.
    pub(super) fn finish(self) -> Result<ContentBlock, AnthropicStreamError> {
        let index = self.index;
        let input = match self.input {
            // Only empty fragments came (a tool without arguments): the start's `{}` stands.
            Some(text) if !text.trim().is_empty() => {
                let raw =
                    RawValue::from_string(text).map_err(|e| AnthropicStreamError::ToolInput {
                        index,
                        reason: e.to_string(),
                    })?;
                if !raw.get().starts_with('{') {
                    let reason = "not an object".to_owned();
                    return Err(AnthropicStreamError::ToolInput { index, reason });
                }
                Some(raw)
            }
            _ => None,
        };
        let mut members = self.members;
        if let Some(input) = input {
            if let Some((_, member)) = members.iter_mut().find(|(key, _)| key == "input") {
                *member = Member::Raw(input);
            }
        }
        if !self.citations.is_empty() {
            citations_into(&mut members, self.citations, index)?;
        }
        let mut text = String::from("{");
        for (i, (key, member)) in members.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&json_string(key));
            text.push(':');
            match member {
                Member::Raw(raw) => text.push_str(raw.get()),
                Member::Text(value) => text.push_str(&json_string(value)),
            }
        }
        text.push('}');
        serde_json::from_str(&text).map_err(|e| AnthropicStreamError::Block {
            index,
            reason: e.to_string(),
        })
    }
}

/// Appends `added` to the block's `citations` array (made, last, when the start had none).
fn citations_into(
    members: &mut Vec<(String, Member)>,
    added: Vec<Box<RawValue>>,
    index: usize,
) -> Result<(), AnthropicStreamError> {
    let position = members.iter().position(|(key, _)| key == "citations");
    let mut all: Vec<Box<RawValue>> = match position.map(|p| &members[p].1) {
        Some(Member::Raw(raw)) if raw.get() != "null" => {
            serde_json::from_str(raw.get()).map_err(|e| AnthropicStreamError::Block {
                index,
                reason: format!("its `citations` is not a list: {e}"),
            })?
        }
        _ => Vec::new(),
    };
    all.extend(added);
    let list = serde_json::value::to_raw_value(&all).map_err(|e| AnthropicStreamError::Block {
        index,
        reason: e.to_string(),
    })?;
    match position {
        Some(p) => members[p].1 = Member::Raw(list),
        None => members.push(("citations".to_owned(), Member::Raw(list))),
    }
    Ok(())
}

/// A string as JSON text (serializing a `str` cannot fail).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}
