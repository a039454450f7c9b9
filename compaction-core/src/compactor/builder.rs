//! [`CompactorBuilder`]: a compactor's settings and their defaults.

use crate::compactor::summarize::DynSummarizer;
use crate::render::{DefaultRenderer, Renderer};
use crate::store::{DynStore, MemoryStore, Store};
use crate::summarize::Summarizer;
use crate::tokens::{TokenCounter, Tokenizer};
use std::sync::Arc;

/// Configures a [`Compactor`](crate::Compactor).
#[must_use]
pub struct CompactorBuilder {
    pub(super) budget: Option<usize>,
    pub(super) counter: Arc<dyn TokenCounter>,
    pub(super) summarizer: Option<Arc<dyn DynSummarizer>>,
    pub(super) store: Arc<dyn DynStore>,
    pub(super) renderer: Arc<dyn Renderer>,
    pub(super) refuse_on_unknown: bool,
    pub(super) evict_on_summarizer_error: bool,
    pub(super) max_summary_tokens: usize,
}

impl Default for CompactorBuilder {
    fn default() -> Self {
        CompactorBuilder {
            budget: None,
            counter: Arc::new(Tokenizer::O200kBase),
            summarizer: None,
            store: Arc::new(MemoryStore::default()),
            renderer: Arc::new(DefaultRenderer),
            refuse_on_unknown: false,
            evict_on_summarizer_error: false,
            max_summary_tokens: 512,
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

    /// The summarizer for `summarize`-enabled fields. Without one, nothing is summarized.
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

    /// The largest summary target handed to the summarizer (default 512 tokens).
    pub fn max_summary_tokens(mut self, tokens: usize) -> Self {
        self.max_summary_tokens = tokens;
        self
    }
}
