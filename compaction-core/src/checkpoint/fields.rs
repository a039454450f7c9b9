//! Read access to a checkpoint's window field by field, for tools that explain where its
//! tokens go (the `compaction show --budget` command) without knowing the state's type.

use crate::checkpoint::compacted::Compacted;
use crate::window::field::FieldView;

impl<S> Compacted<S> {
    /// Every preserved field as the renderer saw it, in traversal order: its path, section
    /// (class) and how it is preserved (verbatim, spilled, summarized, evicted, tombstoned,
    /// effect records). Works on a checkpoint loaded as any
    /// `Compacted<_>` (e.g. `Compacted<()>`), since the state type is only a marker.
    ///
    /// ```
    /// use compaction::{Compactable, Compactor, Section, Tokenizer};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize, Default)]
    /// struct State {
    ///     #[protected]
    ///     step: u32,
    ///     #[redundant]
    ///     log: Vec<String>,
    /// }
    ///
    /// let compactor = Compactor::builder().budget(200).token_counter(Tokenizer::O200kBase).build()?;
    /// let compacted = compactor.compact_blocking(&State { step: 3, log: vec!["ok".into()] })?;
    /// let fields: Vec<_> = compacted.fields().map(|f| (f.path, f.section)).collect();
    /// assert_eq!(fields, [("step", Section::Protected), ("log", Section::Redundant)]);
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn fields(&self) -> impl Iterator<Item = FieldView<'_>> + '_ {
        self.entries.iter().map(FieldView::of)
    }
}
