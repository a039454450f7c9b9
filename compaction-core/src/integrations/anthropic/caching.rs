//! Where a request on Anthropic's wire sets its prompt-cache breakpoints so that they pay under
//! the provider's rules ([`AnthropicCacheRules`]: at most four, a per-model minimum, longer
//! TTLs first), and a request's blocks in cache order for the cache model
//! ([`AnthropicRequest::prompt_blocks`]).
//!
//! Up to four breakpoints, in the order the prefix grows (tools, system, messages): the end of
//! the tools and system prompt (stable for the whole session), the end of the stable prefix
//! (stable between compaction points), the end of what the previous request sent as it is (a
//! session's request: past the stable prefix, that request's rolling entry or one before it
//! holds it; a breakpoint there reads it even when more than the provider's 20-block lookback
//! was added after it, or when a compaction point changed a message after the stable prefix),
//! and the request's last block (a rolling one: the next request appends after it, so it reads
//! everything up to here). Each is set only where the prefix up to it reaches the model's
//! minimum cacheable length: a shorter prefix gets no cache entry, and a breakpoint there would
//! only take one of the four places. With the caller's own breakpoints (on tools) there are
//! never more than four: the rolling one is kept first, then the stable prefix's, the kept
//! prefix's, the system's.

use crate::cache::{AnthropicCacheRules, CacheTtl, PromptBlocks};
use crate::integrations::anthropic::convert::AnthropicError;
use crate::integrations::anthropic::estimate::ClaudeEstimate;
use crate::integrations::anthropic::wire::{AnthropicRequest, CacheControl, ContentBlock};
use crate::tokens::TokenCounter;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// How a request's cache breakpoints are placed: the model's cache rules, the counter that
/// measures a prefix against the minimum, and the tool definitions sent with the request.
#[derive(Clone)]
pub struct AnthropicCaching {
    rules: AnthropicCacheRules,
    counter: Arc<dyn TokenCounter>,
    tools: Option<Vec<Value>>,
    stable_ttl: Option<CacheTtl>,
}

impl fmt::Debug for AnthropicCaching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicCaching")
            .field("rules", &self.rules)
            .field("counter", &self.counter.name())
            .field("tools", &self.tools.as_ref().map(Vec::len))
            .field("stable_ttl", &self.stable_ttl)
            .finish()
    }
}

impl AnthropicCaching {
    /// The documented rules of `model` ([`AnthropicCacheRules::for_model`]), prefixes measured
    /// with [`ClaudeEstimate`] (o200k with a margin), no tools.
    pub fn for_model(model: &str) -> Self {
        AnthropicCaching {
            rules: AnthropicCacheRules::for_model(model),
            counter: Arc::new(ClaudeEstimate::default()),
            tools: None,
            stable_ttl: None,
        }
    }

    /// The minimum cacheable length to place breakpoints by (a model the table does not know,
    /// or a newer documented value).
    pub fn min_cacheable_tokens(mut self, tokens: usize) -> Self {
        self.rules.min_cacheable_tokens = tokens;
        self
    }

    /// The TTL of the breakpoints set (five minutes by default; one hour costs 2x to write
    /// instead of 1.25x, and suits gaps between requests longer than five minutes).
    pub fn ttl(mut self, ttl: CacheTtl) -> Self {
        self.rules.ttl = ttl;
        self
    }

    /// The TTL of the system prompt's and the stable prefix's breakpoints, when it differs from
    /// the rolling one's ([`ttl`](Self::ttl); never shorter than it, as a request lists longer
    /// TTLs first).
    pub fn stable_ttl(mut self, ttl: CacheTtl) -> Self {
        self.stable_ttl = Some(ttl);
        self
    }

    /// The counter that measures prefixes against the minimum.
    pub fn token_counter(mut self, counter: impl TokenCounter + 'static) -> Self {
        self.counter = Arc::new(counter);
        self
    }

    /// The tool definitions the request carries (first in the cache order, so the system
    /// breakpoint covers them too). A definition may carry its own `cache_control`; it counts
    /// towards the four.
    pub fn tools(mut self, tools: Vec<Value>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The rules breakpoints are placed by.
    pub fn rules(&self) -> AnthropicCacheRules {
        self.rules
    }

    /// Whether this caching carries tool definitions of its own, and how many.
    pub(crate) fn tool_count(&self) -> Option<usize> {
        self.tools.as_ref().map(Vec::len)
    }

    /// Sets the tools and this request's breakpoints, given the block that ends the stable
    /// prefix (if any). Existing breakpoints on system and message blocks are replaced; the
    /// caller's own (on tools, in thinking or raw blocks) stay and take their places first, and
    /// more than four of them are refused: such a request cannot be sent.
    pub(crate) fn place(
        &self,
        request: &mut AnthropicRequest,
        stable_end: Option<BlockAt>,
        kept_end: Option<BlockAt>,
    ) -> Result<(), AnthropicError> {
        if let Some(tools) = &self.tools {
            request.tools = Some(tools.clone());
        }
        let at = Blocks::of(request);
        for block in &at.positions {
            set(request, *block, None);
        }
        // The caller's own breakpoints count towards the four, and ours may not outlive an
        // earlier one of theirs (longer TTLs first).
        let theirs: Vec<CacheTtl> = request
            .tools
            .iter()
            .flatten()
            .filter_map(tool_ttl)
            .chain(at.positions.iter().filter_map(|p| raw_ttl(request, *p)))
            .collect();
        let max = crate::cache::ANTHROPIC_MAX_BREAKPOINTS;
        if theirs.len() > max {
            return Err(AnthropicError::TooManyBreakpoints {
                found: theirs.len(),
                max,
            });
        }
        let ttl = theirs.iter().copied().fold(self.rules.ttl, CacheTtl::min);
        let stable_ttl = theirs
            .iter()
            .copied()
            .fold(self.stable_ttl.map_or(ttl, |s| s.max(ttl)), CacheTtl::min);
        let room = max - theirs.len();
        let reaches = at.reaching(request, &*self.counter, self.rules.min_cacheable_tokens);
        let system_end = at
            .positions
            .iter()
            .rposition(|p| matches!(p, BlockAt::System(_)));
        let stable = stable_end.and_then(|s| at.positions.iter().position(|p| *p == s));
        let kept = kept_end.and_then(|k| at.positions.iter().position(|p| *p == k));
        let last = at.positions.iter().rposition(|p| carries(request, *p));
        // By priority: the rolling one, the stable prefix's, the kept prefix's, the system's.
        let mut chosen: Vec<usize> = Vec::new();
        for candidate in [last, stable, kept, system_end].into_iter().flatten() {
            if chosen.len() < room && !chosen.contains(&candidate) && reaches[candidate] {
                chosen.push(candidate);
            }
        }
        for index in chosen {
            let ttl = if Some(index) == last || Some(index) == kept {
                ttl
            } else {
                stable_ttl
            };
            set(request, at.positions[index], Some(ttl));
        }
        Ok(())
    }
}

/// A block of a request: a system block, or block `b` of message `m`. (Tools are not
/// positions: their breakpoints are the caller's.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockAt {
    System(usize),
    Message(usize, usize),
}

/// The system and message blocks of a request, in cache order.
struct Blocks {
    positions: Vec<BlockAt>,
}

impl Blocks {
    fn of(request: &AnthropicRequest) -> Self {
        let mut positions: Vec<BlockAt> = (0..request.system.len()).map(BlockAt::System).collect();
        for (m, message) in request.messages.iter().enumerate() {
            positions.extend((0..message.content.len()).map(|b| BlockAt::Message(m, b)));
        }
        Blocks { positions }
    }

    /// Whether the prefix up to and including each position (tools first) reaches `min`
    /// tokens. Blocks are serialized and counted only until the running total reaches it (each
    /// against what is still missing, so a huge block stops its counter early): a request is
    /// measured up to the model's minimum, never whole, whatever its length.
    fn reaching(
        &self,
        request: &AnthropicRequest,
        counter: &dyn TokenCounter,
        min: usize,
    ) -> Vec<bool> {
        let mut sum = 0;
        // Adds the block `text` makes to the running total (not even serialized once the total
        // reached `min`); `true` once it has.
        let mut add = |text: &dyn Fn() -> String| {
            if sum < min {
                sum = counter
                    .count_till_limit(&text(), min - sum - 1)
                    .map_or(min, |n| sum + n);
            }
            sum >= min
        };
        for tool in request.tools.iter().flatten() {
            add(&|| tool.to_string());
        }
        self.positions
            .iter()
            .map(|p| add(&|| block_text(request, *p)))
            .collect()
    }
}

/// The block's JSON without its breakpoint: what the provider's cache hashes and counts.
fn block_text(request: &AnthropicRequest, at: BlockAt) -> String {
    let value = match at {
        BlockAt::System(i) => serde_json::to_value(&request.system[i]),
        BlockAt::Message(m, b) => serde_json::to_value(&request.messages[m].content[b]),
    };
    let mut value = value.unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("cache_control");
    }
    value.to_string()
}

/// The TTL of the breakpoint a thinking or raw block carries in its own JSON.
fn raw_ttl(request: &AnthropicRequest, at: BlockAt) -> Option<CacheTtl> {
    match at {
        BlockAt::System(_) => None,
        BlockAt::Message(m, b) => request.messages[m].content[b]
            .raw_cache_control()
            .map(|control| value_ttl(&control)),
    }
}

fn carries(request: &AnthropicRequest, at: BlockAt) -> bool {
    match at {
        BlockAt::System(_) => true,
        BlockAt::Message(m, b) => !matches!(
            request.messages[m].content[b],
            ContentBlock::Opaque(_) | ContentBlock::Other(_)
        ),
    }
}

fn set(request: &mut AnthropicRequest, at: BlockAt, ttl: Option<CacheTtl>) {
    let control = ttl.map(|ttl| CacheControl {
        kind: "ephemeral".to_owned(),
        ttl: ttl.wire_ttl().map(str::to_owned),
    });
    match at {
        BlockAt::System(i) => request.system[i].cache_control = control,
        BlockAt::Message(m, b) => {
            request.messages[m].content[b].set_cache_control(control);
        }
    }
}

/// The TTL of a tool definition's own breakpoint.
fn tool_ttl(tool: &Value) -> Option<CacheTtl> {
    tool.get("cache_control").map(value_ttl)
}

/// The TTL of a `cache_control` the caller wrote (any value counts as a breakpoint: the
/// provider, not this function, judges its shape; one it cannot read is taken as five minutes,
/// the shorter).
fn value_ttl(control: &Value) -> CacheTtl {
    serde_json::from_value::<CacheControl>(control.clone())
        .map_or(CacheTtl::FiveMinutes, |c| control_ttl(&c))
}

fn control_ttl(control: &CacheControl) -> CacheTtl {
    match control.ttl.as_deref() {
        Some("1h") => CacheTtl::OneHour,
        _ => CacheTtl::FiveMinutes,
    }
}

impl AnthropicRequest {
    /// The request's blocks in the provider's cache order (tools, system, messages), each
    /// counted with `counter`, hashed without its breakpoint, with its breakpoint: what
    /// [`AnthropicCacheModel`](crate::cache::AnthropicCacheModel) reads.
    pub fn prompt_blocks(&self, counter: &dyn TokenCounter) -> PromptBlocks {
        let mut blocks = PromptBlocks::new();
        for tool in self.tools.iter().flatten() {
            let mut bare = tool.clone();
            if let Some(object) = bare.as_object_mut() {
                object.remove("cache_control");
            }
            let text = bare.to_string();
            blocks.push(text.as_bytes(), counter.count(&text), tool_ttl(tool));
        }
        for at in Blocks::of(self).positions {
            let text = block_text(self, at);
            let ttl = match at {
                BlockAt::System(i) => self.system[i].cache_control.as_ref().map(control_ttl),
                BlockAt::Message(m, b) => self.messages[m].content[b]
                    .cache_control()
                    .map(control_ttl)
                    .or_else(|| raw_ttl(self, at)),
            };
            blocks.push(text.as_bytes(), counter.count(&text), ttl);
        }
        blocks
    }
}
