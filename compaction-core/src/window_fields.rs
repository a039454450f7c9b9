//! Read access to a compacted window field by field, for tools that explain where its tokens go
//! (the `compaction show --budget` command) without knowing the state's type.

use crate::compacted::Compacted;
use crate::render::{render_field, FieldView};

impl<S> Compacted<S> {
    /// Every preserved field as the renderer saw it, in traversal order: its path, section
    /// (class) and how it is preserved (verbatim, spilled, summarized, evicted, tombstoned,
    /// effect records). Works on a checkpoint loaded as any `Compacted<_>` (e.g.
    /// `Compacted<()>`), since the state type is only a marker.
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

impl FieldView<'_> {
    /// The field's lines in the default window format (see [`render`](crate::render)),
    /// ending with a newline. With the default renderer this is exactly the text the field
    /// contributes to the window, so counting its tokens tells what the field costs; with a
    /// custom renderer it is an estimate.
    pub fn default_lines(&self) -> String {
        let mut out = String::new();
        render_field(&mut out, self);
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::{Compacted, DefaultRenderer, Renderer, WindowView};

    #[test]
    fn default_lines_of_every_field_appear_in_the_default_window() {
        let json = r#"{"format":1,"state_type":"T","budget":100,"entries":[
            {"path":"a","section":"protected","form":{"form":"protected","pin":true,"json":"1","fingerprint":"6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"}},
            {"path":"b","section":"redundant","form":{"form":"tombstone"}}],
            "shapes":[],"window":"","tokens":0,
            "report":{"compaction":1,"budget":100,"tokens_after":0,"tokens_before":0,
                "tokens_before_exact":true,"counter":"heuristic","fields":[],"fingerprints":{}},
            "seal":"0000000000000000000000000000000000000000000000000000000000000000"}"#;
        let compacted: Compacted<()> = serde_json::from_str(json).expect("parses");
        let entries: Vec<_> = compacted.entries.iter().map(|e| e.for_window()).collect();
        let window = DefaultRenderer.render(&WindowView {
            compaction: 1,
            state_type: "T",
            entries: &entries,
            budget: 100,
        });
        let lines: Vec<String> = compacted.fields().map(|f| f.default_lines()).collect();
        assert_eq!(lines, ["a [pinned] = 1\n", "[EVICTED b recover=no]\n"]);
        for line in &lines {
            assert!(window.contains(line.as_str()), "{line:?} not in {window}");
        }
    }
}
