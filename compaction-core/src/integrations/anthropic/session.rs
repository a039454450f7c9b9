//! A session's turn on Anthropic's Messages wire: the request with its prompt-cache breakpoints
//! where they pay (`caching.rs`), and the model's reply pushed as it comes.

use crate::conversation::message::Message;
use crate::conversation::tool::ToolDefinition;
use crate::integrations::anthropic::caching::{AnthropicCaching, BlockAt};
use crate::integrations::anthropic::convert::{
    convert, from_anthropic_response, AnthropicError, Layout,
};
use crate::integrations::anthropic::wire::{AnthropicRequest, AnthropicResponse};
use crate::session::error::SessionError;
use crate::session::request::SessionRequest;
use crate::session::turn::ModelResponse;

impl SessionRequest {
    /// The request as an Anthropic Messages API request for `model`, with its prompt-cache
    /// breakpoints placed by [`AnthropicCaching::for_model`]`(model)`: on the end of the system
    /// prompt, the end of the stable prefix (the first
    /// [`stable_prefix_len`](Self::stable_prefix_len) messages), the end of what the previous
    /// request sent as it is (the first [`reused_prefix_len`](Self::reused_prefix_len)
    /// messages, when they reach past the stable prefix: its cache entry is read even when this
    /// request added more than the provider's 20-block lookback after it, or a compaction point
    /// changed what follows) and the request's last block, each only where the prefix up to it
    /// reaches the model's minimum cacheable length, never more than four (Anthropic's prompt
    /// caching rules; see [`crate::cache`]). The same request gives the same breakpoints.
    ///
    /// Layout: the leading system messages (the window's stable part, your system prompt)
    /// are the top-level `system`; the rest follows [`to_anthropic`](super::to_anthropic)'s
    /// rules, except that a system message inside the conversation (the window's state update,
    /// which the session appends late so the prefix stays stable, or a system note you pushed)
    /// goes as a user text block at its place: the Messages API has no system role inside
    /// `messages`. The tools are the session's (`SessionBuilder::tools`, counted in the
    /// budget); add `thinking` and the like to the returned request. Never more than four
    /// breakpoints: a request whose own would make more is refused
    /// ([`AnthropicError::TooManyBreakpoints`]).
    /// Refused as [`to_anthropic`](super::to_anthropic) refuses: a named message, an opaque
    /// part of another provider, arguments that are not a JSON object.
    pub fn anthropic_request(
        &self,
        model: impl Into<String>,
        max_tokens: u32,
    ) -> Result<AnthropicRequest, AnthropicError> {
        let model = model.into();
        let caching = AnthropicCaching::for_model(&model);
        self.anthropic_request_with(model, max_tokens, &caching)
    }

    /// [`anthropic_request`](Self::anthropic_request) with the breakpoints placed by
    /// `caching` (its minimum, TTL and counter). The request's tools are the session's
    /// ([`SessionBuilder::tools`](crate::session::SessionBuilder::tools), counted in
    /// [`tokens`](Self::tokens) and the budget). A session without tools may send
    /// [`AnthropicCaching::tools`] instead (to put a breakpoint of your own on a definition):
    /// those are not counted in the session's budget. Both at once are refused
    /// ([`AnthropicError::ToolsInTwoPlaces`]): the caching's would replace the session's.
    pub fn anthropic_request_with(
        &self,
        model: impl Into<String>,
        max_tokens: u32,
        caching: &AnthropicCaching,
    ) -> Result<AnthropicRequest, AnthropicError> {
        if let Some(caching_tools) = caching.tool_count() {
            if !self.tools.is_empty() {
                return Err(AnthropicError::ToolsInTwoPlaces {
                    session: self.tools.len(),
                    caching: caching_tools,
                });
            }
        }
        build(
            self.messages(),
            self.stable_prefix_len(),
            Some(self.reused_prefix_len()),
            &self.tools,
            model.into(),
            max_tokens,
            caching,
        )
    }
}

impl AnthropicCaching {
    /// `messages` as an Anthropic Messages request for `model`, laid out and with its cache
    /// breakpoints placed exactly as
    /// [`SessionRequest::anthropic_request_with`] does for a request whose first
    /// `stable_prefix_len` messages are its stable prefix (this caching's tools, no others).
    /// For messages that did not come from a [`Session`](crate::session::Session): another
    /// policy's requests priced by the same rules, a replay.
    pub fn request(
        &self,
        model: impl Into<String>,
        max_tokens: u32,
        messages: &[Message],
        stable_prefix_len: usize,
    ) -> Result<AnthropicRequest, AnthropicError> {
        build(
            messages,
            stable_prefix_len,
            None,
            &[],
            model.into(),
            max_tokens,
            self,
        )
    }

    /// [`request`](Self::request) for a list whose first `reused_prefix_len` messages the
    /// previous request of the same conversation sent as they are: past the stable prefix, a
    /// breakpoint also ends that prefix (as [`SessionRequest::anthropic_request_with`] places
    /// it), so the cache entry the previous request left there is read even when more than the
    /// provider's 20-block lookback follows it, or a compaction point changed what follows.
    pub fn request_reusing(
        &self,
        model: impl Into<String>,
        max_tokens: u32,
        messages: &[Message],
        stable_prefix_len: usize,
        reused_prefix_len: usize,
    ) -> Result<AnthropicRequest, AnthropicError> {
        build(
            messages,
            stable_prefix_len,
            Some(reused_prefix_len),
            &[],
            model.into(),
            max_tokens,
            self,
        )
    }
}

/// The request of `messages` with the session's `tools` (in Anthropic's shape), breakpoints
/// placed by `caching`; `reused_prefix_len`, when known, is how many leading messages the
/// previous request sent as they are.
fn build(
    messages: &[Message],
    stable_prefix_len: usize,
    reused_prefix_len: Option<usize>,
    tools: &[ToolDefinition],
    model: String,
    max_tokens: u32,
    caching: &AnthropicCaching,
) -> Result<AnthropicRequest, AnthropicError> {
    // Past the stable prefix, the end of what the previous request sent as it is: the cache
    // holds it (that request's rolling breakpoint, or one before it), and a breakpoint there
    // reads it even when this request added more than the provider's lookback of blocks after
    // it, or a compaction point changed a message after the stable prefix.
    let kept_after = reused_prefix_len.filter(|&reused| reused > stable_prefix_len);
    let layout = Layout {
        breakpoint_after: Some(stable_prefix_len),
        kept_after,
        late_system_as_user: true,
    };
    let conversation = convert(messages, &layout)?;
    let mut request = AnthropicRequest {
        model,
        max_tokens,
        system: conversation.system,
        messages: conversation.messages,
        tools: None,
        tool_choice: None,
        thinking: None,
        temperature: None,
    };
    if !tools.is_empty() {
        request.tools = Some(tools.iter().map(ToolDefinition::anthropic).collect());
    }
    // The layout marked the block that ends the stable prefix and, after it, the one that ends
    // the kept prefix (when that is another block); the placement decides.
    let marked = marked_blocks(&request);
    let stable_end = marked.first().copied();
    let kept_end = kept_after.and(marked.get(1).copied());
    caching.place(&mut request, stable_end, kept_end)?;
    Ok(request)
}

/// The blocks the layout marked, in cache order (system blocks, then messages').
fn marked_blocks(request: &AnthropicRequest) -> Vec<BlockAt> {
    let system = (request.system.iter().enumerate())
        .filter(|(_, b)| b.cache_control.is_some())
        .map(|(i, _)| BlockAt::System(i));
    let messages = request
        .messages
        .iter()
        .enumerate()
        .flat_map(|(m, message)| {
            (message.content.iter().enumerate())
                .filter(|(_, b)| b.cache_control().is_some())
                .map(move |(b, _)| BlockAt::Message(m, b))
        });
    system.chain(messages).take(2).collect()
}

/// The model's reply (thinking blocks kept byte-for-byte); a reply our message cannot hold in
/// order is [`SessionError::Response`].
impl ModelResponse for &AnthropicResponse {
    fn into_message(self) -> Result<Message, SessionError> {
        from_anthropic_response(self).map_err(|e| SessionError::Response(Box::new(e)))
    }
}

impl ModelResponse for AnthropicResponse {
    fn into_message(self) -> Result<Message, SessionError> {
        (&self).into_message()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::message::{OpaquePart, ToolCall};
    use crate::integrations::anthropic::wire::{CacheControl, ContentBlock};
    use serde_json::json;

    fn request(messages: Vec<Message>, stable_prefix_len: usize) -> SessionRequest {
        reusing(messages, stable_prefix_len, 0)
    }

    fn reusing(messages: Vec<Message>, stable_prefix_len: usize, reused: usize) -> SessionRequest {
        SessionRequest {
            messages,
            stable_prefix_len,
            reused_prefix_len: reused,
            compaction_point: false,
            sequence: 1,
            tokens: 0,
            cache_key: "k".into(),
            tools: Vec::new().into(),
            expected_cache: Default::default(),
        }
    }

    /// Where a request's message blocks carry a breakpoint: `(message, block)`.
    fn marks(wire: &AnthropicRequest) -> Vec<(usize, usize)> {
        (wire.messages.iter().enumerate())
            .flat_map(|(m, msg)| {
                (msg.content.iter().enumerate())
                    .filter(|(_, b)| marked(b))
                    .map(move |(b, _)| (m, b))
            })
            .collect()
    }

    #[test]
    fn the_prefix_the_previous_request_sent_ends_with_a_breakpoint_past_the_stable_one() {
        let call = ToolCall::new("c1", "read", json!({"path": "a"}));
        let messages = vec![
            Message::system("window"),
            Message::user("task"),
            Message::assistant_with_tools("", vec![call]),
            Message::tool_result("c1", "body"),
            Message::assistant("read it"),
            Message::user("next"),
            Message::assistant("ok"),
            Message::user("and?"),
        ];
        let caching = AnthropicCaching::for_model("m").min_cacheable_tokens(0);
        // Stable prefix: the task; the previous request sent the first six messages (up to
        // "next") as they are.
        let wire = reusing(messages.clone(), 2, 6)
            .anthropic_request_with("m", 10, &caching)
            .unwrap();
        assert_eq!(
            marks(&wire),
            [(0, 0), (4, 0), (6, 0)],
            "stable, kept, rolling"
        );
        // Nothing reused past the stable prefix (a first request, or a point that changed the
        // message right after it): no fourth breakpoint.
        for reused in [0, 1, 2] {
            let wire = reusing(messages.clone(), 2, reused)
                .anthropic_request_with("m", 10, &caching)
                .unwrap();
            assert_eq!(marks(&wire), [(0, 0), (6, 0)], "reused {reused}");
        }
        // A caller's own breakpoints leave room for fewer: the kept prefix's goes before the
        // stable prefix's.
        let tool = json!({"name": "t", "input_schema": {}, "cache_control": {"type": "ephemeral"}});
        let crowded = caching.clone().tools(vec![tool.clone(), tool]);
        let wire = reusing(messages, 2, 6)
            .anthropic_request_with("m", 10, &crowded)
            .unwrap();
        assert_eq!(marks(&wire), [(0, 0), (6, 0)], "rolling, then stable");
        assert!(wire.system.iter().all(|b| b.cache_control.is_none()));
    }

    fn marked(block: &ContentBlock) -> bool {
        matches!(
            block,
            ContentBlock::Text { cache_control: Some(c), .. }
            | ContentBlock::ToolUse { cache_control: Some(c), .. }
            | ContentBlock::ToolResult { cache_control: Some(c), .. }
            if *c == CacheControl::ephemeral()
        )
    }

    #[test]
    fn a_thinking_only_reply_at_the_boundary_moves_the_breakpoint_back_to_a_block_that_carries_it()
    {
        let thinking = OpaquePart::anthropic_thinking("plan", "c2ln");
        let messages = vec![
            Message::system("window"),
            Message::user("go"),
            Message::assistant("").with_opaque(vec![thinking]),
            Message::user("and?"),
        ];
        // Every breakpoint placed whatever the prefix's length: here the stable prefix's.
        let caching = AnthropicCaching::for_model("m").min_cacheable_tokens(0);
        let wire = request(messages, 3)
            .anthropic_request_with("m", 10, &caching)
            .unwrap();
        assert!(wire.system[0].cache_control.is_some(), "the system's end");
        let marks: Vec<(usize, usize)> = wire
            .messages
            .iter()
            .enumerate()
            .flat_map(|(m, msg)| {
                msg.content
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| marked(b))
                    .map(move |(b, _)| (m, b))
            })
            .collect();
        // The stable prefix's on the user's text, before the thinking; the rolling one last.
        assert_eq!(marks, [(0, 0), (2, 0)]);
    }

    #[test]
    fn a_late_system_message_is_a_user_block_and_the_breakpoint_follows_its_block_into_a_merge() {
        let call = ToolCall::new("c1", "read", json!({"path": "a"}));
        let messages = vec![
            Message::system("window"),
            Message::system("you code"),
            Message::user("task"),
            Message::assistant_with_tools("", vec![call]),
            Message::tool_result("c1", "body"),
            Message::system("⟦compaction:update⟧ the state changed"),
        ];
        let caching = AnthropicCaching::for_model("m").min_cacheable_tokens(0);
        let wire = request(messages.clone(), 5)
            .anthropic_request_with("m", 10, &caching)
            .unwrap();
        assert_eq!(wire.system.len(), 2);
        let last = &wire.messages[2].content;
        assert_eq!(last.len(), 2, "the update joins the results' user turn");
        // The stable prefix's on the result (its block travelled into the merge), the rolling
        // one on the update, the request's last block.
        assert!(marked(&last[0]) && marked(&last[1]));
        // With Anthropic's real minimum, this short request gets none at all.
        let real = request(messages.clone(), 5)
            .anthropic_request("claude-sonnet-4-5", 10)
            .unwrap();
        assert!(real
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .all(|b| !marked(b)));
        assert!(real.system.iter().all(|b| b.cache_control.is_none()));
        assert!(crate::integrations::anthropic::rules::check_anthropic(&wire.messages).is_ok());
        // `to_anthropic` stays strict: a late system message is refused there.
        assert_eq!(
            super::super::to_anthropic(&messages),
            Err(AnthropicError::SystemInConversation {
                index: 5,
                role: "system"
            })
        );
    }

    #[test]
    fn only_prefixes_that_reach_the_minimum_get_a_breakpoint() {
        let messages = vec![
            Message::system("window"),
            Message::user("go"),
            Message::assistant(""),
            Message::user("read this log: ".to_owned() + &"line of the log\n".repeat(400)),
            Message::assistant("done"),
        ];
        let caching = AnthropicCaching::for_model("m")
            .min_cacheable_tokens(1024)
            .token_counter(crate::tokens::Tokenizer::O200kBase);
        // The stable prefix ends at "go", far under 1,024 tokens: no breakpoint there or on the
        // system; the last block's prefix includes the log, over it: the rolling one only.
        let wire = request(messages.clone(), 2)
            .anthropic_request_with("m", 10, &caching)
            .unwrap();
        assert!(wire.system.iter().all(|b| b.cache_control.is_none()));
        let marks: Vec<(usize, usize)> = wire
            .messages
            .iter()
            .enumerate()
            .flat_map(|(m, msg)| {
                msg.content
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| marked(b))
                    .map(move |(b, _)| (m, b))
            })
            .collect();
        assert_eq!(marks, [(3, 0)]);
        // The stable prefix past the log reaches it too.
        let wire = request(messages, 4)
            .anthropic_request_with("m", 10, &caching)
            .unwrap();
        let marked_blocks = wire
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| marked(b))
            .count();
        assert_eq!(marked_blocks, 2, "the stable prefix's and the rolling one");
    }

    #[test]
    fn caching_request_places_what_a_session_request_places() {
        let messages = vec![
            Message::system("window"),
            Message::user("go"),
            Message::assistant("ok"),
            Message::user("read this log: ".to_owned() + &"line of the log\n".repeat(400)),
            Message::assistant("done"),
        ];
        let caching = AnthropicCaching::for_model("m")
            .min_cacheable_tokens(1024)
            .token_counter(crate::tokens::Tokenizer::O200kBase);
        for stable in [0, 2, 4] {
            let session = request(messages.clone(), stable)
                .anthropic_request_with("m", 10, &caching)
                .unwrap();
            let direct = caching.request("m", 10, &messages, stable).unwrap();
            assert_eq!(direct, session, "stable prefix of {stable}");
        }
        // The stable prefix past the log gets its own breakpoint, before the rolling one.
        let direct = caching.request("m", 10, &messages, 4).unwrap();
        let marked_blocks = direct
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| marked(b))
            .count();
        assert_eq!(marked_blocks, 2);
        // A named message is refused the same way.
        let named = vec![Message::user("hi").with_name("p17")];
        assert!(caching.request("m", 10, &named, 0).is_err());
    }

    /// The breakpoints a request carries, as the cache model reads them (tools, system,
    /// messages, thinking and raw blocks included).
    fn breakpoints(wire: &AnthropicRequest) -> usize {
        let blocks = wire.prompt_blocks(&crate::tokens::Tokenizer::O200kBase);
        blocks
            .blocks()
            .iter()
            .filter(|b| b.breakpoint.is_some())
            .count()
    }

    #[test]
    fn never_a_fifth_breakpoint_and_never_tools_in_two_places() {
        let messages = vec![Message::system("window"), Message::user("go")];
        let tool = |name: String, own: bool| {
            let mut tool = json!({"name": name, "input_schema": {"type": "object"}});
            if own {
                tool["cache_control"] = json!({"type": "ephemeral"});
            }
            tool
        };
        let caching = |own: usize| {
            let tools = (0..5).map(|i| tool(format!("t{i}"), i < own)).collect();
            AnthropicCaching::for_model("m")
                .min_cacheable_tokens(0)
                .tools(tools)
        };
        // Ours give way: with none of the caller's, three; with four, none; never a fifth.
        for (own, total) in [(0, 2), (2, 4), (4, 4)] {
            let wire = request(messages.clone(), 1)
                .anthropic_request_with("m", 10, &caching(own))
                .unwrap();
            assert_eq!(breakpoints(&wire), total, "{own} of the caller's");
        }
        // Five of the caller's: refused, never sent, on either builder.
        let five = Err(AnthropicError::TooManyBreakpoints { found: 5, max: 4 });
        let built = request(messages.clone(), 1).anthropic_request_with("m", 10, &caching(5));
        assert_eq!(built, five);
        assert_eq!(caching(5).request("m", 10, &messages, 1), five);
        // The session's own tools and the caching's: refused, so that the caching's never
        // replace the session's (the pointer tool among them) uncounted.
        let mut with_tools = request(messages.clone(), 1);
        with_tools.tools = vec![ToolDefinition::new(
            "resolve_pointer",
            "reads a pointer",
            json!({"type": "object"}),
        )]
        .into();
        assert_eq!(
            with_tools.anthropic_request_with("m", 10, &caching(0)),
            Err(AnthropicError::ToolsInTwoPlaces {
                session: 1,
                caching: 5
            })
        );
        let wire = with_tools
            .anthropic_request_with("m", 10, &AnthropicCaching::for_model("m"))
            .unwrap();
        assert_eq!(wire.tools.unwrap()[0]["name"], "resolve_pointer");
    }

    #[test]
    fn breakpoints_in_thinking_blocks_built_by_hand_take_their_places_first() {
        use crate::conversation::message::OpaqueKind;
        let marked = |i: usize| {
            let block = format!(
                r#"{{"type":"thinking","thinking":"step {i}","signature":"c2ln","cache_control":{{"type":"ephemeral"}}}}"#
            );
            OpaquePart::from_block(OpaqueKind::AnthropicThinking, block).unwrap()
        };
        let messages = |n: usize| {
            let mut messages = vec![Message::system("window"), Message::user("go")];
            for i in 0..n {
                messages.push(Message::assistant("").with_opaque(vec![marked(i)]));
                messages.push(Message::user(format!("and {i}?")));
            }
            messages
        };
        let caching = AnthropicCaching::for_model("m").min_cacheable_tokens(0);
        // Two of theirs: two of ours at most (the rolling one first, then the stable prefix's),
        // and the cache model reads every one of them.
        let wire = request(messages(2), 1)
            .anthropic_request_with("m", 10, &caching)
            .unwrap();
        assert_eq!(breakpoints(&wire), 4);
        assert!(crate::cache::AnthropicCacheModel::check(
            wire.prompt_blocks(&crate::tokens::Tokenizer::O200kBase)
                .blocks()
        )
        .is_ok());
        // Five of theirs: refused.
        assert_eq!(
            request(messages(5), 1).anthropic_request_with("m", 10, &caching),
            Err(AnthropicError::TooManyBreakpoints { found: 5, max: 4 })
        );
    }

    #[test]
    fn a_reply_whose_thinking_carries_a_breakpoint_is_refused() {
        use crate::integrations::anthropic::convert::from_anthropic_response;
        use crate::integrations::anthropic::wire::AnthropicResponse;
        let reply = |thinking: serde_json::Value| {
            serde_json::from_value::<AnthropicResponse>(json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [thinking, {"type": "text", "text": "done"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 5}
            }))
            .unwrap()
        };
        let plain = json!({"type": "thinking", "thinking": "hmm", "signature": "c2ln"});
        assert!(from_anthropic_response(&reply(plain.clone())).is_ok());
        for kind in ["thinking", "redacted_thinking"] {
            let mut marked = if kind == "thinking" {
                plain.clone()
            } else {
                json!({"type": "redacted_thinking", "data": "abc"})
            };
            marked["cache_control"] = json!({"type": "ephemeral"});
            let refused = from_anthropic_response(&reply(marked));
            assert!(
                matches!(&refused, Err(AnthropicError::Unsupported { what, .. })
                    if what.contains("cache_control") && what.contains(kind)),
                "{refused:?}"
            );
        }
        // Text that imitates a field name decides nothing: only a top-level field counts.
        let imitation =
            json!({"type": "thinking", "thinking": "\"cache_control\": {}", "signature": "c2ln"});
        assert!(from_anthropic_response(&reply(imitation)).is_ok());
    }
}
