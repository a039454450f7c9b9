//! How a [`Compactor`] is made: [`Compactor::builder`], the [`CompactorBuilder`]'s settings and
//! their defaults, and [`build`](CompactorBuilder::build), which checks them.

use crate::checkpoint::{Owner, SealKey, SealKeys};
use crate::compactor::Compactor;
use crate::conversation::format::{ChatFormat, OpenAiChat};
use crate::conversation::tool::ToolDefinition;
use crate::error::CompactionError;
use crate::planner::memories::TranscriptPlanner;
use crate::store::{DynStore, MemoryStore, Store};
use crate::summaries::contract::DynSummarizer;
use crate::summaries::Summarizer;
use crate::tokens::{TokenCounter, Tokenizer};
use crate::window::{DefaultRenderer, Renderer};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Configures a [`Compactor`].
#[must_use]
pub struct CompactorBuilder {
    pub(super) budget: Option<usize>,
    pub(super) counter: Arc<dyn TokenCounter>,
    pub(super) chat_format: Arc<dyn ChatFormat>,
    pub(super) summarizer: Option<Arc<dyn DynSummarizer>>,
    pub(super) store: Arc<dyn DynStore>,
    pub(super) renderer: Arc<dyn Renderer>,
    pub(super) refuse_on_unknown: bool,
    pub(super) evict_on_summarizer_error: bool,
    pub(super) max_summary_tokens: usize,
    pub(super) seal_keys: SealKeys,
    pub(super) owner: Owner,
    pub(super) high_water: f64,
    pub(super) low_water: f64,
    pub(super) page_results_over: Option<f64>,
    pub(super) verbatim_first: bool,
    pub(super) keep_first: usize,
    pub(super) window_share: Option<f64>,
    pub(super) tools: Vec<ToolDefinition>,
}

/// The high-water mark a session-style agent loop uses: compaction starts when a request
/// passes 90% of the budget (see [`CompactorBuilder::high_water_mark`]).
pub const SESSION_HIGH_WATER: f64 = 0.9;
/// The low-water mark a session-style agent loop uses: a compaction point brings the request
/// down to about half the budget (see [`CompactorBuilder::low_water_mark`]). Chosen on the
/// session family of BENCHMARKS.md: against 0.6, it kept the requests' mean size about that of
/// LangChain's `SummarizationMiddleware` with the same budget, and raised the pairs billed at or
/// under the cheaper peer (Anthropic's pricing) from 20 to 50 of 72 in a screen of the 18
/// shorter sessions at 8k-64k, leaving the verbatim share as it was.
pub const SESSION_LOW_WATER: f64 = 0.5;
/// The share of the budget above which a `Session` pages a new tool result on arrival (see
/// [`CompactorBuilder::page_results_over`]).
pub const SESSION_PAGE_RESULTS_OVER: f64 = 0.25;
/// The transcript messages a `Session` keeps in place at the start of every request while a
/// compaction point can (see [`CompactorBuilder::keep_first`]): the system prompt, the task
/// as stated and the first two calls with their results (a call is never kept without its
/// results). Chosen on the session family and on its unseen seeds (BENCHMARKS.md, 240
/// session-budget pairs, 8k-128k), screening 4, 6 and 8: 6 met every goal on as many pairs as
/// 4 in both sets and gave the lower median bill at 9 of the 10 (set, budget) cells on
/// Anthropic's pricing (per unseen pair against 4: 24 pairs 2% or more cheaper, 9 dearer);
/// 8 put one more unseen pair over the cheaper peer's bill. Against no opening, the request
/// right after a compaction point reads its opening from the prompt cache (on the two
/// 60-turn coding sessions at 16k, that request read 0.22 of its input from Anthropic's cache
/// without one, 0.66 with six messages); 2 (the system prompt and the task) is about
/// Anthropic's 1,024-token minimum and small beside a request.
pub const SESSION_KEEP_FIRST: usize = 6;
/// The share of the budget a `Session`'s window may grow to beyond its floor (see
/// [`CompactorBuilder::window_share`]).
pub const SESSION_WINDOW_SHARE: f64 = 0.1;

impl Default for CompactorBuilder {
    fn default() -> Self {
        CompactorBuilder {
            budget: None,
            counter: Arc::new(Tokenizer::O200kBase),
            chat_format: Arc::new(OpenAiChat),
            summarizer: None,
            store: Arc::new(MemoryStore::default()),
            renderer: Arc::new(DefaultRenderer),
            refuse_on_unknown: false,
            evict_on_summarizer_error: false,
            max_summary_tokens: 512,
            seal_keys: SealKeys::default(),
            owner: Owner::default(),
            high_water: 1.0,
            low_water: 1.0,
            page_results_over: None,
            verbatim_first: false,
            keep_first: 0,
            window_share: None,
            tools: Vec::new(),
        }
    }
}

impl CompactorBuilder {
    /// The hard budget, in tokens of the rendered window. Required.
    pub fn budget(mut self, tokens: usize) -> Self {
        self.budget = Some(tokens);
        self
    }

    /// The token counter (default: exact `o200k_base`).
    pub fn token_counter(mut self, counter: impl TokenCounter + 'static) -> Self {
        self.counter = Arc::new(counter);
        self
    }

    /// The wire format requests are planned for (default: [`OpenAiChat`]): its token formula
    /// prices every message of a `#[transcript]` field and the window, and it lays out
    /// [`Compacted::messages`](crate::Compacted::messages). Choose
    /// [`AnthropicMessages`](crate::transcript::AnthropicMessages) when the request goes to
    /// Anthropic's Messages API (the window is then counted as a top-level system block), or a
    /// [`ChatFormat`] of your own. Set here, on the compactor, rather than per field: one
    /// request has one wire format. The planner's memory of a request (and a checkpoint's) is
    /// only continued by a compactor with the same counter and format.
    pub fn chat_format(mut self, format: impl ChatFormat + 'static) -> Self {
        self.chat_format = Arc::new(format);
        self
    }

    /// [`chat_format`](Self::chat_format) with a format already shared (the session's).
    pub(crate) fn shared_chat_format(mut self, format: Arc<dyn ChatFormat>) -> Self {
        self.chat_format = format;
        self
    }

    /// The summarizer for `summarize`-enabled fields. Without one, nothing is summarized.
    /// When it has an [`identity`](Summarizer::identity), its summaries are cached in the
    /// store: an unchanged source with an unchanged target is not summarized again.
    pub fn summarizer(mut self, summarizer: impl Summarizer + 'static) -> Self {
        self.summarizer = Some(Arc::new(summarizer));
        self
    }

    /// Where spilled state and summary sources go (default: a fresh [`MemoryStore`]).
    pub fn store(mut self, store: impl Store + 'static) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// A custom window format. The budget is enforced on its output.
    pub fn renderer(mut self, renderer: impl Renderer + 'static) -> Self {
        self.renderer = Arc::new(renderer);
        self
    }

    /// Refuse to compact (`UnknownEffect`) while any effect's outcome is unknown.
    pub fn refuse_on_unknown_effects(mut self, refuse: bool) -> Self {
        self.refuse_on_unknown = refuse;
        self
    }

    /// When the summarizer fails, returns nothing, or returns more than its target: evict the
    /// field (pointer or tombstone) instead of failing the compaction. Off by default, so a
    /// misbehaving summarizer is a `CompactionError::Summarizer` you see. Only fields declared
    /// `summarize` ever reach a summarizer, and their eviction is always safe.
    pub fn evict_on_summarizer_error(mut self, evict: bool) -> Self {
        self.evict_on_summarizer_error = evict;
        self
    }

    /// Hysteresis, upper mark, as a share of the budget (`0.0..=1.0`): a request of a
    /// `#[transcript]` state that, grown by the new messages, stays at or under this share is
    /// sent as the previous request plus the new messages (the previous request is an exact
    /// prefix of it, so a provider's prompt cache serves it); past it, one compaction point
    /// brings it down to the [low-water mark](Self::low_water_mark).
    ///
    /// Default 1.0 (with a low-water mark of 1.0): a plain `Compactor` compacts only when a
    /// request would pass the budget, and then just enough. An agent loop that sends a request
    /// every turn should use [`SESSION_HIGH_WATER`] and [`SESSION_LOW_WATER`] (0.9 and 0.5), as
    /// `Session` does: every compaction point then buys room for many turns of appends. The
    /// budget itself is hard whatever the marks.
    ///
    /// ```
    /// use compaction::{Compactor, SESSION_HIGH_WATER, SESSION_LOW_WATER};
    ///
    /// let compactor = Compactor::builder()
    ///     .budget(16_000)
    ///     .high_water_mark(SESSION_HIGH_WATER)
    ///     .low_water_mark(SESSION_LOW_WATER)
    ///     .build()?;
    /// assert_eq!(compactor.water_marks(), (0.9, 0.5));
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn high_water_mark(mut self, share: f64) -> Self {
        self.high_water = share;
        self
    }

    /// Hysteresis, lower mark, as a share of the budget: what a compaction point brings a
    /// request down to (oldest first, just enough), so later turns find room to append. At
    /// most the [high-water mark](Self::high_water_mark) (`build` refuses otherwise).
    pub fn low_water_mark(mut self, share: f64) -> Self {
        self.low_water = share;
        self
    }

    /// Pages a new tool result on arrival when it alone would take more than `share` of the
    /// budget (`0.0 < share <= 1.0`): the request carries a head and a tail excerpt of at most
    /// that share, with its handle and byte ranges, and the exact bytes are stored, so the model
    /// reads the rest page by page through `resolve_pointer`. Default: off for a `Compactor`
    /// (a result is paged only when the request cannot fit it); a `Session` turns it on at
    /// [`SESSION_PAGE_RESULTS_OVER`](crate::compactor::SESSION_PAGE_RESULTS_OVER).
    ///
    /// Why an agent loop wants it: with hysteresis, the room between the marks is what appends
    /// can use before the next compaction point. One result of half the budget fills it at
    /// once, so nearly every request becomes a compaction point, and a compaction point
    /// re-sends the recent turns behind a new marker, which no provider's prompt cache has seen.
    ///
    /// ```
    /// use compaction::Compactor;
    ///
    /// let compactor = Compactor::builder().budget(16_000).page_results_over(0.25).build()?;
    /// assert_eq!(compactor.page_results_over(), Some(4_000));
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn page_results_over(mut self, share: f64) -> Self {
        self.page_results_over = Some(share);
        self
    }

    /// With [`page_results_over`](Self::page_results_over), sends a new tool result verbatim
    /// whenever its turn fits the request, and pages it on arrival only when it does not: the
    /// newest turn (from the last user message on, every result verbatim) within the budget
    /// less the window (the pinned state with it) and the request's overhead. Older turns make
    /// room for it at the compaction point that follows (folded, tombstoned, their read results
    /// paged), so the model reads every result that can fit whole the first time. Off by
    /// default: it trades prompt-cache reuse for what the model reads verbatim. On the 24
    /// sessions of the family in BENCHMARKS.md (coding, support, research; 100 to 2,000 turns)
    /// it raised the median share of result bytes first seen verbatim (0.06 -> 0.38 at 8k,
    /// 0.23 -> 0.83 at 16k, 0.73 -> 1.0 at 32k) and lowered the pairs at 0.9 of the prefix
    /// reuse ceiling (24 -> 16 of 24 at 16k, 23 -> 14 at 32k) and at or under the cheaper
    /// peer's bill (Anthropic: 24 -> 16 at 8k, 21 -> 7 at 16k): each large result makes
    /// compaction points of its own.
    ///
    /// ```
    /// use compaction::Compactor;
    ///
    /// let compactor = Compactor::builder()
    ///     .budget(16_000)
    ///     .page_results_over(0.25)
    ///     .verbatim_first(true)
    ///     .build()?;
    /// assert!(compactor.verbatim_first());
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn verbatim_first(mut self, on: bool) -> Self {
        self.verbatim_first = on;
        self
    }

    /// Keeps the first `n` messages of a `#[transcript]` field (the task as stated and the
    /// first steps; the last one's unit whole, so a call keeps its results) verbatim, in place,
    /// at the start of every request: the **opening**. A compaction point keeps it while its
    /// soft steps (rule 8's oldest first, after the opening) bring the request under the limit;
    /// when only a hard step would, the point is made as without an opening, and the opening's
    /// messages move on to their compacted forms like any old turn's. So the opening never
    /// costs the recent turns their room and never causes a refusal (only the point made without
    /// it refuses). `0`, the default, keeps none.
    ///
    /// Why: a compaction point changes the request from its first old message on, so the
    /// request right after a point reads only the window from a provider's prompt cache. With
    /// an opening in place, the request's stable prefix
    /// ([`Compacted::stable_prefix_len`](crate::Compacted::stable_prefix_len), where
    /// `anthropic_request` puts a breakpoint) ends after it, and the next point reads it from
    /// the cache. A `Session` keeps [`SESSION_KEEP_FIRST`] messages.
    ///
    /// ```
    /// use compaction::Compactor;
    ///
    /// let compactor = Compactor::builder().budget(16_000).keep_first(4).build()?;
    /// assert_eq!(compactor.keep_first(), 4);
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn keep_first(mut self, n: usize) -> Self {
        self.keep_first = n;
        self
    }

    /// Caps the state window of a `#[transcript]` state at `share` of the budget
    /// (`0.0 < share <= 1.0`) beyond its floor. The floor always stays whatever the cap: the
    /// window's smallest form (pinned protected fields verbatim, the live records of every
    /// non-idempotent effect log, a pointer for everything else), so the cap only decides how
    /// much of the rest is shown rather than left behind its pointer, in the planning order
    /// (unpinned protected fields first, then settled effect records one by one, payloads,
    /// derivable and redundant values).
    ///
    /// Default: off for a `Compactor` (the window takes what the transcript leaves); a `Session`
    /// uses [`SESSION_WINDOW_SHARE`]. Why: the window is the front of every request. Left to
    /// grow, a long session's effect log takes a large part of the budget, and it is rendered
    /// again at every compaction point, so everything after it leaves the prompt cache.
    ///
    /// ```
    /// use compaction::Compactor;
    ///
    /// let compactor = Compactor::builder().budget(64_000).window_share(0.1).build()?;
    /// assert_eq!(compactor.window_share(), Some(6_400));
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn window_share(mut self, share: f64) -> Self {
        self.window_share = Some(share);
        self
    }

    /// The largest summary target handed to the summarizer (default 512 tokens).
    pub fn max_summary_tokens(mut self, tokens: usize) -> Self {
        self.max_summary_tokens = tokens;
        self
    }

    /// Seals every checkpoint this compactor makes with `key` (HMAC-SHA256, beside the plain
    /// SHA-256 seal) and verifies every checkpoint it rehydrates or
    /// [verifies](Compactor::verify_checkpoint) with it: a checkpoint whose keyed seal does not
    /// verify is `Integrity`, whoever recomputed its plain hash, and so is a checkpoint with no
    /// keyed seal (see [`accept_unkeyed_checkpoints`](Self::accept_unkeyed_checkpoints)).
    /// Calling it again replaces the signing key; keep the old one with
    /// [`verify_key`](Self::verify_key) while its checkpoints are still around.
    ///
    /// Without a key, checkpoints carry the plain seal only. It detects damage (a flipped byte,
    /// a truncated row) but not a forger: whoever can write the checkpoint's storage can change
    /// it and recompute the hash.
    ///
    /// ```
    /// use compaction::{Compactable, Compactor, CompactionError, NoReacquire, SealKey};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
    /// struct State {
    ///     #[protected]
    ///     step: u32,
    /// }
    ///
    /// // Rotation: the new key signs, the old one still verifies what it sealed.
    /// let old = SealKey::new("2026-10", [1u8; 32])?;
    /// let new = SealKey::new("2026-11", [2u8; 32])?;
    /// let before = Compactor::builder().budget(100).seal_key(old.clone()).build()?;
    /// let after = Compactor::builder().budget(100).seal_key(new.clone()).verify_key(old).build()?;
    ///
    /// let checkpoint = before.compact_blocking(&State { step: 4 })?;
    /// assert_eq!(checkpoint.seal_key_id(), Some("2026-10"));
    /// assert_eq!(after.rehydrate_blocking(&checkpoint, &NoReacquire)?, State { step: 4 });
    ///
    /// // Once the old key is dropped, what it sealed is refused.
    /// let only_new = Compactor::builder().budget(100).seal_key(new).build()?;
    /// assert!(matches!(
    ///     only_new.verify_checkpoint(&checkpoint),
    ///     Err(CompactionError::Integrity { .. })
    /// ));
    /// # Ok::<(), CompactionError>(())
    /// ```
    pub fn seal_key(mut self, key: SealKey) -> Self {
        self.seal_keys.set_signing(key);
        self
    }

    /// A key that still verifies checkpoints but no longer signs them (a rotated-out key).
    /// Repeat for several; requires a [`seal_key`](Self::seal_key), and every key needs its own
    /// id (`build` refuses otherwise with `Config`).
    pub fn verify_key(mut self, key: SealKey) -> Self {
        self.seal_keys.add_retired(key);
        self
    }

    /// With a [`seal_key`](Self::seal_key): also accept checkpoints older than the
    /// protections, for a migration: checkpoints that carry no keyed seal (made before keys
    /// were introduced; their plain seal is still checked), and keyed checkpoints bound to no
    /// agent (made before [`agent_id`](Self::agent_id) bindings, so any agent's would pass).
    /// Off by default; turn it on for a migration, then off, since while it is on a forger
    /// can strip the keyed seal. A keyed seal that is present must still verify, and a binding
    /// that is present must still name this agent.
    pub fn accept_unkeyed_checkpoints(mut self, accept: bool) -> Self {
        self.seal_keys.set_accept_unkeyed(accept);
        self
    }

    /// The agent this compactor compacts for. Every checkpoint it makes is bound to this
    /// agent id, the [`namespace`](Self::namespace) and a sequence number
    /// ([`CheckpointBinding`](crate::CheckpointBinding)), covered by both seals; and it
    /// verifies (and [rehydrates](Compactor::rehydrate), and lets the pointer tool
    /// [allow](crate::pointer_tool::PointerResolver::allow_compacted)) only checkpoints bound
    /// to the same agent and namespace: another agent's checkpoint, copied over this one's, is
    /// [`ForeignCheckpoint`](CompactionError::ForeignCheckpoint). Backends save and load a bound
    /// checkpoint only under its own agent id and namespace.
    ///
    /// With a [`seal_key`](Self::seal_key) this is what makes a checkpoint this agent's: a
    /// keyed compactor without an agent id refuses bound checkpoints (it cannot tell whose
    /// they are), and a keyed checkpoint without a binding cannot be saved in a backend.
    /// Without a key the binding is checked the same way but, like the plain seal, only
    /// detects mistakes: whoever can write a checkpoint can rewrite it.
    ///
    /// Build one compactor per agent (it also keeps that agent's transcript counts and
    /// compaction numbers).
    pub fn agent_id(mut self, agent_id: impl Into<String>) -> Self {
        self.owner.set_agent_id(agent_id.into());
        self
    }

    /// The namespace this agent's checkpoints are saved in: the one its checkpoint backend was
    /// opened for (a `PgStore`'s namespace), `""` (the default) where there is none (SQLite,
    /// memory). Bound into every checkpoint with the [`agent_id`](Self::agent_id).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.owner.set_namespace(namespace.into());
        self
    }
}

impl Compactor {
    /// Starts configuring a compactor.
    pub fn builder() -> CompactorBuilder {
        CompactorBuilder::default()
    }
}

impl CompactorBuilder {
    /// The tool definitions every request of a transcript carries (the pointer tool's
    /// included, if you offer it: [`resolve_pointer_definition`](crate::pointer_tool::resolve_pointer_definition)):
    /// their tokens by the chat format's formula
    /// ([`ChatFormat::tools_tokens`](crate::conversation::format::ChatFormat::tools_tokens))
    /// are taken from the budget of every request, and a request's
    /// [`request_tokens`](crate::Compacted::request_tokens) counts them. A budget they fill is
    /// refused at build. (A state compacted without a transcript is a window alone, sent with
    /// whatever you add: its budget is the window's.)
    pub fn tools(mut self, tools: impl IntoIterator<Item = ToolDefinition>) -> Self {
        self.tools = tools.into_iter().collect();
        self
    }

    /// Builds the compactor.
    pub fn build(self) -> Result<Compactor, CompactionError> {
        let budget = self
            .budget
            .ok_or_else(|| CompactionError::Config("no budget: call .budget(tokens)".into()))?;
        if budget == 0 {
            return Err(CompactionError::Config(
                "the budget must be above zero".into(),
            ));
        }
        self.seal_keys.check().map_err(CompactionError::from)?;
        let marks = (self.high_water, self.low_water);
        if !(0.0..=1.0).contains(&marks.0)
            || !(0.0..=1.0).contains(&marks.1)
            || marks.1 > marks.0
            || marks.0 == 0.0
        {
            return Err(CompactionError::Config(format!(
                "water marks must satisfy 0 < low <= high <= 1 (got high {}, low {})",
                marks.0, marks.1
            )));
        }
        for (name, share) in [
            ("page_results_over", self.page_results_over),
            ("window_share", self.window_share),
        ] {
            if let Some(share) = share.filter(|s| !(*s > 0.0 && *s <= 1.0)) {
                return Err(CompactionError::Config(format!(
                    "{name} takes a share of the budget in 0 < share <= 1 (got {share})"
                )));
            }
        }
        let tokens = |share: Option<f64>| share.map(|s| ((budget as f64) * s).floor() as usize);
        let tools_tokens = self.chat_format.tools_tokens(&self.tools, &*self.counter);
        if tools_tokens >= budget {
            return Err(CompactionError::Config(format!(
                "the tool definitions take {tools_tokens} tokens of a budget of {budget}: \
                 raise the budget or send fewer tools"
            )));
        }
        Ok(Compactor {
            budget,
            transcript_planner: TranscriptPlanner::with_format(
                self.counter.clone(),
                self.chat_format.clone(),
            ),
            counter: self.counter,
            chat_format: self.chat_format,
            summarizer: self.summarizer,
            store: self.store,
            renderer: self.renderer,
            refuse_on_unknown: self.refuse_on_unknown,
            evict_on_summarizer_error: self.evict_on_summarizer_error,
            max_summary_tokens: self.max_summary_tokens,
            compactions: AtomicU64::new(0),
            seal_keys: self.seal_keys,
            owner: self.owner,
            high_water: self.high_water,
            low_water: self.low_water,
            page_results_over: tokens(self.page_results_over),
            verbatim_first: self.verbatim_first,
            keep_first: self.keep_first,
            window_share: tokens(self.window_share),
            windows: Default::default(),
            records_over: Default::default(),
            tools: self.tools.into(),
            tools_tokens,
        })
    }
}
